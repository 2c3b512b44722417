"""
plan_fuzz - a seeded random query generator for the planner's differential audit
(test_plan_fuzz.py runs it; `python3 test/routing/plan_fuzz.py --help` runs it by hand).

Over the storefront schema of test_routing.py (customers, orders, order_items sharded by
customer in group customer_data over 4 shards; products by lower(sku) in group catalog;
countries a reference table) plus table-less sides (VALUES, generate_series, CTEs over
them), the generator builds SELECTs from a small grammar: joins co-located and not, inner,
LEFT, RIGHT and FULL, with the sharded table on either side of a reference table or a
table-less source, LATERAL subqueries, derived tables and CTEs (MATERIALIZED or not,
referenced once or twice), filters on the shard key (=, IN, = ANY, OR) and not, EXISTS / NOT
EXISTS / IN / NOT IN / scalar subqueries correlated on the key, on another column or not at
all, aggregates with GROUP BY / HAVING (ordered-set ones too), DISTINCT, ORDER BY / LIMIT / OFFSET (also inside
subqueries), window functions, set-returning functions and volatile calls in the select
list, UNION / UNION ALL; and UPDATE / DELETE with RETURNING, INSERT ... SELECT (rows kept
on their shards, moved, or sent to one; ON CONFLICT, RETURNING) and MERGE (UPDATE, DELETE,
INSERT, DO NOTHING) (run in a transaction that is rolled back, compared by RETURNING and by
the table's contents after).

Every query runs through neki and on the reference server holding every row. It passes when
the results are equal (as multisets, or in order when its top level orders every column),
when both fail with the same SQLSTATE, or when neki refuses it with NK013 or 0A000 (counted
by code). Anything else is a failure: a wrong result, an error on one side only, a lost
connection. Data: NULLs, duplicate names and statuses, one shard with one customer and no
orders (empty shards for orders), another with a single order, items on two shards only.
"""
import argparse
import random
import re
import sys
import time
from collections import Counter
from decimal import Decimal

try:
    import psycopg
except ImportError:
    psycopg = None

# ---- schema ------------------------------------------------------------------------------

# (table, columns as (name, type, shard group of the key or None), primary-key columns)
TABLES = {
    "customers": ([("id", "int", "cust"), ("name", "text", None), ("country", "text", None)],
                  ["id"]),
    "orders": ([("customer_id", "int", "cust"), ("id", "int", None), ("status", "text", None),
                ("total", "num", None)], ["customer_id", "id"]),
    "order_items": ([("customer_id", "int", "cust"), ("order_id", "int", None),
                     ("line", "int", None), ("sku", "text", None), ("qty", "int", None)],
                    ["customer_id", "order_id", "line"]),
    "products": ([("sku", "text", "cat"), ("name", "text", None), ("price", "num", None)],
                 ["sku"]),
    "countries": ([("code", "text", None), ("name", "text", None)], ["code"]),
}
SHARDED_CUST = ["customers", "orders", "order_items"]
ALL_TABLES = list(TABLES)

COUNTRIES = [("DE", "Germany"), ("FR", "France"), ("IT", "Italy"), ("ES", "Spain"),
             ("PT", "Portugal")]
PRODUCTS = [("SKU-1", "bolt", Decimal("1.50")), ("sku-1", "bolt", Decimal("1.25")),
            ("SKU-2", "nut", None), ("SKU-3", "gear", Decimal("12.00")),
            ("SKU-4", "spring", Decimal("0.75")), ("Sku-5", "cog", Decimal("3.10"))]
STATUSES = ["new", "paid", "shipped", "void"]
NAMES = ["ann", "bob", "cid", "ann", "dee", "bob", "eve"]
COUNTRY_CYCLE = ["DE", "FR", "IT", None, "FR", "DE", "ES"]


def place_customers(probe):
    """Choose the customers from the placement <probe> gives ({shard: [ids]} of ids 1..60):
    one customer on the first shard, up to 8 on each other."""
    chosen = {}
    for i, shard in enumerate(sorted(probe)):
        ids = sorted(probe[shard])
        chosen[shard] = ids[:1] if i == 0 else ids[:8]
    return chosen


def dataset(placement):
    """The rows of every table as {table: [tuples]} for the customers <placement> chose."""
    shards = sorted(placement)
    customers, orders, items = [], [], []
    n = 0
    for si, shard in enumerate(shards):
        for ci, cid in enumerate(placement[shard]):
            customers.append((cid, NAMES[n % len(NAMES)], COUNTRY_CYCLE[n % len(COUNTRY_CYCLE)]))
            n += 1
            if si == 0:
                continue                   # the first shard: no orders at all
            if si == 1:
                if ci == 0:                # the second shard: a single order
                    orders.append((cid, cid * 10, "paid", Decimal("5.00")))
                continue
            for k in range((cid + ci) % 4):
                total = None if (cid + k) % 5 == 0 else Decimal(f"{(cid * 7 + k * 3) % 40}.50")
                orders.append((cid, cid * 10 + k, STATUSES[(cid + k) % 4], total))
    for cid, oid, _, _ in orders:
        shard = next(s for s in shards if cid in placement[s])
        if shard not in (shards[2], shards[3] if len(shards) > 3 else shards[2]):
            continue
        for line in range(1 + oid % 3):
            sku = ["SKU-1", "sku-1", "SKU-3", "SKU-9", "Sku-5"][(oid + line) % 5]
            items.append((cid, oid, line + 1, sku, 1 + (oid + line) % 4))
    return {"countries": COUNTRIES, "customers": customers, "orders": orders,
            "order_items": items, "products": PRODUCTS, "placement": placement}


