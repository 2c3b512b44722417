"""
Authentication as pgbouncer's test_auth.py exercises it (pgbcompat.py's test bed): auth_user
+ auth_query and where it runs (auth_dbname: database, global, the "*" auto-database, a
disabled or unconfigured or reserved one), server logins with passwords from the ini or the
auth_file (plain, md5, SCRAM: "wrong password type"), client auth_type plain / md5 /
scram-sha-256 against plain, md5 and SCRAM secrets, the console reached through auth_query,
auth_query errors, reloads of hba, and a server password changed under a pool.
"""
import re
import threading

import pytest

from conftest import NekiStartError, wait_until
from pgbcompat import LONG_PASSWORD, bouncer, one_worker_bouncer, pgb_pg  # noqa: F401

try:
    import psycopg
except ImportError:
    psycopg = None

AUTH_QUERY = "SELECT usename, passwd FROM pg_shadow WHERE usename = $1"


def refused(match, fn, *args, **kw):
    with pytest.raises(psycopg.OperationalError, match=match):
        fn(*args, **kw)


def test_auth_user_queries_unknown_users(bouncer):
    bouncer.default_db = "authdb"
    bouncer.admin("SET auth_type = 'md5'")
    bouncer.test(user="someuser", password="anypasswd")
    with bouncer.log_contains(r"closing because: no such user \(age"):
        refused("no such user", bouncer.test, user="nouser", password="anypasswd")
    refused("(SASL|password) authentication failed", bouncer.test, user="someuser",
            password="badpasswd")
    # the auth_query link went back to the pool: the next lookup reuses it
    assert "authdb/pswcheck" not in "\n".join(
        line for line in bouncer.log().splitlines() if "not ready" in line)


def test_auth_query_null_name_is_no_such_user(bouncer):
    """A lookup answering one row of NULLs (a user_lookup()-style function) is a miss."""
    bouncer.admin("SET auth_type = 'md5'")
    bouncer.admin("SET auth_query = 'SELECT (SELECT rolname FROM pg_authid WHERE rolname "
                  "= $1), (SELECT rolpassword FROM pg_authid WHERE rolname = $1)'")
    with bouncer.log_contains(r"closing because: no such user \(age"):
        refused("no such user", bouncer.test, dbname="authdb", user="nosuchuser",
                password="whatever")
    bouncer.test(dbname="authdb", user="someuser", password="anypasswd")


def test_auth_dbname_global(bouncer):
    bouncer.admin("SET auth_dbname = 'authdb'")
    bouncer.admin("SET auth_user = 'pswcheck'")
    bouncer.admin("SET auth_type = 'md5'")
    bouncer.test(dbname="p7a", user="someuser", password="anypasswd")
    bouncer.test(dbname="p7a", user="pswcheck", password="pgbouncer-check")


def test_auth_dbname_unconfigured(bouncer):
    bouncer.admin("SET auth_dbname = 'p_unconfigured_auth_dbname'")
    bouncer.admin("SET auth_type = 'md5'")
    with bouncer.log_contains('authentication database "p_unconfigured_auth_dbname" '
                              'is not configured'):
        refused("bouncer config error", bouncer.test, dbname="authdb", user="someuser",
                password="anypasswd")
    # the database's own auth_dbname wins over the global one
    bouncer.test(dbname="pauthz", user="someuser", password="anypasswd")


def test_auth_dbname_disabled(bouncer):
    bouncer.admin("DISABLE authdb")
    bouncer.admin("SET auth_type = 'md5'")
    refused('authentication database "authdb" is disabled', bouncer.test, dbname="pauthz",
            user="someuser", password="anypasswd")
    bouncer.admin("ENABLE authdb")
    bouncer.test(dbname="pauthz", user="someuser", password="anypasswd")


def _with_autodb(bouncer, prefix=""):
    text = re.sub(r"^;\* = ", f"* = {prefix}", bouncer.config_text(), flags=re.M)
    bouncer.write_config(text)
    bouncer.admin("RELOAD")


