"""
Crash recovery of __neki.tx_mode atomic (issue 17): a worker killed at each step of the
two-phase commit (failpoints: after k of n PREPAREs, after the decision's COMMIT, after k
COMMIT PREPAREDs; the file NEKI_TEST_FAILPOINT names holds the failpoint, the worker removes
it and kills itself with SIGKILL) leaves prepared transactions that the admin process's
recovery finishes as the decision shard says: rolled back before the decision, committed
after it; no prepared transaction stays. A bank-transfer load in atomic mode with the whole
neki killed and restarted keeps the sum of the balances, and every transfer a client saw
committed is there exactly once. A failed COMMIT PREPARED is retried, then waited for by
the session's next statement on that shard; a second neki finishes what a dead one left.
"""
import contextlib
import os
import random
import signal
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import free_port, make_private_dir, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "routing"))
from test_routing import Store, create_schema, routing_neki, sharded_database, topology  # noqa
from test_savepoints import ids_on_shards  # noqa

GRACE_MS = 2000
ACCOUNTS = 40


@contextlib.contextmanager
def env(**values):
    """os.environ with <values> while the block runs (what a neki started there inherits)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def store(pg_cluster):
    fp = Path(make_private_dir("neki-fp.")) / "failpoint"     # (neki may run as another user)
    mport = free_port()
    with sharded_database(pg_cluster, "atomrec") as db, \
            env(NEKI_TEST_FAILPOINT=fp), \
            routing_neki(pg_cluster, db, topology(db), Store,
                         settings={"metrics_listen_port": mport,
                                   "atomic_recovery_grace": GRACE_MS / 1000}) as st:
        st.metrics_port = mport
        create_schema(st)
        st.both("INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany')")
        st.failpoint = fp
        yield st


def in_doubt_metrics(store):
    """The in-doubt gauges of the metrics endpoint: (count, oldest age in seconds)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{store.metrics_port}/metrics",
                                timeout=5) as r:
        text = r.read().decode()
    values = dict(line.split() for line in text.splitlines()
                  if line.startswith("neki_atomic_in_doubt"))
    return int(values["neki_atomic_in_doubt"]), float(values["neki_atomic_in_doubt_oldest_seconds"])


def servers(store):
    return store.cluster.shards + ["auth"]


def prepared(store, skip=()):
    out = {}
    for s in servers(store):
        if s in skip:
            continue
        rows = store.cluster.sql(s, "SELECT gid FROM pg_prepared_xacts WHERE database = %s",
                                 (store.db,))
        if rows:
            out[s] = [r[0] for r in rows]
    return out


def decision(store, gid):
    for s in servers(store):
        rows = store.shard_rows(s, "SELECT commit FROM __neki.tx_decision WHERE gid = "
                                f"'{gid}'") if store.shard_rows(
            s, "SELECT to_regclass('__neki.tx_decision') IS NOT NULL") == [(True,)] else []
        if rows:
            return rows[0][0]
    return None


def atomic_conn(store):
    conn = store.connect()
    conn.execute("SET __neki.tx_mode = 'atomic'")
    return conn


def routed_again(store):
    def ok():
        try:
            with store.connect() as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False
    wait_until(ok, 20, what="neki serving again")


CASES = [("prepare:1", False), ("decision", True), ("commit_prepared:1", True)]


@pytest.mark.parametrize("failpoint,committed", CASES)
def test_worker_killed_at_each_step_is_recovered(store, failpoint, committed):
    ids = ids_on_shards(store, 3, 5000 + 10 * [c[0] for c in CASES].index(failpoint))
    try:
        gid = crash_at(store, failpoint, ids)
        wait_until(lambda: prepared(store) == {}, 30, what="recovery of " + gid)
        routed_again(store)
        got = store.run("SELECT id FROM customers WHERE id IN "
                        f"({', '.join(map(str, ids))}) ORDER BY id")
        assert got == ([(i,) for i in sorted(ids)] if committed else [])
        assert decision(store, gid) is committed
    finally:
        store.failpoint.unlink(missing_ok=True)
        routed_again(store)
        store.both(f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})")


