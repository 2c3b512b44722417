"""
Unknown databases and users, as pgbouncer's test_no_database.py and test_no_user.py check
them (pgbcompat.py's test bed): the client's error and the `closing because:` log line for a
database neki does not know (after authentication, which fails first for a wrong
password), a database the server does not have (directly and through "*", with auth_user),
and a user nobody knows under each auth_type, with and without a forced user.
"""
import re

import pytest

from pgbcompat import bouncer, pgb_pg  # noqa: F401 (fixtures)

try:
    import psycopg
except ImportError:
    psycopg = None


def refused(bouncer, log_pattern, client_pattern, **kw):
    with bouncer.log_contains(log_pattern):
        with pytest.raises(psycopg.OperationalError, match=client_pattern):
            bouncer.test(**kw)


def test_no_database(bouncer):
    refused(bouncer, r"closing because: no such database: nosuchdb",
            "no such database: nosuchdb", dbname="nosuchdb")


def test_no_database_authenticates_first(bouncer):
    bouncer.admin("SET auth_type = 'md5'")
    refused(bouncer, r"closing because: password authentication failed",
            "password authentication failed", dbname="nosuchdb", password="wrong")
    bouncer.admin("SET auth_user = 'pswcheck'")
    refused(bouncer, r"closing because: password authentication failed",
            "password authentication failed", dbname="nosuchdb", user="someuser",
            password="wrong")


@pytest.mark.parametrize("auth_type,user", [("md5", "scramuser1"),
                                            ("scram-sha-256", "scramuser1"),
                                            ("md5", "muser1")])
def test_no_database_after_a_good_login(bouncer, auth_type, user):
    bouncer.admin(f"SET auth_type = '{auth_type}'")
    refused(bouncer, r"closing because: no such database: nosuchdb",
            "no such database: nosuchdb", dbname="nosuchdb", user=user, password="foo")


def test_database_missing_on_the_server(bouncer):
    with bouncer.log_contains(r'server login failed: FATAL database "non_existing_pg_db" '
                              r'does not exist'):
        refused(bouncer, r'closing because: database "non_existing_pg_db" does not exist',
                'database "non_existing_pg_db" does not exist', dbname="non_existing_pg_db")


@pytest.mark.parametrize("auth_user", [False, True])
def test_auto_database_missing_on_the_server(bouncer, auth_user):
    bouncer.write_config(re.sub(r"^;\*", "*", bouncer.config_text(), flags=re.M))
    bouncer.admin("RELOAD")
    kw = {}
    if auth_user:
        bouncer.admin("SET auth_user = 'pswcheck'")
        bouncer.admin("SET auth_type = 'md5'")
        kw = {"user": "nonexistinguser"}
    with bouncer.log_contains(r'server login failed: FATAL database "nosuchdb" does not exist'):
        refused(bouncer, r'closing because: database "nosuchdb" does not exist',
                'database "nosuchdb" does not exist', dbname="nosuchdb", **kw)


@pytest.mark.parametrize("auth_type,failure", [
    ("trust", '"trust" authentication failed'),
    ("plain", "password authentication failed"),
    ("md5", "password authentication failed"),
    ("scram-sha-256", "SASL authentication failed"),
])
@pytest.mark.parametrize("db", ["p2", "p1"])   # p1 has a forced user, p2 has none
def test_no_user(bouncer, auth_type, failure, db):
    bouncer.admin(f"SET auth_type = '{auth_type}'")
    with bouncer.log_contains("no such user: nosuchuser"):
        refused(bouncer, f"closing because: {failure}", failure, dbname=db,
                user="nosuchuser", password="whatever")


def test_no_user_with_auth_user(bouncer):
    """No mock exchange on the auth_query path (as pgbouncer): the client hears so."""
    bouncer.admin("SET auth_type = 'md5'")
    refused(bouncer, r"closing because: no such user \(age", "no such user", dbname="authdb",
            user="nosuchuser", password="whatever")
