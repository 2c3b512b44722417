"""
Topology revisions switched under load (issue 5, "Shared memory publication"): workers record
the revision they run at statement boundaries; publishing revisions while pgbench runs on a
pass-through database drops no client and fails no transaction, and every worker has
switched when wait_for_data_topology returns. Real Postgres, real pgbench.
"""
import re
import subprocess
import time

from test_neki_api import run, set_sql, sharded, topology  # noqa: F401 (fixture)

CLIENTS, THREADS, SECONDS = 8, 2, 6


def test_topology_changes_under_pgbench(sharded, pg_cluster, cluster_db):
    port = pg_cluster.port("shard-a")
    subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-i",
                    "-q", "-s", "1", cluster_db], check=True, capture_output=True, timeout=120)
    inst = sharded(settings={"workers": 4, "pool_mode": "transaction"},
                   databases={"bench": f"host=127.0.0.1 port={port} dbname={cluster_db}"})
    bench = subprocess.Popen(
        ["pgbench", "-h", "127.0.0.1", "-p", str(inst.port), "-U", "postgres", "-n", "-c",
         str(CLIENTS), "-j", str(THREADS), "-T", str(SECONDS), "bench"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    revisions = []
    try:
        doc = topology(cluster_db)
        overwrite = False
        deadline = time.monotonic() + SECONDS - 1
        while time.monotonic() < deadline and len(revisions) < 6:
            rev = run(inst, set_sql(doc, overwrite=overwrite))[0][1]
            overwrite = True
            assert run(inst, f"SELECT * FROM __neki.wait_for_data_topology({rev}, "
                             "'20 seconds')") == [(rev,)]
            # every worker (busy with pgbench) already runs it when the wait returns
            workers = run(inst, "SHOW WORKERS")
            assert len(workers) == 4
            assert all(row[5] >= rev for row in workers), (rev, workers)
            revisions.append(rev)
    finally:
        out, err = bench.communicate(timeout=60)
    assert bench.returncode == 0, out + err
    assert "aborted" not in err, err
    done = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
    failed = re.search(r"number of failed transactions: (\d+)", out)
    assert done > 0 and (failed is None or int(failed.group(1)) == 0), out
    assert len(revisions) >= 2 and revisions == sorted(revisions), revisions
