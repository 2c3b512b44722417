"""
The pgbouncer console on the admin port (issue 4, "The console"): pgbouncer 1.25's column
lists for every SHOW, neki's SHOW WORKERS, the control commands acting on every worker
through the shm mailboxes, SET, access rules and error texts.
"""
import re

import pytest

from conftest import wait_until

try:
    import psycopg
except ImportError:
    psycopg = None

COLUMNS = {
    "POOLS": "database user cl_active cl_waiting cl_active_cancel_req cl_waiting_cancel_req "
             "sv_active sv_active_cancel sv_being_canceled sv_idle sv_used sv_tested sv_login "
             "maxwait maxwait_us pool_mode load_balance_hosts",
    "STATS": "database total_server_assignment_count total_xact_count total_query_count "
             "total_received total_sent total_xact_time total_query_time total_wait_time "
             "total_client_parse_count total_server_parse_count total_bind_count "
             "total_client_login_count "
             "avg_server_assignment_count avg_xact_count avg_query_count avg_recv avg_sent "
             "avg_xact_time avg_query_time avg_wait_time avg_client_parse_count "
             "avg_server_parse_count avg_bind_count avg_client_login_count",
    "CLIENTS": "type user database replication state addr port local_addr local_port "
               "connect_time request_time wait wait_us close_needed ptr link remote_pid tls "
               "application_name prepared_statements id",
    "DATABASES": "name host port database force_user pool_size min_pool_size "
                 "reserve_pool_size server_lifetime pool_mode load_balance_hosts "
                 "max_connections current_connections max_client_connections "
                 "current_client_connections paused disabled",
    "USERS": "name pool_size reserve_pool_size pool_mode max_user_connections "
             "current_connections max_user_client_connections current_client_connections",
    "PEERS": "peer_id host port pool_size",
    "PEER_POOLS": "peer_id cl_active_cancel_req cl_waiting_cancel_req sv_active_cancel sv_login",
    "LISTS": "list items",
    "STATS_TOTALS": "database server_assignment_count xact_count query_count bytes_received "
                    "bytes_sent xact_time query_time wait_time client_parse_count "
                    "server_parse_count bind_count client_login_count",
    "STATS_AVERAGES": "database server_assignment_count xact_count query_count bytes_received "
                      "bytes_sent xact_time query_time wait_time avg_client_parse_count "
                      "avg_server_parse_count avg_bind_count avg_client_login_count",
    "TOTALS": "name value",
    "FDS": "fd task user database addr port cancel link client_encoding std_strings datestyle "
           "timezone password scram_client_key scram_server_key",
    "CONFIG": "key value default changeable",
    "MEM": "name size used free memtotal",
    "STATE": "key value",
    "VERSION": "version",
    "DNS_HOSTS": "hostname ttl addrs",
    "DNS_ZONES": "zonename serial count",
    "WORKERS": "slot pid state clients links revision uptime",
}
COLUMNS["SERVERS"] = COLUMNS["CLIENTS"]
COLUMNS["SOCKETS"] = COLUMNS["CLIENTS"] + " recv_pos pkt_pos pkt_remain send_pos send_remain " \
                                          "pkt_avail send_avail"
COLUMNS["ACTIVE_SOCKETS"] = COLUMNS["SOCKETS"]


@pytest.fixture
def console(neki):
    inst = neki(settings={"workers": 3, "admin_users": "admin", "stats_users": "stats"},
                databases="app = host=127.0.0.1 port=5432 dbname=app\n",
                users="bob = pool_mode=session max_user_connections=7\n",
                extra="[peers]\n1 = host=127.0.0.1 port=7001\n")
    return inst


def q(inst, sql, user="admin", dbname="pgbouncer"):
    with inst.admin_connect(dbname=dbname, user=user) as conn:
        cur = conn.execute(sql)
        return [d.name for d in cur.description], cur.fetchall()


def err(inst, sql, user="admin"):
    with pytest.raises(psycopg.Error) as ei:
        q(inst, sql, user)
    return ei.value


