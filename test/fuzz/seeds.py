#!/usr/bin/python3
"""seeds.py - writes the seed inputs of test/fuzz/corpus/<target>/ (checked in; run again
after changing it: test/fuzz/seeds.py). The router's SQL comes from the project's own tests
(the statements of test/unit/check_router*.c, test/routing/*.py and test/regress/sql/), a
few hundred files at most; the other targets get hand-made messages and files. Files named
regress-* (inputs that once crashed a target) are kept as they are."""
import hashlib
import re
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CORPUS = HERE / "corpus"
SQL_MAX = 300


def msg(t, body):
    return t + struct.pack("!I", len(body) + 4) + body


def cstr(s):
    return s.encode() + b"\0"


def startup(params, version=196608):
    body = struct.pack("!I", version) + b"".join(cstr(k) + cstr(v) for k, v in params) + b"\0"
    return struct.pack("!I", len(body) + 4) + body


SSL = struct.pack("!II", 8, 80877103)
GSS = struct.pack("!II", 8, 80877104)


def client_seeds():
    login = startup([("user", "u"), ("database", "app"), ("options", "-c a=b --x=y")])
    return {
        "startup": login,
        "ssl-gss-startup": SSL + GSS + startup([("user", "u"), ("_pq_.x", "1")], 196610),
        "ssl-twice": SSL + SSL,
        "cancel": struct.pack("!IIII", 16, 80877102, 5, 7),
        "query": login + msg(b"Q", cstr("SELECT 1")) + msg(b"X", b""),
        "extended": msg(b"P", cstr("s1") + cstr("SELECT $1") + struct.pack("!HI", 1, 23)) +
        msg(b"B", cstr("") + cstr("s1") + struct.pack("!HhH", 1, 0, 1) +
            struct.pack("!i", 1) + b"7" + struct.pack("!Hh", 1, 1)) +
        msg(b"D", b"P" + cstr("")) + msg(b"E", cstr("") + struct.pack("!i", 0)) +
        msg(b"C", b"S" + cstr("s1")) + msg(b"S", b"") + msg(b"H", b""),
        "copy": msg(b"d", b"1\t2\n") + msg(b"f", cstr("abort")) + msg(b"c", b""),
        "password": msg(b"p", cstr("secret")) + msg(b"p", cstr("SCRAM-SHA-256") + struct.pack("!i", 8) + b"n,,n=,r="),
        "function": msg(b"F", struct.pack("!I", 1)),
    }


def server_seeds():
    auth_ok = msg(b"R", struct.pack("!I", 0))
    tail = (msg(b"S", cstr("server_version") + cstr("15.4")) +
            msg(b"K", struct.pack("!II", 42, 99)) + msg(b"Z", b"I"))
    rows = (msg(b"T", struct.pack("!H", 2) + cstr("a") + struct.pack("!IhIhih", 0, 0, 23, 4,
                                                                        -1, 0) +
                cstr("b") + struct.pack("!IhIhih", 16384, 2, 25, -1, -1, 0)) +
            msg(b"D", struct.pack("!H", 2) + struct.pack("!i", 1) + b"7" +
                struct.pack("!i", -1)) +
            msg(b"C", cstr("SELECT 1")) +
            msg(b"E", b"SERROR\0C42P01\0Mrelation does not exist\0\0") +
            msg(b"N", b"SNOTICE\0C00000\0Mhi\0\0") +
            msg(b"A", struct.pack("!I", 5) + cstr("chan") + cstr("payload")))
    sasl = msg(b"R", struct.pack("!I", 10) + cstr("SCRAM-SHA-256") + b"\0")
    cont = msg(b"R", struct.pack("!I", 11) + b"r=fixednonceXYZ,s=c2FsdA==,i=1")
    return {
        "trust": b"\0" + auth_ok + tail + rows,
        "cleartext": b"\0" + msg(b"R", struct.pack("!I", 3)) + auth_ok + tail,
        "md5": b"\1" + msg(b"R", struct.pack("!I", 5) + b"abcd") + auth_ok + tail,
        "scram": b"\0" + sasl + cont + msg(b"R", struct.pack("!I", 12) + b"v=AAAA") + auth_ok,
        "scram-secret": b"\2" + sasl + cont,
    }