def test_a_decision_shard_down_means_wait(store):
    """The worker dies after the decision; the decision shard is stopped before recovery
    can read it: the prepared parts wait (SHOW TRANSACTIONS lists them in doubt) and are
    committed once the shard is back, never guessed."""
    ids = sorted(ids_on_shards(store, 2, 5200), key=store.customer_shard)
    dshard = store.customer_shard(ids[0])      # the first in uid order decides
    try:
        with atomic_conn(store) as conn:
            conn.execute("BEGIN")
            for i in ids:
                conn.execute(f"INSERT INTO customers VALUES ({i}, 'x', 'FR')")
            conn.execute("SELECT pg_sleep(0.01)")
            store.failpoint.write_text("decision\n")
            with pytest.raises(psycopg.OperationalError):
                conn.execute("COMMIT")
        # (fast: the test cluster runs synchronous_commit = off, and an immediate stop
        # would lose the decision's commit, with the decision shard's own part)
        store.cluster.stop_server(dshard, mode="fast")
        try:
            left = prepared(store, skip=[dshard])   # (the grace period has not passed)
            assert left
            if left:
                gid = next(iter(left.values()))[0]
                assert gid.endswith(":" + dshard)

                def listed():
                    with store.neki.admin_connect() as c:
                        rows = c.execute("SHOW TRANSACTIONS").fetchall()
                    return [r for r in rows if r[0] == gid and r[5] == "in doubt"]
                row = wait_until(listed, 10, what="SHOW TRANSACTIONS to list " + gid)[0]
                assert row[3] == dshard and row[2] == store.db
                count, oldest = in_doubt_metrics(store)       # the operator's gauge
                assert count >= 1 and oldest >= GRACE_MS / 1000, (count, oldest)
                time.sleep(2 * GRACE_MS / 1000 + 2)    # passes that cannot decide
                assert prepared(store, skip=[dshard]) == left     # waited, no guess
        finally:
            store.cluster.start_server(dshard)
        wait_until(lambda: prepared(store) == {}, 30, what="recovery once the shard is back")
        wait_until(lambda: in_doubt_metrics(store) == (0, 0.0), 10, what="the gauge at 0")
        routed_again(store)
        got = store.run("SELECT id FROM customers WHERE id IN "
                        f"({', '.join(map(str, ids))}) ORDER BY id")
        assert got == [(i,) for i in sorted(ids)]
    finally:
        store.failpoint.unlink(missing_ok=True)
        routed_again(store)
        store.both(f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})")


def test_a_failed_commit_prepared_is_retried_then_waited_for(store):
    """A COMMIT PREPARED that fails (failpoint commit_prepared_error:<k>: its first k rounds
    fail) is retried before the client is answered; when every round fails, the client gets
    COMMIT with a WARNING naming the shard, and the session's next statement there waits
    for the recovery to finish the transaction (it reads the committed row)."""
    ids = sorted(ids_on_shards(store, 2, 5400), key=store.customer_shard)
    late = store.customer_shard(ids[1])       # prepared (the first in uid order decides)
    notices = []
    try:
        with atomic_conn(store) as conn:
            conn.add_notice_handler(lambda d: notices.append((d.severity, d.message_primary)))
            conn.execute("BEGIN")
            for i in ids:
                conn.execute(f"INSERT INTO customers VALUES ({i}, 'x', 'FR')")
            store.failpoint.write_text("commit_prepared_error:1\n")
            assert conn.execute("COMMIT").statusmessage == "COMMIT"
            assert not store.failpoint.exists()
            assert notices == [] and prepared(store) == {}
            conn.execute("BEGIN")
            conn.execute(f"UPDATE customers SET name = 'w' WHERE id IN ({ids[0]}, {ids[1]})")
            store.failpoint.write_text("commit_prepared_error:99\n")
            assert conn.execute("COMMIT").statusmessage == "COMMIT"
            assert not store.failpoint.exists()
            assert [n[0] for n in notices] == ["WARNING"], notices
            assert f'shard "{late}"' in notices[0][1]
            assert list(prepared(store)) == [late]
            started = time.monotonic()
            got = conn.execute(f"SELECT name FROM customers WHERE id = {ids[1]}").fetchone()
            assert got == ("w",)
            waited = time.monotonic() - started     # the recovery's, after its grace period
            assert GRACE_MS / 2000 < waited < GRACE_MS / 1000 + 5, waited
            assert prepared(store) == {}
    finally:
        store.failpoint.unlink(missing_ok=True)
        routed_again(store)
        store.both(f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})")


