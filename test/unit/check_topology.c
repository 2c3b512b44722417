/*
 * check_topology.c - unit tests for the topology model (src/topology): one case per
 * validation rule with its exact JSON path, rule and message; force / pre-existing
 * semantics; the set_data_topology error form; resolution order for tables and sequences;
 * the canonical writer; the storefront example. Image tests are in check_topoimage.c.
 *
 * JSON in this file is written with single quotes and converted before parsing.
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/topology.h"
#include "neki/topology_image.h"
#include "suites.h"
#include "topo_fixtures.h"

/* One rule: a document that breaks exactly it, and the one finding it must produce. */
struct rule_case {
	const char *json;
	const char *path;
	const char *rule;
	const char *sqlstate;
	const char *message;	/* NULL: not checked */
};

#define AUTH "{'uid':'auth','key_ranges':[{'shard_uid':'auth'}]}"
#define TAIL "'authoritative_shard_group':'auth'"
#define G2(idx) "{'uid':'g','default_shard_index':'" idx "','key_ranges':[" \
	"{'shard_uid':'shard-a','end':'80'},{'shard_uid':'shard-b','start':'80'}]}"
#define IDX(name, body) "'shard_indexes':{'" name "':" body "}"
#define ONE_GROUP(ranges) "{'shard_groups':[" AUTH ",{'uid':'g','default_shard_index':'h'," \
	"'key_ranges':" ranges "}]," IDX("h", "{'type':'xxhash','columns':['id']}") "," TAIL "}"
#define RANGE_GROUP(ranges) "{'shard_groups':[" AUTH ",{'uid':'g','default_shard_index':'h'," \
	"'key_ranges':" ranges "}]," IDX("h", "{'type':'range','columns':['id']}") "," TAIL "}"
#define INDEX_DOC(body) "{'shard_groups':[" AUTH ",{'uid':'g','default_shard_index':'h'," \
	"'key_ranges':[{'shard_uid':'shard-a'}]}]," IDX("h", body) "," TAIL "}"
#define DB_DOC(schema) "{'shard_groups':[" AUTH "," G2("h") "]," \
	IDX("h", "{'type':'xxhash','columns':['tenant_id']}") "," TAIL \
	",'databases':{'db':{'schemas':{'s':" schema "}}}}"
#define GSI_DOC(users, lookup_group, gsi) "{'shard_groups':[" AUTH "," G2("h") "]," \
	IDX("h", "{'type':'xxhash','columns':['tenant_id']}") "," TAIL \
	",'databases':{'db':{'schemas':{'s':{'tables':{'users':" users "," \
	"'users_by_email':{'shard_group':'" lookup_group "'}}}}," \
	"'global_secondary_indexes':{'by_email':" gsi "}}}}"
#define USERS_SI(cols) "{'shard_group':'g','secondary_indexes':[{'name':'by_email'," \
	"'columns':" cols "}]}"
#define GSI_OK_BODY(extra) "{'schema':'s','table':'users_by_email','owner_table':'users'," \
	"'columns':['email'],'unique':true" extra "}"

#define OVERRIDE_DOC "{'shard_groups':[" AUTH "," G2("h") "]," "'shard_indexes':{'h':{'type':" \
	"'xxhash','columns':['tenant_id']},'m':{'type':'modulo','columns':['id'],'index_params':" \
	"{'modulus':4}}}," TAIL ",'databases':{'db':{'schemas':{'s':{'tables':{'t':" \
	"{'shard_group':'g','shard_index':'m'}}}}}}}"
#define AMBIGUOUS_DOC "{'shard_groups':[" AUTH "]," TAIL ",'databases':{'db':" \
	"{'default_shard_group':'auth','schemas':{'s':{'tables':{'lk':{},'users':{}}}," \
	"'s2':{'tables':{'lk':{}}}},'global_secondary_indexes':{'x':{'table':'lk'," \
	"'owner_table':'users','columns':['a'],'owner_sk_columns':['a'],'unique':true}}}}}"