def auth_seeds():
    return {
        "scram-server": b"\0n,,n=,r=abc\0c=biws,r=abcX,p=AAAA",
        "scram-client": b"\1r=fixednonceX,s=c2FsdA==,i=1\0v=AAAA",
        "md5": b"\2md5" + b"0" * 32,
        "hba": b"\3# hba\nlocal all all trust\nhost all all 10.0.0.0/8 md5\n"
               b"hostssl app u,admin ::1/128 scram-sha-256\n"
               b"host replication all 0.0.0.0/0 cert map=m\nhost all @users 1.2.3.4 255.0.0.0 reject\n"
               b"\x05\x00\x00\x0a",
        "userlist": b"\3\"u\" \"md5" + b"a" * 32 + b"\"\n\"admin\" \"pencil\"\n; comment\n"
                    b"\"x\"\"y\" \"SCRAM-SHA-256$4096:c2FsdA==$YQ==:Yg==\"\n",
        "ident": b"\3m u admin\nm \"root\" \"u\"\n# c\n",
        "secret": b"\3SCRAM-SHA-256$1:c2FsdA==$Otk5kdnAo/6UDUcm0KaO+uESed84FVLF7Qg4N9v1MRA=:"
                  b"Uc4DDcQRN5WJ44eNiyKPEO+MJvVo84Ucr4WI9nixz60=",
        "saslprep": b"\3I\xc2\xadX \xe2\x85\xa8",
    }


def ini_seeds():
    sample = (REPO / "neki.ini.sample").read_text()
    return {
        "sample": sample.encode()[:6000],
        "include": b"[pgbouncer]\nlisten_port = 6432\n%include a.ini\n\0"
                   b"[databases]\napp = host=127.0.0.1 port=5432 dbname=app pool_size=5\n"
                   b"%include b.ini\n\0[users]\nu = pool_mode=session max_user_connections=3\n",
        "sections": b"[neki]\nworkers = 2\nadmin_listen_port = 6433\nauth_type = md5\n"
                    b"[shards]\nshard-a = host=h1 port=5433\n[peers]\n1 = host=/tmp\n"
                    b"[databases]\n* = host=localhost\nx = topology=yes\n",
        "loop": b"%include main.ini\n",
        "bad": b"[pgbouncer]\nlisten_port = 99999\n\"quoted key\" = 1\n",
    }


def topology_seeds():
    store = (REPO / "etc" / "topology-storefront.json").read_text()
    return {
        "storefront": store.encode(),
        "minimal": b'{"shard_groups":[{"uid":"auth","key_ranges":[{"shard_uid":"auth"}]}],'
                   b'"authoritative_shard_group":"auth"}',
        "modulo": b'{"authoritative_shard_group":"a","shard_groups":[{"uid":"a","key_ranges":'
                  b'[{"shard_uid":"auth"}]},{"uid":"m","default_shard_index":"i","key_ranges":'
                  b'[{"shard_uid":"shard-a","end":"80"},{"shard_uid":"shard-b","start":"80"}]}],'
                  b'"shard_indexes":{"i":{"type":"modulo","columns":["id * 10"],'
                  b'"index_params":{"modulus":4}}},"databases":{"d":{"default_shard_group":"m"}}}',
        "range": b'{"authoritative_shard_group":"a","shard_groups":[{"uid":"a","key_ranges":'
                 b'[{"shard_uid":"auth"}]},{"uid":"r","default_shard_index":"i","key_ranges":'
                 b'[{"shard_uid":"shard-a","end":"-100"},{"shard_uid":"shard-b","start":"-100"}]}],'
                 b'"shard_indexes":{"i":{"type":"range","columns":["lower(k)"]}}}',
    }