def test_auth_dbname_on_the_auto_database(bouncer):
    _with_autodb(bouncer, "auth_dbname=authdb ")
    bouncer.admin("SET auth_user = 'pswcheck'")
    bouncer.admin("SET auth_type = 'md5'")
    bouncer.test(dbname="postgres", user="someuser", password="anypasswd")
    bouncer.test(dbname="postgres", user="pswcheck", password="pgbouncer-check")


def test_auth_dbname_served_by_the_auto_database(bouncer):
    """An auth_dbname with no [databases] entry is served by "*" (registered on the way)."""
    _with_autodb(bouncer)
    bouncer.admin("SET auth_dbname = 'unconfigured_auth_database'")
    bouncer.admin("SET auth_user = 'pswcheck'")
    bouncer.admin("SET auth_type = 'md5'")
    bouncer.test(dbname="p7a", user="someuser", password="anypasswd")
    refused('database "this_database_doesnt_exist" does not exist', bouncer.test,
            dbname="this_database_doesnt_exist", user="muser1", password="foo")
    bouncer.test(user="muser1", password="foo")


def test_server_passwords_from_ini_and_auth_file(bouncer):
    """Forced users log in with the [databases] password, else the auth_file's."""
    for db in ("p4", "p5"):
        bouncer.test(dbname=db)
        refused("password authentication failed", bouncer.test, dbname=f"{db}x")
        bouncer.test(dbname=f"{db}y")
        refused("password authentication failed", bouncer.test, dbname=f"{db}z")
    bouncer.test(dbname="p4l")   # a 2047-character password from the auth_file


def test_scram_server_passwords(bouncer):
    bouncer.test(dbname="p6")
    refused("password authentication failed", bouncer.test, dbname="p6x")
    # a stored SCRAM secret cannot log in to a SCRAM server without a client's keys
    refused("wrong password type", bouncer.test, dbname="p6y")
    refused("wrong password type", bouncer.test, dbname="p6z")


def _client_users(bouncer, scram=True, md5=True):
    bouncer.test(user="puser1", password="foo")
    refused("(password|SASL) authentication failed", bouncer.test, user="puser1",
            password="wrong")
    if md5:
        bouncer.test(user="muser1", password="foo")
        refused("password authentication failed", bouncer.test, user="muser1",
                password="wrong")
    if scram:
        bouncer.test(user="scramuser1", password="foo")
        refused("(password|SASL) authentication failed", bouncer.test, user="scramuser1",
                password="wrong")


def test_plain_client(bouncer):
    bouncer.admin("SET auth_type = 'plain'")
    _client_users(bouncer)
    bouncer.test(user="longpass", password=LONG_PASSWORD)
    refused("password authentication failed", bouncer.test, user="longpass",
            password="X" + LONG_PASSWORD)


def test_md5_client(bouncer):
    bouncer.admin("SET auth_type = 'md5'")
    _client_users(bouncer)


def test_scram_client(bouncer):
    bouncer.admin("SET auth_type = 'scram-sha-256'")
    _client_users(bouncer, md5=False)
    # an md5 secret cannot answer SCRAM: right and wrong passwords both fail
    with bouncer.log_contains(r"closing because: SASL authentication failed"):
        refused("SASL authentication failed", bouncer.test, user="muser1", password="foo")
    refused("SASL authentication failed", bouncer.test, user="muser1", password="wrong")


def test_scram_both_sides(bouncer):
    bouncer.admin("SET auth_type = 'scram-sha-256'")
    bouncer.test(dbname="p61", user="scramuser3", password="baz")
    bouncer.test(dbname="p62", user="scramuser1", password="foo")


def _authq_config(bouncer, databases, extra=""):
    return bouncer.config_block(databases, "\n".join([
        f"auth_query = {AUTH_QUERY}", "auth_user = pswcheck", "stats_users = stats",
        "auth_type = md5", extra]))