static const struct rule_case rule_cases[] = {
	/* 0: JSON structure */
	{ "{", "(root)", "json/syntax", "22P02", NULL },
	{ "{'shard_groups':[" AUTH "]," TAIL ",'shard_group':'x'}", "shard_group",
	  "json/unknown-key", "22023", "unknown key \"shard_group\"" },
	{ ONE_GROUP("[{'shard_uid':'shard-a','strat':'40'}]"), "shard_groups[1].key_ranges[0].strat",
	  "json/unknown-key", "22023", "unknown key \"strat\"" },
	{ "{'shard_groups':[" AUTH "]," TAIL "," TAIL "}", "authoritative_shard_group",
	  "json/duplicate-key", "22023", "duplicate key \"authoritative_shard_group\"" },
	{ "{'shard_groups':[" AUTH ",{'uid':5,'key_ranges':[{'shard_uid':'shard-a'}]}]," TAIL "}",
	  "shard_groups[1].uid", "json/type", "22023", "must be a string, not a number" },
	/* 5 */
	{ "{'shard_groups':[" AUTH "]}", "authoritative_shard_group", "json/required", "22023",
	  "missing required key \"authoritative_shard_group\"" },
	{ "{'shard_groups':[" AUTH ",{'uid':'g','key_ranges':[{}]}]," TAIL "}",
	  "shard_groups[1].key_ranges[0].shard_uid", "json/required", "22023",
	  "missing required key \"shard_uid\"" },
	{ "{'shard_groups':[" AUTH ",{'uid':'','key_ranges':[{'shard_uid':'shard-a'}]}]," TAIL "}",
	  "shard_groups[1].uid", "json/empty", "22023", "must not be empty" },
	/* shard indexes: V1, V2, expressions, V5 */
	{ INDEX_DOC("{'type':'hash','columns':['id']}"), "shard_indexes.h.type", "shard-index/type",
	  "22023", "unknown shard index type \"hash\": must be xxhash, modulo or range" },
	{ INDEX_DOC("{'type':'xxhash','columns':['a','b']}"), "shard_indexes.h.columns",
	  "shard-index/multi-column", "NK013", "multi-column partitioning indexes are not supported" },
	/* 10 */
	{ INDEX_DOC("{'type':'xxhash','columns':[]}"), "shard_indexes.h.columns",
	  "shard-index/columns", "22023", "a shard index needs exactly one entry in columns" },
	{ INDEX_DOC("{'type':'xxhash','columns':['md5(email)']}"), "shard_indexes.h.columns[0]",
	  "shard-index/expression", "22023", "unsupported shard key expression \"md5(email)\": "
	  "only lower(), upper() and left() calls are supported" },
	{ INDEX_DOC("{'type':'modulo','columns':['id']}"), "shard_indexes.h.index_params",
	  "shard-index/modulus", "22023",
	  "a modulo shard index needs a positive integer index_params.modulus" },
	{ INDEX_DOC("{'type':'modulo','columns':['id'],'index_params':{'modulus':0}}"),
	  "shard_indexes.h.index_params.modulus", "shard-index/modulus", "22023",
	  "a modulo shard index needs a positive integer index_params.modulus" },
	{ INDEX_DOC("{'type':'xxhash','columns':['id'],'index_params':{'modulus':4}}"),
	  "shard_indexes.h.index_params.modulus", "shard-index/params", "22023",
	  "modulus applies only to shard indexes of type modulo" },
	/* 15: key ranges */
	{ ONE_GROUP("[{'shard_uid':'shard-a','end':'40'},{'shard_uid':'shard-b','start':'40x'}]"),
	  "shard_groups[1].key_ranges[1].start", "key-ranges/bound", "22023",
	  "invalid bound \"40x\": expected 1 to 16 hexadecimal digits" },
	{ RANGE_GROUP("[{'shard_uid':'shard-a','end':'0'},{'shard_uid':'shard-b','start':'ff'}]"),
	  "shard_groups[1].key_ranges[1].start", "key-ranges/bound", "22023",
	  "invalid bound \"ff\": the group's shard index is of type range, so bounds are signed "
	  "64-bit decimal integers" },
	{ ONE_GROUP("[{'shard_uid':'shard-a','end':'40'},{'shard_uid':'shard-b','start':'80'}]"),
	  "shard_groups[1].key_ranges[1].start", "key-ranges/gap", "22023",
	  "gap in key ranges: this range starts at \"80\" but the previous one ends at \"40\"" },
	{ ONE_GROUP("[{'shard_uid':'shard-a','end':'80'},{'shard_uid':'shard-b','start':'40'}]"),
	  "shard_groups[1].key_ranges[1].start", "key-ranges/overlap", "22023",
	  "key ranges overlap or are out of order: this range starts at \"40\" but the previous "
	  "one ends at \"80\"" },
	{ ONE_GROUP("[{'shard_uid':'shard-a','end':'40'},{'shard_uid':'shard-b','start':'40',"
		    "'end':'40'},{'shard_uid':'shard-c','start':'40'}]"),
	  "shard_groups[1].key_ranges[1].end", "key-ranges/empty-range", "22023",
	  "end \"40\" must be greater than start \"40\"" },
	/* 20 */
	{ ONE_GROUP("[{'shard_uid':'shard-a','start':'10','end':'80'},{'shard_uid':'shard-b',"
		    "'start':'80'}]"),
	  "shard_groups[1].key_ranges[0].start", "key-ranges/complete", "22023",
	  "the first key range must start at the beginning of the keyspace (omit \"start\"), "
	  "not at \"10\"" },
	{ ONE_GROUP("[{'shard_uid':'shard-a','end':'80'},{'shard_uid':'shard-b','start':'80',"
		    "'end':'f0'}]"),
	  "shard_groups[1].key_ranges[1].end", "key-ranges/complete", "22023",
	  "the last key range must run to the end of the keyspace (omit \"end\"), not stop at "
	  "\"f0\"" },
	{ "{'shard_groups':[" AUTH ",{'uid':'g','key_ranges':[]}]," TAIL "}",
	  "shard_groups[1].key_ranges", "key-ranges/empty", "22023",
	  "a shard group needs at least one key range" },
	{ "{'shard_groups':[" AUTH ",{'uid':'g','key_ranges':[{'shard_uid':'shard-x'}]}]," TAIL "}",
	  "shard_groups[1].key_ranges[0].shard_uid", "key-ranges/shard-declared", "42704",
	  "data topology shard group \"g\" key_ranges[0].shard_uid \"shard-x\" is not a shard the "
	  "cluster has created" },
	{ "{'shard_groups':[" AUTH "," AUTH "]," TAIL "}", "shard_groups[1].uid",
	  "shard-groups/unique-uid", "22023", "duplicate shard group uid \"auth\"" },
	/* 25 */
	{ "{'shard_groups':[" AUTH ",{'uid':'g','key_ranges':[{'shard_uid':'shard-a','end':'80'},"
	  "{'shard_uid':'shard-b','start':'80'}]}]," TAIL "}",
	  "shard_groups[1].default_shard_index", "shard-groups/needs-index", "22023",
	  "a shard group with more than one key range needs a default_shard_index" },
	{ "{'shard_groups':[" AUTH ",{'uid':'g','default_shard_index':'nope','key_ranges':"
	  "[{'shard_uid':'shard-a'}]}]," TAIL "}",
	  "shard_groups[1].default_shard_index", "references/shard-index", "22023",
	  "shard index \"nope\" does not exist" },
	{ DB_DOC("{'tables':{'t':{'shard_group':'nope'}}}"),
	  "databases.db.schemas.s.tables.t.shard_group", "references/shard-group", "22023",
	  "shard group \"nope\" does not exist" },
	/* authoritative: V6, V7 (V8 has its own test) */
	{ "{'shard_groups':[{'uid':'auth','default_shard_index':'h','key_ranges':[{'shard_uid':"
	  "'auth','end':'80'},{'shard_uid':'shard-a','start':'80'}]}],"
	  IDX("h", "{'type':'xxhash','columns':['id']}") "," TAIL "}",
	  "shard_groups[0].key_ranges", "authoritative/one-range", "22023",
	  "the authoritative shard group \"auth\" must have exactly one key_range, with no start "
	  "or end" },
	{ "{'shard_groups':[" AUTH ",{'uid':'g','key_ranges':[{'shard_uid':'shard-a'}]}]," TAIL
	  ",'default_shard_group':'g'}", "default_shard_group", "authoritative/default-group",
	  "22023", "default_shard_group \"g\" must be omitted or equal authoritative_shard_group "
	  "\"auth\"" },
	/* 30: tables, reference tables, sequences */
	{ OVERRIDE_DOC, "databases.db.schemas.s.tables.t.shard_index", "tables/index-compatible",
	  "22023", "shard index \"m\" (type modulo) does not fit shard group \"g\", whose key "
	  "ranges are laid out for type xxhash" },
	{ DB_DOC("{'tables':{'t':{}}}"), "databases.db.schemas.s.tables.t", "tables/no-group",
	  "22023", "table has no shard group: set \"shard_group\" or a schema, database or "
	  "topology default_shard_group" },
	{ DB_DOC("{'tables':{'t':{'shard_group':'auth'}},'reference_tables':{'t':{'shard_groups':"
		 "['g']}}}"),
	  "databases.db.schemas.s.reference_tables.t", "tables/duplicate", "22023",
	  "table \"t\" is listed both in tables and in reference_tables" },
	{ DB_DOC("{'reference_tables':{'r':{}}}"), "databases.db.schemas.s.reference_tables.r",
	  "reference/no-group", "22023", "reference table needs \"shard_groups\": no schema, "
	  "database or topology default_shard_group resolves" },
	{ DB_DOC("{'sequences':{'q':{'shard_group':'g'}}}"),
	  "databases.db.schemas.s.sequences.q.shard_group", "sequences/single-shard", "22023",
	  "sequence shard group \"g\" must contain exactly one shard, not 2" },
	/* 35: global secondary indexes (V10 and declarations) */
	{ GSI_DOC("{'shard_group':'g','secondary_indexes':[{'name':'nope','columns':['email']}]}",
		  "auth", GSI_OK_BODY("")),
	  "databases.db.schemas.s.tables.users.secondary_indexes[0].columns", "gsi/unknown", "22023",
	  "global secondary index \"nope\" is not declared in databases.db.global_secondary_indexes" },
	{ GSI_DOC(USERS_SI("['mail']"), "auth", GSI_OK_BODY("")),
	  "databases.db.schemas.s.tables.users.secondary_indexes[0].columns",
	  "gsi/columns-mismatch", "22023",
	  "columns must equal the columns of global secondary index \"by_email\"" },
	{ GSI_DOC(USERS_SI("['email']"), "g", GSI_OK_BODY("")),
	  "databases.db.global_secondary_indexes.by_email.table", "gsi/lookup-sharding", "22023",
	  "lookup table \"users_by_email\" is sharded by column \"tenant_id\", which is not one of "
	  "the index's columns" },
	{ GSI_DOC(USERS_SI("['email']"), "auth", GSI_OK_BODY(",'owner_sk_columns':['id']")),
	  "databases.db.global_secondary_indexes.by_email.owner_sk_columns", "gsi/owner-sk-columns",
	  "22023", "owner_sk_columns must include \"tenant_id\", the shard key of owner table "
	  "\"users\"" },
	{ GSI_DOC(USERS_SI("['email']"), "auth", "{'schema':'s','table':'users_by_email',"
		  "'owner_table':'users','columns':['email']}"),
	  "databases.db.global_secondary_indexes.by_email", "gsi/owner-pk-columns", "22023",
	  "a non-unique global secondary index needs owner_pk_columns" },
	/* 40 */
	{ GSI_DOC(USERS_SI("['email']"), "auth", "{'schema':'s','table':'nope',"
		  "'owner_table':'users','columns':['email'],'unique':true}"),
	  "databases.db.global_secondary_indexes.by_email.table", "gsi/lookup-table", "22023",
	  "lookup table \"nope\" needs its own entry in tables" },
	{ GSI_DOC("{'shard_group':'g'}", "auth", "{'schema':'s','table':'users_by_email',"
		  "'owner_table':'ghost','columns':['email'],'unique':true}"),
	  "databases.db.global_secondary_indexes.by_email.owner_table", "gsi/owner-table", "22023",
	  "owner table \"ghost\" does not resolve to a shard group" },
	{ GSI_DOC("{'shard_group':'g'}", "auth", "{'schema':'s','table':'users_by_email',"
		  "'owner_table':'users','columns':[],'unique':true}"),
	  "databases.db.global_secondary_indexes.by_email.columns", "gsi/columns", "22023",
	  "a global secondary index needs at least one column" },
	{ GSI_DOC("{'shard_group':'g'}", "auth", "{'schema':'s','table':'users_by_email',"
		  "'owner_table':'users_by_email','columns':['email'],'unique':true}"),
	  "databases.db.global_secondary_indexes.by_email", "gsi/owner-sk-columns", "22023",
	  "owner_sk_columns must be given: owner table \"users_by_email\" has no shard index to "
	  "infer them from" },
	{ AMBIGUOUS_DOC, "databases.db.global_secondary_indexes.x.schema", "gsi/schema-ambiguous",
	  "22023", "lookup table \"lk\" is in several schemas: set \"schema\"" },
	{ GSI_DOC(USERS_SI("['email']"), "auth", GSI_OK_BODY(",'write_only':true")),
	  "databases.db.global_secondary_indexes.by_email.write_only", "gsi/write-only", "22023",
	  "a write-only global secondary index must be enabled (write_only: the router maintains "
	  "its lookup rows but does not read through them)" },
};

