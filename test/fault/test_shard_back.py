"""
A data shard that goes away and comes back, under statements that need it (issue 21,
faults), with the default server_login_retry (15 s):

- while it is down, every statement on it fails at once naming it, and the log says
  `could not connect` once per connection attempt of a pool, not once per failed statement;
- neki uses it again as soon as it accepts logins (a probe for routed shard pools), not
  when server_login_retry has run out.
"""
import re
import threading
import time

import pytest

from conftest import wait_until
from faultlib import ids_by_shard, ledger_neki, psycopg

VICTIM = "shard-c"
WORKERS = 2


@pytest.fixture(scope="module")
def ledger(pg_cluster):
    with ledger_neki(pg_cluster, "back", settings={"workers": WORKERS}) as st:
        st.run("INSERT INTO ledger SELECT g, 0, 'n' FROM generate_series(1, 100) g")
        yield st


def hammer(st, sql, params, stop, outcomes):
    """Run <sql> on new sessions until <stop>; record (time, error or None)."""
    while not stop.is_set():
        try:
            with st.connect() as conn:
                for _ in range(20):
                    try:
                        conn.execute(sql, params).fetchall()
                        outcomes.append((time.monotonic(), None))
                    except psycopg.Error as e:
                        outcomes.append((time.monotonic(), e))
                    if stop.wait(0.005):
                        break
        except psycopg.Error as e:
            outcomes.append((time.monotonic(), e))


def direct_login(cluster, server):
    try:
        with cluster.connect(server, connect_timeout=2):
            return True
    except psycopg.Error:
        return False


def test_shard_comes_back(ledger):
    st = ledger
    cluster = st.cluster
    vid = ids_by_shard(st, 100)[VICTIM][0]
    sql, params = "SELECT note FROM ledger WHERE id = %s", (vid,)
    log_before = len(st.neki.log())
    stop, outcomes = threading.Event(), []
    threads = [threading.Thread(target=hammer, args=(st, sql, params, stop, outcomes))
               for _ in range(4)]
    cluster.stop_server(VICTIM)
    try:
        down_at = time.monotonic()
        for t in threads:
            t.start()
        wait_until(lambda: sum(1 for t, e in outcomes if e is not None) >= 200, 20,
                   what="200 failed statements on the stopped shard")
        down_for = time.monotonic() - down_at
        failed = [e for _, e in outcomes if e is not None]
        assert all(f'shard "{VICTIM}"' in str(e) for e in failed), str(failed[0])
        lines = re.findall(rf"could not connect.*{VICTIM}|{VICTIM}.*could not connect",
                           st.neki.log()[log_before:])
        # one attempt per pool (one per worker) per server_login_retry, and the down time
        # is well within one retry
        assert 1 <= len(lines) <= WORKERS * (1 + int(down_for // 15)), \
            f"{len(lines)} lines for {len(failed)} failures in {down_for:.1f} s:\n" + \
            "\n".join(lines[:10])
        cluster.start_server(VICTIM)
        wait_until(lambda: direct_login(cluster, VICTIM), 30, interval=0.05,
                   what="the shard to accept logins")
        ready = time.monotonic()
        back = wait_until(lambda: next((t for t, e in outcomes if e is None and t > ready),
                                       None), 15, interval=0.02,
                          what="a statement on the shard through neki")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        if cluster.status().get(VICTIM) != "running":
            cluster.start_server(VICTIM)
    print(f"used again {back - ready:.2f} s after it accepted logins; {len(lines)} "
          f"'could not connect' lines for {len(failed)} failed statements")
    assert back - ready < 1.0, f"used {back - ready:.2f} s after it accepted logins"
