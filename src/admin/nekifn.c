/*
 * nekifn.c - the __neki functions: one table row per function (parameters with types and
 * defaults, the role it needs, its handler), argument binding (positional and `name =>`),
 * the role check, and the handlers that need no store (get, get_revision, validate).
 * Entry point: nekifn_start(), called by the console for every recognised call.
 */
#include "neki/base.h"

#include "admin_int.h"
#include "gsibuild.h"
#include "nekidesc.h"
#include "recover.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "neki/admin.h"
#include "neki/config.h"
#include "neki/topology.h"

#define FN_MAX_PARAMS 4
#define FN_DEFAULT_WAIT_SECS 60.0

enum fn_type {
	FN_T_TEXT = 0,
	FN_T_BOOL = 1,
	FN_T_INT8 = 2,
	FN_T_INTERVAL = 3,
};

enum fn_role {
	FN_ROLE_VIEWER = 0,	/* stats_users, admin_users, neki_viewer, neki_operator */
	FN_ROLE_OPERATOR = 1,	/* admin_users, neki_operator */
};

/* A bound argument value. */
struct fn_val {
	bool is_null;
	const char *text;	/* borrowed from the call (TEXT) */
	bool b;			/* BOOL */
	int64_t i;		/* INT8 */
	double secs;		/* INTERVAL */
};

struct fn_param {
	const char *name;
	enum fn_type type;
	const char *def;	/* default as text; NULL = required ("NULL" = SQL NULL) */
};

typedef void (*fn_handler)(struct adm_req *req, const struct fn_val *args);

struct adm_fn {
	const char *name;
	struct fn_param params[FN_MAX_PARAMS];
	size_t nparams;
	enum fn_role role;
	fn_handler run;
	const char *group;		/* list_metafuncs' group_name */
	const char *purpose;		/* list_metafuncs' purpose */
};

/* ---- handlers ---- */

static void
fail(struct adm_req *req, const char *sqlstate, const char *msg)
{
	struct nk_error err;

	nk_error_set(&err, sqlstate, "%s", msg);
	adm_req_fail(req, &err);
}

/* One row of one column. */
static void
reply_one(struct adm_req *req, const char *col, enum adm_type type, const char *val)
{
	const struct adm_col c = { col, type };

	adm_result_columns(&req->res, &c, 1);
	adm_result_row(&req->res, &val);
	adm_result_complete(&req->res, "SELECT", true);
	adm_req_finish(req);
}

static void
fn_set(struct adm_req *req, const struct fn_val *a)
{
	if (a[0].is_null || a[1].is_null) {
		fail(req, ERRCODE_NULL_VALUE_NOT_ALLOWED,
		     "the data topology and overwrite must not be null");
		return;
	}
	rev_set(req, a[0].text, a[1].b, a[2].is_null ? NULL : a[2].text);
}

static void
fn_wait(struct adm_req *req, const struct fn_val *a)
{
	if (a[0].is_null || a[0].i < 0) {
		fail(req, ERRCODE_INVALID_PARAMETER_VALUE,
		     "the revision must be a non-negative number");
		return;
	}
	follow_wait(req, (uint64_t)a[0].i, a[1].is_null ? FN_DEFAULT_WAIT_SECS : a[1].secs);
}

static void
fn_wait_ddl(struct adm_req *req, const struct fn_val *a)
{
	if (a[0].is_null || a[0].i < 0 || a[1].is_null || a[1].i < 0) {
		fail(req, ERRCODE_INVALID_PARAMETER_VALUE,
		     "the schema and cluster versions must be non-negative numbers");
		return;
	}
	follow_wait_ddl(req, (uint64_t)a[0].i, (uint64_t)a[1].i,
			a[2].is_null ? FN_DEFAULT_WAIT_SECS : a[2].secs);
}

static void
fn_check_schema(struct adm_req *req, const struct fn_val *a)
{
	advisor_check_schema(req, a[0].is_null ? NULL : a[0].text);
}

/*
 * delete_shard(shard_uid): shards are declared in the ini's [shards], so neki cannot drop
 * one itself; the call says whether it can go: refused while a key range of the topology
 * names it (55006), else the HINT says how to remove it.
 */