@pytest.mark.parametrize("what", sorted(COLUMNS))
def test_show_columns(console, what):
    cols, _ = q(console, f"SHOW {what}")
    assert cols == COLUMNS[what].split()


def test_show_contents(console):
    _, rows = q(console, "SHOW DATABASES")
    assert [r[0] for r in rows] == ["app", "pgbouncer"]
    assert rows[1][2] == console.port and rows[1][9] == "statement"
    _, rows = q(console, "SHOW USERS")
    # every known user, sorted: the [users] entry and the auth_file's users
    assert ("bob", "", "", "session", 7, 0, 0, 0) in rows
    assert [r[0] for r in rows] == sorted(r[0] for r in rows) and len(rows) > 1
    assert all(r[3] is None for r in rows if r[0] != "bob")
    _, rows = q(console, "SHOW PEERS")
    assert rows[0][:3] == (1, "127.0.0.1", 7001)
    _, rows = q(console, "select config")          # SELECT x is SHOW x
    assert ("listen_port", str(console.port)) in [(r[0], r[1]) for r in rows]
    _, rows = q(console, "SHOW CLIENTS;")
    assert any(r[1] == "admin" and r[2] == "pgbouncer" for r in rows)   # the session itself
    _, rows = q(console, "SHOW LISTS")
    assert [r[0] for r in rows][:3] == ["databases", "users", "peers"] and len(rows) == 14
    _, rows = q(console, "SHOW TOTALS")
    assert rows[0][0] == "total_server_assignment_count" and len(rows) == 24
    assert [r[0] for r in rows][11:13] == ["total_client_login_count",
                                           "avg_server_assignment_count"]
    assert rows[-1][0] == "avg_client_login_count"
    _, rows = q(console, "SHOW VERSION")
    assert rows[0][0].startswith("PgBouncer 1.25.2")
    wait_until(lambda: [r[2] for r in q(console, "SHOW WORKERS")[1]] == ["running"] * 3, 5,
               what="three running workers")


def test_pause_resume(console):
    wait_until(lambda: [r[2] for r in q(console, "SHOW WORKERS")[1]] == ["running"] * 3, 5,
               what="three running workers")
    with console.admin_connect(dbname="pgbouncer", user="admin") as conn:
        conn.execute("PAUSE app")
        conn.execute("RESUME")           # a paused database is enough for a global RESUME
    with console.admin_connect(dbname="pgbouncer", user="admin") as conn:
        conn.execute("PAUSE")
        assert conn.execute("SHOW STATE").fetchall() == \
            [("active", "no"), ("paused", "yes"), ("suspended", "no")]
        assert {r[2] for r in conn.execute("SHOW WORKERS").fetchall()} == {"paused"}
        with pytest.raises(psycopg.Error, match="already suspended/paused"):
            conn.execute("PAUSE")
    with console.admin_connect(dbname="pgbouncer", user="admin") as conn:
        conn.execute("RESUME")
        assert {r[2] for r in conn.execute("SHOW WORKERS").fetchall()} == {"running"}
        with pytest.raises(psycopg.Error, match="pooler is not paused/suspended"):
            conn.execute("RESUME")


def test_command_errors(console):
    assert "no such database: nosuch" in str(err(console, "PAUSE nosuch"))
    assert "cannot pause admin db: pgbouncer" in str(err(console, "PAUSE pgbouncer"))
    assert "cannot kill admin db: pgbouncer" in str(err(console, "KILL pgbouncer"))
    assert "a database is required" in str(err(console, "DISABLE"))
    assert "database app is not paused" in str(err(console, "RESUME app"))
    assert "invalid command 'FOO BAR BAZ', use SHOW HELP;" in str(err(console, "FOO BAR BAZ"))
    # SUSPEND works, and a second one (on the same session) is refused as pgbouncer does
    with console.admin_connect(dbname="pgbouncer", user="admin") as conn:
        assert conn.execute("SUSPEND").statusmessage == "SUSPEND"
        with pytest.raises(psycopg.Error, match="already suspended/paused"):
            conn.execute("SUSPEND")
        assert conn.execute("RESUME").statusmessage == "RESUME"
    # stats_users: SHOW only, not FDS; others may not log in to the pgbouncer console
    assert q(console, "SHOW VERSION", user="stats")[1]
    assert "admin access needed" in str(err(console, "PAUSE", user="stats"))
    assert "admin access needed" in str(err(console, "SHOW FDS", user="stats"))
    with pytest.raises(psycopg.OperationalError, match="not allowed"):
        q(console, "SHOW VERSION", user="stranger")