def sql_lit(v):
    if v is None:
        return "NULL"
    if isinstance(v, (int, Decimal)):
        return str(v)
    return "'" + str(v).replace("'", "''") + "'"


def insert_sql(table, rows):
    return f"INSERT INTO {table} VALUES " + ", ".join(
        "(" + ", ".join(sql_lit(v) for v in r) + ")" for r in rows)


# ---- the generator -------------------------------------------------------------------------

class Col:
    """A column a FROM item offers: its text, type ('int', 'text', 'num') and, for a plain
    shard-key column of a sharded table, the group ('cust' or 'cat')."""

    def __init__(self, expr, typ, key=None):
        self.expr, self.typ, self.key = expr, typ, key


class Src:
    """A FROM item: its text and the columns it offers."""

    def __init__(self, text, cols):
        self.text, self.cols = text, cols


class Query:
    def __init__(self, sql, types, ordered=False, kind="select", target=None):
        self.sql, self.types, self.ordered = sql, types, ordered
        self.kind, self.target = kind, target


class Gen:
    """One statement at a time: gen() gives a Query. Deterministic for a seed."""

    def __init__(self, seed, data):
        self.r = random.Random(seed)
        self.data = data
        self.ids = sorted(c[0] for c in data["customers"])
        self.oids = sorted(o[1] for o in data["orders"])

    # -- small helpers

    def alias(self):
        self.n_alias += 1
        return f"a{self.n_alias}"

    def pick(self, seq):
        return self.r.choice(seq)

    def chance(self, p):
        return self.r.random() < p

    def key_lit(self, group):
        if group == "cat":
            return sql_lit(self.pick(["SKU-1", "sku-1", "SKU-3", "Sku-5", "SKU-7"]))
        return str(self.pick(self.ids + [999, 0]))

    def lit_for(self, col):
        if col.key:
            return self.key_lit(col.key)
        name = col.expr.split(".")[-1]
        if col.typ == "text":
            pool = {"status": STATUSES, "country": [c for c, _ in COUNTRIES],
                    "code": [c for c, _ in COUNTRIES], "sku": [p[0] for p in PRODUCTS]}
            return sql_lit(self.pick(pool.get(name, NAMES + ["zed"])))
        if col.typ == "num":
            return self.pick(["5", "10.50", "20", "0"])
        if name in ("id", "order_id", "customer_id"):
            return str(self.pick(self.oids + self.ids + [3]))
        return str(self.r.randint(0, 4))

    # -- FROM items

    def table(self, name=None, weights=None):
        if name is None:
            names = ["customers", "orders", "order_items", "products", "countries"]
            name = self.r.choices(names, weights or [3, 3, 2, 1, 2])[0]
        a = self.alias()
        cols = [Col(f"{a}.{c}", t, k) for c, t, k in TABLES[name][0]]
        return Src(f"{name} {a}", cols), name, a

    def tableless(self, depth):
        kind = self.pick(["series", "values", "cte"])
        a = self.alias()
        if kind == "series":
            n = self.pick([3, 12, 40])
            return Src(f"generate_series(1, {n}) {a}(n)", [Col(f"{a}.n", "int")])
        if kind == "values":
            rows = [(self.pick(self.ids), "FR"), (self.pick(self.ids), "DE"), (999, "PT"),
                    (self.pick(self.ids), None)]
            text = ", ".join(f"({i}::bigint, {sql_lit(c)})" for i, c in rows)
            return Src(f"(VALUES {text}) {a}(n, cc)", [Col(f"{a}.n", "int"),
                                                      Col(f"{a}.cc", "text")])
        name = self.cte(f"SELECT n, n % 3 AS m FROM generate_series(1, {self.pick([5, 30])}) n")
        return Src(f"{name} {a}", [Col(f"{a}.n", "int"), Col(f"{a}.m", "int")])

    def cte(self, body, types=None):
        name = f"w{len(self.ctes) + 1}"
        mat = self.pick(["", "", "MATERIALIZED ", "NOT MATERIALIZED "])
        self.ctes.append((name, f"{name} AS {mat}({body})", types))
        return name

    def join_type(self):
        return self.r.choices(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"], [4, 3, 2, 1])[0]

    def on_extra(self, src):
        """An optional extra ON conjunct on a column of <src>."""
        if not self.chance(0.4):
            return ""
        col = self.pick(src.cols)
        if col.key and self.chance(0.6):
            return f" AND {col.expr} = {self.key_lit(col.key)}"
        return f" AND {self.pred_on(col)}"

    def join_pair(self, left, right, on):
        jt = self.join_type()
        if self.chance(0.5):
            left, right = right, left
        extra = self.on_extra(self.pick([left, right]))
        return Src(f"{left.text} {jt} {right.text} ON {on}{extra}", left.cols + right.cols)

    def colocated(self):
        if self.chance(0.2):
            c, _, ca = self.table("customers")
            o, _, oa = self.table("orders")
            i, _, ia = self.table("order_items")
            jt = self.join_type()
            return Src(f"{c.text} JOIN {o.text} ON {oa}.customer_id = {ca}.id {jt} {i.text} "
                       f"ON {ia}.customer_id = {oa}.customer_id AND {ia}.order_id = {oa}.id",
                       c.cols + o.cols + i.cols)
        pair = self.pick([("customers", "orders"), ("orders", "order_items"),
                          ("customers", "order_items")])
        l, ln, la = self.table(pair[0])
        r, rn, ra = self.table(pair[1])
        lk = TABLES[ln][0][0][0]
        on = f"{ra}.customer_id = {la}.{lk}"
        if pair == ("orders", "order_items") and self.chance(0.7):
            on += f" AND {ra}.order_id = {la}.id"
        return self.join_pair(l, r, on)

    def with_reference(self):
        s, name, a = self.table(self.pick(["customers", "orders", "order_items", "products"]))
        k, _, ka = self.table("countries")
        text = {"customers": "country", "orders": "status", "order_items": "sku",
                "products": "name"}[name]
        on = self.pick([f"{ka}.code = {a}.{text}", f"{ka}.code <> {a}.{text}",
                        f"{ka}.code = 'FR'"])
        return self.join_pair(s, k, on)

    def with_tableless(self, depth):
        s, name, a = self.table(self.pick(SHARDED_CUST))
        t = self.tableless(depth)
        key = TABLES[name][0][0][0]
        on = self.pick([f"{a}.{key} = {t.cols[0].expr}",
                        f"{a}.{key} = {self.key_lit('cust')} AND {a}.{key} = {t.cols[0].expr}",
                        f"{a}.{key} = {self.key_lit('cust')}", "true"])
        return self.join_pair(s, t, on)

    def not_colocated(self):
        l, ln, la = self.table(self.pick(["customers", "orders"]))
        r, rn, ra = self.table(self.pick(["orders", "order_items", "products"]))
        on = {("customers", "orders"): f"{ra}.id = {la}.id",
              ("orders", "orders"): f"{ra}.id = {la}.id",
              ("customers", "order_items"): f"{ra}.line = {la}.id",
              ("orders", "order_items"): f"{ra}.order_id = {la}.id",
              ("customers", "products"): f"{ra}.name = {la}.name",
              ("orders", "products"): f"{ra}.name = {la}.status"}[(ln, rn)]
        if self.chance(0.5):
            l1, r1 = [c for c in l.cols if c.key][0], [c for c in r.cols if c.key][0]
            on += f" AND {l1.expr} = {self.key_lit(l1.key)}"
            on += f" AND {r1.expr} = {self.key_lit(r1.key)}"
        return self.join_pair(l, r, on)

    def derived(self, depth):
        q = self.select(depth + 1, sub=True)
        a = self.alias()
        cols = [Col(f"{a}.c{i + 1}", t) for i, t in enumerate(q.types)]
        return Src(f"({q.sql}) {a}", cols)

    def cte_ref(self, depth):
        reuse = [c for c in self.ctes if c[2]]
        if reuse and self.chance(0.35):
            name, _, types = self.pick(reuse)
        else:
            q = self.select(depth + 1, sub=True)
            types = q.types
            name = self.cte(q.sql, types)
        a = self.alias()
        return Src(f"{name} {a}", [Col(f"{a}.c{i + 1}", t) for i, t in enumerate(types)])

    def lateral(self, depth):
        outer, oname, oa = self.table(self.pick(["customers", "orders", "countries"]))
        inner, iname, ia = self.table(self.pick(["orders", "order_items", "customers"]))
        okey = [c for c in outer.cols if c.key]
        corr = []
        if okey and self.chance(0.6):
            corr.append(f"{ia}.customer_id = {okey[0].expr}" if iname != "customers"
                        else f"{ia}.id = {okey[0].expr}")
        elif oname == "countries" and iname == "customers":
            corr.append(f"{ia}.country = {oa}.code")
        elif self.chance(0.5):
            corr.append(self.pred_on(self.pick(inner.cols)))
        where = " WHERE " + " AND ".join(corr) if corr else ""
        icols = inner.cols
        if self.chance(0.4):
            body = f"SELECT count(*) AS c1, max({icols[0].expr}) AS c2 FROM {inner.text}{where}"
            types = ["int", "int"]
        else:
            c = [icols[0], self.pick(icols[1:])]
            order = ", ".join(x.expr for x in icols)
            body = (f"SELECT {c[0].expr} AS c1, {c[1].expr} AS c2 FROM {inner.text}{where} "
                    f"ORDER BY {order} LIMIT {self.pick([1, 2])}")
            types = [c[0].typ, c[1].typ]
        a = self.alias()
        cols = [Col(f"{a}.c{i + 1}", t) for i, t in enumerate(types)]
        if self.chance(0.5):
            text = f"{outer.text} CROSS JOIN LATERAL ({body}) {a}"
        else:
            text = f"{outer.text} LEFT JOIN LATERAL ({body}) {a} ON true"
        return Src(text, outer.cols + cols)

    def from_item(self, depth):
        kinds = ["table", "colocated", "reference", "tableless", "notcoloc", "derived", "cte",
                 "lateral", "cross"]
        weights = [6, 5, 4, 4, 1, 2, 2, 2, 1] if depth < 2 else [6, 3, 2, 2, 0, 0, 0, 0, 1]
        kind = self.r.choices(kinds, weights)[0]
        if kind == "table":
            return self.table()[0]
        if kind == "colocated":
            return self.colocated()
        if kind == "reference":
            return self.with_reference()
        if kind == "tableless":
            return self.with_tableless(depth)
        if kind == "notcoloc":
            return self.not_colocated()
        if kind == "derived":
            return self.derived(depth)
        if kind == "cte":
            return self.cte_ref(depth)
        if kind == "lateral":
            return self.lateral(depth)
        a, _, _ = self.table(self.pick(SHARDED_CUST))
        b = self.pick([self.table("countries")[0], self.tableless(depth)])
        return Src(f"{a.text}, {b.text}", a.cols + b.cols)

    # -- predicates

    def pred_on(self, col):
        lit = self.lit_for(col)
        if col.typ == "text":
            return self.pick([f"{col.expr} = {lit}", f"{col.expr} <> {lit}",
                              f"{col.expr} IS NULL", f"{col.expr} IS NOT NULL",
                              f"{col.expr} LIKE 'a%'", f"{col.expr} > {lit}"])
        return self.pick([f"{col.expr} > {lit}", f"{col.expr} = {lit}", f"{col.expr} IS NULL",
                          f"{col.expr} <= {lit}", f"{col.expr} IS NOT NULL"])

    def key_pred(self, col):
        lits = [self.key_lit(col.key) for _ in range(self.r.randint(2, 4))]
        form = self.pick(["eq", "in", "any", "or"])
        if form == "eq":
            return f"{col.expr} = {lits[0]}"
        if form == "in":
            return f"{col.expr} IN ({', '.join(lits)})"
        if form == "any":
            return f"{col.expr} = ANY(ARRAY[{', '.join(lits)}])"
        return "(" + " OR ".join(f"{col.expr} = {v}" for v in lits[:2]) + ")"

    def sub_from(self, depth, outer):
        """A subquery's table and its correlation with <outer>'s columns (or none)."""
        inner, iname, ia = self.table(self.pick(["orders", "order_items", "customers",
                                                 "countries", "products"]))
        okeys = [c for c in outer.cols if c.key == "cust"]
        ikey = [c for c in inner.cols if c.key]
        otext = [c for c in outer.cols if c.typ == "text"]
        how = self.pick(["key", "key", "other", "none"])
        corr = None
        if how == "key" and okeys and ikey and ikey[0].key == "cust":
            corr = f"{ikey[0].expr} = {self.pick(okeys).expr}"
        elif how in ("key", "other") and otext:
            itext = [c for c in inner.cols if c.typ == "text"]
            corr = f"{self.pick(itext).expr} = {self.pick(otext).expr}"
        conds = [corr] if corr else []
        if self.chance(0.3):
            col = self.pick(inner.cols)
            conds.append(self.key_pred(col) if col.key else self.pred_on(col))
        where = " WHERE " + " AND ".join(conds) if conds else ""
        return inner, where

    def key_in(self, src, depth):
        """`outer.key [NOT] IN (SELECT inner.key ...)` over co-located tables."""
        okey = self.pick([c for c in src.cols if c.key == "cust"])
        inner, iname, ia = self.table(self.pick(SHARDED_CUST))
        ikey = f"{ia}.{TABLES[iname][0][0][0]}"
        conds = [self.pred_on(self.pick(inner.cols))] if self.chance(0.6) else []
        tail = ""
        if self.chance(0.3):
            tail = f" GROUP BY {ikey} HAVING count(*) > {self.pick([0, 1, 2])}"
        where = " WHERE " + " AND ".join(conds) if conds else ""
        op = self.pick(["IN", "NOT IN", "= ANY"])
        return f"{okey.expr} {op} (SELECT {ikey} FROM {inner.text}{where}{tail})"

    def sublink_pred(self, src, depth):
        if any(c.key == "cust" for c in src.cols) and self.chance(0.3):
            return self.key_in(src, depth)
        inner, where = self.sub_from(depth, src)
        kind = self.pick(["exists", "not exists", "in", "not in", "scalar"])
        if kind in ("exists", "not exists"):
            return f"{kind.upper()} (SELECT 1 FROM {inner.text}{where})"
        if kind in ("in", "not in"):
            for oc in self.r.sample(src.cols, len(src.cols)):
                ic = [c for c in inner.cols if c.typ == oc.typ]
                if ic:
                    ic = self.pick(ic)
                    return f"{oc.expr} {kind.upper()} (SELECT {ic.expr} FROM {inner.text}{where})"
            return "true"
        nums = [c for c in src.cols if c.typ in ("int", "num")]
        inums = [c for c in inner.cols if c.typ in ("int", "num")]
        if not nums or not inums:
            return f"EXISTS (SELECT 1 FROM {inner.text}{where})"
        agg = self.pick(["max", "min", "avg", "count", "sum"])
        return f"{self.pick(nums).expr} > (SELECT {agg}({self.pick(inums).expr}) FROM " \
               f"{inner.text}{where})"

    def where(self, src, depth):
        conds = []
        for _ in range(self.r.choices([0, 1, 2], [3, 4, 2])[0]):
            keys = [c for c in src.cols if c.key]
            kind = self.r.choices(["key", "col", "or", "sub", "volatile"],
                                  [4, 3, 1, 3 if depth < 2 else 0, 1])[0]
            if kind == "key" and keys:
                conds.append(self.key_pred(self.pick(keys)))
            elif kind == "or":
                a, b = self.pick(src.cols), self.pick(src.cols)
                left = self.key_pred(a) if a.key else self.pred_on(a)
                conds.append(f"({left} OR {self.pred_on(b)})")
            elif kind == "sub":
                conds.append(self.sublink_pred(src, depth))
            elif kind == "volatile":
                conds.append("random() < 2")
            else:
                conds.append(self.pred_on(self.pick(src.cols)))
        return " WHERE " + " AND ".join(conds) if conds else ""

    # -- select lists

    def scalar_sub(self, src, depth):
        inner, where = self.sub_from(depth, src)
        if self.chance(0.7):
            agg = self.pick(["count(*)", f"max({inner.cols[0].expr})",
                             f"min({inner.cols[-1].expr})"])
            typ = "int" if agg == "count(*)" else (inner.cols[0].typ if agg.startswith("max")
                                                   else inner.cols[-1].typ)
            return f"(SELECT {agg} FROM {inner.text}{where})", typ
        c = inner.cols[0]
        order = ", ".join(x.expr for x in inner.cols)
        return f"(SELECT {c.expr} FROM {inner.text}{where} ORDER BY {order} LIMIT 1)", c.typ

    def extra_column(self, src, depth):
        kind = self.r.choices(["scalar", "srf", "window", "volatile", "expr"],
                              [4 if depth < 2 else 0, 1, 2, 1, 2])[0]
        if kind == "scalar":
            return self.scalar_sub(src, depth)
        if kind == "srf":
            return "generate_series(1, 2)", "int"
        if kind == "window":
            order = ", ".join(c.expr for c in src.cols)
            keys = [c for c in src.cols if c.key]
            part = self.pick(keys) if keys and self.chance(0.5) else self.pick(src.cols)
            fn = self.pick([f"row_number() OVER (PARTITION BY {part.expr} ORDER BY {order})",
                            f"count(*) OVER (PARTITION BY {part.expr})",
                            "count(*) OVER ()",
                            f"rank() OVER (ORDER BY {part.expr})",
                            f"dense_rank() OVER (PARTITION BY {part.expr} ORDER BY {order})",
                            f"(lag({part.expr}) OVER (ORDER BY {order}) IS NULL)::int"])
            return fn, "int"
        if kind == "volatile":     # values differ by shard, row counts must not
            return self.pick(["(random() < 2)::int", "(now() IS NOT NULL)::int",
                              "(clock_timestamp() > '2000-01-01')::int"]), "int"
        c = self.pick(src.cols)
        if c.typ == "text":
            return f"upper({c.expr})", "text"
        return f"coalesce({c.expr}, 0) + 1", c.typ

    def rows_list(self, src, depth, sig):
        items = []
        if sig:
            for t in sig:
                cands = [c for c in src.cols if c.typ == t]
                if cands and self.chance(0.85):
                    items.append((self.pick(cands).expr, t))
                else:
                    items.append(({"int": "0::bigint", "num": "NULL::numeric",
                                   "text": "'x'"}[t], t))
            return items
        for c in self.r.sample(src.cols, min(len(src.cols), self.r.randint(1, 3))):
            items.append((c.expr, c.typ))
        if self.chance(0.35):
            items.append(self.extra_column(src, depth))
        return items

    def agg_list(self, src, sub=False):
        groups = self.r.sample(src.cols, min(len(src.cols), self.r.choices([0, 1, 2],
                                                                            [3, 4, 2])[0]))
        keys = [c for c in src.cols if c.key]
        if sub and keys and self.chance(0.5) and keys[0] not in groups:
            groups.insert(0, keys[0])
        items = [(c.expr, c.typ) for c in groups]
        for _ in range(self.r.randint(1, 2)):
            c = self.pick(src.cols)
            num = c.typ in ("int", "num")
            fn = self.pick(["count(*)", "count", "min", "max", "count distinct",
                            "percentile_disc", "mode"] +
                           (["sum", "avg", "percentile_cont"] if num else []))
            if fn in ("percentile_disc", "mode"):     # (every value of a group in one place)
                arg = "0.5" if fn == "percentile_disc" else ""
                items.append((f"{fn}({arg}) WITHIN GROUP (ORDER BY {c.expr})", c.typ))
            elif fn == "percentile_cont":
                items.append((f"percentile_cont(0.25) WITHIN GROUP (ORDER BY {c.expr})", "num"))
            elif fn == "count(*)":
                items.append(("count(*)", "int"))
            elif fn == "count":
                items.append((f"count({c.expr})", "int"))
            elif fn == "count distinct":
                items.append((f"count(DISTINCT {c.expr})", "int"))
            elif fn == "avg":
                items.append((f"avg({c.expr})", "num"))
            elif fn == "sum":
                items.append((f"sum({c.expr})", "num"))
            else:
                items.append((f"{fn}({c.expr})", c.typ))
        group = " GROUP BY " + ", ".join(c.expr for c in groups) if groups else ""
        having = " HAVING count(*) > 1" if groups and self.chance(0.3) else ""
        return items, group + having

    def select(self, depth, sub=False, sig=None):
        """A SELECT block; <sub>: inside another statement (deterministic LIMITs only)."""
        src = self.from_item(depth)
        where = self.where(src, depth)
        mode = "rows" if sig else self.r.choices(["rows", "agg", "distinct"], [5, 3, 1])[0]
        tail = ""
        if mode == "agg":
            items, tail = self.agg_list(src, sub)
        else:
            items = self.rows_list(src, depth, sig)
        distinct = "DISTINCT " if mode == "distinct" else ""
        distinct_on = mode == "distinct" and not sub and self.chance(0.3)
        if distinct_on:
            distinct = "DISTINCT ON (1) "
        names = [f"{e} AS c{i + 1}" for i, (e, _) in enumerate(items)]
        sql = f"SELECT {distinct}{', '.join(names)} FROM {src.text}{where}{tail}"
        ordered = False
        if not sig and (distinct_on or self.chance(0.35 if sub else 0.4)):
            dirs = [self.pick(["", " DESC", " NULLS FIRST", " DESC NULLS LAST"])
                    for _ in items]
            sql += " ORDER BY " + ", ".join(f"{i + 1}{d}" for i, d in enumerate(dirs))
            ordered = True
            if self.chance(0.6 if sub else 0.5):
                sql += f" LIMIT {self.pick([1, 2, 5, 20])}"
                if self.chance(0.3):
                    sql += f" OFFSET {self.pick([1, 3])}"
        return Query(sql, [t for _, t in items], ordered and not sub)

    def union(self, depth):
        first = self.select(depth, sub=True)
        sig = first.types
        second = self.select(depth, sub=True, sig=sig)
        op = self.pick(["UNION", "UNION ALL"])
        sql = f"({first.sql}) {op} ({second.sql})"
        ordered = False
        if self.chance(0.4):
            sql += " ORDER BY " + ", ".join(str(i + 1) for i in range(len(sig)))
            ordered = True
            if self.chance(0.5):
                sql += f" LIMIT {self.pick([2, 10])}"
        return Query(sql, sig, ordered)

    def tableless_top(self, depth):
        t = self.tableless(depth)
        src = Src(f"{t.text}", t.cols)
        if self.chance(0.4):
            sub, typ = self.scalar_sub(Src("", []), depth)
            return Query(f"SELECT {sub} AS c1", [typ])
        sub, typ = self.scalar_sub(src, depth)
        where = self.where(src, depth)
        return Query(f"SELECT {t.cols[0].expr} AS c1, {sub} AS c2 FROM {src.text}{where}",
                     ["int", typ])

    # -- writes

    def dml(self):
        """UPDATE or DELETE (with RETURNING or not) of a sharded or the reference table."""
        target = self.r.choices(["orders", "order_items", "customers", "countries"],
                                [4, 2, 2, 2])[0]
        src, _, a = self.table(target)
        sets = {"orders": {"status": "'upd'", "total": f"coalesce({a}.total, 0) + 1"},
                "order_items": {"qty": f"{a}.qty + 1"},
                "customers": {"name": f"{a}.name || '+'"},
                "countries": {"name": f"{a}.name || '!'"}}[target]
        where = self.where(src, 1)
        using = ""
        if self.chance(0.3):
            other = self.pick([self.table("countries")[0],
                               self.table(self.pick(SHARDED_CUST))[0], self.tableless(1)])
            using = other.text
            link = self.pick(src.cols)
            oc = [c for c in other.cols if c.typ == link.typ]
            cond = f"{oc[0].expr} = {link.expr}" if oc else "true"
            where = f"{where} AND {cond}" if where else f" WHERE {cond}"
        if target in ("orders", "order_items") and self.chance(0.4):
            col, _ = self.scalar_sub(src, 1)
            sets["total" if target == "orders" else "qty"] = f"coalesce(({col})::int, 1)"
        if target != "countries" and self.chance(0.1):
            key = TABLES[target][0][0][0]
            sets[key] = f"{a}.{key}"           # assigning the shard key: 145
        ret = ""
        if self.chance(0.5):
            ret = " RETURNING " + ", ".join(f"{a}.{c}" for c, _, _ in TABLES[target][0])
        if self.chance(0.6):
            cols = self.r.sample(sorted(sets), self.r.randint(1, len(sets)))
            assign = ", ".join(f"{c} = {sets[c]}" for c in cols)
            sql = (f"UPDATE {target} {a} SET {assign}{' FROM ' + using if using else ''}"
                   f"{where}{ret}")
        else:
            sql = f"DELETE FROM {target} {a}{' USING ' + using if using else ''}{where}{ret}"
        return Query(sql, [], kind="dml", target=target)

    def insert_select(self):
        """INSERT ... SELECT of a table's rows into the same table under new keys: kept on
        their shards, moved to others, or all to one; from a subquery-filtered, ordered and
        limited, or joined source; ON CONFLICT and RETURNING or not. (The source is keyed
        by the table's own primary key, so no two rows collide unless the shift folds them:
        then both servers fail alike.)"""
        target = self.r.choices(["orders", "order_items", "customers"], [4, 2, 2])[0]
        src, _, a = self.table(target)
        new_key = self.pick([f"{a}.customer_id", f"{a}.customer_id + {self.pick([1, 7])}",
                             self.key_lit("cust")])
        exprs = {"orders": [new_key, f"{a}.id + 100000", self.pick([f"{a}.status", "'ins'"]),
                            f"{a}.total"],
                 "order_items": [new_key, f"{a}.order_id", f"{a}.line + 1000",
                                 f"{a}.sku", f"{a}.qty"],
                 "customers": [f"{a}.id + {self.pick([100000, 100007])}", f"{a}.name",
                               f"{a}.country"]}[target]
        where = self.where(src, 1)
        tail = ""
        if self.chance(0.25):           # (by the source's primary key: no ties)
            tail = (f" ORDER BY {', '.join(f'{a}.{c}' for c in TABLES[target][1])} "
                    f"LIMIT {self.pick([1, 3, 10])}")
        cols = ", ".join(c for c, _, _ in TABLES[target][0])
        pk = ", ".join(TABLES[target][1])
        conflict = ""
        if self.chance(0.3):
            first = TABLES[target][0][2 if target != "customers" else 1][0]
            conflict = self.pick([" ON CONFLICT DO NOTHING",
                                  f" ON CONFLICT ({pk}) DO NOTHING",
                                  f" ON CONFLICT ({pk}) DO UPDATE SET {first} = "
                                  f"excluded.{first}"])
        ret = f" RETURNING {cols}" if self.chance(0.4) else ""
        sql = (f"INSERT INTO {target} ({cols}) SELECT {', '.join(exprs)} FROM {src.text}"
               f"{where}{tail}{conflict}{ret}")
        return Query(sql, [], kind="dml", target=target)

    def merge(self):
        """MERGE into orders from order_items, orders or a table-less source, matched on
        the key and the order id (co-located or not), with UPDATE / DELETE / INSERT / DO
        NOTHING actions."""
        src, name, a = self.pick([self.table("order_items"), self.table("orders"),
                                  (self.tableless(1), None, None)])
        if name == "order_items":
            on_key, on_id, ins = (f"{a}.customer_id", f"{a}.order_id",
                                  f"({a}.customer_id, {a}.order_id * 10 + {a}.line, 'm', "
                                  f"{a}.qty)")
        elif name == "orders":
            shift = self.pick(["", " + 1"])
            on_key, on_id, ins = (f"{a}.customer_id{shift}", f"{a}.id + 5",
                                  f"({a}.customer_id{shift}, {a}.id + 5, {a}.status, "
                                  f"{a}.total)")
        else:
            c = src.cols[0].expr
            on_key, on_id, ins = (c, f"{c} * 10", f"({c}, {c} * 10 + 7, 'v', 1)")
        on = f"t.customer_id = {on_key} AND t.id = {on_id}"
        if self.chance(0.3):
            on = f"t.customer_id = {on_key}"
        matched = self.pick(["UPDATE SET status = 'mrg'", "DELETE",
                             "UPDATE SET total = coalesce(t.total, 0) + 1", "DO NOTHING"])
        cond = self.pick(["", " AND t.status <> 'void'"])
        whens = [f"WHEN MATCHED{cond} THEN {matched}"]
        if self.chance(0.7):
            whens.append(f"WHEN NOT MATCHED THEN INSERT VALUES {ins}")
        self.r.shuffle(whens)
        sql = f"MERGE INTO orders t USING {src.text} ON {on} {' '.join(whens)}"
        return Query(sql, [], kind="dml", target="orders")

    # -- statements

    def gen(self):
        self.n_alias = 0
        self.ctes = []
        kind = self.r.choices(["select", "union", "tableless", "dml", "insert", "merge"],
                              [12, 2, 1, 2, 1, 1])[0]
        if kind == "select":
            q = self.select(0)
        elif kind == "union":
            q = self.union(0)
        elif kind == "tableless":
            q = self.tableless_top(0)
        elif kind == "insert":
            q = self.insert_select()
        elif kind == "merge":
            q = self.merge()
        else:
            q = self.dml()
        if self.ctes:
            q.sql = "WITH " + ", ".join(c[1] for c in self.ctes) + " " + q.sql
        return q


# ---- running and comparing -------------------------------------------------------------

NK_CODE = re.compile(r"not implemented: \[(\d+)\]")
EQ_INT = re.compile(r"(?<=[^<>!]= )(-?\d+)\b(?!\.)")


def parametrize(sql):
    """<sql> with the integers compared by `= N` as %s parameters, and their values."""
    params = [int(m) for m in EQ_INT.findall(sql)]
    return EQ_INT.sub("%s", sql.replace("%", "%%")), params


def canon(rows):
    return [tuple(repr(v) for v in r) for r in rows]


class Runner:
    """Runs Queries through neki and on the reference; keeps the tallies."""

    def __init__(self, neki_connect, ref_connect, extended_share=0.3, seed=0):
        self.neki_connect, self.ref_connect = neki_connect, ref_connect
        self.r = random.Random(seed)
        self.extended_share = extended_share
        self.passed = 0
        self.refusals = Counter()
        self.refusal_examples = {}
        self.both_errors = Counter()
        self.failures = []
        self.refused_log = None     # a file: every refused statement, with its code
        self.last = None            # the last check's (neki, reference) (status, rows)
        self.neki = self.ref = None

    def connections(self):
        if self.neki is None or self.neki.closed:
            self.neki = self.neki_connect()
        if self.ref is None or self.ref.closed:
            self.ref = self.ref_connect()

    def close(self):
        for c in (self.neki, self.ref):
            if c is not None and not c.closed:
                c.close()

    @staticmethod
    def execute(conn, sql, extended, dml_target=None, params=None):
        """('ok', rows[, after]) or ('error', sqlstate, message). <extended>: the extended
        protocol, with <params> bound for the %s of <sql> when given."""
        cur = conn.cursor() if extended else psycopg.ClientCursor(conn)
        try:
            if dml_target:
                cur.execute("BEGIN")
            if params is not None:
                cur.execute(sql, params, prepare=False)
            else:
                cur.execute(sql, prepare=False) if extended else cur.execute(sql)
            rows = cur.fetchall() if cur.description is not None else []
            after = None
            if dml_target:
                cur.execute(f"SELECT * FROM {dml_target}")
                after = cur.fetchall()
            return ("ok", rows, after)
        except psycopg.Error as e:
            return ("error", e.diag.sqlstate or "", str(e).split("\n")[0])
        finally:
            if dml_target and not conn.closed:
                try:
                    conn.execute("ROLLBACK")
                except psycopg.Error:
                    pass

    def refusal(self, res):
        if res[0] != "error" or res[1] not in ("NK013", "0A000"):
            return None
        m = NK_CODE.search(res[2])
        return f"NK013 [{m.group(1)}]" if m else f"{res[1]} {res[2][:70]}"

    def check(self, q):
        """Run <q> on both sides; None when it passes, else the failure's text."""
        self.connections()
        extended = self.r.random() < self.extended_share
        target = q.target if q.kind == "dml" else None
        sql, params = q.sql, None
        if extended and self.r.random() < 0.5:
            sql, params = parametrize(q.sql)
            if not params:
                sql, params = q.sql, None
        try:
            got = self.execute(self.neki, sql, extended, target, params)
        except psycopg.OperationalError as e:
            got = ("error", "lost", str(e))
        if self.neki.closed or (got[0] == "error" and got[1] in ("lost", "08006", "57P01")):
            self.neki = None
            return f"neki lost the connection: {got}"
        want = self.execute(self.ref, sql, extended, target, params)
        self.last = (got[:2], want[:2])
        ref = self.refusal(got)
        if ref and not (want[0] == "error" and want[1] == got[1]):
            self.refusals[ref] += 1
            self.refusal_examples.setdefault(ref, q.sql)
            if self.refused_log:
                print(f"{ref}\t{q.sql}", file=self.refused_log)
            return None
        if got[0] == "error" or want[0] == "error":
            if got[0] == want[0] == "error" and got[1] == want[1]:
                self.both_errors[got[1]] += 1
                return None
            return f"neki {got} / reference {want[:3] if want[0] == 'error' else 'ok'}"
        g, w = canon(got[1]), canon(want[1])
        if not q.ordered:
            g, w = sorted(g), sorted(w)
        if g != w:
            return f"rows differ:\n  neki      {g[:12]}{' ...' if len(g) > 12 else ''}" \
                   f" ({len(g)} rows)\n  reference {w[:12]}" \
                   f"{' ...' if len(w) > 12 else ''} ({len(w)} rows)"
        if target and sorted(canon(got[2])) != sorted(canon(want[2])):
            return f"table {target} differs after the write"
        return None

    def run(self, q, label=""):
        why = self.check(q)
        if why is None:
            self.passed += 1
        else:
            self.failures.append((label, q.sql, why))
        return why

    def answered(self):
        """Statements neki answered like the reference (not refused, not failing alike)."""
        return self.passed - sum(self.refusals.values()) - sum(self.both_errors.values())

    def summary(self):
        lines = [f"{self.answered()} answered alike, {sum(self.both_errors.values())} failed "
                 f"alike {dict(self.both_errors)}, {sum(self.refusals.values())} refused, "
                 f"{len(self.failures)} failed"]
        for code, n in sorted(self.refusals.items(), key=lambda kv: -kv[1]):
            lines.append(f"  refused {n:4d} x {code}: {self.refusal_examples[code][:160]}")
        for label, sql, why in self.failures:
            lines.append(f"FAIL {label}: {sql}\n  {why}")
        return "\n".join(lines)


def load(run_neki, run_ref, probe_placement):
    """Load the data set through neki (<run_neki>(sql)) and on the reference (<run_ref>);
    <probe_placement>() gives {shard: [customer ids]} after customers 1..60 were inserted
    through neki. Returns the data set."""
    run_neki(insert_sql("countries", COUNTRIES))
    run_neki(insert_sql("customers", [(i, "probe", None) for i in range(1, 61)]))
    placement = place_customers(probe_placement())
    run_neki("DELETE FROM customers")
    data = dataset(placement)
    run_ref(insert_sql("countries", COUNTRIES))
    for table in ("customers", "orders", "order_items", "products"):
        if data[table]:
            run_neki(insert_sql(table, data[table]))
            run_ref(insert_sql(table, data[table]))
    return data


def tables_differ(runner):
    """The tables whose rows differ between neki and the reference (writes are rolled back,
    so none should)."""
    runner.connections()
    bad = []
    for table in TABLES:
        got = runner.execute(runner.neki, f"SELECT * FROM {table}", False)
        want = runner.execute(runner.ref, f"SELECT * FROM {table}", False)
        if got[0] != "ok" or sorted(canon(got[1])) != sorted(canon(want[1])):
            bad.append(table)
    return bad


def fuzz(runner, data, seed, n, out=None, stop_after=None):
    """Generate and check <n> statements from <seed>."""
    gen = Gen(seed, data)
    started = time.monotonic()
    for i in range(n):
        q = gen.gen()
        why = runner.run(q, f"#{i} seed {seed}")
        if why and out:
            print(f"FAIL #{i}: {q.sql}\n  {why}", file=out, flush=True)
        if q.kind == "dml" and out and tables_differ(runner):
            print(f"DIVERGED after #{i}: {q.sql}", file=out, flush=True)
            break
        if stop_after and len(runner.failures) >= stop_after:
            break
    return time.monotonic() - started


def main():
    """By hand: against a running cluster (`test/harness/cluster start` printed its env)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cluster-env", required=True, help="file holding `cluster start`'s output")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--print", action="store_true", help="only print the statements")
    ap.add_argument("--stop-after", type=int, default=0)
    ap.add_argument("--sql", help="file of statements (one a line) to run and show instead")
    ap.add_argument("--refused-log", help="write every refused statement to this file")
    args = ap.parse_args()
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
    import conftest
    import test_plan_fuzz
    cluster = conftest.Cluster(conftest.parse_env(open(args.cluster_env).read()))
    with test_plan_fuzz.fuzz_store(cluster, "fuzzdev") as (st, data):
        if args.sql:
            runner = Runner(st.connect, st.ref, extended_share=0)
            for line in open(args.sql):
                if line.strip() and not line.startswith("#"):
                    q = Query(line.strip().rstrip(";"), [], "ORDER BY" in line.upper())
                    if line.upper().startswith(("UPDATE", "DELETE", "INSERT")):
                        q.kind, q.target = "dml", line.split()[2 if line.upper()
                                                                 .startswith("UPDATE")
                                                                 else 2]
                    print(q.sql, "\n  ->", runner.check(q) or "ok", runner.last, runner.refusals
                          if runner.refusals else "")
                    runner.refusals.clear()
            return
        if args.print:
            gen = Gen(args.seed, data)
            for _ in range(args.n):
                print(gen.gen().sql + ";")
            return
        runner = Runner(st.connect, st.ref, seed=args.seed)
        if args.refused_log:
            runner.refused_log = open(args.refused_log, "w")
        secs = fuzz(runner, data, args.seed, args.n, out=sys.stdout,
                    stop_after=args.stop_after)
        runner.close()
        print(runner.summary().split("\nFAIL")[0])
        print(f"{args.n} statements in {secs:.1f}s")
        for line in st.neki.log().splitlines() + st.neki.output().splitlines():
            if "Sanitizer" in line or "runtime error" in line:
                print("SANITIZER:", line)


if __name__ == "__main__":
    main()