def test_reserved_console_database_as_auth_dbname(bouncer):
    """auth_dbname may not be the console: each login that would run auth_query there is
    refused with "bouncer config error" and the reason logged."""
    pg = f"host=127.0.0.1 port={bouncer.pg.port('shard-a')}"
    cfg = _authq_config(bouncer, f"pgbouncer_test = {pg} auth_dbname=pgbouncer\n"
                                 f"* = {pg} auth_dbname=pgbouncer")
    cfg = cfg.replace("admin_users = pgbouncer", "admin_users = pswcheck")
    with bouncer.log_contains('cannot use the reserved "pgbouncer" database as an '
                              'auth_dbname', 3):
        with bouncer.run_with_config(cfg):
            for db in ("pgbouncer", "pgbouncer_test", "p4"):
                refused("bouncer config error", bouncer.sql, "show stats", user="stats",
                        password="stats", dbname=db)


def test_reserved_console_database_as_global_auth_dbname(bouncer):
    """pgbouncer refuses the value itself: RELOAD fails with F0000, the configuration in
    force stays (auth_type too), the reason is logged once; SET refuses it too."""
    pg = f"host=127.0.0.1 port={bouncer.pg.port('shard-a')}"
    old = bouncer.config_text()
    bouncer.write_config(_authq_config(bouncer, f"* = {pg}", "auth_dbname = pgbouncer"))
    try:
        with bouncer.log_contains('cannot use the reserved "pgbouncer" database as an '
                                  'auth_dbname', 1):
            with pytest.raises(psycopg.errors.ConfigFileError,
                               match=r"^RELOAD failed, see logs for additional details$"):
                bouncer.admin("RELOAD")
        assert bouncer.config_value("auth_dbname") == ""
        assert bouncer.config_value("auth_type") == "trust"
        bouncer.test()
    finally:
        bouncer.write_config(old)
    for name in ("pgbouncer", "neki"):
        with pytest.raises(psycopg.Error, match=f'SET failed: .*cannot use the reserved '
                                                f'"{name}" database as an auth_dbname'):
            bouncer.admin(f"SET auth_dbname = {name}")
    assert bouncer.config_value("auth_dbname") == ""


def test_reserved_console_database_as_auth_dbname_at_start(neki):
    """At start the same value is fatal, as pgbouncer's "cannot load config file"."""
    with pytest.raises(NekiStartError, match=r'(?s)exited with 1.*cannot use the reserved '
                                             r'"neki" database as an auth_dbname'):
        neki(settings={"auth_dbname": "neki"})


def test_auth_query_of_the_database(bouncer):
    pg = f"host=127.0.0.1 port={bouncer.pg.port('shard-a')}"
    good = _authq_config(bouncer, f"postgres = auth_query='{AUTH_QUERY}' {pg}",
                         "auth_dbname = postgres").replace(
        f"auth_query = {AUTH_QUERY}", "auth_query = SELECT 1")
    with bouncer.run_with_config(good):
        bouncer.sql("select version()", user="stats", password="stats", dbname="postgres")
    bad = _authq_config(bouncer, f"postgres = auth_query='SELECT usename, "
                                 f"substring(passwd,1,3) FROM pg_shadow WHERE usename = $1' "
                                 f"{pg}", "auth_dbname = postgres")
    with bouncer.run_with_config(bad):
        refused("password authentication failed", bouncer.sql, "select version()",
                user="stats", password="stats", dbname="postgres")


def test_auth_query_for_users_listed_in_users_section(bouncer):
    pg = f"host=127.0.0.1 port={bouncer.pg.port('shard-a')}"
    for user, password in (("puser1", "foo"), ("stats", "stats")):
        cfg = _authq_config(bouncer, f"postgres = {pg}",
                            "auth_dbname = postgres\npool_mode = session").replace(
            "[pgbouncer]", f"[users]\n{user} = pool_mode=statement\n\n[pgbouncer]")
        with bouncer.run_with_config(cfg):
            with bouncer.log_contains("closing because: transaction blocks not allowed in "
                                      "statement pooling mode"):
                refused("transaction blocks not allowed", bouncer.sql, "begin", user=user,
                        password=password, dbname="postgres")


