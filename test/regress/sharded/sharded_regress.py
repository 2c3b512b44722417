#!/usr/bin/python3
"""
sharded_regress.py - Postgres 15's own regression SQL run through neki against a sharded
database, and directly on one Postgres server (the cluster's `reference`), statement by
statement. The SQL and data files are not in this repository: pg15_source.py fetches them
from Debian's postgresql-15 source package at the first run and caches them.

    test/regress/sharded/sharded_regress.py [--files a,b,...] [--results DIR] [--update]

The set-up (sql/test_setup.sql, adapted as below) and then each file run in one psql
session through neki (database `regression`, topology=yes, authority on `auth`, 4 data
shards) and in one psql session on the reference server. Before anything runs, a topology
is generated for each file from the CREATE TABLEs of the set-up and of the file: a table
whose first column has a type with a routing rule (integers, text, varchar, name, uuid) is
sharded by that column (xxhash over the 4 shards), a table with INHERITS, a first column of another
type, or a CREATE TABLE AS of anything but `SELECT * FROM <sharded table>` is a reference
table (a copy on every shard). A temporary table (neki refuses them, NK013 338) is made a
regular one, declared the same way and dropped after its file.

Adaptations (textual, the same on both sides): server-side `COPY t FROM :'filename'` becomes
psql's `\\copy` from data/ (each shard would read the whole file); CREATE TEMP TABLE
becomes CREATE TABLE; the set-up's C-language functions (regress.so is not installed) are
left out. Nothing else is changed.

Comparison: the input is split into statements (psql's rules: quotes, dollar quotes,
comments, parentheses, meta-commands, COPY data), each followed by `\\echo` of a marker, so
both outputs split into one block per statement. A block is the same when its text is
equal once `DETAIL:  Raised on shard(s) ...` lines and the `Committed on ...` / `Applied on no
shard.` sentences are dropped (neki's, spec 4.1, doc/router.md), or when
only the order of its rows differs (a scatter without ORDER BY). Every other block is a
difference, classified as `NK013 <code>` (neki's "not implemented" refusal),
`error-position` (the same error without its position: psql's LINE and caret lines),
`notices` (the same lines, some of them repeated: a NOTICE of every shard),
`error` (neki failed, the reference did not), `rows` (both answered,
differently), `error-text` (both failed, differently), `passed` (neki answered, the
reference failed). Each file's differences are written to RESULTS/<file>.tsv (statement
number, statement_hash, class, reason - MANUAL's for the ones looked at one by one, else
the first rule of REASONS that matches) and RESULTS/<file>.diff (both
outputs of every differing statement); the summary prints the pass rate per file and in
all. --update copies the .tsv files to expected/ (what test_pg_regress_sharded.py
compares with).
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
sys.path.insert(0, str(REPO / "test"))
sys.path.insert(0, str(REPO / "test" / "routing"))

EXPECTED = HERE / "expected"
DB = "regression"
MARK = "@@neki-stmt@@"
ALL_FILES = ["select", "select_distinct", "select_having", "select_implicit", "case",
             "union", "subselect", "join", "aggregates", "window", "with", "limit",
             "strings", "numerology", "arrays", "json", "jsonb", "insert", "update",
             "delete"]
SHORT_FILES = ["select_having", "case", "numerology", "delete", "select_implicit"]
_SRC = []


def pg15():
    """Postgres 15's src/test/regress (sql/, data/, expected/) for the set-up and
    ALL_FILES, fetched once (pg15_source.py); pg15_source.Unavailable when it cannot be."""
    if not _SRC:
        import pg15_source
        _SRC.append(pg15_source.regress_dir(["test_setup"] + ALL_FILES))
    return _SRC[0]
KEY_TYPES = {"smallint", "int2", "integer", "int", "int4", "bigint", "int8", "text",
             "varchar", "name", "uuid"}
ENV = {"PGTZ": "America/Los_Angeles", "PGDATESTYLE": "Postgres, MDY", "PGOPTIONS": "",
       "LC_MESSAGES": "C", "LANG": "C", "PGAPPNAME": "pg_regress"}


# ---- splitting ------------------------------------------------------------------------

def split_statements(text):
    """[(kind, text)]: kind "sql" (a statement with its ';', or a query ended by a
    meta-command such as \\gset, which is kept with it), "meta" (a meta-command line) or
    "copy" (COPY ... FROM stdin with its data up to \\.)."""
    out, buf, i, n = [], "", 0, len(text)
    depth = 0
    while i < n:
        c = text[i]
        if c == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            buf += text[i:j]
            i = j
            continue
        if c == "/" and text.startswith("/*", i):
            j, level = i + 2, 1
            while j < n and level:
                if text.startswith("/*", j):
                    level, j = level + 1, j + 2
                elif text.startswith("*/", j):
                    level, j = level - 1, j + 2
                else:
                    j += 1
            buf += text[i:j]
            i = j
            continue
        if c in "'\"":
            escape = c == "'" and i > 0 and text[i - 1] in "eE" and \
                (i < 2 or not (text[i - 2].isalnum() or text[i - 2] == "_"))
            j = i + 1
            while j < n:
                if escape and text[j] == "\\":
                    j += 2
                    continue
                if text[j] == c:
                    if j + 1 < n and text[j + 1] == c:
                        j += 2
                        continue
                    break
                j += 1
            buf += text[i:j + 1]
            i = j + 1
            continue
        if c == "$":
            m = re.match(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$", text[i:])
            if m and not (buf and (buf[-1].isalnum() or buf[-1] == "_")):
                tag = m.group(0)
                j = text.find(tag, i + len(tag))
                j = n if j < 0 else j + len(tag)
                buf += text[i:j]
                i = j
                continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        if c == "\\":
            j = text.find("\n", i)
            j = n if j < 0 else j
            meta = text[i:j]
            if buf.strip():
                out.append(("sql", buf.strip() + " " + meta))
            else:
                out.append(("meta", meta))
            buf, depth = "", 0
            i = j + 1
            continue
        if c == ";" and depth == 0:
            stmt = (buf + ";").strip()
            buf = ""
            i += 1
            if re.match(r"(?is)^copy\b.*\bfrom\s+stdin", _strip_comments(stmt)):
                j = text.find("\n\\.", i)
                j = n if j < 0 else j + 3
                out.append(("copy", stmt + text[i:j]))
                i = j
            else:
                out.append(("sql", stmt))
            continue
        buf += c
        i += 1
    if buf.strip() and _strip_comments(buf).strip():
        out.append(("sql", buf.strip()))
    return [(k, s) for k, s in out if _strip_comments(s).strip()]


def _strip_comments(s):
    s = re.sub(r"/\*.*?\*/", " ", s, flags=re.S)
    return re.sub(r"--[^\n]*", " ", s)


def statement_hash(stmt):
    """A short hash naming a statement in the lists (which hold no Postgres text): of its
    text without comments, whitespace runs made one space, the source directory left out
    (the adapted \\copy names a data file in it)."""
    text = " ".join(_strip_comments(stmt).replace(str(pg15()), "").split())
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# ---- adaptation and topology ------------------------------------------------------------

def adapt(stmts, setup):
    """The textual adaptations (see the module doc): \\copy for server-side COPY from the
    data directory, and (in the set-up) no C-language functions."""
    out, filename = [], None
    for kind, s in stmts:
        m = re.match(r"\\set filename :abs_srcdir '(/data/[^']+)'", s)
        if kind == "meta" and m:
            filename = str(pg15()) + m.group(1)
            out.append((kind, s))
            continue
        m = re.match(r"(?is)^copy\s+(\S+)\s+from\s+:'filename'\s*;$", s.strip())
        if kind == "sql" and m and filename:
            out.append(("meta", f"\\copy {m.group(1)} FROM '{filename}'"))
            continue
        if setup and kind == "sql" and ":'regresslib'" in s:
            continue
        if kind == "sql":
            s = TEMP.sub(r"\1", s)
        out.append((kind, s))
    return out


# CREATE TEMP TABLE -> CREATE TABLE (neki refuses temporary tables, NK013 338, and most
# files use them): the table is declared like any other and dropped at the file's end
TEMP = re.compile(r"(?is)^((?:--[^\n]*\n|\s)*create\s+)(?:temp|temporary)\s+(?=table\b)")


def temp_tables(name):
    """The tables <name>'s file creates as temporary ones (dropped after it)."""
    stmts = split_statements((pg15() / "sql" / f"{name}.sql").read_text())
    out = []
    for kind, s in stmts:
        m = CREATE.match(_strip_comments(s).strip())
        if kind == "sql" and m and (m.group(1) or "").lower() in ("temp", "temporary"):
            t = m.group(2).lower()
            if t not in out:
                out.append(t)
    return out