static void
expect_one_finding(const char *json_q, const char *path, const char *rule,
		   const char *sqlstate, const char *message)
{
	struct topo_findings f;
	struct topo_model *m = fx_parse_validate(json_q, NULL, &f);

	ck_assert_msg(f.n == 1, "expected one finding (%s at %s), got %zu: first %s: %s [%s]",
		      rule, path, f.n, f.n ? f.v[0].path : "-", f.n ? f.v[0].message : "-",
		      f.n ? f.v[0].rule : "-");
	ck_assert_str_eq(f.v[0].path, path);
	ck_assert_str_eq(f.v[0].rule, rule);
	ck_assert_str_eq(f.v[0].sqlstate, sqlstate);
	if (message)
		ck_assert_str_eq(f.v[0].message, message);
	topo_findings_cleanup(&f);
	topo_model_free(m);
}

START_TEST(test_rule)
{
	const struct rule_case *c = &rule_cases[_i];

	expect_one_finding(c->json, c->path, c->rule, c->sqlstate, c->message);
}
END_TEST

/* V8: the authoritative group may be renamed, never moved to another shard. */
START_TEST(test_authority_cannot_move)
{
	struct topo_findings f0, f;
	struct topo_model *prev = fx_parse_validate("{'shard_groups':[" AUTH "]," TAIL "}", NULL,
						    &f0);
	struct topo_model *m;

	ck_assert_uint_eq(f0.n, 0);
	m = fx_parse_validate("{'shard_groups':[{'uid':'meta','key_ranges':[{'shard_uid':'auth'}]}]"
			      ",'authoritative_shard_group':'meta'}", prev, &f);
	ck_assert_uint_eq(f.n, 0);
	topo_findings_cleanup(&f);
	topo_model_free(m);
	m = fx_parse_validate("{'shard_groups':[{'uid':'auth','key_ranges':[{'shard_uid':'shard-a'}]}"
			      "]," TAIL "}", prev, &f);
	ck_assert_uint_eq(f.n, 1);
	ck_assert_str_eq(f.v[0].path, "authoritative_shard_group");
	ck_assert_str_eq(f.v[0].rule, "authoritative/moved");
	ck_assert_str_eq(f.v[0].message,
			 "authoritative shard cannot change from shard \"auth\" to shard \"shard-a\"");
	topo_findings_cleanup(&f);
	topo_findings_cleanup(&f0);
	topo_model_free(m);
	topo_model_free(prev);
}
END_TEST

