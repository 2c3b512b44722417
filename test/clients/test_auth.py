"""Client authentication through neki, for every auth_type, against the cluster's roles:
neki_test (SCRAM on the server), neki_md5 (md5), neki_plain (cleartext password). Each accepts
the right password and refuses a wrong one with Postgres' own error (28P01)."""
import hashlib

import psycopg
import pytest

from conftest import wait_until
from pgwire import Wire, errors_in

WRONG = "certainly-not-the-password"


def md5_secret(user, password):
    return "md5" + hashlib.md5((password + user).encode()).hexdigest()


def auth_file(n, lines):
    path = n.dir / "userlist.txt"
    path.write_text("".join(f'"{u}" "{p}"\n' for u, p in lines))
    path.chmod(0o644)
    return path


def start(neki, pg, db, users_lines, **settings):
    n = neki(databases=f"{db} = host=127.0.0.1 port={pg.port('shard-a')} dbname={db}",
             start=False)
    path = auth_file(n, users_lines)
    n.update({"auth_file": path, **settings})
    n.start()
    return n


def ok(n, db, user, password):
    with n.connect(dbname=db, user=user, password=password) as c:
        return c.execute("select current_user").fetchone()[0]


def refused(n, db, user, password, match=None):
    with pytest.raises(psycopg.OperationalError) as ei:
        n.connect(dbname=db, user=user, password=password)
    msg = str(ei.value)
    assert (match or f'password authentication failed for user "{user}"') in msg, msg
    return msg


def test_plain(pg_cluster, cluster_db, neki):
    pg = pg_cluster
    n = start(neki, pg, cluster_db, [(pg.plain_user, pg.plain_password)], auth_type="plain")
    assert ok(n, cluster_db, pg.plain_user, pg.plain_password) == pg.plain_user
    refused(n, cluster_db, pg.plain_user, WRONG)
    refused(n, cluster_db, "nobody_here", WRONG)
    n.wait_log("closing because: password authentication failed")


def test_md5(pg_cluster, cluster_db, neki):
    pg = pg_cluster
    n = start(neki, pg, cluster_db, [(pg.md5_user, md5_secret(pg.md5_user, pg.md5_password))],
              auth_type="md5")
    assert ok(n, cluster_db, pg.md5_user, pg.md5_password) == pg.md5_user
    refused(n, cluster_db, pg.md5_user, WRONG)
    refused(n, cluster_db, "nobody_here", WRONG)


def test_scram_client_and_server(pg_cluster, cluster_db, neki):
    pg = pg_cluster
    n = start(neki, pg, cluster_db, [(pg.test_user, pg.test_password)],
              auth_type="scram-sha-256")
    assert ok(n, cluster_db, pg.test_user, pg.test_password) == pg.test_user
    # pgbouncer's text for every SCRAM failure, wrong password and unknown user alike
    refused(n, cluster_db, pg.test_user, WRONG, match="SASL authentication failed")
    refused(n, cluster_db, "nobody_here", WRONG, match="SASL authentication failed")
    n.wait_log("closing because: SASL authentication failed")
    # libpq refuses channel binding it cannot get; require it and neki must not offer PLUS
    with pytest.raises(psycopg.OperationalError, match="channel binding"):
        n.connect(dbname=cluster_db, user=pg.test_user, password=pg.test_password,
                  channel_binding="require", sslmode="disable")


def test_scram_pass_through_with_stored_secret(pg_cluster, cluster_db, neki):
    pg = pg_cluster
    secret = pg.sql("shard-a", "select rolpassword from pg_authid where rolname = %s",
                    (pg.test_user,))[0][0]
    assert secret.startswith("SCRAM-SHA-256$")
    n = start(neki, pg, cluster_db, [(pg.test_user, secret)], auth_type="md5")
    # md5 with a SCRAM secret switches to SCRAM; the server login reuses the client's keys
    assert ok(n, cluster_db, pg.test_user, pg.test_password) == pg.test_user
    refused(n, cluster_db, pg.test_user, WRONG, match="SASL authentication failed")