def test_a_failed_round_asking_the_readers_rolls_every_shard_back(store):
    """The round asking the shards that only read whether they wrote fails (failpoint
    probe_error): nothing is prepared, every shard rolls back, the client gets the error with
    its DETAIL saying so; the session goes on."""
    a, b, c = ids_on_shards(store, 3, 5600)
    store.run(f"INSERT INTO customers VALUES ({a}, 'a', 'FR')")
    try:
        with atomic_conn(store) as conn:
            conn.execute("BEGIN")
            conn.execute(f"SELECT name FROM customers WHERE id = {a}")
            for i in (b, c):
                conn.execute(f"INSERT INTO customers VALUES ({i}, 'x', 'FR')")
            store.failpoint.write_text("probe_error\n")
            with pytest.raises(psycopg.errors.DivisionByZero) as ei:
                conn.execute("COMMIT")
            assert "rolled back on every shard" in (ei.value.diag.message_detail or "")
            assert not store.failpoint.exists()
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert prepared(store) == {}
        assert store.run(f"SELECT id FROM customers WHERE id IN ({a}, {b}, {c})") == [(a,)]
    finally:
        store.failpoint.unlink(missing_ok=True)
        store.both(f"DELETE FROM customers WHERE id IN ({a}, {b}, {c})")


@pytest.mark.parametrize("failpoint,committed", [("prepare:1", False), ("decision", True)])
def test_a_second_host_recovers_what_a_dead_one_left(store, failpoint, committed):
    """Two neki on the same shards: the first (its grace period an hour: its own recovery
    does not act) dies at a failpoint of an atomic commit, is then killed whole (SIGKILL)
    and never comes back; the second's recovery finishes what it left: nothing stays
    prepared on any shard, and the rows are all there (after the decision) or none."""
    ids = ids_on_shards(store, 3, 5500 + 10 * (failpoint == "decision"))
    try:
        with routing_neki(store.cluster, store.db, topology(store.db), Store,
                          settings={"atomic_recovery_grace": 3600}) as first:
            gid = crash_at(store, failpoint, ids, inst=first)
            assert f"-{first.neki.port}:" in gid      # (the first host's)
            first.neki.kill_all()
            wait_until(lambda: prepared(store) == {}, 30,
                       what="the second host's recovery of " + gid)
        got = store.run("SELECT id FROM customers WHERE id IN "
                        f"({', '.join(map(str, ids))}) ORDER BY id")
        assert got == ([(i,) for i in sorted(ids)] if committed else [])
        assert decision(store, gid) is committed
    finally:
        store.failpoint.unlink(missing_ok=True)
        routed_again(store)
        store.both(f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})")


def in_doubt(store, gid, state=None):
    with store.neki.admin_connect() as c:
        rows = c.execute("SHOW TRANSACTIONS").fetchall()
    return [r for r in rows if r[0] == gid and (state is None or r[5] == state)]