def test_auth_query_error_is_logged(bouncer):
    pg = f"host=127.0.0.1 port={bouncer.pg.port('shard-a')}"
    cfg = _authq_config(bouncer, f"postgres = auth_query='SELECT usename, passwd FROM "
                                 f"not_pg_shadow WHERE usename = $1' {pg}",
                        "auth_dbname = postgres")
    with bouncer.log_contains('"not_pg_shadow" does not exist'):
        with bouncer.run_with_config(cfg):
            refused("bouncer config error", bouncer.sql, "select version()", user="stats",
                    password="stats", dbname="postgres")


def test_console_and_pooled_logins_through_auth_query(bouncer):
    """The console looks users up with auth_query too (in the global auth_dbname), and a
    database pointing at the console itself authenticates like any other."""
    pg = f"host=127.0.0.1 port={bouncer.pg.port('shard-a')}"
    me = f"host=127.0.0.1 port={bouncer.port}"
    cfg = _authq_config(bouncer, "\n".join([
        f"postgres_authdb1 = {pg} dbname=postgres auth_dbname=postgres",
        f"postgres_authdb2 = {pg} dbname=postgres auth_dbname=postgres",
        f"to_console = {me} dbname=pgbouncer auth_dbname=postgres_authdb2",
        f"to_console_global = {me} dbname=pgbouncer",
        f"* = {pg} auth_dbname=postgres",
    ]), "auth_dbname = postgres_authdb1")
    with bouncer.run_with_config(cfg):
        bouncer.sql("show stats", user="pgbouncer", password="fake", dbname="pgbouncer")
        bouncer.sql("show stats", user="stats", password="stats", dbname="pgbouncer")
        bouncer.sql("show stats", user="stats", password="stats", dbname="to_console")
        bouncer.sql("show stats", user="stats", password="stats", dbname="to_console_global")
        bouncer.test(user="stats", password="stats", dbname="postgres")


def test_hba_reloads(bouncer):
    rules = bouncer.config_dir / "hba.rules"
    rules.write_text("host all all 127.0.0.1/32 trust\nlocal all all trust\n")
    bouncer.write_ini("auth_type = hba")
    bouncer.write_ini(f"auth_hba_file = {rules}")
    bouncer.admin("RELOAD")
    bouncer.test()
    bouncer.write_ini("auth_type = trust")
    bouncer.admin("RELOAD")
    bouncer.write_ini("auth_type = hba")
    bouncer.admin("RELOAD")
    bouncer.admin("RELOAD")
    bouncer.test()


def test_users_entry_alone_is_no_known_user(bouncer):
    """A [users] entry without an auth_file line makes no known user (pgbouncer keeps it
    with an empty, "dynamic" password): "no such user" in the log, and trust refuses."""
    with bouncer.log_contains(r"no such user: pswcheck_not_in_auth_file$"):
        refused('"trust" authentication failed', bouncer.test, dbname="p0a",
                user="pswcheck_not_in_auth_file")


def test_auth_user_not_in_auth_file_with_trust(bouncer):
    """pgbouncer issue #1116: an auth_user without a password is fine under trust."""
    bouncer.admin("SET auth_user = 'pswcheck_not_in_auth_file'")
    bouncer.admin("SET auth_type = 'trust'")
    with bouncer.conn(dbname="p7a", user="pswcheck_not_in_auth_file") as c:
        c.execute("select 1")
    pg = f"host=127.0.0.1 port={bouncer.pg.port('shard-a')}"
    cfg = bouncer.config_block(f"postgres = {pg} dbname=postgres min_pool_size=2 "
                               "auth_user=pswcheck_not_in_auth_file",
                               "auth_dbname = postgres")
    with bouncer.run_with_config(cfg):
        with bouncer.conn(dbname="postgres", user="pswcheck_not_in_auth_file") as c:
            c.execute("select 1")