static void
fn_delete_shard(struct adm_req *req, const struct fn_val *a)
{
	const struct topo_model *m = rev_get()->model;
	struct nk_error err;

	if (a[0].is_null || cfg_shard_find(cfg_current(), a[0].text) == NULL) {
		nk_error_set(&err, ERRCODE_UNDEFINED_OBJECT,
			     "shard \"%s\" is not declared in [shards]",
			     a[0].is_null ? "" : a[0].text);
		goto fail;
	}
	for (size_t g = 0; m != NULL && g < m->ngroups; g++)
		for (size_t k = 0; k < m->groups[g].nranges; k++) {
			const char *uid = m->groups[g].ranges[k].shard_uid;

			if (uid == NULL || strcmp(uid, a[0].text) != 0)
				continue;
			nk_error_set(&err, ERRCODE_OBJECT_IN_USE,
				     "shard \"%s\" is in use by the data topology",
				     a[0].text);
			nk_error_detail(&err, "shard_groups[%zu].key_ranges[%zu] (group \"%s\") "
					"names it.", g, k, m->groups[g].uid);
			nk_error_hint(&err, "Move its key ranges to other shards first "
				      "(__neki.set_data_topology), then delete it.");
			goto fail;
		}
	nk_error_set(&err, ERRCODE_FEATURE_NOT_SUPPORTED, "neki does not delete shards itself");
	nk_error_detail(&err, "Shard \"%s\" holds no key range of the data topology.",
			a[0].text);
	nk_error_hint(&err, "Remove its entry from the [shards] section of the configuration "
		      "and RELOAD.");
fail:
	adm_req_fail(req, &err);
}

static void
fn_stat_activity(struct adm_req *req, const struct fn_val *a)
{
	(void)a;
	activity_start(req);
}

static void
fn_get(struct adm_req *req, const struct fn_val *a)
{
	reply_one(req, "data_topology_json", ADM_T_TEXT, rev_get()->json);
}

static void
fn_get_revision(struct adm_req *req, const struct fn_val *a)
{
	char rev[24];

	snprintf(rev, sizeof(rev), "%" PRIu64, rev_get()->revision);
	reply_one(req, "get_data_topology_revision", ADM_T_INT8, rev);
}

static void
fn_validate(struct adm_req *req, const struct fn_val *a)
{
	static const struct adm_col cols[] = {
		{ "path", ADM_T_TEXT }, { "rule", ADM_T_TEXT }, { "message", ADM_T_TEXT },
	};
	const struct cfg *c = cfg_current();
	const char *uids[256];
	struct topo_validate_input in = { .shard_uids = uids, .previous = rev_get()->model };
	struct topo_findings f;
	struct topo_model *m;

	if (a[0].is_null) {
		fail(req, ERRCODE_NULL_VALUE_NOT_ALLOWED, "the data topology must not be null");
		return;
	}
	for (size_t i = 0; i < c->n_shards && i < NK_ARRAY_LEN(uids); i++)
		uids[in.nshards++] = c->shards[i].uid;
	topo_findings_init(&f);
	m = topo_parse(a[0].text, strlen(a[0].text), &f);
	if (m != NULL) {
		topo_validate(m, &in, &f);
		catload_add_findings(m, &f);	/* V4, V11: from the catalog */
	}
	if (!a[1].b && rev_get()->revision > 0)
		topo_findings_add(&f, "", "write/overwrite-required",
				  ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, false,
				  "a data topology already exists (revision %" PRIu64 "); setting"
				  " this one needs overwrite => true", rev_get()->revision);
	adm_result_columns(&req->res, cols, NK_ARRAY_LEN(cols));
	for (size_t i = 0; i < f.n; i++) {
		const char *vals[3] = { f.v[i].path, f.v[i].rule, f.v[i].message };

		adm_result_row(&req->res, vals);
	}
	adm_result_complete(&req->res, "SELECT", true);
	topo_findings_cleanup(&f);
	topo_model_free(m);
	adm_req_finish(req);
}

static void
fn_list_shards(struct adm_req *req, const struct fn_val *a)
{
	follow_list_shards(req);
}

static void
fn_list_revisions(struct adm_req *req, const struct fn_val *a)
{
	rev_list_revisions(req);
}

static void
fn_queue_usage(struct adm_req *req, const struct fn_val *a)
{
	(void)a;
	follow_queue_usage(req);
}

