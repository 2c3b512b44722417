"""
pg15_source.py - Postgres 15's regression files (src/test/regress/{sql,data,expected}) for
sharded_regress.py, fetched at test time from Debian's archive: none of them is in this
repository.

    regress_dir(names) -> Path      the directory with sql/, data/ and expected/

The source tarball is found through the .dsc of the postgresql-15 source package in
Debian's pool (deb.debian.org, the main and the security archive), for the installed
postgresql-15 first, then for every other version apt knows of (`apt-cache madison`), so
that nothing breaks when Debian moves to a newer 15.x. The tarball's SHA-256 is the
.dsc's. Only the named files' sql/<name>.sql and expected/<name>.out and the data files
they load are extracted, into a cache outside the tracked files that later runs reuse:
$NEKI_PG15_REGRESS_CACHE, else $XDG_CACHE_HOME/neki/pg15-regress, else
~/.cache/neki/pg15-regress (one directory per upstream version). $NEKI_PG15_REGRESS_DIR
names an existing src/test/regress directory to use instead (no fetch). When none of this
works, Unavailable says why (the tests skip with that reason).
"""
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

MIRROR = os.environ.get("NEKI_DEBIAN_MIRROR", "http://deb.debian.org")
POOLS = ["debian/pool/main/p/postgresql-15", "debian-security/pool/updates/main/p/postgresql-15"]
TIMEOUT = 60


class Unavailable(Exception):
    """The regression files cannot be had (the message says why)."""


def cache_root():
    if os.environ.get("NEKI_PG15_REGRESS_CACHE"):
        return Path(os.environ["NEKI_PG15_REGRESS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "neki" / "pg15-regress"


def candidate_versions():
    """Debian versions of postgresql-15 to try: the installed one, then apt's others."""
    out = []
    for cmd in (["dpkg-query", "-W", "-f", "${Version}", "postgresql-15"],
                ["apt-cache", "madison", "postgresql-15"]):
        try:
            res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        for line in res.stdout.splitlines():
            v = line.split("|")[1].strip() if "|" in line else line.strip()
            if re.match(r"^15\.\d+", v) and v not in out:
                out.append(v)
    return out


def upstream(version):
    """15.18-0+deb12u1 -> 15.18"""
    return re.sub(r"^\d+:", "", version).rsplit("-", 1)[0]


def cached(names):
    """The cache's directory holding every named file, or None."""
    root = cache_root()
    for v in candidate_versions() or []:
        d = root / upstream(v)
        if complete(d, names):
            return d
    if root.is_dir():
        for d in sorted(root.iterdir(), reverse=True):
            if complete(d, names):
                return d
    return None


def complete(d, names):
    return all((d / "sql" / f"{n}.sql").is_file() for n in names) and \
        all((d / "data" / f).is_file() for n in names for f in data_files(d, n))


def data_files(d, name):
    """The data files <name>.sql loads (its `:abs_srcdir '/data/x.data'` lines)."""
    path = d / "sql" / f"{name}.sql"
    if not path.is_file():
        return []
    return re.findall(r":abs_srcdir\s+'/data/([\w.-]+)'", path.read_text())


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as res:
            return res.read()
    except (urllib.error.URLError, OSError) as e:
        raise Unavailable(f"{url}: {e}") from None


def find_tarball(version):
    """(url, sha256) of the .orig tarball of Debian's postgresql-15 <version>."""
    errors = []
    for pool in POOLS:
        base = f"{MIRROR}/{pool}"
        try:
            dsc = get(f"{base}/postgresql-15_{re.sub(r'^[0-9]+:', '', version)}.dsc").decode()
        except Unavailable as e:
            errors.append(str(e))
            continue
        m = re.search(r"^ ([0-9a-f]{64}) \d+ (postgresql-15_[\w.~+-]+\.orig\.tar\.\w+)$", dsc,
                      re.M)
        if m:
            return f"{base}/{m.group(2)}", m.group(1)
        errors.append(f"{base}: no .orig tarball in the .dsc")
    raise Unavailable("; ".join(errors))


def extract(tarball, dest, names):
    """sql/<name>.sql, expected/<name>.out and the data files they load, from <tarball>
    (one pass over the stream) into <dest>."""
    want = {f"sql/{n}.sql" for n in names} | {f"expected/{n}.out" for n in names}
    data = {}
    with tarfile.open(tarball, mode="r|*") as tar:
        for member in tar:
            m = re.match(r"^[^/]+/src/test/regress/((?:sql|expected|data)/[^/]+)$", member.name)
            if not m or not member.isfile():
                continue
            rel = m.group(1)
            if rel in want or rel.startswith("data/"):
                body = tar.extractfile(member).read()
                if rel.startswith("data/"):
                    data[rel] = body
                else:
                    write(dest / rel, body)
    for n in names:
        for f in data_files(dest, n):
            if f"data/{f}" in data:
                write(dest / "data" / f, data[f"data/{f}"])


def write(path, body):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)


def fetch(names):
    """Download and extract into the cache; the version's directory."""
    versions = candidate_versions()
    if not versions:
        raise Unavailable("no postgresql-15 version known to dpkg or apt")
    errors = []
    for v in versions:
        try:
            url, sha = find_tarball(v)
        except Unavailable as e:
            errors.append(str(e))
            continue
        root = cache_root()
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="fetch.", dir=root))
        try:
            tarball = tmp / url.rsplit("/", 1)[1]
            body = get(url)
            if hashlib.sha256(body).hexdigest() != sha:
                raise Unavailable(f"{url}: SHA-256 differs from the .dsc's")
            tarball.write_bytes(body)
            del body
            out = tmp / "regress"
            extract(tarball, out, names)
            if not complete(out, names):
                raise Unavailable(f"{url}: the tarball lacks some of {', '.join(names)}")
            final = root / upstream(v)
            if not complete(final, names):
                shutil.rmtree(final, ignore_errors=True)
                try:
                    os.replace(out, final)
                except OSError:
                    if not complete(final, names):  # else another run put it there
                        raise
            return final
        except (Unavailable, tarfile.TarError, OSError) as e:
            errors.append(str(e))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    raise Unavailable("; ".join(errors))


def regress_dir(names):
    """The directory with Postgres 15's regression sql/, data/ and expected/ for <names>
    (fetched once, then from the cache); Unavailable when it cannot be had."""
    if os.environ.get("NEKI_PG15_REGRESS_DIR"):
        d = Path(os.environ["NEKI_PG15_REGRESS_DIR"])
        if not complete(d, names):
            raise Unavailable(f"NEKI_PG15_REGRESS_DIR={d} lacks some of {', '.join(names)}")
        return d
    return cached(names) or fetch(names)
