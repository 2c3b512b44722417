"""
The types the merge orders, groups and compares besides test_merge_exact.py's (issue 20):
arrays of the element types it knows (array_cmp: elements, then element count, dimensions,
lower bounds), interval (interval_cmp: '1 day' = '24 hours', '1 mon' = '30 days'), inet /
cidr, bit / varbit, time and timetz. Same method as test_merge_exact.py: the rows split over
4 real shards, the shard query run on each (text or binary results), the results through
test/unit/merge_run, compared byte for byte with the reference server holding every row;
then the same through a neki with psycopg text and binary cursors.
"""
import random

import pytest

from test_merge_exact import BAG, ORDERED, check

SCHEMA = """
CREATE TABLE ty (id int PRIMARY KEY, g int, ia int4[], ta text[], na numeric[], iv interval,
                 inn inet, cd cidr, bt bit(4), vb varbit, tm time, ttz timetz,
                 iva interval[], ua uuid[], ba bool[]);
"""

COLUMNS = {
    "ia": ["{1,2}", "{1,2,3}", "{1,NULL}", "{NULL}", "{}", "{{1,2},{3,4}}", "[0:1]={1,2}",
           "{-5}", "{2}", "{1,2,NULL}", None, "{{1},{2}}", "{1,2,3,4}", "[2:3]={1,2}"],
    "ta": ["{a,b}", '{"a b","c,d"}', '{"x\\"y"}', "{NULL,a}", "{}", "{Apple,apple}",
           '{"NULL"}', "{ß}", "{éclair}", "{a}", None, "{b,a}", '{"",a}'],
    "na": ["{1.0,2}", "{1.00,2}", "{NaN}", "{-1.5}", "{1e3}", "{Infinity}", None, "{0}"],
    "iv": ["1 day", "24 hours", "1 mon", "30 days", "-1 days +02:00:00",
           "1 year 2 mons 3 days 04:05:06.789", "00:00:00", "-00:00:01.5", "720:00:00",
           None, "1 day 00:00:00.000001", "-2 years", "3 days -04:00:00"],
    "inn": ["192.168.1.5/24", "192.168.1.5", "10.0.0.1", "::1", "2001:db8::1/64",
            "192.168.1.0/24", "::ffff:1.2.3.4", "10.0.0.0/8", None, "0.0.0.0/0", "10.0.0.1/31"],
    "cd": ["10.0.0.0/8", "10.1.0.0/16", "192.168.0.0/24", "2001:db8::/32", "0.0.0.0/0", None,
           "10.0.0.0/16", "::/0"],
    "bt": ["1010", "0001", "1111", "0000", None, "0110"],
    "vb": ["1", "10", "0", "00", "101", "", "1000000001", None, "0111", "11111111"],
    "tm": ["00:00:00", "23:59:59.999999", "12:00:00", "24:00:00", "12:00:00.5", None,
           "07:30:00"],
    "ttz": ["12:00:00+00", "13:00:00+01", "12:00:00-05", "06:00:00+05:30", None,
            "12:00:00+00:00:30", "23:00:00-11"],
    "iva": ['{"1 day","2 hours"}', '{"24 hours"}', '{"1 day"}', "{NULL}", None,
            '{"-1 days +02:00:00"}'],
    "ua": ["{00000000-0000-0000-0000-000000000001}", "{ffffffff-ffff-ffff-ffff-ffffffffffff}",
           "{00000000-0000-0000-0000-000000000001,NULL}", None],
    "ba": ["{t,f}", "{f}", "{t}", "{}", None],
}

