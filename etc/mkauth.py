#!/usr/bin/env python3
"""mkauth - write neki's (and pgbouncer's) auth_file from a server's pg_shadow.

    etc/mkauth.py DSTFN CONNSTR

DSTFN is the auth_file to write ("-" = standard output); CONNSTR a libpq connection string
or URI of a superuser connection. Each role becomes one line `"name" "secret"` (a double
quote inside a field is doubled; a role without a password gets ""), sorted by name, in
the userlist.txt format neki.ini(5) describes. The file is replaced only when its contents
change, atomically (a new file in the same directory, renamed over the old one), so a
running neki never reads half a file; its mode is kept, 0600 for a new one.
Needs psycopg (Debian: python3-psycopg) or psycopg2.
"""
import os
import sys
import tempfile

USAGE = "usage: mkauth DSTFN CONNSTR"


def connect(conninfo):
    try:
        import psycopg
        return psycopg.connect(conninfo)
    except ImportError:
        import psycopg2
        return psycopg2.connect(conninfo)


def quote(field):
    return '"' + (field or "").replace('"', '""') + '"'


def userlist(conninfo):
    conn = connect(conninfo)
    try:
        cur = conn.cursor()
        cur.execute("SELECT usename, passwd FROM pg_shadow ORDER BY 1")
        rows = cur.fetchall()
    finally:
        conn.close()
    return "".join(f"{quote(name)} {quote(secret)}\n" for name, secret in rows)


def replace_file(path, text):
    try:
        with open(path) as f:
            if f.read() == text:
                return
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o600
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                               prefix=".mkauth-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv):
    if len(argv) != 3:
        print(USAGE)
        return 1
    text = userlist(argv[2])
    if argv[1] == "-":
        sys.stdout.write(text)
    else:
        replace_file(argv[1], text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