/* The error set_data_topology raises: path and rule in it, SQLSTATE, where = path. */
START_TEST(test_check_error_form)
{
	struct nk_error err;
	struct topo_model *m;

	nk_error_clear(&err);
	m = fx_check(ONE_GROUP("[{'shard_uid':'shard-a','end':'40'},{'shard_uid':'shard-b',"
			       "'start':'80'}]"), NULL, false, &err);
	ck_assert_ptr_null(m);
	ck_assert_str_eq(err.sqlstate, "22023");
	ck_assert_str_eq(err.message, "invalid data topology: shard_groups[1].key_ranges[1].start: "
			 "gap in key ranges: this range starts at \"80\" but the previous one "
			 "ends at \"40\"");
	ck_assert_str_eq(err.detail, "Broken rule: key-ranges/gap.");
	ck_assert_str_eq(err.where, "shard_groups[1].key_ranges[1].start");
	m = fx_check(INDEX_DOC("{'type':'xxhash','columns':['a','b']}"), NULL, false, &err);
	ck_assert_ptr_null(m);
	ck_assert_str_eq(err.sqlstate, "NK013");
	ck_assert_int_eq(err.code, 10);
	ck_assert_str_eq(err.message,
			 "not implemented: [10] Multi-column partitioning indexes are unavailable.");
	ck_assert_str_eq(err.where, "shard_indexes.h.columns");
	m = fx_check("{'shard_groups':[" AUTH ",{'uid':'g','key_ranges':[{'shard_uid':'zz'}]}]," TAIL
		     "}", NULL, false, &err);
	ck_assert_ptr_null(m);
	ck_assert_str_eq(err.sqlstate, "42704");
	ck_assert_str_eq(err.message, "data topology shard group \"g\" key_ranges[0].shard_uid "
			 "\"zz\" is not a shard the cluster has created");
	ck_assert(strstr(err.hint, "Create the shard first") != NULL);
}
END_TEST