def test_resolve_transaction(store):
    """__neki.resolve_transaction(gid, outcome): refused when the decision shard decided
    otherwise; with the decision shard down, the operator's outcome finishes the prepared
    parts (the note says it was not checked)."""
    ids = sorted(ids_on_shards(store, 2, 5300), key=store.customer_shard)
    dshard = store.customer_shard(ids[0])
    try:
        with atomic_conn(store) as conn:
            conn.execute("BEGIN")
            for i in ids:
                conn.execute(f"INSERT INTO customers VALUES ({i}, 'x', 'FR')")
            store.failpoint.write_text("decision\n")
            with pytest.raises(psycopg.OperationalError):
                conn.execute("COMMIT")
        gid = next(iter(prepared(store).values()))[0]
        wait_until(lambda: in_doubt(store, gid), 5, what="SHOW TRANSACTIONS to list it")
        with store.neki.admin_connect() as c:
            with pytest.raises(psycopg.Error) as ei:
                c.execute(f"SELECT * FROM __neki.resolve_transaction('{gid}', 'abort')")
            assert ei.value.diag.sqlstate == "55000", ei.value
            with pytest.raises(psycopg.Error) as ei:
                c.execute(f"SELECT * FROM __neki.resolve_transaction('{gid}', 'maybe')")
            assert ei.value.diag.sqlstate == "22023"
        store.cluster.stop_server(dshard, mode="fast")
        try:
            with store.neki.admin_connect() as c:
                row = c.execute(f"SELECT * FROM __neki.resolve_transaction('{gid}', "
                                "'commit')").fetchone()
            assert row[0] == gid and row[1] == "committed" and row[2] >= 1, row
            assert "not checked" in row[3]
            assert prepared(store, skip=[dshard]) == {}
        finally:
            store.cluster.start_server(dshard)
        routed_again(store)
        got = store.run("SELECT id FROM customers WHERE id IN "
                        f"({', '.join(map(str, ids))}) ORDER BY id")
        assert got == [(i,) for i in sorted(ids)]
        with store.neki.admin_connect() as c:
            with pytest.raises(psycopg.Error) as ei:
                c.execute("SELECT * FROM __neki.resolve_transaction('neki:nope:1:x', "
                          "'commit')")
            assert ei.value.diag.sqlstate == "42704"
    finally:
        store.failpoint.unlink(missing_ok=True)
        routed_again(store)
        store.both(f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})")


def workers(store):
    admin = store.neki.admin_connect().execute("SHOW WORKERS").fetchall()
    return [c for c in store.neki.children() if c in {int(r[1]) for r in admin}]


def test_bank_transfers_survive_sigkills(store):
    """Transfers between accounts (orders.total, one row per customer, mostly on different
    shards) in atomic mode while a worker, then the whole neki, is killed with SIGKILL and
    neki restarted: the sum of the balances is unchanged, every transfer a client saw
    committed is there once (order_items rows), no prepared transaction is left."""
    ids = list(range(9000, 9000 + ACCOUNTS))
    store.run(f"DELETE FROM order_items WHERE customer_id >= 9000")
    store.run(f"DELETE FROM orders WHERE customer_id >= 9000")
    store.run("INSERT INTO orders (customer_id, id, total) VALUES " +
              ", ".join(f"({i}, 1, 1000)" for i in ids))
    seen = []
    stop = threading.Event()

    def client(n):
        rnd = random.Random(n)
        k = 0
        while not stop.is_set():
            a, b = rnd.sample(ids, 2)
            k += 1
            line = n * 100000 + k
            try:
                with atomic_conn(store) as conn:
                    conn.execute("BEGIN")
                    conn.execute("UPDATE orders SET total = total - 7 "
                                 f"WHERE customer_id = {a} AND id = 1")
                    conn.execute("UPDATE orders SET total = total + 7 "
                                 f"WHERE customer_id = {b} AND id = 1")
                    conn.execute("INSERT INTO order_items VALUES "
                                 f"({a}, 1, {line}, 'transfer to {b}', 7)")
                    conn.execute("COMMIT")
                    seen.append((a, line))
            except psycopg.Error as e:
                errors.append(f"{type(e).__name__}: {e}")
                time.sleep(0.05)

    errors = []
    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    try:
        for victim in range(3):
            time.sleep(1.0)
            before = len(seen)
            if victim < 2:
                os.kill(random.choice(workers(store)), signal.SIGKILL)
            else:
                store.neki.kill_all()
                store.neki.start()
            routed_again(store)
            try:
                wait_until(lambda: len(seen) > before + 3, 60, what="transfers again")
            except TimeoutError:
                raise AssertionError((victim, len(seen), errors[-5:], prepared(store)))
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    wait_until(lambda: prepared(store) == {}, 30, what="recovery after the kills")
    assert store.run("SELECT sum(total) FROM orders WHERE customer_id >= 9000"
                     )[0][0] == 1000 * ACCOUNTS
    got = store.run("SELECT customer_id, line FROM order_items WHERE customer_id >= 9000")
    assert len(got) == len(set(got))
    assert set(seen) <= set(got), set(seen) - set(got)
    moved = sum(abs(r[0] - 1000) for r in store.run(
        "SELECT total FROM orders WHERE customer_id >= 9000"))
    assert moved <= 14 * len(got)
    assert len(seen) > 10