CREATE = re.compile(r"(?is)^create\s+(?:(?:global|local)\s+)?(temp|temporary|unlogged)?\s*"
                    r"table\s+(?:if\s+not\s+exists\s+)?([\w.\"]+)\s*(.*)$")


def table_decls(stmts):
    """{(schema, table): ("sharded", column) | ("reference", None)} from the CREATE TABLEs."""
    decls = {}
    for kind, s in stmts:
        if kind != "sql":
            continue
        m = CREATE.match(_strip_comments(s).strip())
        if not m:
            continue
        name = m.group(2).replace('"', "")
        schema, _, table = name.rpartition(".")
        schema = (schema or "public").lower() if '"' not in m.group(2) else (schema or "public")
        table = table.lower() if '"' not in m.group(2) else table
        key = (schema, table)
        if key in decls:
            continue
        rest = m.group(3)
        decls[key] = table_kind(rest, decls)
    return decls


def table_kind(rest, decls):
    """How a table whose CREATE TABLE goes on with <rest> is declared."""
    low = rest.lower()
    if re.match(r"(?s)^as\s+select\s+\*\s+from\s+([\w.]+)\s*;?$", low.strip()):
        src = low.strip().split()[-1].rstrip(";")
        src = tuple(src.split(".")) if "." in src else ("public", src)
        if decls.get(src, ("reference",))[0] == "sharded":
            return decls[src]
        return ("reference", None)
    if not low.startswith("(") or "inherits" in low or "partition" in low:
        return ("reference", None)
    m = re.match(r"\(\s*(\"?[\w]+\"?)\s+([\w ]+?)(?:\(|\s|,|\))", rest)
    if not m or m.group(1).lower() in ("like", "constraint", "primary", "unique", "check",
                                         "foreign", "exclude"):
        return ("reference", None)
    col, typ = m.group(1), m.group(2).strip().lower()
    typ = re.sub(r"\s+(not|null|primary|default|references|unique|check).*$", "", typ)
    if typ in KEY_TYPES or typ.startswith("character varying") or typ == "serial" or \
            typ == "bigserial":
        return ("sharded", col.replace('"', "") if col.startswith('"') else col.lower())
    return ("reference", None)