@pytest.mark.parametrize("where", ["global", "database"])
def test_auth_user_same_as_forced_user(bouncer, where):
    """pgbouncer issue #1103: a forced user that is also the auth_user."""
    pg = f"host=127.0.0.1 port={bouncer.pg.port('shard-a')}"
    db_extra = "auth_user=postgres " if where == "database" else ""
    cfg = bouncer.config_block(f"* = {pg} {db_extra}user=postgres min_pool_size=2",
                               "auth_dbname = postgres" +
                               ("\nauth_user = postgres" if where == "global" else ""))
    with bouncer.run_with_config(cfg):
        refused("no such user", bouncer.conn, dbname="dummydb2", user="dummyuser2",
                password="dummypswd2")
        with bouncer.conn(dbname="p3", user="postgres", password="asdasd") as c:
            c.execute("select 1")


def test_server_password_changed_under_the_pool(one_worker_bouncer):
    """A pool whose server password stopped working: the open link goes on serving (with one
    worker: a link serves the clients of its own worker); the clients queued behind it all
    fail with the server's error as soon as the first new login fails (pgbouncer's
    kill_pool_logins: one failed login at the server, not one per client)."""
    bouncer = one_worker_bouncer
    bouncer.default_db = "p4"
    bouncer.admin("SET default_pool_size = 1")
    bouncer.admin("SET pool_mode = transaction")
    pg_conn = bouncer.pg.connect("shard-a")
    errors = []

    def client():
        try:
            bouncer.test()
        except psycopg.OperationalError as e:
            errors.append(str(e))

    try:
        bouncer.test()
        pg_conn.execute("ALTER USER puser1 PASSWORD 'bar'")
        bouncer.test()   # the open link still works
        with bouncer.conn(autocommit=False) as holder:
            holder.execute("SELECT 1")          # claim the only link
            with bouncer.log_contains(r"C-0x[0-9a-f]+: p4/\S+ closing because: password "
                                      r"authentication failed for user", times=3):
                threads = [threading.Thread(target=client) for _ in range(3)]
                for t in threads:
                    t.start()
                wait_until(lambda: sum(r[3] for r in bouncer.admin("SHOW POOLS")
                                       if r[0] == "p4") == 3, 10, what="3 queued clients")
                bouncer.admin("RECONNECT")             # the held link is closed at release
                bouncer.admin("SET default_pool_size = 2")   # room for a new login
                for t in threads:
                    t.join(20)
        assert len(errors) == 3 and all("password authentication failed" in e
                                        for e in errors), errors
    finally:
        pg_conn.execute("ALTER USER puser1 PASSWORD 'foo'")
        pg_conn.close()


def _unix_conn(bouncer, **kw):
    from pgbcompat import as_neki_uid
    with as_neki_uid():
        return bouncer.conn(host=bouncer.admin_host, **kw)


def test_peer_auth_with_ident_map(bouncer):
    """hba `peer map=...` on the Unix socket: the peer's OS user (here the one neki runs as)
    may log in as the database users the auth_ident_file maps it to, as pgbouncer."""
    from conftest import run_as_user
    me = run_as_user() if __import__("os").geteuid() == 0 else __import__("getpass").getuser()
    ident = bouncer.config_dir / "ident.conf"
    hba = bouncer.config_dir / "hba.conf"
    ident.write_text(f"mymap {me} postgres\nmymap {me} someuser\n")
    hba.write_text("local all all peer map=mymap\nhost all all 127.0.0.1/32 trust\n")
    for line in ("auth_type = hba", f"auth_query = {AUTH_QUERY}", "auth_user = pswcheck",
                 f"auth_hba_file = {hba}", f"auth_ident_file = {ident}"):
        bouncer.write_ini(line)
    bouncer.admin("RELOAD")
    for user in ("postgres", "someuser"):     # someuser comes from auth_query
        with _unix_conn(bouncer, dbname="p0y", user=user) as c:
            assert c.execute("SELECT current_user").fetchone()[0] == user
    with bouncer.log_contains(r"p0y/bouncer@unix\(\d+\):\d+ ident map mymap cannot be "
                              r"matched"):
        with pytest.raises(psycopg.OperationalError, match="unix socket login rejected"):
            _unix_conn(bouncer, dbname="p0y", user="bouncer")
    ident.write_text(f"mymap {me} all\n")     # all: every database user
    bouncer.admin("RELOAD")
    with _unix_conn(bouncer, dbname="p0", user="bouncer") as c:
        c.execute("SELECT 1")


