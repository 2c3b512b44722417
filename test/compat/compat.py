"""Helpers shared by test/compat: pgbouncer's own test scenarios, checked against neki with our
fixtures (pg_cluster and neki from test/conftest.py).

    n = start(neki, pg_cluster, db, mode="statement", workers=1)   # db on shard-a
    admin(n, "SET max_prepared_statements = 1")                     # the console, as pgbouncer's
    rows = admin(n, "SHOW DATABASES", dicts=True)                   #   tests drive it

It also makes test/clients/pgwire.py (the raw protocol client) importable."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))

from psycopg.rows import dict_row  # noqa: E402


def db_line(pg, db, name=None, **extra):
    """A [databases] line for `db` on shard-a (name defaults to db; extra keys appended)."""
    parts = [f"host=127.0.0.1", f"port={pg.port('shard-a')}", f"dbname={db}"]
    parts += [f"{k}={v}" for k, v in extra.items()]
    return f"{name or db} = {' '.join(parts)}"


def start(neki, pg, db, mode="statement", databases=None, **settings):
    """neki in front of `db` on shard-a, in pool mode `mode` (pgbouncer's tests run statement
    mode by default; postgres is an admin_users name); other [pgbouncer] settings as keywords."""
    return neki(settings={"pool_mode": mode, "admin_users": "postgres", **settings},
                databases=databases if databases is not None else db_line(pg, db))


def admin(n, sql, dicts=False):
    """Run one console command on neki's admin port; the rows when it returns any."""
    with n.admin_connect(dbname="pgbouncer") as c:
        cur = c.cursor(row_factory=dict_row) if dicts else c.cursor()
        cur.execute(sql)
        return cur.fetchall() if cur.description else None
