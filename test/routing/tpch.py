"""
A small TPC-H: the schema, a deterministic data generator (scale <sf>: 1.0 is the spec's
SF 0.001-like shape, about 6k lineitems at sf=1), the topology that shards the tables by
their natural keys over the four data shards (nation and region reference tables), and the
22 queries with fixed substitution parameters (the spec's validation values, Q15's view as
a WITH query). Used by test_tpch.py (small scale) and test/bench/tpch (larger).
"""
import datetime
import random

SCHEMA = [
    "CREATE TABLE region (r_regionkey int PRIMARY KEY, r_name char(25) NOT NULL, "
    "r_comment varchar(152))",
    "CREATE TABLE nation (n_nationkey int PRIMARY KEY, n_name char(25) NOT NULL, "
    "n_regionkey int NOT NULL, n_comment varchar(152))",
    "CREATE TABLE supplier (s_suppkey int PRIMARY KEY, s_name char(25) NOT NULL, "
    "s_address varchar(40) NOT NULL, s_nationkey int NOT NULL, s_phone char(15) NOT NULL, "
    "s_acctbal numeric(15,2) NOT NULL, s_comment varchar(101) NOT NULL)",
    "CREATE TABLE customer (c_custkey int PRIMARY KEY, c_name varchar(25) NOT NULL, "
    "c_address varchar(40) NOT NULL, c_nationkey int NOT NULL, c_phone char(15) NOT NULL, "
    "c_acctbal numeric(15,2) NOT NULL, c_mktsegment char(10) NOT NULL, "
    "c_comment varchar(117) NOT NULL)",
    "CREATE TABLE part (p_partkey int PRIMARY KEY, p_name varchar(55) NOT NULL, "
    "p_mfgr char(25) NOT NULL, p_brand char(10) NOT NULL, p_type varchar(25) NOT NULL, "
    "p_size int NOT NULL, p_container char(10) NOT NULL, p_retailprice numeric(15,2) NOT NULL, "
    "p_comment varchar(23) NOT NULL)",
    "CREATE TABLE partsupp (ps_partkey int NOT NULL, ps_suppkey int NOT NULL, "
    "ps_availqty int NOT NULL, ps_supplycost numeric(15,2) NOT NULL, "
    "ps_comment varchar(199) NOT NULL, PRIMARY KEY (ps_partkey, ps_suppkey))",
    "CREATE TABLE orders (o_orderkey int PRIMARY KEY, o_custkey int NOT NULL, "
    "o_orderstatus char(1) NOT NULL, o_totalprice numeric(15,2) NOT NULL, "
    "o_orderdate date NOT NULL, o_orderpriority char(15) NOT NULL, o_clerk char(15) NOT NULL, "
    "o_shippriority int NOT NULL, o_comment varchar(79) NOT NULL)",
    "CREATE TABLE lineitem (l_orderkey int NOT NULL, l_partkey int NOT NULL, "
    "l_suppkey int NOT NULL, l_linenumber int NOT NULL, l_quantity numeric(15,2) NOT NULL, "
    "l_extendedprice numeric(15,2) NOT NULL, l_discount numeric(15,2) NOT NULL, "
    "l_tax numeric(15,2) NOT NULL, l_returnflag char(1) NOT NULL, "
    "l_linestatus char(1) NOT NULL, l_shipdate date NOT NULL, l_commitdate date NOT NULL, "
    "l_receiptdate date NOT NULL, l_shipinstruct char(25) NOT NULL, "
    "l_shipmode char(10) NOT NULL, l_comment varchar(44) NOT NULL, "
    "PRIMARY KEY (l_orderkey, l_linenumber))",
]

TABLES = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]