def keyexpr_seeds():
    out = {}
    for i, e in enumerate(["id", "lower(email)", "tenant_id * 1000", "a + b", "left(name, 3)",
                           "(x / 2)::int2", "upper(s)::varchar", "-k - 1", "\"Tenant Id\""]):
        out[f"expr-{i}"] = b"\0" + e.encode() + b"\0" + b"42\0" + b"7"
    for i, (t, v) in enumerate([(0, "-32768"), (2, "9223372036854775807"), (3, "hello"),
                                (7, "\\x0102ff"), (9, "1e308"), (10, "-0.000120"),
                                (11, "2024-02-29"), (12, "2024-03-31 02:30:00"),
                                (13, "2024-03-31 02:30:00"), (14, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
                                (5, "ab   "), (8, "NaN")]):
        out[f"value-{i}"] = b"\1" + bytes([t, i * 7]) + v.encode()
    out["bounds"] = b"\2" + b"40\0" + b"80\0" + b"c0\0" + b"-5\0" + b"ffffffffffffffff"
    return out


def copy_seeds():
    # options: fmt | null<<2 | force_null<<4 | force_not_null<<5, delim, quote, escape, key, step
    sig = b"PGCOPY\n\377\r\n\0" + struct.pack("!II", 0, 0)
    tup = struct.pack("!h", 2) + struct.pack("!i", 2) + b"42" + struct.pack("!i", -1)
    return {
        "text": b"\0\0\0\0\1\3" + b"1\ta\\\nb\n22\t\\\\\n\\N\tx\r\n\\.\n",
        "csv": b"\1,\"\0\1\5" + b"1,\"a,\n\"\"b\"\n2,\\N\n3,\r\n\\.\n",
        "csv-cr": b"\x11;'\\\0\2" + b"1;'x\r'\r2;y\r",
        "binary": b"\2\0\0\0\1\4" + sig + tup + tup + struct.pack("!h", -1),
    }


def merge_seeds():
    def rd(oids):
        return bytes([0, len(oids)]) + bytes(oids)  # kind 0: count, then type picks

    def dr(vals):
        out = bytes([len(vals)])
        for v in vals:
            out += b"\xff" if v is None else bytes([len(v)]) + v
        return out

    seeds = {}
    # shape 0 (ORDER BY id) on 2 shards: int8 column (oid index 2)
    seeds["order"] = (bytes([0, 1, 0]) + bytes([0 << 2 | 0]) + rd([2])[1:] +
                      bytes([1 << 2 | 0]) + dr([b"1"]) + bytes([1 << 2 | 0]) + dr([b"5"]) +
                      bytes([2 << 2 | 0, 1]) + bytes([0 << 2 | 1]) + rd([2])[1:] +
                      bytes([1 << 2 | 1]) + dr([b"3"]) + bytes([2 << 2 | 1, 1]) +
                      bytes([4 << 2, 4]))
    # shape 3 (sum, count, max of numeric) on 2 shards
    seeds["numeric-agg"] = (bytes([3, 1, 0]) + bytes([0]) + rd([8, 2, 8])[1:] +
                            bytes([4]) + dr([b"1.50", b"2", b"-3"]) + bytes([8, 1]) +
                            bytes([1]) + rd([8, 2, 8])[1:] + bytes([5]) +
                            dr([b"99999999999999999999.5", b"3", None]) + bytes([9, 1]))
    # shape 4 (avg, HAVING: final combine SQL) on 1 shard, then the final query's answer
    seeds["final"] = (bytes([4, 0, 0]) + bytes([0]) + rd([4, 8, 2, 2])[1:] + bytes([4]) +
                      dr([b"1", b"2.5", b"2", b"3"]) + bytes([8, 1]) + bytes([3]) +
                      rd([4, 8])[1:] + bytes([7]) + dr([b"1", b"2.5"]) + bytes([11, 1]))
    seeds["sql"] = b"\xff\x01\x80SELECT a, b FROM t ORDER BY b DESC NULLS LAST, a LIMIT 2\0" + \
        bytes([0]) + rd([4, 5])[1:] + bytes([4]) + dr([b"1", b"x"]) + bytes([8, 1])
    return seeds


SQL_START = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|COPY|CREATE|ALTER|DROP|BEGIN|"
                       r"COMMIT|ROLLBACK|SET|RESET|SHOW|EXPLAIN|DECLARE|FETCH|MOVE|CLOSE|MERGE|"
                       r"TRUNCATE|PREPARE|EXECUTE|DO|VALUES|TABLE|LOCK|GRANT|VACUUM|ANALYZE|"
                       r"LISTEN|NOTIFY|SAVEPOINT|START|DISCARD)\b", re.I)


def c_strings(text):
    """The string literals of C source <text>, adjacent literals joined."""
    out, cur = [], None
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"|(,|;|\)|\{|\})', text):
        if m.group(1) is not None:
            s = bytes(m.group(1), "utf-8").decode("unicode_escape", errors="replace")
            cur = s if cur is None else cur + s
        elif cur is not None:
            out.append(cur)
            cur = None
    return out


def py_strings(text):
    joined = re.sub(r'"\s*\n\s*"', "", text)
    return [m.group(2) for m in re.finditer(r'(f?)"((?:[^"\\\n]|\\.)+)"', joined)
            if not m.group(1)]


def router_seeds():
    sqls = []
    for f in sorted((REPO / "test" / "unit").glob("check_router*.c")):
        sqls += c_strings(f.read_text())
    for f in sorted((REPO / "test" / "routing").glob("*.py")):
        sqls += py_strings(f.read_text())
    for f in sorted((REPO / "test" / "regress" / "sql").glob("*.sql")):
        sqls += [s.strip() + ";" for s in f.read_text().split(";\n") if s.strip()]
    seen, out = set(), {}
    for s in sqls:
        if not SQL_START.match(s) or "%" in s or s in seen or len(s) > 2000:
            continue
        seen.add(s)
    picked = sorted(seen, key=lambda s: hashlib.sha1(s.encode()).hexdigest())[:SQL_MAX]
    for s in picked:
        out["sql-" + hashlib.sha1(s.encode()).hexdigest()[:12]] = s.encode()
    return out


def write(target, seeds):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    for f in d.iterdir():
        if not f.name.startswith("regress-"):
            f.unlink()
    for name, data in seeds.items():
        (d / name).write_bytes(data)


def main():
    write("client", client_seeds())
    write("server", server_seeds())
    write("auth", auth_seeds())
    write("ini", ini_seeds())
    write("topology", topology_seeds())
    write("keyexpr", keyexpr_seeds())
    write("copy", copy_seeds())
    write("merge", merge_seeds())
    write("router", router_seeds())


if __name__ == "__main__":
    main()