# What a client that sends the empty password gets, per method (pgbouncer's words): the
# cleartext path sees the empty password itself; md5 and SCRAM only see a proof of it.
EMPTY_REFUSALS = {
    "plain": ("password", "08P01", "empty password returned by client"),
    "md5": ("md5", "28P01", 'password authentication failed for user "postgres"'),
    "scram-sha-256": ("scram", "28P01", "SASL authentication failed"),
}


@pytest.mark.parametrize("auth_type", sorted(EMPTY_REFUSALS))
def test_empty_auth_file_password_lets_nobody_in(pg_cluster, cluster_db, neki, auth_type):
    """An auth_file entry with the secret "" (what etc/mkauth.py writes for a role without a
    password, often postgres) is a user no password can match: the client that runs the
    exchange with the empty password is refused like any other, on every method (Postgres
    and pgbouncer refuse empty passwords)."""
    n = start(neki, pg_cluster, cluster_db, [("postgres", "")], auth_type=auth_type)
    method, want_state, want_msg = EMPTY_REFUSALS[auth_type]
    w = Wire(n.port)
    try:
        got_method, _, msgs = w.password_login("", user="postgres", database=cluster_db)
    finally:
        w.close()
    assert got_method == method
    assert [(e["S"], e["C"], e["M"]) for e in errors_in(msgs)] == [("FATAL", want_state,
                                                                    want_msg)], msgs
    assert not any(typ == "Z" for typ, _ in msgs)
    refused(n, cluster_db, "postgres", WRONG,
            match=want_msg if auth_type != "plain" else None)


def test_scram_iterations_of_derived_secrets(pg_cluster, cluster_db, neki):
    """scram_iterations is the iteration count of the SCRAM secrets neki computes: from an
    auth_file plain password, and for the mock exchange of an unknown user (as pgbouncer);
    a stored SCRAM secret keeps its own."""
    pg = pg_cluster
    n = start(neki, pg, cluster_db, [(pg.test_user, pg.test_password)],
              auth_type="scram-sha-256", scram_iterations=1234)
    for user, password in ((pg.test_user, pg.test_password), ("nobody_here", WRONG)):
        w = Wire(n.port)
        try:
            method, first, msgs = w.password_login(password, user=user, database=cluster_db)
        finally:
            w.close()
        assert method == "scram" and ",i=1234" in first, first
        assert (msgs[-1][0] == "Z") == (user == pg.test_user), msgs
    assert ok(n, cluster_db, pg.test_user, pg.test_password) == pg.test_user


def trust_refusal(port, user, database):
    """The messages a trust login of <user> gets: pgbouncer's exact FATAL, then the close."""
    w = Wire(port)
    try:
        w.startup(user=user, database=database)
        return errors_in(w.read_all())
    finally:
        w.close()


TRUST_FAILED = [{"S": "FATAL", "C": "08P01", "M": '"trust" authentication failed'}]


def test_trust_needs_a_listed_user(pg_cluster, cluster_db, neki):
    """pgbouncer's rule: trust asks no password but the user must be in auth_file (or found
    by auth_query); anyone else gets FATAL 08P01 "trust" authentication failed (the
    same for a role the server has), on the pooled databases and on the console alike."""
    port = pg_cluster.port("shard-a")
    n = neki(databases=f"{cluster_db} = host=127.0.0.1 port={port} dbname={cluster_db}",
             settings={"admin_users": "postgres"})
    assert ok(n, cluster_db, "postgres", None) == "postgres"
    for user in ("nobody_here", pg_cluster.md5_user + "_x"):
        for p, db in ((n.port, cluster_db), (n.port, "pgbouncer"), (n.admin_port, "neki")):
            got = [{k: e.get(k) for k in "SCM"} for e in trust_refusal(p, user, db)]
            assert got == TRUST_FAILED, (p, db, got)
    n.wait_log("no such user: nobody_here")
    n.wait_log('closing because: "trust" authentication failed')
    with n.admin_connect(dbname="pgbouncer", user="postgres") as c:
        assert c.execute("show version").fetchone()[0].startswith("PgBouncer")
    # listed later and reloaded: let in
    n.allow_users("late_user")
    pg_cluster.sql("shard-a", "do $$ begin if not exists (select from pg_roles where rolname = "
                   "'late_user') then create role late_user login; end if; end $$")
    n.reload()
    wait_until(lambda: _logs_in(n, cluster_db, "late_user"), 5, what="late_user let in")


