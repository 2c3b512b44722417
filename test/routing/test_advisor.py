"""
__neki.check_schema([database]), the schema readiness advisor (issue 23): the seeds' own
examples (uuidv7() keys, the shard key leading a composite primary key, co-located child
tables with foreign keys that carry the key) give no finding; each broken variant gives
exactly the expected finding. The schemas are created on the authoritative shard, where the
advisor reads pg_catalog; the topology is applied through neki. Real Postgres, psycopg.
"""
import pytest

from test_fleet import quarter_ranges as ranges
from test_routing import psycopg, routing_neki, sharded_database, Store


def topology(db):
    return {
        "databases": {db: {"schemas": {"public": {
            "tables": {"tenants": {"shard_group": "tenant_data"},
                       "orders": {"shard_group": "tenant_data"},
                       "order_items": {"shard_group": "tenant_data"},
                       "events": {"shard_group": "event_data"},
                       "plans": {"shard_group": "tier_data"}},
            "reference_tables": {"countries": {"shard_groups": ["tenant_data"]}},
        }}}},
        "shard_groups": [
            {"uid": "authoritative", "key_ranges": [{"shard_uid": "auth"}]},
            {"uid": "tenant_data", "default_shard_index": "by_tenant", "key_ranges": ranges()},
            {"uid": "event_data", "default_shard_index": "by_event", "key_ranges": ranges()},
            {"uid": "tier_data", "default_shard_index": "by_tier", "key_ranges": ranges()},
        ],
        "shard_indexes": {"by_tenant": {"type": "xxhash", "columns": ["tenant_id"]},
                          "by_event": {"type": "xxhash", "columns": ["id"]},
                          "by_tier": {"type": "xxhash", "columns": ["tier"]}},
        "authoritative_shard_group": "authoritative",
        "default_shard_group": "authoritative",
    }


GOOD = {
    "countries": "CREATE TABLE countries (code text PRIMARY KEY, name text NOT NULL)",
    "tenants": "CREATE TABLE tenants (tenant_id bigint PRIMARY KEY, country text "
               "REFERENCES countries, created timestamptz NOT NULL DEFAULT now()); "
               "CREATE INDEX ON tenants (country)",
    "events": "CREATE TABLE events (id uuid DEFAULT uuidv7() PRIMARY KEY, "
              "tenant_id bigint NOT NULL)",
    "orders": "CREATE TABLE orders (tenant_id bigint NOT NULL REFERENCES tenants, "
              "id bigint GENERATED ALWAYS AS IDENTITY, PRIMARY KEY (tenant_id, id))",
    "order_items": "CREATE TABLE order_items (tenant_id bigint NOT NULL, order_id bigint "
                   "NOT NULL, line int NOT NULL, id uuid DEFAULT uuidv7(), "
                   "PRIMARY KEY (tenant_id, order_id, line), "
                   "FOREIGN KEY (tenant_id, order_id) REFERENCES orders)",
    "plans": "CREATE TABLE plans (tier text PRIMARY KEY CHECK (tier IN ('free', 'pro')))",
}

# table -> (its broken definition, extra DDL run after it, {(object, rule, severity)})
BROKEN = {
    "pk": ("order_items", "CREATE TABLE order_items (tenant_id bigint NOT NULL, order_id "
           "bigint NOT NULL, line int NOT NULL, PRIMARY KEY (order_id, line, tenant_id), "
           "FOREIGN KEY (tenant_id, order_id) REFERENCES orders)",
           "CREATE INDEX ON order_items (tenant_id, order_id)",
           {("public.order_items", "pk-leads-with-shard-key", "warning")}),
    "uuidv4": ("events", "CREATE TABLE events (id uuid DEFAULT gen_random_uuid() PRIMARY KEY, "
               "tenant_id bigint NOT NULL)", None,
               {("public.events.id", "uuidv4-default", "warning")}),
    "sequence": ("tenants", "CREATE TABLE tenants (tenant_id bigserial PRIMARY KEY, "
                 "country text REFERENCES countries)", "CREATE INDEX ON tenants (country)",
                 {("public.tenants.tenant_id", "sequence-on-shard-key", "warning")}),
    "jsonb": ("plans", "CREATE TABLE plans (tier jsonb PRIMARY KEY)", None,
              {("public.plans.tier", "shard-key-type", "error")}),
    "enum": ("plans", "CREATE TABLE plans (tier tier_t PRIMARY KEY)", None,
             {("public.plans.tier", "enum-shard-key", "info")}),
    "mismatch": ("tenants", "CREATE TABLE tenants (tenant_id int PRIMARY KEY, country text "
                 "REFERENCES countries)", "CREATE INDEX ON tenants (country)",
                 {("public.tenants.tenant_id", "shard-key-type-mismatch", "warning"),
                  ("public.orders.tenant_id", "shard-key-type-mismatch", "warning"),
                  ("public.order_items.tenant_id", "shard-key-type-mismatch", "warning")}),
    "timestamp": ("tenants", "CREATE TABLE tenants (tenant_id bigint PRIMARY KEY, country "
                  "text REFERENCES countries, created timestamp NOT NULL DEFAULT now())",
                  "CREATE INDEX ON tenants (country)",
                  {("public.tenants.created", "timestamp-without-time-zone", "info")}),
    "unique": ("events", "CREATE TABLE events (id uuid DEFAULT uuidv7() PRIMARY KEY, "
               "tenant_id bigint NOT NULL, slug text, UNIQUE (slug))", None,
               {("public.events.events_slug_key", "unique-without-shard-key", "warning")}),
    "fk-index": ("order_items", "CREATE TABLE order_items (tenant_id bigint NOT NULL, "
                 "order_id bigint NOT NULL, line int NOT NULL, PRIMARY KEY (tenant_id, line, "
                 "order_id), CONSTRAINT items_order FOREIGN KEY (tenant_id, order_id) "
                 "REFERENCES orders)", None,
                 {("public.order_items.items_order", "fk-not-indexed", "warning")}),
    "fk-group": ("order_items", "CREATE TABLE order_items (tenant_id bigint NOT NULL, "
                 "order_id bigint NOT NULL, line int NOT NULL, event_id uuid CONSTRAINT "
                 "items_event REFERENCES events, PRIMARY KEY (tenant_id, order_id, line), "
                 "FOREIGN KEY (tenant_id, order_id) REFERENCES orders)",
                 "CREATE INDEX ON order_items (event_id)",
                 {("public.order_items.items_event", "fk-across-shard-groups", "error")}),
    "fk-key": ("order_items", "CREATE TABLE order_items (tenant_id bigint NOT NULL, "
               "order_id bigint NOT NULL, line int NOT NULL, PRIMARY KEY (tenant_id, "
               "order_id, line), CONSTRAINT items_order FOREIGN KEY (order_id) "
               "REFERENCES orders (id))", "CREATE INDEX ON order_items (order_id)",
               {("public.order_items.items_order", "fk-without-shard-key", "error")}),
}