def topology(db):
    """Each table sharded by its natural key (lineitem with its orders, partsupp with its
    part), nation and region reference tables."""
    def t(index):
        return {"shard_group": "tpch", "shard_index": index}
    return {
        "databases": {db: {"schemas": {"public": {
            "tables": {"supplier": t("by_suppkey"), "customer": t("by_custkey"),
                       "part": t("by_partkey"), "partsupp": t("by_ps_partkey"),
                       "orders": t("by_orderkey"), "lineitem": t("by_l_orderkey")},
            "reference_tables": {"nation": {"shard_groups": ["tpch"]},
                                 "region": {"shard_groups": ["tpch"]}}}}}},
        "shard_groups": [
            {"uid": "authoritative", "key_ranges": [{"shard_uid": "auth"}]},
            {"uid": "tpch", "default_shard_index": "by_orderkey", "key_ranges": [
                {"shard_uid": "shard-a", "end": "40"},
                {"shard_uid": "shard-b", "start": "40", "end": "80"},
                {"shard_uid": "shard-c", "start": "80", "end": "c0"},
                {"shard_uid": "shard-d", "start": "c0"}]}],
        "shard_indexes": {name: {"type": "xxhash", "columns": [col]} for name, col in (
            ("by_suppkey", "s_suppkey"), ("by_custkey", "c_custkey"),
            ("by_partkey", "p_partkey"), ("by_ps_partkey", "ps_partkey"),
            ("by_orderkey", "o_orderkey"), ("by_l_orderkey", "l_orderkey"))},
        "authoritative_shard_group": "authoritative",
        "default_shard_group": "authoritative",
    }


REGIONS = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
NATIONS = [("ALGERIA", 0), ("ARGENTINA", 1), ("BRAZIL", 1), ("CANADA", 1), ("EGYPT", 4),
           ("ETHIOPIA", 0), ("FRANCE", 3), ("GERMANY", 3), ("INDIA", 2), ("INDONESIA", 2),
           ("IRAN", 4), ("IRAQ", 4), ("JAPAN", 2), ("JORDAN", 4), ("KENYA", 0),
           ("MOROCCO", 0), ("MOZAMBIQUE", 0), ("PERU", 1), ("CHINA", 2), ("ROMANIA", 3),
           ("SAUDI ARABIA", 4), ("VIETNAM", 2), ("RUSSIA", 3), ("UNITED KINGDOM", 3),
           ("UNITED STATES", 1)]
COLORS = ["almond", "antique", "aquamarine", "azure", "beige", "bisque", "black", "blue",
          "blush", "brown", "burlywood", "chartreuse", "chocolate", "coral", "cornsilk",
          "cyan", "dark", "deep", "dodger", "firebrick", "forest", "frosted", "gainsboro",
          "green", "honeydew", "hot", "indian", "ivory", "khaki", "lace", "lavender", "lemon",
          "light", "lime", "linen", "magenta", "maroon", "medium", "metallic", "midnight",
          "mint", "misty", "navajo", "navy", "olive", "orange", "orchid", "pale", "papaya",
          "peach", "peru", "pink", "plum", "powder", "puff", "purple", "red", "rose", "rosy",
          "royal", "saddle", "salmon", "sandy", "seashell", "sienna", "sky", "slate", "smoke",
          "snow", "spring", "steel", "tan", "thistle", "tomato", "turquoise", "violet",
          "wheat", "white", "yellow"]
TYPES1 = ["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"]
TYPES2 = ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"]
TYPES3 = ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"]
CONT1 = ["SM", "LG", "MED", "JUMBO", "WRAP"]
CONT2 = ["CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"]
SEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD"]
PRIORITIES = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"]
INSTRUCT = ["DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"]
MODES = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"]
WORDS = ["furiously", "quickly", "carefully", "blithely", "slyly", "final", "ironic",
         "pending", "regular", "express", "bold", "even", "special", "requests", "deposits",
         "accounts", "packages", "theodolites", "pinto", "beans", "foxes", "ideas"]
SIZES = [1, 3, 5, 9, 14, 15, 19, 23, 36, 45, 49, 7, 11, 22, 30, 41]
# suppliers' nations in turn: GERMANY, CANADA, SAUDI ARABIA, FRANCE, BRAZIL, ... (Q2, Q7, Q8,
# Q11, Q20, Q21 name them)
SUPPLIER_NATIONS = [7, 3, 20, 6, 2, 12, 8, 18, 19, 24, 1, 21, 22, 23, 9]
START = datetime.date(1992, 1, 1)
END = datetime.date(1998, 8, 2)


