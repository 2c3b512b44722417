/*
 * nekifn.c - the __neki functions: one table row per function (parameters with types and
 * defaults, the role it needs, its handler), argument binding (positional and `name =>`),
 * the role check, and the handlers that need no store (get, get_revision, validate).
 * Entry point: nekifn_start(), called by the console for every recognised call.
 */
#include "neki/base.h"

#include "admin_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
};

/* ---- handlers ---- */

static void
fail(struct adm_req *req, const char *sqlstate, const char *msg)
{
	struct nk_error err;

	nk_error_set(&err, sqlstate, "%s", msg);
	adm_result_error(&req->res, &err);
	adm_req_finish(req);
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
		fail(req, "22004", "the data topology and overwrite must not be null");
		return;
	}
	rev_set(req, a[0].text, a[1].b, a[2].is_null ? NULL : a[2].text);
}

static void
fn_wait(struct adm_req *req, const struct fn_val *a)
{
	if (a[0].is_null || a[0].i < 0) {
		fail(req, "22023", "the revision must be a non-negative number");
		return;
	}
	follow_wait(req, (uint64_t)a[0].i, a[1].is_null ? FN_DEFAULT_WAIT_SECS : a[1].secs);
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
		fail(req, "22004", "the data topology must not be null");
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
		topo_findings_add(&f, "", "write/overwrite-required", "55000", false,
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

static const struct adm_fn functions[] = {
	{ "set_data_topology", { { "data_topology_json", FN_T_TEXT, NULL },
				 { "overwrite", FN_T_BOOL, NULL },
				 { "options", FN_T_TEXT, "NULL" } }, 3, FN_ROLE_OPERATOR, fn_set },
	{ "wait_for_data_topology", { { "revision", FN_T_INT8, NULL },
				      { "timeout", FN_T_INTERVAL, "NULL" } }, 2, FN_ROLE_VIEWER,
	  fn_wait },
	{ "get_data_topology", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER, fn_get },
	{ "get_data_topology_revision", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER,
	  fn_get_revision },
	{ "validate_data_topology", { { "data_topology_json", FN_T_TEXT, NULL },
				      { "overwrite", FN_T_BOOL, "false" } }, 2, FN_ROLE_VIEWER,
	  fn_validate },
	{ "list_shards", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER, fn_list_shards },
	{ "list_topology_revisions", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER, fn_list_revisions },
	{ "notification_queue_usage", { { NULL, 0, NULL } }, 0, FN_ROLE_VIEWER, fn_queue_usage },
};

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
	return nk_error_set(err, "22P02", "invalid input syntax for type %s: \"%s\"",
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
	nk_error_set(err, "42883", "function __neki.%s with %zu arguments does not exist",
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
		adm_result_error(&req->res, &err);
		adm_req_finish(req);
		return;
	}
	req->fn->run(req, vals);
}

static void
denied(struct adm_req *req)
{
	char msg[128];

	snprintf(msg, sizeof(msg), "permission denied for function %s", req->fn->name);
	fail(req, "42501", msg);
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
		nk_error_set(&err, "42883", "function __neki.%s does not exist", req->call.fn);
		adm_result_error(&req->res, &err);
		adm_req_finish(req);
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