/* Pre-existing findings never block; new forceable ones need force; others always block. */
START_TEST(test_force_and_preexisting)
{
	const char *undeclared = "{'shard_groups':[" AUTH ",{'uid':'g','key_ranges':"
				 "[{'shard_uid':'zz'}]}]," TAIL "}";
	const char *undeclared2 = "{'shard_groups':[" AUTH ",{'uid':'g','key_ranges':"
				  "[{'shard_uid':'zz'}]},{'uid':'g2','key_ranges':"
				  "[{'shard_uid':'yy'}]}]," TAIL "}";
	struct nk_error err;
	struct topo_model *prev, *m;

	prev = fx_check(undeclared, NULL, true, &err);
	ck_assert_ptr_nonnull(prev);	/* forced */
	m = fx_check(undeclared, prev, false, &err);
	ck_assert_ptr_nonnull(m);	/* same problem, pre-existing: no force needed */
	topo_model_free(m);
	m = fx_check(undeclared2, prev, false, &err);
	ck_assert_ptr_null(m);		/* a new undeclared shard */
	ck_assert(strstr(err.message, "\"yy\"") != NULL);
	m = fx_check(undeclared2, prev, true, &err);
	ck_assert_ptr_nonnull(m);
	topo_model_free(m);
	m = fx_check(ONE_GROUP("[{'shard_uid':'shard-a','end':'40'},{'shard_uid':'shard-b',"
			       "'start':'80'}]"), prev, true, &err);
	ck_assert_ptr_null(m);		/* a gap is never forceable */
	topo_model_free(prev);
}
END_TEST