def test_acting_commands(console):
    for cmd, tag in [("PAUSE app", "PAUSE"), ("RESUME app", "RESUME"),
                     ("RECONNECT", "RECONNECT"), ("RECONNECT app", "RECONNECT"),
                     ("DISABLE app", "DISABLE"), ("ENABLE app", "ENABLE"),
                     ("KILL app", "KILL"), ("RESUME app", "RESUME"), ("WAIT_CLOSE", "WAIT_CLOSE"),
                     ("RELOAD", "RELOAD")]:
        with console.admin_connect(dbname="pgbouncer", user="admin") as conn:
            cur = conn.execute(cmd)
            assert cur.statusmessage == tag, cmd
    assert "reloaded" in console.wait_log("configuration reloaded in every process", 5).group(0)


def test_set(console):
    notices = []
    with console.admin_connect(dbname="pgbouncer", user="admin") as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        conn.execute("SET client_encoding = 'UTF8'")
        assert notices == ["SET ignored"]
        cur = conn.execute("SET query_timeout = 7")
        assert cur.statusmessage == "SET"
        rows = conn.execute("SHOW CONFIG").fetchall()
        assert ("query_timeout", "7") in [(r[0], r[1]) for r in rows]
        # not reloadable: pgbouncer answers SET and ignores it; neki adds a WARNING
        listen_port = [r[1] for r in conn.execute("SHOW CONFIG").fetchall()
                       if r[0] == "listen_port"]
        assert conn.execute("SET listen_port TO 1").statusmessage == "SET"
        assert 'parameter "listen_port" cannot be changed at run time' in notices[-1]
        assert [r[1] for r in conn.execute("SHOW CONFIG").fetchall()
                if r[0] == "listen_port"] == listen_port
        # a long value (a whole auth_query) reaches every worker
        query = "SELECT usename, passwd FROM pg_shadow WHERE usename = $1 " + "AND true " * 40
        assert conn.execute(f"SET auth_query = '{query}'").statusmessage == "SET"
        assert ("auth_query", query) in [(r[0], r[1]) for r in
                                        conn.execute("SHOW CONFIG").fetchall()]
        # over 1 kB: refused, the setting unchanged
        with pytest.raises(psycopg.Error, match='value of "auth_query" is longer than 1012 bytes'):
            conn.execute("SET auth_query = '" + "x" * 1100 + "'")
        assert ("auth_query", query) in [(r[0], r[1]) for r in
                                        conn.execute("SHOW CONFIG").fetchall()]
    with console.admin_connect(dbname="pgbouncer", user="admin") as conn:
        with pytest.raises(psycopg.Error, match='unknown parameter "nosuch"'):
            conn.execute("SET nosuch = 1")


def test_shutdown_wait_for_clients(console):
    with console.admin_connect(dbname="pgbouncer", user="admin") as conn:
        assert conn.execute("SHUTDOWN WAIT_FOR_CLIENTS").statusmessage == "SHUTDOWN"
    console.wait_exit(10)


def test_console_tls(neki):
    import os
    import shutil
    import subprocess
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command")
    inst = neki(settings={"workers": 1, "admin_users": "admin"}, start=False)
    key, crt = inst.dir / "server.key", inst.dir / "server.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(crt)], check=True, capture_output=True)
    os.chmod(key, 0o644)
    inst.update({"client_tls_sslmode": "require", "client_tls_key_file": key,
                 "client_tls_cert_file": crt})
    inst.start()
    with inst.admin_connect(dbname="pgbouncer", user="admin", sslmode="verify-full",
                            sslrootcert=str(crt)) as conn:
        rows = conn.execute("SHOW CLIENTS").fetchall()
        assert rows[0][17].startswith("TLSv1.")
        assert conn.pgconn.ssl_in_use
    with pytest.raises(psycopg.OperationalError, match="SSL required"):
        inst.admin_connect(dbname="pgbouncer", user="admin", sslmode="disable")


