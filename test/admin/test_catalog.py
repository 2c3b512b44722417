"""
The catalog (issue 6, "Catalog from the authoritative shard") against real servers:

- the loader's query (cat_load_sql) run on a storefront schema with enums, domains,
  identity/serial columns, a partitioned table, inheritance, views and INCLUDE keys; the
  rows go through cat_build() and the shared-memory image (test/unit/catalog_dump), and
  what the image readers see is checked;
- the admin process loads and publishes the catalog at start and after each topology
  revision, rejects a topology whose shard-key column type has no routing rule (V4) and
  reports a unique GSI whose lookup table's primary key no longer matches (V11).
"""
import json
import subprocess
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

REPO = Path(__file__).resolve().parent.parent.parent
DUMP = REPO / "test" / "unit" / "catalog_dump"
SCHEMA = (Path(__file__).resolve().parent / "storefront_catalog.sql").read_text()


def load_dump(pg_cluster, server, dbname):
    """Run the loader's query on <server>/<dbname>; return catalog_dump's lines."""
    assert DUMP.exists(), "build first: make (test/unit/catalog_dump)"
    sql = subprocess.run([str(DUMP), "--sql"], capture_output=True, text=True,
                         check=True).stdout
    rows = pg_cluster.sql(server, sql, dbname=dbname)
    data = "".join("\x1f".join("\\N" if v is None else v for v in r) + "\n" for r in rows)
    p = subprocess.run([str(DUMP), dbname], input=data, capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_loader_on_storefront(pg_cluster, cluster_db):
    pg_cluster.sql("shard-a", SCHEMA, dbname=cluster_db)
    lines = load_dump(pg_cluster, "shard-a", cluster_db)
    facts = set(lines)
    assert lines[0].startswith(f"db {cluster_db} ")
    # relation kinds; temporary tables and the store schema are not read
    for rel, kind in [("customers", "table"), ("events", "partitioned table"),
                      ("v_orders", "view"), ("mv_counts", "materialized view"),
                      ("invoice_no", "sequence"), ("orders_pkey", "index")]:
        assert f"table public.{rel} {kind} partition=0" in facts, rel
    assert "table public.events_2024 table partition=1" in facts
    assert not any("scratch" in l or "__neki" in l for l in lines)
    # columns in attnum order, the dropped one left out
    cols = [l.split()[2:4] for l in lines if l.startswith("col public.customers ")]
    assert cols == [["1", "id"], ["2", "email"], ["4", "name"], ["5", "country"]]
    # identity (BY DEFAULT = 2, ALWAYS = 1) and serial columns with their sequences
    assert ("col public.customers 1 id int8 typmod=-1 notnull=1 ident=2 default=0 gen=0 "
            "seq=public.customers_id_seq ks=int8") in facts
    assert ("col public.orders 2 id int8 typmod=-1 notnull=1 ident=1 default=0 gen=0 "
            "seq=public.orders_id_seq ks=int8") in facts
    assert ("col public.order_items 3 line int4 typmod=-1 notnull=1 ident=0 default=1 gen=0 "
            "seq=public.order_items_line_seq ks=int4") in facts
    assert "seq public.customers_id_seq cache=20 type=20" in facts
    assert "seq public.invoice_no cache=50 type=23" in facts
    # routing types through enums and domains (over domains); none for arrays and point
    assert ("col public.orders 3 status order_status typmod=-1 notnull=1 ident=0 default=1 "
            "gen=0 seq=- ks=enum") in facts
    assert "col public.customers 2 email email typmod=-1 notnull=0 ident=0 default=0 gen=0 " \
           "seq=- ks=text" in facts
    assert any(l.startswith("col public.orders 4 total money_amount ") and l.endswith(
        "ks=numeric") for l in lines)
    assert any(l.startswith("col public.orders 5 tags _int8 ") and l.endswith("ks=-")
               for l in lines)
    assert any(l.startswith("col public.orders 6 total_cents ") and " gen=1 " in l
               for l in lines)
    assert any(l.startswith("col public.order_items 4 sku varchar typmod=68 ") for l in lines)
    # types: enum labels in sort order (a value added BEFORE another), domain chains
    assert "type public.order_status 3 base=- elem=- labels=new,cancelled,paid,shipped" in facts
    assert "type public.email 2 base=short_text elem=- labels=" in facts
    assert "type public.short_text 2 base=text elem=- labels=" in facts
    assert "type pg_catalog._int8 0 base=- elem=int8 labels=" in facts
    # keys: PK first, INCLUDE columns left out, partial and expression unique indexes left out
    assert "key public.orders orders_pkey p customer_id,id" in facts
    assert "key public.order_items order_items_pkey p customer_id,order_id,line" in facts
    assert [l for l in lines if l.startswith("key public.customers ")] == [
        "key public.customers customers_pkey p id",
        "key public.customers customers_email_key u email"]
    assert not any(l.startswith("key public.products ") for l in lines)
    # partitions and inheritance children
    assert "child public.events public.events_2024" in facts
    assert "child public.events public.events_2025" in facts
    assert "child public.audit public.audit_orders" in facts
    # the relations a view or materialized view reads (rows 'v')
    assert "child public.v_orders public.orders" in facts
    assert "child public.mv_counts public.orders" in facts
    # a second schema (search_path lookups)
    assert "table app.customers table partition=0" in facts


# ---- through the admin process ----------------------------------------------------------

def lit(value):
    return "'" + value.replace("'", "''") + "'"


def set_sql(doc, overwrite=True):
    return (f"SELECT * FROM __neki.set_data_topology({lit(json.dumps(doc))}, "
            f"{'true' if overwrite else 'false'})")


def validate_sql(doc):
    return (f"SELECT path, rule, message FROM __neki.validate_data_topology("
            f"{lit(json.dumps(doc))}, overwrite => true)")


def run(inst, sql):
    with inst.connect(dbname="neki", user="postgres", port=inst.admin_port) as conn:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description is not None else None


def run_err(inst, sql):
    with pytest.raises(psycopg.Error) as ei:
        run(inst, sql)
    return ei.value


def storefront(db):
    """etc/topology-storefront.json for database <db>, authority on shard-a."""
    doc = json.loads((REPO / "etc" / "topology-storefront.json").read_text())
    doc["databases"] = {db: doc["databases"]["store"]}
    doc["shard_groups"][0]["key_ranges"][0]["shard_uid"] = "shard-a"
    return doc


def with_table(doc, db, table, index, column):
    """<doc> plus <table> in group catalog, sharded by a new xxhash index on <column>."""
    doc = json.loads(json.dumps(doc))
    doc["databases"][db]["schemas"]["public"]["tables"][table] = {
        "shard_group": "catalog", "shard_index": index}
    doc["shard_indexes"][index] = {"type": "xxhash", "columns": [column]}
    return doc


def published(inst, version, ndbs):
    word = "database" if ndbs == 1 else "databases"
    inst.wait_log(rf"published catalog version {version} \({ndbs} {word}\)", timeout=10)


def test_admin_publishes_catalog_and_applies_v4_v11(pg_cluster, cluster_db, neki):
    db = cluster_db
    pg_cluster.sql("shard-a", SCHEMA, dbname=db)
    inst = neki(settings={"workers": 1, "admin_users": "postgres"},
                shards=pg_cluster.shards_section(dbname=db))
    published(inst, 1, 0)			# at start, no topology yet
    doc = storefront(db)
    assert run(inst, set_sql(doc, overwrite=False)) == [(True, 1)]
    published(inst, 2, 1)			# after the revision: the storefront's catalog

    # V4: a shard key of type point has no routing rule -> rejected at apply
    bad = with_table(doc, db, "products", "by_loc", "loc")
    e = run_err(inst, set_sql(bad))
    path = f"databases.{db}.schemas.public.tables.products"
    assert e.diag.sqlstate == "22023"
    assert e.diag.message_primary == (
        f'invalid data topology: {path}: shard key column "loc" of table "public.products" '
        f'has type point, which has no routing rule')
    assert e.diag.message_detail == "Broken rule: tables/shard-key-type."
    rows = run(inst, validate_sql(bad))
    assert (path, "tables/shard-key-type") in [(r[0], r[1]) for r in rows]
    assert run(inst, "SELECT __neki.get_data_topology_revision()") == [(1,)]

    # a table created directly on the shard is known after the next topology change
    pg_cluster.sql("shard-a", "CREATE TABLE gadgets (gid point)", dbname=db)
    gadgets = with_table(doc, db, "gadgets", "by_gid", "gid")
    assert run(inst, set_sql(doc)) == [(True, 2)]
    published(inst, 3, 1)
    e = run_err(inst, set_sql(gadgets))
    assert 'shard key column "gid" of table "public.gadgets" has type point' in \
        e.diag.message_primary

    # V11: the lookup table's PK no longer matches the unique GSI's columns -> disabled
    assert [r for r in run(inst, validate_sql(doc)) if r[1] == "gsi/lookup-pk"] == []
    pg_cluster.sql("shard-a", "ALTER TABLE orders_by_id DROP CONSTRAINT orders_by_id_pkey, "
                   "ADD PRIMARY KEY (customer_id, id)", dbname=db)
    assert run(inst, set_sql(doc)) == [(True, 3)]	# V11 never blocks an apply
    published(inst, 4, 1)
    rows = [r for r in run(inst, validate_sql(doc)) if r[1] == "gsi/lookup-pk"]
    assert rows == [(f"databases.{db}.global_secondary_indexes.orders_by_id", "gsi/lookup-pk",
                     'unique global secondary index "orders_by_id" is disabled: the primary '
                     'key of lookup table "orders_by_id" is not its columns')]
    inst.wait_log(r'global_secondary_indexes\.orders_by_id: unique global secondary index '
                  r'"orders_by_id" is disabled')