static void fn_list_metafuncs(struct adm_req *req, const struct fn_val *a);
static const char *type_name(enum fn_type t);

static void
fn_resolve(struct adm_req *req, const struct fn_val *a)
{
	recover_resolve(req, a[0].is_null ? NULL : a[0].text, a[1].is_null ? NULL : a[1].text);
}

static void
fn_gsi_build(struct adm_req *req, const struct fn_val *a)
{
	if (a[0].is_null || (a[2].is_null ? false : a[2].secs <= 0)) {
		fail(req, ERRCODE_INVALID_PARAMETER_VALUE,
		     "the index name must not be null, and the timeout must be positive");
		return;
	}
	gsibuild_start(req, a[0].text, a[1].is_null ? NULL : a[1].text,
		       a[2].is_null ? FN_DEFAULT_WAIT_SECS : a[2].secs);
}

static void
fn_gsi_build_status(struct adm_req *req, const struct fn_val *a)
{
	(void)a;
	gsibuild_status(req);
}

static const struct adm_fn functions[] = {
	{ "set_data_topology", { { "data_topology_json", FN_T_TEXT, NULL },
				 { "overwrite", FN_T_BOOL, NULL },
				 { "options", FN_T_TEXT, "NULL" } }, 3, FN_ROLE_OPERATOR, fn_set,
	  "topology", "validate, store and publish a new data topology revision" },
	{ "wait_for_data_topology", { { "revision", FN_T_INT8, NULL },
				      { "timeout", FN_T_INTERVAL, "NULL" } }, 2, FN_ROLE_VIEWER,
	  fn_wait, "topology", "wait until every neki host runs a topology revision" },
	{ "wait_for_ddl", { { "schema_version", FN_T_INT8, NULL },
			    { "cluster_version", FN_T_INT8, "0" },
			    { "timeout", FN_T_INTERVAL, "NULL" } }, 3, FN_ROLE_VIEWER, fn_wait_ddl,
	  "ddl", "wait until every neki host has the catalog of a schema version" },
	{ "get_data_topology", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER, fn_get,
	  "topology", "the data topology in force" },
	{ "get_data_topology_revision", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER,
	  fn_get_revision, "topology", "the revision of the data topology in force" },
	{ "validate_data_topology", { { "data_topology_json", FN_T_TEXT, NULL },
				      { "overwrite", FN_T_BOOL, "false" } }, 2, FN_ROLE_VIEWER,
	  fn_validate, "topology", "the findings of a data topology, nothing stored" },
	{ "list_shards", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER, fn_list_shards,
	  "shards", "the declared shards as this router sees them" },
	{ "list_topology_revisions", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER, fn_list_revisions,
	  "topology", "every stored data topology revision" },
	{ "notification_queue_usage", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER, fn_queue_usage,
	  "monitoring", "NOTIFY queue usage of each shard of the notify shard group" },
	{ "check_schema", { { "database", FN_T_TEXT, "NULL" } }, 1, FN_ROLE_VIEWER,
	  fn_check_schema, "schema", "the schema readiness advisor: findings of the rules for "
	  "sharded tables" },
	{ "stat_get_activity", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER, fn_stat_activity,
	  "monitoring", "the client sessions of every neki host, with their server links" },
	{ "delete_shard", { { "shard_uid", FN_T_TEXT, NULL } }, 1, FN_ROLE_OPERATOR,
	  fn_delete_shard, "shards", "whether a shard can be removed: refused while the data "
	  "topology uses it" },
	{ "list_metafuncs", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER, fn_list_metafuncs,
	  "discovery", "the __neki functions, their arguments and required roles" },
	{ "resolve_transaction", { { "gid", FN_T_TEXT, NULL }, { "outcome", FN_T_TEXT, NULL } },
	  2, FN_ROLE_OPERATOR, fn_resolve, "transactions", "commit or abort an in-doubt atomic "
	  "transaction (neki's own recovery decides it otherwise)" },
	{ "gsi_build", { { "gsi_name", FN_T_TEXT, NULL }, { "database", FN_T_TEXT, "NULL" },
			 { "timeout", FN_T_INTERVAL, "NULL" } }, 3, FN_ROLE_OPERATOR,
	  fn_gsi_build, "topology", "build a global secondary index on an owner with rows, "
	  "online: write-only, backfill, verify, enable" },
	{ "gsi_build_status", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER, fn_gsi_build_status,
	  "topology", "the global secondary index build running on this host, and the last one "
	  "that ended" },
};