def _logs_in(n, db, user):
    try:
        return ok(n, db, user, None) == user
    except psycopg.OperationalError:
        return False


def test_trust_user_found_by_auth_query(pg_cluster, cluster_db, neki):
    """A user missing from auth_file is vouched for by auth_query; a role auth_query does not
    find is refused."""
    n = start(neki, pg_cluster, cluster_db, [("postgres", "")], auth_type="trust",
              auth_user="postgres")
    assert ok(n, cluster_db, pg_cluster.md5_user, None) == pg_cluster.md5_user
    with pytest.raises(psycopg.OperationalError, match="no such user"):
        n.connect(dbname=cluster_db, user="nobody_here")


def test_trust_without_auth_file_lets_nobody_in(pg_cluster, cluster_db, neki):
    port = pg_cluster.port("shard-a")
    n = neki(databases=f"{cluster_db} = host=127.0.0.1 port={port} dbname={cluster_db}",
             settings={"auth_file": None})
    refused(n, cluster_db, "postgres", None, match='"trust" authentication failed')


def test_any_uses_forced_user(pg_cluster, cluster_db, neki):
    port = pg_cluster.port("shard-a")
    n = neki(settings={"auth_type": "any"},
             databases=f"{cluster_db} = host=127.0.0.1 port={port} dbname={cluster_db} "
                       "user=postgres")
    assert ok(n, cluster_db, "whoever", None) == "postgres"


def test_hba(pg_cluster, cluster_db, neki):
    pg = pg_cluster
    n = neki(databases=f"{cluster_db} = host=127.0.0.1 port={pg.port('shard-a')} "
                       f"dbname={cluster_db}", start=False)
    hba = n.dir / "hba.conf"
    hba.write_text(f"host all {pg.plain_user} 127.0.0.1/32 password\n"
                   f"host all {pg.md5_user} 127.0.0.1/32 md5\n"
                   f"host all {pg.test_user} 127.0.0.1/32 scram-sha-256\n"
                   "host all postgres 127.0.0.1/32 trust\n"
                   "host all rejected_user 0.0.0.0/0 reject\n")
    hba.chmod(0o644)
    path = auth_file(n, [(pg.plain_user, pg.plain_password),
                         (pg.md5_user, md5_secret(pg.md5_user, pg.md5_password)),
                         (pg.test_user, pg.test_password), ("postgres", ""),
                         ("rejected_user", "x")])
    n.update({"auth_type": "hba", "auth_hba_file": hba, "auth_file": path})
    n.start()
    for user, pw in ((pg.plain_user, pg.plain_password), (pg.md5_user, pg.md5_password),
                     (pg.test_user, pg.test_password)):
        assert ok(n, cluster_db, user, pw) == user
        refused(n, cluster_db, user, WRONG, match="SASL authentication failed"
                if user == pg.test_user else None)
    assert ok(n, cluster_db, "postgres", None) == "postgres"
    # pgbouncer's words to the client; Postgres' (with the address) in the log
    refused(n, cluster_db, "rejected_user", "x", match="login rejected")
    n.wait_log('pg_hba.conf rejects connection for host "127.0.0.1", user "rejected_user"')
    refused(n, cluster_db, "unlisted", "x", match="no authentication method is found")
    n.wait_log("no pg_hba.conf entry for host")


def test_auth_query(pg_cluster, cluster_db, neki):
    pg = pg_cluster
    n = start(neki, pg, cluster_db, [("postgres", "")], auth_type="md5", auth_user="postgres")
    # neki_md5 is not in the auth_file: its secret comes from pg_authid via auth_query
    assert ok(n, cluster_db, pg.md5_user, pg.md5_password) == pg.md5_user
    refused(n, cluster_db, pg.md5_user, WRONG)
    # pgbouncer has no mock exchange when auth_query finds no row: it says so
    refused(n, cluster_db, "nobody_here", WRONG, match="no such user")
    # a role without a password (NULL secret) can never log in
    pg.sql("shard-a", "do $$ begin if not exists (select from pg_roles where rolname = "
           "'neki_nopw') then create role neki_nopw login; end if; end $$")
    refused(n, cluster_db, "neki_nopw", "anything")
