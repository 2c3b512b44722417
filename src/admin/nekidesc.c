/*
 * nekidesc.c - Describe of a __neki call over the extended query protocol: the result
 * columns of every function (the ones its handler writes; test/routing/test_neki_ext.py
 * compares each with the RowDescription of a call that runs) and the types of the call's
 * `$n` parameters (those of the arguments they stand for). Entry point: admin_fn_describe().
 */
#include "neki/base.h"

#include "nekidesc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/admin.h"

#include "admin_int.h"

static const struct adm_col c_set[] = { { "success", ADM_T_BOOL }, { "revision", ADM_T_INT8 } };
static const struct adm_col c_wait[] = { { "wait_for_data_topology", ADM_T_INT8 } };
static const struct adm_col c_wait_ddl[] = { { "wait_for_ddl", ADM_T_INT8 } };
static const struct adm_col c_get[] = { { "data_topology_json", ADM_T_TEXT } };
static const struct adm_col c_get_rev[] = { { "get_data_topology_revision", ADM_T_INT8 } };
static const struct adm_col c_validate[] = {
	{ "path", ADM_T_TEXT }, { "rule", ADM_T_TEXT }, { "message", ADM_T_TEXT },
};
static const struct adm_col c_shards[] = {
	{ "uid", ADM_T_TEXT }, { "host", ADM_T_TEXT }, { "port", ADM_T_INT4 },
	{ "dbname", ADM_T_TEXT }, { "has_writable_primary", ADM_T_BOOL },
	{ "revision", ADM_T_INT8 }, { "server", ADM_T_INT4 }, { "kind", ADM_T_TEXT },
	{ "role", ADM_T_TEXT }, { "state", ADM_T_TEXT }, { "lag_ms", ADM_T_INT8 },
	{ "max_prepared_transactions", ADM_T_INT4 },
};
static const struct adm_col c_revisions[] = {
	{ "revision", ADM_T_INT8 }, { "created_at", ADM_T_TIMESTAMPTZ },
	{ "comment", ADM_T_TEXT }, { "created_by", ADM_T_TEXT },
};
static const struct adm_col c_queue[] = { { "shard_uid", ADM_T_TEXT }, { "usage", ADM_T_FLOAT8 } };
static const struct adm_col c_check[] = {
	{ "object", ADM_T_TEXT }, { "rule", ADM_T_TEXT }, { "severity", ADM_T_TEXT },
	{ "advice", ADM_T_TEXT },
};
static const struct adm_col c_activity[] = {
	{ "host_id", ADM_T_TEXT }, { "user", ADM_T_TEXT }, { "database", ADM_T_TEXT },
	{ "state", ADM_T_TEXT }, { "addr", ADM_T_TEXT }, { "port", ADM_T_INT4 },
	{ "connect_time", ADM_T_TEXT }, { "request_time", ADM_T_TEXT }, { "wait_us", ADM_T_INT4 },
	{ "link", ADM_T_TEXT }, { "remote_pid", ADM_T_INT4 }, { "application_name", ADM_T_TEXT },
};
static const struct adm_col c_metafuncs[] = {
	{ "name", ADM_T_TEXT }, { "arguments", ADM_T_TEXT }, { "purpose", ADM_T_TEXT },
	{ "group_name", ADM_T_TEXT }, { "required_role", ADM_T_TEXT },
};
static const struct adm_col c_resolve[] = {
	{ "gid", ADM_T_TEXT }, { "outcome", ADM_T_TEXT }, { "shards", ADM_T_INT4 },
	{ "note", ADM_T_TEXT },
};

static const struct adm_col c_gsi_build[] = {
	{ "gsi_name", ADM_T_TEXT }, { "revision", ADM_T_INT8 }, { "rows_written", ADM_T_INT8 },
	{ "rows_verified", ADM_T_INT8 }, { "passes", ADM_T_INT4 },
};

static const struct adm_col c_gsi_status[] = {
	{ "gsi_name", ADM_T_TEXT }, { "database", ADM_T_TEXT }, { "state", ADM_T_TEXT },
	{ "shard_uid", ADM_T_TEXT }, { "pass", ADM_T_INT4 }, { "rows_written", ADM_T_INT8 },
	{ "rows_scanned", ADM_T_INT8 }, { "started_at", ADM_T_TIMESTAMPTZ },
	{ "ended_at", ADM_T_TIMESTAMPTZ }, { "error", ADM_T_TEXT },
};