def text(rnd, n):
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def rows(sf=1.0, seed=15):
    """{table: [tuple, ...]}, the same for the same <sf> and <seed>."""
    rnd = random.Random(seed)
    nsupp, npart, ncust, nord = int(20 * sf), int(200 * sf), int(150 * sf), int(1500 * sf)
    out = {t: [] for t in TABLES}
    out["region"] = [(i, r, text(rnd, 5)) for i, r in enumerate(REGIONS)]
    out["nation"] = [(i, n, r, text(rnd, 6)) for i, (n, r) in enumerate(NATIONS)]
    for s in range(1, nsupp + 1):
        comment = text(rnd, 6)
        if s % 7 == 3:
            comment += " Customer unhappy Complaints noted"
        nk = SUPPLIER_NATIONS[s % len(SUPPLIER_NATIONS)]    # (every query's nations)
        out["supplier"].append((s, f"Supplier#{s:09d}", text(rnd, 2), nk,
                                f"{10 + nk}-{rnd.randrange(100, 999)}-{rnd.randrange(100, 999)}"
                                f"-{rnd.randrange(1000, 9999)}",
                                round(rnd.uniform(-999.99, 9999.99), 2), comment))
    for p in range(1, npart + 1):
        name = " ".join(rnd.sample(COLORS, 5))
        m = rnd.randrange(1, 6)
        brand = f"Brand#{m}{rnd.randrange(1, 6)}"
        ptype = f"{rnd.choice(TYPES1)} {rnd.choice(TYPES2)} {rnd.choice(TYPES3)}"
        size = rnd.choice(SIZES)
        container = f"{rnd.choice(CONT1)} {rnd.choice(CONT2)}"
        if p % 9 == 0:      # (Q17, Q19)
            brand, container = rnd.choice([("Brand#23", "MED BOX"), ("Brand#12", "SM CASE"),
                                           ("Brand#34", "LG BOX")])
            size = rnd.randrange(1, 6)
        elif p % 10 == 0:   # (Q8)
            ptype = "ECONOMY ANODIZED STEEL"
        elif p % 7 == 0:    # (Q2)
            ptype, size = ptype.rsplit(" ", 1)[0] + " BRASS", 15
        out["part"].append((p, name, f"Manufacturer#{m}", brand, ptype, size, container,
                            round(900 + (p % 200) + p / 10 % 1000, 2), text(rnd, 2)[:23]))
        for k in range(4):
            out["partsupp"].append((p, (p + k * (nsupp // 4 + 1)) % nsupp + 1,
                                    rnd.randrange(1, 10000), round(rnd.uniform(1, 1000), 2),
                                    text(rnd, 8)))
    for c in range(1, ncust + 1):
        nk = rnd.randrange(25)
        out["customer"].append((c, f"Customer#{c:09d}", text(rnd, 2), nk,
                                f"{10 + nk}-{rnd.randrange(100, 999)}-{rnd.randrange(100, 999)}"
                                f"-{rnd.randrange(1000, 9999)}",
                                round(rnd.uniform(-999.99, 9999.99), 2), rnd.choice(SEGMENTS),
                                text(rnd, 7)))
    days = (END - START).days
    for o in range(1, nord + 1):
        key = o * 4 - 3 if o % 8 else o * 4       # sparse keys, as dbgen's
        cust = rnd.randrange(1, ncust + 1)
        if cust % 3 == 0:                           # a third of the customers never order
            cust = cust - 1 or 1
        odate = START + datetime.timedelta(days=rnd.randrange(days - 151))
        lines, total, statuses = [], 0, set()
        big = o % 40 == 0                            # (Q18: more than 300 items)
        for ln in range(1, 8 if big else rnd.randrange(2, 8)):
            part = rnd.randrange(1, npart + 1)
            supp = (part + rnd.randrange(4) * (nsupp // 4 + 1)) % nsupp + 1
            qty = rnd.randrange(45, 51) if big else rnd.randrange(1, 51)
            price = round(qty * (900 + (part % 200) + part / 10 % 1000) / 10, 2)
            disc, tax = rnd.randrange(0, 11) / 100, rnd.randrange(0, 9) / 100
            ship = odate + datetime.timedelta(days=rnd.randrange(1, 122))
            commit = odate + datetime.timedelta(days=rnd.randrange(30, 91))
            receipt = ship + datetime.timedelta(days=rnd.randrange(1, 31))
            flag = (rnd.choice("RA") if receipt <= datetime.date(1995, 6, 17) else "N")
            status = "O" if ship > datetime.date(1995, 6, 17) else "F"
            statuses.add(status)
            total += price * (1 + tax) * (1 - disc)
            lines.append((key, part, supp, ln, qty, price, disc, tax, flag, status, ship,
                          commit, receipt, rnd.choice(INSTRUCT), rnd.choice(MODES),
                          text(rnd, 3)[:44]))
        ostatus = "F" if statuses == {"F"} else "O" if statuses == {"O"} else "P"
        comment = text(rnd, 5)
        if o % 13 == 0:
            comment += " special requests"
        out["orders"].append((key, cust, ostatus, round(total, 2), odate,
                              rnd.choice(PRIORITIES), f"Clerk#{rnd.randrange(1, 1000):09d}",
                              0, comment))
        out["lineitem"].extend(lines)
    return out


def insert_sql(table, batch):
    def lit(v):
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        if isinstance(v, datetime.date):
            return f"'{v.isoformat()}'"
        return repr(v)
    return f"INSERT INTO {table} VALUES " + ", ".join(
        "(" + ", ".join(lit(v) for v in r) + ")" for r in batch)


QUERIES = {
    1: """SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty,
 sum(l_extendedprice) AS sum_base_price, sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
 sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, avg(l_quantity) AS avg_qty,
 avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc, count(*) AS count_order
FROM lineitem WHERE l_shipdate <= date '1998-12-01' - interval '90' day
GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
    2: """SELECT s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
FROM part, supplier, partsupp, nation, region
WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND p_size = 15
 AND p_type LIKE '%BRASS' AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
 AND r_name = 'EUROPE' AND ps_supplycost = (
  SELECT min(ps_supplycost) FROM partsupp, supplier, nation, region
  WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND s_nationkey = n_nationkey
   AND n_regionkey = r_regionkey AND r_name = 'EUROPE')
ORDER BY s_acctbal DESC, n_name, s_name, p_partkey LIMIT 100""",
    3: """SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate,
 o_shippriority
FROM customer, orders, lineitem
WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
 AND o_orderdate < date '1995-03-15' AND l_shipdate > date '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority ORDER BY revenue DESC, o_orderdate LIMIT 10""",
    4: """SELECT o_orderpriority, count(*) AS order_count FROM orders
WHERE o_orderdate >= date '1993-07-01' AND o_orderdate < date '1993-07-01' + interval '3' month
 AND EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate)
GROUP BY o_orderpriority ORDER BY o_orderpriority""",
    5: """SELECT n_name, sum(l_extendedprice * (1 - l_discount)) AS revenue
FROM customer, orders, lineitem, supplier, nation, region
WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey
 AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
 AND r_name = 'ASIA' AND o_orderdate >= date '1994-01-01'
 AND o_orderdate < date '1994-01-01' + interval '1' year
GROUP BY n_name ORDER BY revenue DESC""",
    6: """SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1994-01-01' + interval '1' year
 AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND l_quantity < 24""",
    7: """SELECT supp_nation, cust_nation, l_year, sum(volume) AS revenue FROM (
 SELECT n1.n_name AS supp_nation, n2.n_name AS cust_nation,
  extract(year FROM l_shipdate) AS l_year, l_extendedprice * (1 - l_discount) AS volume
 FROM supplier, lineitem, orders, customer, nation n1, nation n2
 WHERE s_suppkey = l_suppkey AND o_orderkey = l_orderkey AND c_custkey = o_custkey
  AND s_nationkey = n1.n_nationkey AND c_nationkey = n2.n_nationkey
  AND ((n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY')
   OR (n1.n_name = 'GERMANY' AND n2.n_name = 'FRANCE'))
  AND l_shipdate BETWEEN date '1995-01-01' AND date '1996-12-31') AS shipping
GROUP BY supp_nation, cust_nation, l_year ORDER BY supp_nation, cust_nation, l_year""",
    8: """SELECT o_year, sum(CASE WHEN nation = 'BRAZIL' THEN volume ELSE 0 END) / sum(volume)
 AS mkt_share FROM (
 SELECT extract(year FROM o_orderdate) AS o_year, l_extendedprice * (1 - l_discount) AS volume,
  n2.n_name AS nation
 FROM part, supplier, lineitem, orders, customer, nation n1, nation n2, region
 WHERE p_partkey = l_partkey AND s_suppkey = l_suppkey AND l_orderkey = o_orderkey
  AND o_custkey = c_custkey AND c_nationkey = n1.n_nationkey AND n1.n_regionkey = r_regionkey
  AND r_name = 'AMERICA' AND s_nationkey = n2.n_nationkey
  AND o_orderdate BETWEEN date '1995-01-01' AND date '1996-12-31'
  AND p_type = 'ECONOMY ANODIZED STEEL') AS all_nations
GROUP BY o_year ORDER BY o_year""",
    9: """SELECT nation, o_year, sum(amount) AS sum_profit FROM (
 SELECT n_name AS nation, extract(year FROM o_orderdate) AS o_year,
  l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity AS amount
 FROM part, supplier, lineitem, partsupp, orders, nation
 WHERE s_suppkey = l_suppkey AND ps_suppkey = l_suppkey AND ps_partkey = l_partkey
  AND p_partkey = l_partkey AND o_orderkey = l_orderkey AND s_nationkey = n_nationkey
  AND p_name LIKE '%green%') AS profit
GROUP BY nation, o_year ORDER BY nation, o_year DESC""",
    10: """SELECT c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) AS revenue, c_acctbal,
 n_name, c_address, c_phone, c_comment
FROM customer, orders, lineitem, nation
WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate >= date '1993-10-01'
 AND o_orderdate < date '1993-10-01' + interval '3' month AND l_returnflag = 'R'
 AND c_nationkey = n_nationkey
GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
ORDER BY revenue DESC, c_custkey LIMIT 20""",
    11: """SELECT ps_partkey, sum(ps_supplycost * ps_availqty) AS value
FROM partsupp, supplier, nation
WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY'
GROUP BY ps_partkey HAVING sum(ps_supplycost * ps_availqty) > (
 SELECT sum(ps_supplycost * ps_availqty) * 0.0001 FROM partsupp, supplier, nation
 WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY')
ORDER BY value DESC, ps_partkey""",
    12: """SELECT l_shipmode,
 sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END)
  AS high_line_count,
 sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END)
  AS low_line_count
FROM orders, lineitem
WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP')
 AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
 AND l_receiptdate >= date '1994-01-01' AND l_receiptdate < date '1994-01-01' + interval '1' year
GROUP BY l_shipmode ORDER BY l_shipmode""",
    13: """SELECT c_count, count(*) AS custdist FROM (
 SELECT c_custkey, count(o_orderkey) FROM customer LEFT OUTER JOIN orders
  ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
 GROUP BY c_custkey) AS c_orders (c_custkey, c_count)
GROUP BY c_count ORDER BY custdist DESC, c_count DESC""",
    14: """SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount)
 ELSE 0 END) / sum(l_extendedprice * (1 - l_discount)) AS promo_revenue
FROM lineitem, part
WHERE l_partkey = p_partkey AND l_shipdate >= date '1995-09-01'
 AND l_shipdate < date '1995-09-01' + interval '1' month""",
    15: """WITH revenue0 (supplier_no, total_revenue) AS (
 SELECT l_suppkey, sum(l_extendedprice * (1 - l_discount)) FROM lineitem
 WHERE l_shipdate >= date '1996-01-01' AND l_shipdate < date '1996-01-01' + interval '3' month
 GROUP BY l_suppkey)
SELECT s_suppkey, s_name, s_address, s_phone, total_revenue FROM supplier, revenue0
WHERE s_suppkey = supplier_no AND total_revenue = (SELECT max(total_revenue) FROM revenue0)
ORDER BY s_suppkey""",
    16: """SELECT p_brand, p_type, p_size, count(DISTINCT ps_suppkey) AS supplier_cnt
FROM partsupp, part
WHERE p_partkey = ps_partkey AND p_brand <> 'Brand#45' AND p_type NOT LIKE 'MEDIUM POLISHED%'
 AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9)
 AND ps_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Customer%Complaints%')
GROUP BY p_brand, p_type, p_size ORDER BY supplier_cnt DESC, p_brand, p_type, p_size""",
    17: """SELECT sum(l_extendedprice) / 7.0 AS avg_yearly FROM lineitem, part
WHERE p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container = 'MED BOX'
 AND l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem WHERE l_partkey = p_partkey)""",
    18: """SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity)
FROM customer, orders, lineitem
WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey
  HAVING sum(l_quantity) > 300)
 AND c_custkey = o_custkey AND o_orderkey = l_orderkey
GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
ORDER BY o_totalprice DESC, o_orderdate LIMIT 100""",
    19: """SELECT sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem, part
WHERE (p_partkey = l_partkey AND p_brand = 'Brand#12'
  AND p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG') AND l_quantity >= 1
  AND l_quantity <= 1 + 10 AND p_size BETWEEN 1 AND 5 AND l_shipmode IN ('AIR', 'REG AIR')
  AND l_shipinstruct = 'DELIVER IN PERSON')
 OR (p_partkey = l_partkey AND p_brand = 'Brand#23'
  AND p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK') AND l_quantity >= 10
  AND l_quantity <= 10 + 10 AND p_size BETWEEN 1 AND 10 AND l_shipmode IN ('AIR', 'REG AIR')
  AND l_shipinstruct = 'DELIVER IN PERSON')
 OR (p_partkey = l_partkey AND p_brand = 'Brand#34'
  AND p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG') AND l_quantity >= 20
  AND l_quantity <= 20 + 10 AND p_size BETWEEN 1 AND 15 AND l_shipmode IN ('AIR', 'REG AIR')
  AND l_shipinstruct = 'DELIVER IN PERSON')""",
    20: """SELECT s_name, s_address FROM supplier, nation
WHERE s_suppkey IN (
 SELECT ps_suppkey FROM partsupp WHERE ps_partkey IN (
  SELECT p_partkey FROM part WHERE p_name LIKE 'forest%')
 AND ps_availqty > (SELECT 0.5 * sum(l_quantity) FROM lineitem
  WHERE l_partkey = ps_partkey AND l_suppkey = ps_suppkey AND l_shipdate >= date '1994-01-01'
   AND l_shipdate < date '1994-01-01' + interval '1' year))
 AND s_nationkey = n_nationkey AND n_name = 'CANADA'
ORDER BY s_name""",
    21: """SELECT s_name, count(*) AS numwait FROM supplier, lineitem l1, orders, nation
WHERE s_suppkey = l1.l_suppkey AND o_orderkey = l1.l_orderkey AND o_orderstatus = 'F'
 AND l1.l_receiptdate > l1.l_commitdate
 AND EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey
  AND l2.l_suppkey <> l1.l_suppkey)
 AND NOT EXISTS (SELECT * FROM lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey
  AND l3.l_suppkey <> l1.l_suppkey AND l3.l_receiptdate > l3.l_commitdate)
 AND s_nationkey = n_nationkey AND n_name = 'SAUDI ARABIA'
GROUP BY s_name ORDER BY numwait DESC, s_name LIMIT 100""",
    22: """SELECT cntrycode, count(*) AS numcust, sum(c_acctbal) AS totacctbal FROM (
 SELECT substring(c_phone FROM 1 FOR 2) AS cntrycode, c_acctbal FROM customer
 WHERE substring(c_phone FROM 1 FOR 2) IN ('13', '31', '23', '29', '30', '18', '17')
  AND c_acctbal > (SELECT avg(c_acctbal) FROM customer WHERE c_acctbal > 0.00
   AND substring(c_phone FROM 1 FOR 2) IN ('13', '31', '23', '29', '30', '18', '17'))
  AND NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey)) AS custsale
GROUP BY cntrycode ORDER BY cntrycode""",
}