/* Every finding is reported, not only the first. */
START_TEST(test_all_findings)
{
	struct topo_findings f;
	struct topo_model *m = fx_parse_validate(
		"{'shard_groups':[" AUTH ",{'uid':'g','default_shard_index':'h','key_ranges':["
		"{'shard_uid':'zz','end':'40'},{'shard_uid':'shard-b','start':'80'}]}],"
		IDX("h", "{'type':'hash','columns':['id']}") "," TAIL ",'bogus':1}", NULL, &f);

	ck_assert_uint_eq(f.n, 4);
	ck_assert_str_eq(f.v[0].rule, "json/unknown-key");
	ck_assert_str_eq(f.v[1].rule, "shard-index/type");
	ck_assert_str_eq(f.v[2].rule, "key-ranges/gap");
	ck_assert_str_eq(f.v[3].rule, "key-ranges/shard-declared");
	ck_assert(f.v[3].forceable && !f.v[2].forceable);
	topo_findings_cleanup(&f);
	topo_model_free(m);
}
END_TEST

START_TEST(test_storefront_valid)
{
	struct topo_findings f;
	char *text = fx_read_file("etc/topology-storefront.json");
	struct topo_model *m;

	ck_assert_ptr_nonnull(text);
	topo_findings_init(&f);
	m = topo_parse(text, strlen(text), &f);
	ck_assert_ptr_nonnull(m);
	topo_validate(m, fx_input(NULL), &f);
	ck_assert_msg(f.n == 0, "%s: %s", f.n ? f.v[0].path : "", f.n ? f.v[0].message : "");
	topo_findings_cleanup(&f);
	topo_model_free(m);
	free(text);
}
END_TEST