QUERIES = [
    (ORDERED, "SELECT id, ia FROM ty ORDER BY ia, id"),
    (ORDERED, "SELECT id, ia FROM ty ORDER BY ia DESC NULLS LAST, id"),
    (ORDERED, "SELECT ia, count(*) FROM ty GROUP BY ia ORDER BY ia"),
    (ORDERED, "SELECT DISTINCT ta FROM ty ORDER BY 1"),
    (ORDERED, "SELECT id, ta FROM ty ORDER BY ta DESC, id"),
    (ORDERED, "SELECT id, ta FROM ty ORDER BY ta COLLATE \"C\", id"),
    (ORDERED, "SELECT min(ia), max(ia), min(ta), max(ta), min(ba), max(ba) FROM ty"),
    (ORDERED, "SELECT id, na FROM ty ORDER BY na, id"),
    (ORDERED, "SELECT id, iv FROM ty ORDER BY iv, id"),
    (ORDERED, "SELECT id, iv FROM ty ORDER BY iv DESC NULLS LAST, id LIMIT 9"),
    (ORDERED, "SELECT count(*), min(id) FROM ty GROUP BY iv ORDER BY 2"),
    (BAG, "SELECT count(DISTINCT iv), count(DISTINCT vb), count(DISTINCT inn) FROM ty"),
    (ORDERED, "SELECT min(iv), max(iv) FROM ty"),
    (ORDERED, "SELECT id, iva FROM ty ORDER BY iva, id"),
    (ORDERED, "SELECT count(*), min(id) FROM ty GROUP BY iva ORDER BY 2"),
    (ORDERED, "SELECT id, inn FROM ty ORDER BY inn, id"),
    (ORDERED, "SELECT inn, count(*) FROM ty GROUP BY inn ORDER BY inn"),
    (ORDERED, "SELECT id, cd FROM ty ORDER BY cd DESC, id"),
    (ORDERED, "SELECT DISTINCT cd FROM ty ORDER BY 1"),
    (ORDERED, "SELECT min(inn), max(inn), min(cd), max(cd) FROM ty"),
    (ORDERED, "SELECT id, bt, vb FROM ty ORDER BY vb, id"),
    (ORDERED, "SELECT bt, count(*) FROM ty GROUP BY bt ORDER BY bt DESC"),
    (ORDERED, "SELECT DISTINCT vb FROM ty ORDER BY 1"),
    (ORDERED, "SELECT id, tm FROM ty ORDER BY tm, id"),
    (ORDERED, "SELECT id, ttz FROM ty ORDER BY ttz, id"),
    (ORDERED, "SELECT ttz, count(*) FROM ty GROUP BY ttz ORDER BY ttz"),
    (ORDERED, "SELECT min(tm), max(tm), min(ttz), max(ttz) FROM ty"),
    (ORDERED, "SELECT id, ua FROM ty ORDER BY ua, id"),
    (ORDERED, "SELECT g, min(ia), min(inn), max(tm), max(ttz) FROM ty GROUP BY g ORDER BY g"),
]


def rows_for_ty(n=90):
    rnd = random.Random(20)
    names = list(COLUMNS)
    rows = []
    for i in range(1, n + 1):
        rows.append([i, rnd.randint(0, 4)] +
                    [COLUMNS[c][(i * (k + 3) + rnd.randint(0, 1)) % len(COLUMNS[c])]
                     for k, c in enumerate(names)])
    return names, rows


@pytest.fixture(scope="module")
def typed(pg_cluster):
    dbname = f"mtypes_{random.randrange(10 ** 9)}"
    servers = pg_cluster.shards[:4] + ["reference"]
    for srv in servers:
        pg_cluster.sql(srv, f'CREATE DATABASE "{dbname}"')
    conns = {srv: pg_cluster.connect(srv, dbname) for srv in servers}
    try:
        names, rows = rows_for_ty()
        for srv in servers:
            conns[srv].execute(SCHEMA)
        ins = f"INSERT INTO ty (id, g, {', '.join(names)}) VALUES (" + \
            ", ".join(["%s"] * (len(names) + 2)) + ")"
        for i, row in enumerate(rows):
            for srv in (pg_cluster.shards[i % 4], "reference"):
                conns[srv].execute(ins, row)
        collation = conns["reference"].execute(
            "SELECT datcollate FROM pg_database WHERE datname = current_database()"
        ).fetchone()[0]
        yield [conns[s] for s in pg_cluster.shards[:4]], conns["reference"], collation
    finally:
        for c in conns.values():
            c.close()
        for srv in servers:
            pg_cluster.sql(srv, f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


# (the driver asks the shards for binary hidden columns too, where neki asks for text:
# DISTINCT partials in binary are checked through neki below)
CASES = [(k, q, f) for k, q in QUERIES for f in (0, 1) if not (f and "(DISTINCT" in q)]


@pytest.mark.parametrize("kind,sql,fmt", CASES,
                         ids=[f"{q} [{'binary' if f else 'text'}]" for _, q, f in CASES])
def test_types_merge_as_one_server(typed, kind, sql, fmt):
    check(typed, kind, sql, fmt)


def test_other_interval_styles_are_refused(typed):
    shards, _ref, collation = typed
    from test_merge_exact import merged
    for c in shards:
        c.execute("SET IntervalStyle = sql_standard")
    try:
        with pytest.raises(AssertionError) as exc:
            merged(shards, "SELECT id, iv FROM ty ORDER BY iv, id", 0, collation)
        assert "IntervalStyle" in str(exc.value)
    finally:
        for c in shards:
            c.execute("RESET IntervalStyle")