@pytest.fixture(scope="module")
def adv(pg_cluster):
    with sharded_database(pg_cluster, "advise") as db, \
            routing_neki(pg_cluster, db, topology(db), Store) as st:
        st.cluster.sql("auth", "CREATE TYPE tier_t AS ENUM ('free', 'pro')", dbname=db)
        yield st


def build(st, replace=None):
    """(Re)create the good schema on the authoritative shard, <replace> = (table, sql,
    extra) swapped in."""
    order = ["countries", "tenants", "events", "orders", "order_items", "plans"]
    sql = ["DROP TABLE IF EXISTS " + ", ".join(reversed(order)) + " CASCADE"]
    for t in order:
        if replace and replace[0] == t:
            sql.append(replace[1])
            if replace[2]:
                sql.append(replace[2])
        else:
            sql.append(GOOD[t])
    for s in sql:
        for one in s.split("; "):
            st.cluster.sql("auth", one, dbname=st.db)


def findings(st):
    rows = st.run(f"SELECT * FROM __neki.check_schema('{st.db}')")
    for r in rows:
        assert r[3], r          # every finding has advice
    return {(o, rule, sev) for o, rule, sev, _ in rows}


def test_seed_examples_have_no_finding(adv):
    build(adv)
    assert findings(adv) == set()
    # without an argument: every database of the topology (this one)
    assert adv.run("SELECT * FROM __neki.check_schema()") == []


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_variant_gives_its_finding(adv, case):
    table, sql, extra, want = BROKEN[case]
    if case == "fk-key":
        build(adv)      # orders needs a unique id for the reference
        adv.cluster.sql("auth", "ALTER TABLE orders ADD CONSTRAINT orders_id_key UNIQUE (id)",
                        dbname=adv.db)
        adv.cluster.sql("auth", "DROP TABLE order_items", dbname=adv.db)
        adv.cluster.sql("auth", sql, dbname=adv.db)
        adv.cluster.sql("auth", extra, dbname=adv.db)
        want = want | {("public.orders.orders_id_key", "unique-without-shard-key", "warning")}
    else:
        build(adv, (table, sql, extra))
    assert findings(adv) == want


def test_unknown_database(adv):
    with pytest.raises(psycopg.Error) as ei:
        adv.run("SELECT * FROM __neki.check_schema('nope')")
    assert ei.value.diag.sqlstate == "3D000"


def ddl_notices(st, sql):
    notices = []
    with st.connect(autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append((d.message_primary, d.message_hint)))
        psycopg.ClientCursor(conn).execute(sql)
    return [n for n in notices if not n[0].startswith("DDL is committed")]


def test_ddl_breaking_a_rule_gets_a_notice(adv):
    """DDL through neki: a NOTICE (with the advice as HINT) per finding about its table."""
    build(adv)
    ddl_notices(adv, "DROP TABLE IF EXISTS events")
    got = ddl_notices(adv, "CREATE TABLE events (id uuid DEFAULT gen_random_uuid() PRIMARY KEY"
                           ", tenant_id bigint NOT NULL)")
    assert len(got) == 1, got
    msg, hint = got[0]
    assert msg == "public.events.id breaks the schema rule uuidv4-default " \
                  "(__neki.check_schema)"
    assert "uuidv7()" in hint
    # the good definition: no advice
    ddl_notices(adv, "DROP TABLE events")
    assert ddl_notices(adv, GOOD["events"]) == []