def epochs(store, inst=None):
    """The epochs __neki.router_epochs on the authoritative shard holds for the host id of
    <inst> (the store's neki by default), oldest first."""
    port = (inst or store.neki).port
    return [e for (e,) in store.shard_rows(
        "auth", f"SELECT epoch FROM __neki.router_epochs WHERE host_id LIKE '%:{port}' "
        "ORDER BY epoch")]


def gid_epoch(gid):
    """The epoch field of global id neki:<host>-<port>:<epoch>.<pid>:<seq>:<uid>."""
    return int(gid.split(":")[2].split(".")[0])


def crash_at(store, failpoint, ids, inst=None):
    """An atomic commit inserting <ids> whose worker dies at <failpoint>; the gid it left."""
    with atomic_conn(inst or store) as conn:
        conn.execute("BEGIN")
        for i in ids:
            conn.execute(f"INSERT INTO customers VALUES ({i}, 'x', 'FR')")
        store.failpoint.write_text(failpoint + "\n")
        with pytest.raises(psycopg.OperationalError):
            conn.execute("COMMIT")
    assert not store.failpoint.exists()
    left = [g for gids in prepared(store).values() for g in gids]
    assert left, "the crash left no prepared transaction"
    return left[0]


def test_ids_carry_the_epoch_and_a_previous_epochs_are_recovered(store):
    """Each start of neki takes the next epoch of its host id from the authoritative shard
    (__neki.router_epochs) and its global ids carry it; a transaction a previous life left
    prepared (killed whole right after the decision, before its own recovery could act) is
    committed by the next life's recovery, whose own ids carry the new epoch."""
    ids = ids_on_shards(store, 3, 5600)
    more = ids_on_shards(store, 3, 5650)
    try:
        before = epochs(store)
        assert before and before == list(range(before[0], before[-1] + 1)), before
        gid = crash_at(store, "decision", ids)
        assert gid.startswith(f"neki:") and f"-{store.neki.port}:{before[-1]}." in gid, gid
        assert gid_epoch(gid) == before[-1]
        store.neki.kill_all()
        assert gid in [g for gids in prepared(store).values() for g in gids]   # not finished
        store.neki.start()
        routed_again(store)
        wait_until(lambda: epochs(store)[-1] > before[-1], 20, what="a new epoch")
        assert epochs(store) == before + [before[-1] + 1]
        wait_until(lambda: prepared(store) == {}, 30, what="the next life's recovery of " + gid)
        got = store.run("SELECT id FROM customers WHERE id IN "
                        f"({', '.join(map(str, ids))}) ORDER BY id")
        assert got == [(i,) for i in sorted(ids)]
        assert decision(store, gid) is True
        gid2 = crash_at(store, "prepare:1", more)
        assert gid_epoch(gid2) == before[-1] + 1, gid2
        wait_until(lambda: prepared(store) == {}, 30, what="recovery of " + gid2)
        assert store.run("SELECT id FROM customers WHERE id IN "
                         f"({', '.join(map(str, more))})") == []
    finally:
        store.failpoint.unlink(missing_ok=True)
        routed_again(store)
        store.both(f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids + more))})")