def test_socket_ids_are_global(console):
    """Client and server ids come from one counter in shm for every process (pgbouncer's
    single counter): a worker's client taken between two console sessions uses the id
    between theirs."""
    with console.admin_connect(dbname="pgbouncer", user="admin") as a:
        first = [r[20] for r in a.execute("SHOW CLIENTS").fetchall()]
        with pytest.raises(psycopg.OperationalError, match="no such database"):
            console.connect(dbname="nosuch", user="admin")
        with console.admin_connect(dbname="pgbouncer", user="admin") as b:
            ids = sorted(r[20] for r in b.execute("SHOW CLIENTS").fetchall())
    # (>=: another process may take an id meanwhile, e.g. a probe of the harness on a loaded
    # machine; a counter per process would give first + 1)
    assert len(first) == 1 and ids[0] == first[0] and ids[1] >= first[0] + 2, (first, ids)


def test_admin_port_logins_count_toward_client_limits(neki):
    """A login on the admin port counts toward the admin database's and its user's client
    limits as on the main port (pgbouncer's admin-database rules): refused past them with
    pgbouncer's FATAL, except admin_users; the units come back at logout."""
    inst = neki(settings={"admin_users": "admin", "stats_users": "stats",
                          "max_user_client_connections": 1, "max_db_client_connections": 3})
    with inst.admin_connect(dbname="pgbouncer", user="stats"):
        with pytest.raises(psycopg.OperationalError, match=r"client connections exceeded "
                           r"\(max_user_client_connections\)"):
            inst.admin_connect(dbname="pgbouncer", user="stats")
        with inst.admin_connect(dbname="pgbouncer", user="admin"), \
                inst.admin_connect(dbname="pgbouncer", user="admin"):   # 3 of 3, exempt
            with pytest.raises(psycopg.OperationalError, match=r"client connections "
                               r"exceeded \(max_db_client_connections\)"):
                inst.admin_connect(dbname="pgbouncer", user="viewer")
            with inst.admin_connect(dbname="pgbouncer", user="admin") as c:   # exempt
                assert c.execute("SHOW VERSION").fetchone()[0].startswith("PgBouncer")

    def stats_again():
        try:
            inst.admin_connect(dbname="pgbouncer", user="stats").close()
            return True
        except psycopg.OperationalError:
            return False
    wait_until(stats_again, 5, what="the stats user's unit given back")


def test_set_verbose_takes_effect_in_every_process(neki):
    """SET verbose = 1 turns DEBUG lines on at once in the admin process (its next console
    login's line) and in every worker (the line of the next command from the mailbox: the
    gathering of SHOW CLIENTS), and SET verbose = 0 off again."""
    inst = neki(settings={"admin_users": "admin", "workers": 3})
    got = r"\[(\d+)\] DEBUG worker: got command"

    def show_clients():     # answered once every worker has acted on its list command
        with inst.admin_connect(dbname="pgbouncer", user="admin") as c:
            c.execute("SHOW CLIENTS")
    with inst.admin_connect(dbname="pgbouncer", user="admin") as c:
        c.execute("SET verbose = 1")
    show_clients()
    inst.wait_log(r"DEBUG console login: user=admin db=pgbouncer")
    assert len(set(re.findall(got, inst.log()))) == 3, inst.log()
    with inst.admin_connect(dbname="pgbouncer", user="admin") as c:
        c.execute("SET verbose = 0")    # (each worker logs taking it, then turns DEBUG off)
    before = len(re.findall(got, inst.log()))
    show_clients()
    assert len(re.findall(got, inst.log())) == before
