"""pgbench through neki in transaction mode (-M simple, extended, prepared; -c 50 -j 2, five
links, workers = 1, 2, 4, trust and SCRAM): no failed transaction, and pgbench_history gets
exactly the rows a direct run against Postgres gets."""
import os
import re
import subprocess

import pytest

CLIENTS, THREADS, TXNS = 50, 2, 20


def pgbench(port, db, *args, timeout=300, user="postgres", env=None):
    cmd = ["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", user, *args, db]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, **(env or {})})
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


def run_modes(pg_cluster, db, direct_rows, n, modes=("simple", "extended", "prepared"),
              user="postgres", env=None):
    """Every protocol mode through <n>: no failed transaction, pgbench_history gets exactly
    the rows of the direct run."""
    for mode in modes:
        before = history(pg_cluster, db)
        out = pgbench(n.port, db, "-n", "-M", mode, "-c", str(CLIENTS), "-j", str(THREADS),
                      "-t", str(TXNS), user=user, env=env)
        assert processed(out) == (CLIENTS * TXNS, 0), (mode, out)
        assert history(pg_cluster, db) - before == direct_rows, mode


def direct_run(pg_cluster, db):
    before = history(pg_cluster, db)
    out = pgbench(pg_cluster.port("shard-a"), db, "-n", "-c", str(CLIENTS), "-j",
                  str(THREADS), "-t", str(TXNS))
    assert processed(out) == (CLIENTS * TXNS, 0)
    rows = history(pg_cluster, db) - before
    assert rows == CLIENTS * TXNS
    return rows


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_pgbench_transaction_mode(pg_cluster, bench_db, neki, workers):
    """Five links for 50 clients, 25 per pgbench thread, in every mode. -M prepared prepares
    with libpq's synchronous PQprepare(): a thread blocked in it while the other clients of
    the thread hold every link inside their transactions never gets one (pgbouncer 1.25 stalls
    there), so neki answers such a Parse itself (doc/operations.md)."""
    direct_rows = direct_run(pg_cluster, bench_db)
    direct_port = pg_cluster.port("shard-a")
    n = neki(settings={"pool_mode": "transaction", "default_pool_size": 5,
                       "workers": workers, "max_prepared_statements": 100,
                       "query_wait_timeout": 30},
             databases=f"{bench_db} = host=127.0.0.1 port={direct_port} dbname={bench_db}")
    run_modes(pg_cluster, bench_db, direct_rows, n)


def test_pgbench_prepared_scram(pg_cluster, bench_db, neki):
    """The same with SCRAM logins (client and server) on two workers."""
    pg = pg_cluster
    direct_rows = direct_run(pg, bench_db)
    pg.sql("shard-a", f"grant all on all tables in schema public to {pg.test_user}",
           dbname=bench_db)
    n = neki(settings={"pool_mode": "transaction", "default_pool_size": 5, "workers": 2,
                       "max_prepared_statements": 100, "query_wait_timeout": 30},
             databases=f"{bench_db} = host=127.0.0.1 port={pg.port('shard-a')} "
                       f"dbname={bench_db}", start=False)
    path = n.dir / "userlist.txt"
    path.write_text(f'"{pg.test_user}" "{pg.test_password}"\n"postgres" ""\n')
    n.update({"auth_file": path, "auth_type": "scram-sha-256"})
    n.start()
    run_modes(pg, bench_db, direct_rows, n, modes=("prepared",), user=pg.test_user,
              env={"PGPASSWORD": pg.test_password})