def topology(db, decls, shards):
    n = len(shards)
    bounds = [None] + [format(i * 256 // n, "02x") for i in range(1, n)] + [None]
    ranges = []
    for i, uid in enumerate(shards):
        r = {"shard_uid": uid}
        if bounds[i]:
            r["start"] = bounds[i]
        if bounds[i + 1]:
            r["end"] = bounds[i + 1]
        ranges.append(r)
    schemas, indexes = {}, {}
    for (schema, table), (kind, col) in sorted(decls.items()):
        sch = schemas.setdefault(schema, {"tables": {}, "reference_tables": {}})
        if kind == "sharded":
            idx = f"by_{col}"
            indexes[idx] = {"type": "xxhash", "columns": [col]}
            sch["tables"][table] = {"shard_group": "data", "shard_index": idx}
        else:
            sch["reference_tables"][table] = {"shard_groups": ["data"]}
    return {
        "databases": {db: {"schemas": schemas}},
        "shard_groups": [{"uid": "authoritative", "key_ranges": [{"shard_uid": "auth"}]},
                         {"uid": "data", "key_ranges": ranges,
                          "default_shard_index": next(iter(indexes), "by_id")}],
        "shard_indexes": indexes or {"by_id": {"type": "xxhash", "columns": ["id"]}},
        "authoritative_shard_group": "authoritative",
        "default_shard_group": "authoritative",
    }


# ---- running ----------------------------------------------------------------------------

def script(stmts):
    """The psql input: every statement followed by a marker."""
    parts = []
    for k, (kind, s) in enumerate(stmts):
        parts.append(s + "\n")
        parts.append(f"\\echo {MARK} {k}\n")
    return "".join(parts)


def run_psql(port, text, workdir, name, timeout=600):
    path = workdir / f"{name}.in.sql"
    path.write_text(text)
    env = dict(os.environ, **ENV, PG_ABS_SRCDIR=str(pg15()), PG_LIBDIR="/nonexistent",
               PG_DLSUFFIX=".so")
    res = subprocess.run(["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(port), "-U",
                          "postgres", "-d", DB, "-v", "HIDE_TABLEAM=on",
                          "-v", "HIDE_TOAST_COMPRESSION=on", "-f", str(path)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env, timeout=timeout, cwd=str(workdir))
    return res.stdout


def blocks(output, n):
    """The output split at the markers: n blocks (missing ones empty)."""
    out = [""] * n
    cur = []
    for line in output.splitlines(keepends=True):
        m = re.match(rf"^{MARK} (\d+)$", line.strip())
        if m:
            idx = int(m.group(1))
            if idx < n:
                out[idx] = "".join(cur)
            cur = []
        else:
            cur.append(re.sub(r"^psql:[^:]+:\d+: ", "psql: ", line))
    return out


SHARD_DETAIL = re.compile(r"^DETAIL:  Raised on shards? [^\n]*\n", re.M)
COMMITTED = re.compile(r" ?(Committed on (no shard|shards? [^\n]*)|Applied on no shard)\.$",
                       re.M)


DDL_NOTICE = re.compile(r"^(?:psql: )?NOTICE:  DDL is committed and the change is visible "
                        r"on this router[^\n]*\n", re.M)
ADVISOR_NOTICE = re.compile(r"^(?:psql: )?NOTICE:  \S+ breaks the schema rule [^\n]*\n"
                            r"(?:HINT:  [^\n]*\n)?", re.M)


def normal(block):
    """<block> without what neki adds to a shard's error (spec 4.1): the DETAIL naming the
    shards that raised it, the sentence naming where a write was committed, and the one
    saying a statement for every shard was applied on none (`Applied on shards a, b.`, a
    partial application, stays a difference); and without neki's own NOTICEs after DDL
    (wait_for_ddl's, the schema advisor's)."""
    block = ADVISOR_NOTICE.sub("", DDL_NOTICE.sub("", block))
    return re.sub(r"^DETAIL:\s*\n", "", COMMITTED.sub("", SHARD_DETAIL.sub("", block)),
                  flags=re.M)


POSITION = re.compile(r"^LINE \d+: [^\n]*\n *\^\n", re.M)


def no_position(block):
    """<block> without the LINE / caret lines psql prints for an error's position."""
    return POSITION.sub("", block)


def classify(neki, ref):
    """None when the block is the same; else the class of the difference."""
    a, b = normal(neki), normal(ref)
    if a == b or sorted(a.splitlines()) == sorted(b.splitlines()):
        return None
    m = re.search(r"ERROR:  not implemented: \[(\d+)\]", a)
    if m:
        return f"NK013 {m.group(1)}"
    if no_position(a) == no_position(b):
        return "error-position"
    if set(a.splitlines()) == set(b.splitlines()):
        return "notices"
    neki_err, ref_err = "ERROR:" in a, "ERROR:" in b
    if neki_err and not ref_err:
        return "error"
    if neki_err and ref_err:
        return "error-text"
    if ref_err:
        return "passed"
    return "rows"


# Why a difference is one: (class or None, regex on neki's block, reason). The first match
# wins; a difference no rule explains is "unexplained" (DIFFERENCES.md says what they are).
REASONS = [
    (None, r"not implemented: \[(\d+)\]", "refused: NK013 {0} (spec 4.2)"),
    ("error-position", None, "the same error without its position (LINE / caret)"),
    ("error-text",
     r"^(?:psql: )?ERROR:  (?:invalid Unicode escape|trailing junk|syntax error)",
     "a syntax error of neki's parser: Postgres' HINT or position is missing"),
    (None, r"requires Neki router processing", "EXPLAIN of a routed statement: neki's plan "
     "is EXPLAIN (NEKI_PLAN) (spec)"),
    (None, r"violates not-null constraint", "a NULL shard key is refused (23502, "
     "doc/router.md INSERT)"),
    (None, r"shard-key column .* missing from", "the shard key is missing from the INSERT "
     "(doc/router.md INSERT)"),
    (None, r"CREATE TABLE AS over sharded table", "refused: CREATE TABLE AS over a sharded "
     "table (each shard would build it from its own rows; doc/router.md)"),
    (None, r"standard_conforming_strings = off is unavailable", "refused: "
     "standard_conforming_strings off (the router reads standard strings; doc/router.md)"),
    (None, r"AGGREGATE inside a transaction block is unavailable", "refused: CREATE "
     "AGGREGATE in a transaction block (the router knows committed aggregates only; "
     "doc/router.md)"),
    (None, r"current transaction is aborted", "cascade: an earlier statement of its "
     "transaction was refused"),
    (None, r"relation \S+ does not exist", "cascade: its CREATE was refused"),
    (None, r"(WITH RECURSIVE over sharded|INSERT in a WITH query|cannot be combined across "
     r"shards|is not merged across shards|cannot be applied across shards|cannot read "
     r"sharded table|is unavailable across shards)", "refused: a shape the router does "
     "not combine across shards (doc/router.md)"),
    ("rows", r"^\s*\(0 rows\)", "cascade: neki's copy of the table is empty or smaller (an "
     "INSERT of it was refused)"),
    (None, r"(across shards|is unavailable|cannot be combined with arms|LIMIT across|OFFSET "
     r"across|can only scan forward)", "refused: a shape the router does not combine across "
     "shards (doc/router.md)"),
    (None, r"violates foreign key constraint", "a foreign key to a row on another shard "
     "(each shard checks its own rows)"),
    (None, r"currval of sequence", "currval(): sequences are the router's (doc/router.md "
     "Sequences), the value was not taken on this link"),
    (None, r"(operator class|table|view) \S+ does not exist", "cascade: its CREATE was "
     "refused"),
    ("notices", None, "the NOTICE of every shard is forwarded (one copy per shard)"),
]
# Differences looked at one by one (DIFFERENCES.md): (file, statement_hash, class) -> reason
WINDOW_ORDER = ("a window frame over an order the query leaves open (no ORDER BY, or ties "
                "in it): the router computes it over the rows in the order it read them, one "
                "Postgres in its heap's")
FUNCTION_BODY = ("a SQL function reading a sharded table runs on one shard (its body is "
                 "opaque to the router): that shard's rows only")
MANUAL = {
    ("window", "f7a08ceeab", "rows"): WINDOW_ORDER,  # 27
    ("window", "306b514fec", "rows"): WINDOW_ORDER,  # 51
    ("window", "2bf5935744", "rows"): WINDOW_ORDER,  # 52
    ("window", "3ea673bda9", "rows"): WINDOW_ORDER,  # 53
    ("window", "30c3a75184", "rows"): WINDOW_ORDER,  # 54
    ("window", "902856628e", "rows"): WINDOW_ORDER,  # 57
    ("window", "54c7cee13a", "rows"): WINDOW_ORDER,  # 58
    ("window", "1cee327d7c", "rows"): WINDOW_ORDER,  # 60
    ("window", "0a1af65cdf", "rows"): WINDOW_ORDER,  # 61
    ("window", "d90014bc3e", "rows"): WINDOW_ORDER,  # 62
    ("window", "a4e33fb124", "rows"): WINDOW_ORDER,  # 63
    ("window", "459c8cf107", "rows"): WINDOW_ORDER,  # 64
    ("window", "3d2fcc6180", "rows"): WINDOW_ORDER,  # 65
    ("window", "8cf1db106b", "rows"): WINDOW_ORDER,  # 70
    ("window", "6b4c7decce", "rows"): WINDOW_ORDER,  # 93
    ("window", "89e4070efe", "rows"): WINDOW_ORDER,  # 118
    ("window", "892f0cb7f9", "rows"): WINDOW_ORDER,  # 119
    ("window", "5fa673362b", "rows"): WINDOW_ORDER,  # 120
    ("window", "e26c9af371", "rows"): WINDOW_ORDER,  # 121
    ("window", "e54c6abcd5", "rows"): WINDOW_ORDER,  # 138
    ("window", "1bb39ceefd", "rows"): WINDOW_ORDER,  # 139
    ("window", "c559712678", "rows"): WINDOW_ORDER,  # 171
    ("window", "4748a8df6f", "rows"): WINDOW_ORDER,  # 173
    ("window", "8376147a61", "rows"): WINDOW_ORDER,  # 175
    ("window", "8d5c51aff1", "rows"): WINDOW_ORDER,  # 205
    ("window", "32ce395f12", "rows"): WINDOW_ORDER,  # 206
    ("window", "5a67a36f2b", "rows"): WINDOW_ORDER,  # 207
    ("window", "35cd432ffa", "rows"): WINDOW_ORDER,  # 208
    ("window", "bdd5284364", "rows"): WINDOW_ORDER,  # 268
    ("window", "857540ad02", "rows"): WINDOW_ORDER,  # 277
    ("window", "f73d3c83d4", "rows"): FUNCTION_BODY,  # 129
    ("window", "c7b946c6fd", "rows"): FUNCTION_BODY,  # 130
    ("window", "4ddc35ee72", "rows"): FUNCTION_BODY,  # 134
    ("window", "591745f8e6", "rows"): FUNCTION_BODY,  # 135
    ("select", "ed65d0b210", "rows"): "cascade: neki's int8_tbl is empty (the set-up's INSERT "
    "of its values was refused, NK013 118); the UNION ALL arms are right",  # 26
}


def reason(cls, neki_block):
    for rcls, rx, text in REASONS:
        if rcls is not None and rcls != cls:
            continue
        if rx is None:
            return text
        m = re.search(rx, neki_block, re.M)
        if m:
            return text.format(*m.groups())
    return "unexplained"


# After neki refused standard_conforming_strings = off, until the file turns it on again,
# the reference (and psql, which splits statements by the server's setting) reads strings
# differently
SCS_REFUSED = "standard_conforming_strings = off is unavailable"
SCS_ON = re.compile(r"(?i)\breset\s+(all|standard_conforming_strings)\b|"
                    r"\bstandard_conforming_strings\s*(=|to)\s*'?(on|true)\b")
SCS_CASCADE = "cascade: standard_conforming_strings off was refused (the reference reads " \
              "strings with backslash escapes)"


def compare(name, stmts, out_neki, out_ref, results):
    n = len(stmts)
    bn, br = blocks(out_neki, n), blocks(out_ref, n)
    rows, diff = [], []
    scs_off = False
    for k, (kind, s) in enumerate(stmts):
        cls = classify(bn[k], br[k])
        cascade, scs_off = scs_off, (scs_off or SCS_REFUSED in bn[k]) and \
            not SCS_ON.search(_strip_comments(s))
        if cls is None:
            continue
        h = statement_hash(s)
        why = MANUAL.get((name, h, cls)) or (SCS_CASCADE if cascade else reason(cls, bn[k]))
        rows.append(f"{k}\t{h}\t{cls}\t{why}\n")
        diff.append(f"=== {name} #{k} [{cls}]\n{s}\n--- neki\n{bn[k]}--- reference\n{br[k]}\n")
    (results / f"{name}.tsv").write_text("".join(rows))
    (results / f"{name}.diff").write_text("".join(diff))
    return n, len(rows)


def load(name):
    return adapt(split_statements((pg15() / "sql" / f"{name}.sql").read_text()),
                 setup=name == "test_setup")


def file_decls(name):
    """The declarations a file runs under: the set-up's tables, then its own (which win
    over a set-up table or another file's table of the same name)."""
    decls = table_decls(load("test_setup"))
    if name != "test_setup":
        decls.update(table_decls(load(name)))
    return decls


def run_all(files, results, cluster, inst):
    """Run the set-up and <files>, each under its own topology (file_decls); return
    {file: (statements, differences, seconds)}."""
    from test_routing import set_topology
    figures = {}
    inst_port = inst.port
    for name in ["test_setup"] + files:
        set_topology(inst, topology(DB, file_decls(name), cluster.shards))
        stmts = load(name)
        text = script(stmts)
        t0 = time.monotonic()
        out_neki = run_psql(inst_port, text, results, f"{name}.neki")
        out_ref = run_psql(cluster.port("reference"), text, results, f"{name}.ref")
        figures[name] = compare(name, stmts, out_neki, out_ref, results) + \
            (time.monotonic() - t0,)
        drop = "".join(f"DROP TABLE IF EXISTS {t} CASCADE;\n" for t in temp_tables(name))
        if drop:
            for port in (inst_port, cluster.port("reference")):
                run_psql(port, "SET client_min_messages = warning;\n" + drop, results,
                         f"{name}.drop")
    return figures


def setup_cluster_and_neki(cluster, files):
    """The database on every server, the topology of the set-up's and the files' tables,
    and a routing neki (started; the caller stops it)."""
    from conftest import wait_until
    from test_routing import routing_instance, set_topology
    import psycopg  # noqa: F811
    for server in cluster.servers:
        cluster.sql(server, f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        cluster.sql(server, f"CREATE DATABASE {DB}")
    decls = file_decls("test_setup")
    inst = routing_instance(cluster, DB, settings={"workers": 2, "max_client_conn": 200,
                                                   "query_wait_timeout": 60})
    inst.start()
    set_topology(inst, topology(DB, decls, cluster.shards))

    def routed():
        try:
            with inst.connect(dbname=DB) as conn:
                conn.execute("EXPLAIN (NEKI_PLAN) SELECT 1")
                return True
        except psycopg.Error:
            return False
    wait_until(routed, 30, what="neki routes the regression database")
    return inst, decls


def summary(figures):
    lines, total, same = [], 0, 0
    for name, (n, d, secs) in figures.items():
        if name == "test_setup":
            continue
        total += n
        same += n - d
        lines.append(f"{name:<18} {n - d:5d}/{n:<5d} {100 * (n - d) / max(n, 1):6.1f} %  "
                     f"({secs:.1f} s)")
    lines.append(f"{'all':<18} {same:5d}/{total:<5d} {100 * same / max(total, 1):6.1f} %")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", help="comma-separated file names (default: all of them)")
    ap.add_argument("--short", action="store_true", help="the short form's files")
    ap.add_argument("--results", default=str(HERE / "results"))
    ap.add_argument("--update", action="store_true",
                    help="copy the differences to expected/ (review them first)")
    args = ap.parse_args()
    files = SHORT_FILES if args.short else \
        (args.files.split(",") if args.files else ALL_FILES)
    results = Path(args.results)
    import pg15_source
    try:
        pg15()
    except pg15_source.Unavailable as e:
        print(f"sharded_regress: Postgres 15's regression files are unavailable: {e}")
        return 77
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)
    os.chmod(results, 0o777)
    from conftest import start_cluster
    cluster = start_cluster()
    inst = None
    try:
        inst, decls = setup_cluster_and_neki(cluster, files)
        (results / "topology.json").write_text(json.dumps(topology(DB, decls,
                                                                   cluster.shards), indent=1))
        figures = run_all(files, results, cluster, inst)
    finally:
        if inst is not None:
            inst.cleanup()
        cluster.stop()
    print(summary(figures))
    print(f"differences: {results}/<file>.tsv and .diff")
    if args.update:
        EXPECTED.mkdir(exist_ok=True)
        for name in ["test_setup"] + files:
            shutil.copy(results / f"{name}.tsv", EXPECTED / f"{name}.tsv")


if __name__ == "__main__":
    sys.exit(main())