/* The writer's output parses back to the same text; key order in the input is irrelevant. */
START_TEST(test_canonical_round_trip)
{
	char *text = fx_read_file("etc/topology-storefront.json");
	struct topo_findings f;
	struct topo_model *m, *m2;
	char *out, *out2;

	topo_findings_init(&f);
	m = topo_parse(text, strlen(text), &f);
	out = topo_to_json(m, false);
	m2 = topo_parse(out, strlen(out), &f);
	out2 = topo_to_json(m2, true);
	topo_model_free(m2);
	m2 = topo_parse(out2, strlen(out2), &f);
	free(out2);
	out2 = topo_to_json(m2, false);
	ck_assert_uint_eq(f.n, 0);
	ck_assert_str_eq(out, out2);
	ck_assert(strncmp(out, "{\"databases\":{\"store\":{\"schemas\":{\"public\":{\"tables\":"
			  "{\"customers\":", 64) == 0);
	free(out);
	free(out2);
	topo_model_free(m);
	topo_model_free(m2);
	m = fx_parse_validate("{'authoritative_shard_group':'auth','shard_groups':[" AUTH "]}",
			      NULL, &f);
	out = topo_to_json(m, false);
	ck_assert_str_eq(out, "{\"shard_groups\":[{\"uid\":\"auth\",\"key_ranges\":[{\"shard_uid\":"
			 "\"auth\"}]}],\"authoritative_shard_group\":\"auth\"}");
	free(out);
	free(text);
	topo_findings_cleanup(&f);
	topo_model_free(m);
}
END_TEST

/* The storefront example in doc/topology.md is the one in etc/ (same canonical JSON). */
START_TEST(test_doc_example_matches_etc)
{
	char *doc = fx_read_file("doc/topology.md"), *etc = fx_read_file("etc/topology-storefront.json");
	char *start, *end, *a, *b;
	struct topo_findings f;
	struct topo_model *ma, *mb;

	ck_assert_ptr_nonnull(doc);
	ck_assert_ptr_nonnull(etc);
	start = strstr(doc, "```json\n{\n  \"databases\": {\n    \"store\"");
	ck_assert_ptr_nonnull(start);
	start += strlen("```json\n");
	end = strstr(start, "```");
	ck_assert_ptr_nonnull(end);
	topo_findings_init(&f);
	ma = topo_parse(start, (size_t)(end - start), &f);
	mb = topo_parse(etc, strlen(etc), &f);
	ck_assert_uint_eq(f.n, 0);
	a = topo_to_json(ma, false);
	b = topo_to_json(mb, false);
	ck_assert_str_eq(a, b);
	free(a);
	free(b);
	free(doc);
	free(etc);
	topo_model_free(ma);
	topo_model_free(mb);
	topo_findings_cleanup(&f);
}
END_TEST