/* list_metafuncs(): one row per function of the table above. */
static void
fn_list_metafuncs(struct adm_req *req, const struct fn_val *a)
{
	static const struct adm_col cols[] = {
		{ "name", ADM_T_TEXT }, { "arguments", ADM_T_TEXT }, { "purpose", ADM_T_TEXT },
		{ "group_name", ADM_T_TEXT }, { "required_role", ADM_T_TEXT },
	};

	(void)a;
	adm_result_columns(&req->res, cols, NK_ARRAY_LEN(cols));
	for (size_t i = 0; i < NK_ARRAY_LEN(functions); i++) {
		const struct adm_fn *fn = &functions[i];
		char args[512] = "";
		size_t at = 0;
		const char *vals[5] = { fn->name, args, fn->purpose, fn->group,
					fn->role == FN_ROLE_OPERATOR ? "neki_operator" : "neki_viewer" };

		for (size_t k = 0; k < fn->nparams && at < sizeof(args); k++) {
			const struct fn_param *p = &fn->params[k];
			const char *def = p->def;
			int n;

			if (def != NULL && p->type == FN_T_INTERVAL && strcmp(def, "NULL") == 0)
				def = "'60 seconds'";	/* (FN_DEFAULT_WAIT_SECS) */
			n = snprintf(args + at, sizeof(args) - at, "%s%s %s%s%s", k ? ", " : "",
				     p->name, type_name(p->type), def ? " DEFAULT " : "",
				     def ? def : "");
			at += n > 0 ? (size_t)n : 0;
		}
		adm_result_row(&req->res, vals);
	}
	adm_result_complete(&req->res, "SELECT", true);
	adm_req_finish(req);
}

/* admin_fn_exists: see neki/admin.h. */
bool
admin_fn_exists(const char *fn)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(functions); i++)
		if (strcmp(functions[i].name, fn) == 0)
			return true;
	return false;
}

/* nekifn_param_oid: see nekidesc.h. */
uint32_t
nekifn_param_oid(const char *fn, const char *name, size_t pos)
{
	static const uint32_t oids[] = { [FN_T_TEXT] = 25, [FN_T_BOOL] = 16, [FN_T_INT8] = 20,
					 [FN_T_INTERVAL] = 1186 };

	for (size_t i = 0; i < NK_ARRAY_LEN(functions); i++) {
		const struct adm_fn *f = &functions[i];

		if (strcmp(f->name, fn) != 0)
			continue;
		for (size_t k = 0; name != NULL && name[0] != '\0' && k < f->nparams; k++)
			if (strcmp(f->params[k].name, name) == 0)
				return oids[f->params[k].type];
		return name != NULL && name[0] != '\0' ? 0 :
		       pos < f->nparams ? oids[f->params[pos].type] : 0;
	}
	return 0;
}

/* admin_fn_unknown: see neki/admin.h. */
bool
admin_fn_unknown(const char *fn, struct nk_error *err)
{
	nk_error_set(err, ERRCODE_UNDEFINED_FUNCTION, "function __neki.%s does not exist", fn);
	nk_error_hint(err, "SELECT * FROM __neki.list_metafuncs() lists them.");
	return false;
}

/* ---- binding ---- */

static const char *
type_name(enum fn_type t)
{
	switch (t) {
	case FN_T_TEXT: return "text";
	case FN_T_BOOL: return "boolean";
	case FN_T_INT8: return "bigint";
	case FN_T_INTERVAL: return "interval";
	}
	return "unknown";
}

/* Postgres' boolean input (prefixes of true/false/yes/no, on/off, 1/0). */
static bool
parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "t", "tr", "tru", "true", "y", "ye", "yes", "on", "1" };
	static const char *const no[] = { "f", "fa", "fal", "fals", "false", "n", "no", "off",
					  "of", "0" };

	for (size_t i = 0; i < NK_ARRAY_LEN(yes); i++)
		if (strcasecmp(s, yes[i]) == 0)
			return *out = true;
	for (size_t i = 0; i < NK_ARRAY_LEN(no); i++)
		if (strcasecmp(s, no[i]) == 0)
			return !(*out = false);
	return false;
}

