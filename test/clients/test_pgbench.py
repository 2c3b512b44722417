"""pgbench through neki in transaction mode (-M simple, extended, prepared; -c 50 -j 2,
workers = 2): no failed transaction, and pgbench_history gets exactly the rows a direct run
against Postgres gets."""
import re
import subprocess

import pytest

CLIENTS, THREADS, TXNS = 50, 2, 20


def pgbench(port, db, *args, timeout=300):
    cmd = ["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", *args, db]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{cmd}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def processed(out):
    done = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
    failed = re.search(r"number of failed transactions: (\d+)", out)
    return done, int(failed.group(1)) if failed else 0


def history(pg, db):
    return pg.sql("shard-a", "select count(*) from pgbench_history", dbname=db)[0][0]


@pytest.fixture
def bench_db(pg_cluster, cluster_db):
    pgbench(pg_cluster.port("shard-a"), cluster_db, "-i", "-q", "-s", "1")
    return cluster_db


def test_pgbench_transaction_mode(pg_cluster, bench_db, neki):
    direct_port = pg_cluster.port("shard-a")
    before = history(pg_cluster, bench_db)
    out = pgbench(direct_port, bench_db, "-n", "-c", str(CLIENTS), "-j", str(THREADS), "-t",
                  str(TXNS))
    assert processed(out) == (CLIENTS * TXNS, 0)
    direct_rows = history(pg_cluster, bench_db) - before
    assert direct_rows == CLIENTS * TXNS
    # pgbench -M prepared prepares with the synchronous PQprepare(): with fewer links than
    # clients of one pgbench thread, a thread can block in PQprepare while its other clients
    # hold every link mid-transaction (the same holds for pgbouncer). Hence a pool that fits
    # all clients for that mode; the others run with 20 links for 50 clients.
    for mode, pool_size in (("simple", 20), ("extended", 20), ("prepared", CLIENTS)):
        n = neki(settings={"pool_mode": "transaction", "default_pool_size": pool_size,
                           "workers": 2, "max_prepared_statements": 100},
                 databases=f"{bench_db} = host=127.0.0.1 port={direct_port} dbname={bench_db}")
        before = history(pg_cluster, bench_db)
        out = pgbench(n.port, bench_db, "-n", "-M", mode, "-c", str(CLIENTS), "-j",
                      str(THREADS), "-t", str(TXNS))
        assert processed(out) == (CLIENTS * TXNS, 0), (mode, out)
        assert history(pg_cluster, bench_db) - before == direct_rows, mode
        n.stop()
