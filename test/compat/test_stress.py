"""pgbouncer's test/stress.py, bounded: many threads connect, run short sleeps in autocommit
and in transactions, and disconnect, against a small pool in transaction mode. Every query must
succeed, and afterwards nothing waits and nothing was cut off mid-query."""
import random
import threading

import psycopg

from compat import admin, start
from conftest import wait_until

THREADS = 40
CYCLES = 3
QUERIES = 4


def test_stress(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, mode="transaction", default_pool_size=5,
              max_client_conn=THREADS + 10)
    errors, done = [], []

    def worker(seed):
        rnd = random.Random(seed)
        try:
            for cycle in range(CYCLES):
                with n.connect(cluster_db, autocommit=cycle % 2 == 0,
                               connect_timeout=30) as c:
                    for _ in range(QUERIES):
                        c.execute("select pg_sleep(%s)", (rnd.random() * 0.05,))
                        if not c.autocommit:
                            c.commit()
            done.append(seed)
        except psycopg.Error as e:   # noqa: PERF203
            errors.append(f"{seed}: {e}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]
    assert len(done) == THREADS

    def settled():
        pools = [r for r in admin(n, "SHOW POOLS", dicts=True) if r["database"] == cluster_db]
        return all(p["cl_waiting"] == 0 and p["sv_active"] == 0 for p in pools)
    wait_until(settled, 10, what="the pool to settle")
    stats = next(r for r in admin(n, "SHOW STATS", dicts=True) if r["database"] == cluster_db)
    assert stats["total_query_count"] >= THREADS * CYCLES * QUERIES
    log = n.log()
    assert "client disconnected with query in progress" not in log
    assert "FATAL" not in log.replace("FATAL  ", "")
