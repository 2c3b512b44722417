"""
etc/mkauth.py, the auth_file generator pgbouncer ships as etc/mkauth.py (pgbouncer's
test_mkauth.py checks the same): usage errors, standard output, a new or an existing file,
and that neki reads what it writes.
"""
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from pgbcompat import bouncer, pgb_pg  # noqa: F401 (fixtures)

SCRIPT = REPO / "etc" / "mkauth.py"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def mkauth(*args):
    return subprocess.run([PYTHON, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=60)


def dsn(pg):
    return f"postgresql://postgres@127.0.0.1:{pg.port('shard-a')}/postgres"


def test_usage(pgb_pg):
    for args in ([], ["-"], ["-", "last_arg", "extra_arg"]):
        res = mkauth(*args)
        assert res.stdout == "usage: mkauth DSTFN CONNSTR\n" and res.returncode == 1


def test_stdout(pgb_pg):
    res = mkauth("-", dsn(pgb_pg))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.split("\n")
    assert '"bouncer" ""' in lines
    assert any(line.startswith('"muser1" "md5') for line in lines)
    assert lines[:-1] == sorted(lines[:-1])


def test_new_and_existing_file(pgb_pg, tmp_path):
    out = tmp_path / "userlist.txt"
    res = mkauth(out, dsn(pgb_pg))
    assert res.returncode == 0, res.stderr
    assert '"bouncer" ""' in out.read_text()
    assert (out.stat().st_mode & 0o777) == 0o600
    out.chmod(0o640)
    out.write_text('"old" "x"\n')
    res = mkauth(out, dsn(pgb_pg))
    assert res.returncode == 0 and '"old"' not in out.read_text()
    assert (out.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["userlist.txt"]


def test_neki_reads_what_it_writes(bouncer):
    res = mkauth(bouncer.auth_path, dsn(bouncer.pg))
    assert res.returncode == 0, res.stderr
    os.chmod(bouncer.auth_path, 0o644)
    bouncer.admin("SET auth_type = 'md5'")   # a new configuration: the file is read again
    # md5 and SCRAM secrets straight from pg_shadow log clients in
    bouncer.test(user="muser1", password="foo")
    bouncer.test(user="scramuser1", password="foo")
    assert Path(bouncer.auth_path).read_text().count("\n") > 10
