"""
Savepoints across shards (issue 17): SAVEPOINT, ROLLBACK TO [SAVEPOINT] and RELEASE
[SAVEPOINT] inside a transaction over several shards, over the simple and the extended
protocol, each script run through neki and on the reference server: every statement's
outcome (command tag or SQLSTATE), the final transaction status and the rows must agree.
"""
import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from test_routing import Store, create_schema, routing_neki, sharded_database, topology
from test_txn import no_idle_in_transaction

PROTOCOLS = ["simple", "extended"]


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "svp") as db, \
            routing_neki(pg_cluster, db, topology(db), Store) as st:
        create_schema(st)
        st.both("INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany')")
        yield st


def ids_on_shards(store, n, base):
    """<n> customer ids >= base, each on another data shard (n <= the shard count)."""
    out, seen = [], set()
    for i in range(base, base + 200):
        sh = store.customer_shard(i)
        if sh not in seen:
            seen.add(sh)
            out.append(i)
            if len(out) == n:
                return out
    raise AssertionError("not enough shards")


def run_script(conn, protocol, script):
    """Each statement of <script> on <conn>: its tag (with the rows it returned) or
    'ERROR <sqlstate>'; then the transaction status. Extended: binary results, which make
    psycopg use Parse/Bind/Execute."""
    cur = psycopg.ClientCursor(conn) if protocol == "simple" else conn.cursor()
    out = []
    for sql in script:
        try:
            cur.execute(sql, binary=protocol == "extended")
            rows = cur.fetchall() if cur.description is not None else None
            out.append((cur.statusmessage, rows))
        except psycopg.Error as e:
            out.append(("ERROR " + (e.diag.sqlstate or ""), None))
    out.append(conn.info.transaction_status.name)
    return out


def compare_script(store, protocol, script, ids):
    """<script> through neki and on the reference; then the rows of <ids> on both."""
    sel = f"SELECT id, name FROM customers WHERE id IN ({', '.join(map(str, ids))}) ORDER BY id"
    results = []
    try:
        for connect in (store.connect, store.ref):
            with connect() as conn:
                conn.autocommit = True
                got = run_script(conn, protocol, script)
                if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    conn.execute("ROLLBACK")
                got.append(conn.execute(sel).fetchall())
                results.append(got)
        assert results[0] == results[1], f"neki {results[0]} != reference {results[1]}"
        no_idle_in_transaction(store)
    finally:
        store.both(f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})")
    return results[0]


def ins(i, name="x"):
    return f"INSERT INTO customers VALUES ({i}, '{name}', 'FR')"