/* Next value of a fixed-seed linear congruential generator. */
static uint32_t
lcg(uint32_t *state)
{
	*state = *state * 1103515245u + 12345u;
	return *state >> 8;
}

/* Mutate <buf> (length *<len>, capacity <cap>) in 1-4 random places. */
static void
mutate(char *buf, size_t *len, size_t cap, uint32_t *seed)
{
	static const char alphabet[] = "{}[]\",:0123456789abcdef-x \\";
	int edits = 1 + (int)(lcg(seed) % 4);

	for (int k = 0; k < edits && *len > 1; k++) {
		size_t at = lcg(seed) % *len;
		char c = alphabet[lcg(seed) % (sizeof(alphabet) - 1)];

		switch (lcg(seed) % 3) {
		case 0:
			buf[at] = c;
			break;
		case 1:
			memmove(buf + at, buf + at + 1, *len - at - 1);
			(*len)--;
			break;
		default:
			if (*len + 1 < cap) {
				memmove(buf + at + 1, buf + at, *len - at);
				buf[at] = c;
				(*len)++;
			}
		}
	}
}

/* Broken documents never crash the reader, the validator or the image builder. */
START_TEST(test_parse_mutations)
{
	char *text = fx_read_file("etc/topology-storefront.json");
	size_t n = strlen(text), cap = n + 64;
	char *buf = malloc(cap);
	uint32_t seed = 20261130;
	size_t applied = 0;

	for (int iter = 0; iter < 3000; iter++) {
		struct topo_findings f;
		struct topo_model *m;
		size_t len = n;

		memcpy(buf, text, n);
		mutate(buf, &len, cap, &seed);
		topo_findings_init(&f);
		m = topo_parse(buf, len, &f);
		if (m)
			topo_validate(m, fx_input(NULL), &f);
		if (m && !topo_findings_first_blocking(&f, false)) {
			size_t size = topo_image_size(m);
			void *img = aligned_alloc(8, (size + 7) & ~(size_t)7);
			struct topo_img_rel r;

			ck_assert_int_eq(topo_image_build(m, 1, img, size), (ssize_t)size);
			ck_assert(topo_image_is_valid(img, size));
			topo_image_resolve_table(img, "store", "public", "orders", &r);
			free(img);
			applied++;
		}
		topo_findings_cleanup(&f);
		topo_model_free(m);
	}
	ck_assert_uint_gt(applied, 0);
	free(buf);
	free(text);
}
END_TEST

Suite *
topology_suite(void)
{
	Suite *s = suite_create("topology");
	TCase *tc = tcase_create("validation");
	TCase *tr = tcase_create("resolution");
	TCase *ti = tcase_create("image");

	tcase_set_timeout(tc, 60);

	tcase_add_loop_test(tc, test_rule, 0, NK_ARRAY_LEN(rule_cases));
	tcase_add_test(tc, test_authority_cannot_move);
	tcase_add_test(tc, test_check_error_form);
	tcase_add_test(tc, test_force_and_preexisting);
	tcase_add_test(tc, test_all_findings);
	tcase_add_test(tc, test_storefront_valid);
	tcase_add_test(tc, test_canonical_round_trip);
	tcase_add_test(tc, test_parse_mutations);
	tcase_add_test(tc, test_doc_example_matches_etc);
	suite_add_tcase(s, tc);
	topology_add_resolution_tests(tr);
	suite_add_tcase(s, tr);
	topology_add_image_tests(ti);
	suite_add_tcase(s, ti);
	return s;
}