@pytest.mark.parametrize("decided", [True, None])
def test_ids_of_the_old_form_are_recovered(store, decided):
    """A transaction prepared under the global id of neki before epochs
    (neki:<host>-<port>:<pid>x<start>:<seq>:<decision uid>) is still finished: committed
    when its decision shard holds its commit row, else rolled back (and the abort row is
    inserted there)."""
    dshard, other = store.cluster.shards[0], store.cluster.shards[1]
    gid = f"neki:oldhost-5999:4242x5f5e100:{7 if decided else 8}:{dshard}"
    with store.cluster.connect(other, dbname=store.db) as c:
        c.execute("CREATE TABLE IF NOT EXISTS old_form_probe (gid text)")
    try:
        if decided:
            with store.cluster.connect(dshard, dbname=store.db) as c:
                c.execute("INSERT INTO __neki.tx_decision (gid, commit) VALUES (%s, true)",
                          (gid,))
        with store.cluster.connect(other, dbname=store.db) as c:
            c.execute("BEGIN")
            c.execute("INSERT INTO old_form_probe VALUES (%s)", (gid,))
            c.execute(f"PREPARE TRANSACTION '{gid}'")
        assert prepared(store) == {other: [gid]}
        wait_until(lambda: prepared(store) == {}, 30, what="recovery of " + gid)
        got = store.shard_rows(other, f"SELECT count(*) FROM old_form_probe WHERE gid = '{gid}'")
        assert got == [(1 if decided else 0,)]
        assert decision(store, gid) is bool(decided)
    finally:
        with store.cluster.connect(other, dbname=store.db, autocommit=True) as c:
            # a transaction recovery left (the test failed) holds the table's lock
            if c.execute("SELECT 1 FROM pg_prepared_xacts WHERE gid = %s", (gid,)).fetchall():
                c.execute(f"ROLLBACK PREPARED '{gid}'")
            c.execute("DROP TABLE IF EXISTS old_form_probe")


def test_without_an_epoch_a_commit_needing_2pc_is_refused(store):
    """Until the admin process has taken its epoch (here a trigger makes the insert into
    __neki.router_epochs fail), a transaction that would need two-phase commit is refused
    at its COMMIT (57P03, retryable) and rolled back on every shard, nothing prepared; once
    the insert goes through (a later beat), the same transaction commits, its global id
    carrying the epoch taken."""
    ids = ids_on_shards(store, 2, 5700)
    with store.cluster.connect("auth", dbname=store.db) as c:
        c.execute("CREATE FUNCTION public.neki_test_no_epoch() RETURNS trigger LANGUAGE plpgsql"
                  " AS $f$BEGIN RAISE EXCEPTION 'no epoch in this test'; END$f$")
        c.execute("CREATE TRIGGER neki_test_no_epoch BEFORE INSERT ON __neki.router_epochs "
                  "FOR EACH ROW EXECUTE FUNCTION public.neki_test_no_epoch()")
    dropped = False
    try:
        with routing_neki(store.cluster, store.db, topology(store.db), Store) as second:
            port = second.neki.port
            with atomic_conn(second) as conn:
                conn.execute("BEGIN")
                for i in ids:
                    conn.execute(f"INSERT INTO customers VALUES ({i}, 'x', 'FR')")
                with pytest.raises(psycopg.Error) as ei:
                    conn.execute("COMMIT")
                assert ei.value.diag.sqlstate == "57P03", ei.value
                assert "epoch" in ei.value.diag.message_primary
                assert "rolled back on every shard" in ei.value.diag.message_detail
                assert ei.value.diag.message_hint.startswith("Retry")
                assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
                assert prepared(store) == {}
                assert store.run("SELECT id FROM customers WHERE id IN "
                                 f"({', '.join(map(str, ids))})") == []
                assert epochs(store, second.neki) == []
                with store.cluster.connect("auth", dbname=store.db) as c:
                    c.execute("DROP TRIGGER neki_test_no_epoch ON __neki.router_epochs")
                dropped = True
                taken = wait_until(lambda: epochs(store, second.neki), 10, what="the epoch")
                conn.execute("BEGIN")
                for i in ids:
                    conn.execute(f"INSERT INTO customers VALUES ({i}, 'x', 'FR')")
                assert conn.execute("COMMIT").statusmessage == "COMMIT"
            got = [g for s in servers(store) for (g,) in store.shard_rows(
                s, f"SELECT gid FROM __neki.tx_decision WHERE gid LIKE '%-{port}:%'")]
            assert len(got) == 1 and gid_epoch(got[0]) == taken[-1], (got, taken)
            assert sorted(store.run("SELECT id FROM customers WHERE id IN "
                                    f"({', '.join(map(str, ids))})")) == [(i,) for i in sorted(ids)]
    finally:
        with store.cluster.connect("auth", dbname=store.db) as c:
            if not dropped:
                c.execute("DROP TRIGGER IF EXISTS neki_test_no_epoch ON __neki.router_epochs")
            c.execute("DROP FUNCTION IF EXISTS public.neki_test_no_epoch()")
        store.both(f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})")