SCRIPTS = {
    # a shard joining after the savepoint: ROLLBACK TO undoes its part only
    "join_after": lambda a, b, c: [
        "BEGIN", ins(a), "SAVEPOINT s", ins(b), "ROLLBACK TO SAVEPOINT s", ins(c), "COMMIT"],
    # both shards before the savepoint, updates after it on both are undone
    "both_before": lambda a, b, c: [
        "BEGIN", ins(a), ins(b), "SAVEPOINT s",
        f"UPDATE customers SET name = 'u' WHERE id IN ({a}, {b})", "ROLLBACK TO s",
        f"SELECT id, name FROM customers WHERE id IN ({a}, {b}) ORDER BY id", "COMMIT"],
    # an error on a shard that joined after the savepoint: ROLLBACK TO restores the block
    "error_recovered": lambda a, b, c: [
        "BEGIN", ins(a), "SAVEPOINT s", ins(b), ins(b), "SELECT 1", "ROLLBACK TO s",
        "SELECT 1", ins(c), "COMMIT"],
    # nested savepoints, RELEASE of the inner one, ROLLBACK TO the outer one
    "nested": lambda a, b, c: [
        "BEGIN", ins(a), "SAVEPOINT s1", ins(b), "SAVEPOINT s2", ins(c), "RELEASE s2",
        "ROLLBACK TO SAVEPOINT s1", f"SELECT count(*) FROM customers WHERE id IN ({b}, {c})",
        "RELEASE SAVEPOINT s1", "COMMIT"],
    # the inner one rolled back, the outer one released: its part stays
    "inner_rollback": lambda a, b, c: [
        "BEGIN", "SAVEPOINT s1", ins(a), "SAVEPOINT s2", ins(b), ins(c),
        "ROLLBACK TO s2", "RELEASE s1", "COMMIT"],
    # ROLLBACK TO keeps the savepoint: a second ROLLBACK TO it again; a later one is gone
    "rollback_twice": lambda a, b, c: [
        "BEGIN", "SAVEPOINT s", ins(a), "SAVEPOINT t", "ROLLBACK TO s", ins(b),
        "ROLLBACK TO s", "ROLLBACK TO t", "ROLLBACK", ],
    # the same name twice: the newest one is meant, RELEASE uncovers the older one
    "same_name": lambda a, b, c: [
        "BEGIN", "SAVEPOINT s", ins(a), "SAVEPOINT s", ins(b), "ROLLBACK TO s",
        "RELEASE s", ins(c), "ROLLBACK TO s", "COMMIT"],
    # quoted names keep their case
    "quoted": lambda a, b, c: [
        "BEGIN", 'SAVEPOINT "Mixed ""Case"""', ins(a), 'ROLLBACK TO "Mixed ""Case"""',
        "ROLLBACK TO mixed", ins(b), "COMMIT"],
    # refusals as Postgres: outside a block, unknown names, RELEASE in an aborted block
    "outside_block": lambda a, b, c: [
        "SAVEPOINT s", "RELEASE s", "ROLLBACK TO s", ins(a)],
    "unknown": lambda a, b, c: [
        "BEGIN", ins(a), "RELEASE nope", "ROLLBACK TO nope", "SAVEPOINT s",
        "ROLLBACK", "BEGIN", "SAVEPOINT s", ins(b), "SELECT 1 / 0", "RELEASE s",
        "SAVEPOINT t", "ROLLBACK TO nope", "ROLLBACK TO s", ins(c), "COMMIT"],
    # a rolled-back part, then COMMIT in the aborted block: ROLLBACK
    "commit_aborted": lambda a, b, c: [
        "BEGIN", ins(a), "SAVEPOINT s", ins(b), "SELECT 1 / 0", "COMMIT"],
    # a cursor declared after the savepoint is gone after ROLLBACK TO, one before stays
    "cursors": lambda a, b, c: [
        "BEGIN", ins(a), ins(b), "DECLARE c1 CURSOR FOR SELECT id FROM customers "
        f"WHERE id IN ({a}, {b}) ORDER BY id", "SAVEPOINT s",
        "DECLARE c2 CURSOR FOR SELECT id FROM customers ORDER BY id", "ROLLBACK TO s",
        "FETCH 1 FROM c1", "ROLLBACK TO s", "FETCH 1 FROM c2", "ROLLBACK TO s",
        "FETCH 1 FROM c1", "COMMIT"],
    # settings: SET after the savepoint undone, including on a shard that joins later
    "settings": lambda a, b, c: [
        "BEGIN", "SET statement_timeout = '11s'", ins(a), "SAVEPOINT s",
        "SET statement_timeout = '12s'", ins(b), "SHOW statement_timeout",
        "ROLLBACK TO s", "SHOW statement_timeout", ins(c),
        f"SELECT current_setting('statement_timeout'), count(*) FROM customers WHERE id = {c}",
        f"SELECT current_setting('statement_timeout'), count(*) FROM customers WHERE id = {b}",
        "COMMIT", "SHOW statement_timeout", "RESET statement_timeout"],
    # a shard joining after two savepoints with settings between them
    "settings_join": lambda a, b, c: [
        "BEGIN", "SET LOCAL lock_timeout = '1s'", "SAVEPOINT s1",
        "SET LOCAL lock_timeout = '2s'", "SAVEPOINT s2", "SET LOCAL lock_timeout = '3s'",
        ins(a), "ROLLBACK TO s2",
        f"SELECT current_setting('lock_timeout'), count(*) FROM customers WHERE id = {a}",
        "ROLLBACK TO s1", ins(b),
        f"SELECT current_setting('lock_timeout'), count(*) FROM customers WHERE id = {a}",
        f"SELECT current_setting('lock_timeout'), count(*) FROM customers WHERE id = {b}",
        f"SELECT current_setting('lock_timeout'), count(*) FROM customers WHERE id = {c}",
        "COMMIT"],
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_savepoint_script_as_postgres(store, protocol, name):
    base = 1000 + 10 * sorted(SCRIPTS).index(name) + (500 if protocol == "extended" else 0)
    a, b, c = ids_on_shards(store, 3, base)
    compare_script(store, protocol, SCRIPTS[name](a, b, c), [a, b, c])


def test_savepoint_in_a_multi_statement_query(store):
    """In the implicit transaction of a Query SAVEPOINT is refused (25P01) as by Postgres;
    inside a block a Query may hold savepoint statements (psycopg's ROLLBACK TO; RELEASE)."""
    a, b, c = ids_on_shards(store, 3, 2000)
    compare_script(store, "simple", [
        f"{ins(a)}; SAVEPOINT s; {ins(b)}",
        "BEGIN", ins(a), f"SAVEPOINT s; {ins(b)}; ROLLBACK TO SAVEPOINT s; RELEASE SAVEPOINT s",
        ins(c), "COMMIT"], [a, b, c])


def test_psycopg_nested_transactions(store):
    """psycopg's nested conn.transaction() blocks (savepoints), an inner one failing, give
    the rows one Postgres holds."""
    ids = ids_on_shards(store, 4, 2100)
    results = []
    try:
        for connect in (store.connect, store.ref):
            with connect() as conn:
                conn.autocommit = True
                with conn.transaction():
                    conn.execute(ins(ids[0], "outer"))
                    with conn.transaction():
                        conn.execute(ins(ids[1], "kept"))
                    with pytest.raises(psycopg.errors.UniqueViolation):
                        with conn.transaction():
                            conn.execute(ins(ids[2], "undone"))
                            with conn.transaction():
                                conn.execute(ins(ids[3], "undone too"))
                            conn.execute(ins(ids[0], "duplicate"))
                    with conn.transaction():
                        conn.execute(ins(ids[3], "after"))
                        with conn.transaction(force_rollback=True):
                            conn.execute(f"UPDATE customers SET name = 'gone' WHERE id = {ids[1]}")
                results.append(conn.execute(
                    "SELECT id, name FROM customers WHERE id IN "
                    f"({', '.join(map(str, ids))}) ORDER BY id").fetchall())
        assert results[0] == results[1]
        assert [r[1] for r in results[0]] == ["outer", "kept", "after"]
        no_idle_in_transaction(store)
    finally:
        store.both(f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})")