#define DESC(fn, cols) { fn, cols, NK_ARRAY_LEN(cols) }

static const struct {
	const char *fn;
	const struct adm_col *cols;
	size_t n;
} descs[] = {
	DESC("set_data_topology", c_set), DESC("wait_for_data_topology", c_wait),
	DESC("wait_for_ddl", c_wait_ddl), DESC("get_data_topology", c_get),
	DESC("get_data_topology_revision", c_get_rev), DESC("validate_data_topology", c_validate),
	DESC("list_shards", c_shards), DESC("list_topology_revisions", c_revisions),
	DESC("notification_queue_usage", c_queue), DESC("check_schema", c_check),
	DESC("stat_get_activity", c_activity), DESC("list_metafuncs", c_metafuncs),
	DESC("resolve_transaction", c_resolve), DESC("gsi_build", c_gsi_build),
	DESC("gsi_build_status", c_gsi_status),
	/* delete_shard returns no rows: it only ever explains why neki does not delete */
};

/* nekidesc_cols: see nekidesc.h. */
const struct adm_col *
nekidesc_cols(const char *fn, size_t *n)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(descs); i++) {
		if (strcmp(descs[i].fn, fn) == 0) {
			*n = descs[i].n;
			return descs[i].cols;
		}
	}
	*n = 0;
	return NULL;
}

/* pg_type.typlen of a result column's type. */
static int16_t
col_len(enum adm_type t)
{
	return t == ADM_T_BOOL ? 1 : t == ADM_T_INT4 ? 4 :
	       t == ADM_T_INT8 || t == ADM_T_FLOAT8 || t == ADM_T_TIMESTAMPTZ ? 8 : -1;
}

/* The columns <call> selects of <cols>[0..n) into <d>; false with <err> (42703). */
static bool
describe_cols(const struct adm_call *call, const struct adm_col *cols, size_t n,
	      struct admin_fn_desc *d, struct nk_error *err)
{
	bool all = !call->from_form || (call->ncols == 1 && strcmp(call->cols[0], "*") == 0);
	size_t want = all ? n : call->ncols;

	for (size_t s = 0; s < want && s < ADMIN_DESC_MAX_COLS; s++) {
		size_t k = s;

		if (!all)
			for (k = 0; k < n && strcmp(cols[k].name, call->cols[s]) != 0; k++)
				;
		if (k == n)
			return nk_error_set(err, ERRCODE_UNDEFINED_COLUMN,
					    "column \"%s\" does not exist",
					    call->cols[s]);
		d->cols[d->ncols++] = (struct proto_column){
			.name = cols[k].name, .type_oid = (uint32_t)cols[k].type,
			.typlen = col_len(cols[k].type), .typmod = -1, .format = 0,
		};
	}
	return true;
}

/* admin_fn_describe: see neki/admin.h. */
bool
admin_fn_describe(const char *sql, struct admin_fn_desc *d, struct nk_error *err)
{
	struct adm_call call;
	const struct adm_col *cols;
	size_t n;
	bool ok;

	memset(d, 0, sizeof(*d));
	switch (adm_call_parse(sql, &call, err)) {
	case ADM_CALL_OK:
		break;
	case ADM_CALL_NOT_NEKI:
		return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED, "not a __neki call");
	case ADM_CALL_ERROR:
		return false;
	}
	if (!admin_fn_exists(call.fn)) {
		ok = admin_fn_unknown(call.fn, err);
		adm_call_cleanup(&call);
		return ok;
	}
	for (size_t i = 0; i < call.nargs; i++) {
		const struct adm_arg *a = &call.args[i];
		unsigned long k = a->text != NULL && a->text[0] == ADMIN_DESC_MARK ?
				  strtoul(a->text + 1, NULL, 10) : 0;

		if (k >= 1 && k <= ADMIN_DESC_MAX_PARAMS)
			d->param_oids[k - 1] = nekifn_param_oid(call.fn, a->name, i);
	}
	cols = nekidesc_cols(call.fn, &n);
	ok = describe_cols(&call, cols, n, d, err);
	adm_call_cleanup(&call);
	return ok;
}