/* Convert literal <text> (<null>: SQL NULL) to parameter type <p>. */
static bool
convert(const struct fn_param *p, const char *text, bool null, struct fn_val *v,
	struct nk_error *err)
{
	char *end;

	memset(v, 0, sizeof(*v));
	v->is_null = null;
	v->text = text;
	if (null)
		return true;
	switch (p->type) {
	case FN_T_TEXT:
		return true;
	case FN_T_BOOL:
		if (parse_bool(text, &v->b))
			return true;
		break;
	case FN_T_INT8:
		v->i = strtoll(text, &end, 10);
		if (end != text && *end == '\0')
			return true;
		break;
	case FN_T_INTERVAL:
		if (adm_parse_interval(text, &v->secs))
			return true;
		break;
	}
	return nk_error_set(err, ERRCODE_INVALID_TEXT_REPRESENTATION,
			    "invalid input syntax for type %s: \"%s\"",
			    type_name(p->type), text);
}

/* Fill <vals> from the call's arguments (positional, then named), then the defaults. */
static bool
bind_args(const struct adm_fn *fn, const struct adm_call *call, struct fn_val *vals,
	  struct nk_error *err)
{
	bool set[FN_MAX_PARAMS] = { false };

	if (call->nargs > fn->nparams)
		goto no_function;
	for (size_t i = 0; i < call->nargs; i++) {
		const struct adm_arg *a = &call->args[i];
		size_t k = i;

		if (a->name[0] != '\0')
			for (k = 0; k < fn->nparams && strcmp(fn->params[k].name, a->name) != 0; k++)
				;
		if (k == fn->nparams || set[k])
			goto no_function;
		if (!convert(&fn->params[k], a->text, a->kind == ADM_ARG_NULL, &vals[k], err))
			return false;
		set[k] = true;
	}
	for (size_t k = 0; k < fn->nparams; k++) {
		const char *def = fn->params[k].def;

		if (set[k])
			continue;
		if (def == NULL)
			goto no_function;
		if (!convert(&fn->params[k], def, strcmp(def, "NULL") == 0, &vals[k], err))
			return false;
	}
	return true;
no_function:
	nk_error_set(err, ERRCODE_UNDEFINED_FUNCTION,
		     "function __neki.%s with %zu arguments does not exist",
		     fn->name, call->nargs);
	nk_error_hint(err, "__neki.%s takes %zu arguments (see doc/topology.md).", fn->name,
		      fn->nparams);
	return false;
}

/* ---- running a call ---- */

/* Bind the arguments and run the handler (the role check has passed). */
static void
run(struct adm_req *req)
{
	struct fn_val vals[FN_MAX_PARAMS];
	struct nk_error err;

	if (!bind_args(req->fn, &req->call, vals, &err)) {
		adm_req_fail(req, &err);
		return;
	}
	req->fn->run(req, vals);
}

static void
denied(struct adm_req *req)
{
	char msg[128];

	snprintf(msg, sizeof(msg), "permission denied for function %s", req->fn->name);
	fail(req, ERRCODE_INSUFFICIENT_PRIVILEGE, msg);
}

static void
viewer_checked(struct adm_req *req, bool member)
{
	if (member)
		run(req);
	else
		denied(req);
}

static void
operator_checked(struct adm_req *req, bool member)
{
	if (member)
		run(req);
	else if (req->fn->role == FN_ROLE_VIEWER)
		follow_check_role(req, "neki_viewer", viewer_checked);
	else
		denied(req);
}

void
nekifn_start(struct adm_req *req)
{
	struct nk_error err;

	for (size_t i = 0; i < NK_ARRAY_LEN(functions); i++)
		if (strcmp(functions[i].name, req->call.fn) == 0)
			req->fn = &functions[i];
	if (req->fn == NULL) {
		nk_error_set(&err, ERRCODE_UNDEFINED_FUNCTION,
			     "function __neki.%s does not exist", req->call.fn);
		adm_req_fail(req, &err);
		return;
	}
	if (req->access == ADM_ACCESS_ADMIN ||
	    (req->access == ADM_ACCESS_STATS && req->fn->role == FN_ROLE_VIEWER)) {
		run(req);
		return;
	}
	/* not listed in the ini: membership in the roles on the authoritative shard */
	follow_check_role(req, "neki_operator", operator_checked);
}