def test_rollback_to_after_a_lost_shard_is_refused(store):
    """A shard whose link broke inside the transaction lost its part: ROLLBACK TO cannot
    bring it back, so it is refused (25P02, the shard named) and ROLLBACK ends the block."""
    a, b = ids_on_shards(store, 2, 2200)
    shard_b = store.customer_shard(b)
    try:
        with store.connect(autocommit=True) as conn:
            conn.execute("BEGIN")
            conn.execute(ins(a))
            conn.execute("SAVEPOINT s")
            conn.execute(ins(b))
            pid = conn.execute(f"SELECT pg_backend_pid() FROM customers WHERE id = {b}"
                               ).fetchone()[0]
            store.cluster.sql(shard_b, "SELECT pg_terminate_backend(%s)", (pid,))
            with pytest.raises(psycopg.Error):
                conn.execute(f"SELECT 1 FROM customers WHERE id = {b}")
            with pytest.raises(psycopg.Error) as ei:
                conn.execute("ROLLBACK TO s")
            assert ei.value.diag.sqlstate == "25P02"
            assert shard_b in ei.value.diag.message_primary
            conn.execute("ROLLBACK")
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert store.run(f"SELECT id FROM customers WHERE id IN ({a}, {b})") == []
    finally:
        store.both(f"DELETE FROM customers WHERE id IN ({a}, {b})")