def test_hba_refusals_in_pgbouncer_words(bouncer):
    hba = bouncer.config_dir / "hba.conf"
    hba.write_text("host all rejected 127.0.0.1/32 reject\n"
                   "host all postgres 127.0.0.1/32 trust\n")
    bouncer.write_ini("auth_type = hba")
    bouncer.write_ini(f"auth_hba_file = {hba}")
    bouncer.admin("RELOAD")
    bouncer.test()
    with pytest.raises(psycopg.OperationalError, match="no authentication method is found"):
        bouncer.test(user="marko")
    hba.write_text("host all marko 127.0.0.1/32 reject\n")
    bouncer.admin("RELOAD")
    with bouncer.log_contains("closing because: login rejected"):
        with pytest.raises(psycopg.OperationalError, match="login rejected"):
            bouncer.test(user="marko")


def _client_pki(bouncer):
    """A CA, a server certificate for 127.0.0.1 and a client certificate CN=certuser."""
    import shutil
    import subprocess
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command")
    d = bouncer.config_dir / "pki"
    d.mkdir()
    for cmd in (
            "openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
            "-keyout ca.key -out ca.crt -days 2 -subj /CN=ca",
            "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
            "-keyout server.key -out server.csr -subj /CN=localhost",
            "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.cnf",
            "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
            "-out server.crt -days 2 -extfile san.cnf",
            "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
            "-keyout client.key -out client.csr -subj /CN=certuser",
            "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
            "-out client.crt -days 2"):
        subprocess.run(cmd, shell=True, cwd=str(d), check=True, capture_output=True)
    for f in d.iterdir():
        f.chmod(0o644)
    (d / "client.key").chmod(0o600)
    return d


def test_cert_auth_with_ident_map(bouncer):
    """hba `hostssl ... cert map=...`: the certificate's CN may log in as the database users
    the auth_ident_file maps it to (pgbouncer 1.23's user name maps)."""
    pki = _client_pki(bouncer)
    ident = bouncer.config_dir / "ident.conf"
    hba = bouncer.config_dir / "hba.conf"
    ident.write_text("cmap certuser someuser\ncmap certuser postgres\n")
    hba.write_text("hostssl all all 127.0.0.1/32 cert map=cmap\n"
                   "local all all trust\n")
    for line in (f"client_tls_key_file = {pki / 'server.key'}",
                 f"client_tls_cert_file = {pki / 'server.crt'}",
                 f"client_tls_ca_file = {pki / 'ca.crt'}", "client_tls_sslmode = verify-full",
                 "auth_type = hba", f"auth_hba_file = {hba}", f"auth_ident_file = {ident}",
                 f"auth_query = {AUTH_QUERY}", "auth_user = pswcheck"):
        bouncer.write_ini(line)
    bouncer.admin("RELOAD")
    tls = {"sslmode": "verify-full", "sslrootcert": str(pki / "ca.crt"),
           "sslcert": str(pki / "client.crt"), "sslkey": str(pki / "client.key")}
    for user in ("postgres", "someuser"):
        with bouncer.conn(dbname="p0a", user=user, **tls) as c:
            assert c.execute("SELECT current_user").fetchone()[0] == user
    with bouncer.log_contains(r"p0a/bouncer@127\.0\.0\.1:\d+ ident map: cmap does not have "
                              r"a match"):
        with pytest.raises(psycopg.OperationalError,
                           match="certificate authentication failed"):
            bouncer.conn(dbname="p0a", user="bouncer", **tls)
