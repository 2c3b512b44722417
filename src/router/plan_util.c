/*
 * plan_util.c - plans of utility statements and the checks every plan passes: transaction
 * control (23, 22, 24, 25), SET/RESET/SHOW (27, 28, 29) and the __neki.* settings (their
 * values, spec 3.4; tx_mode atomic runs in src/exec/route_2pc.c), COPY (41-56), EXPLAIN
 * (30-33, NK017), DDL/maintenance on every shard, __neki.fanout and __neki.tx_mode limits.
 *
 * Isolation levels: READ UNCOMMITTED (Postgres runs it as READ COMMITTED), READ COMMITTED and
 * REPEATABLE READ are accepted (each shard gives its own snapshot; no snapshot is shared
 * across shards); SERIALIZABLE is refused with 24 as the spec's catalog example shows.
 */
#include "neki/base.h"

#include <ctype.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "neki/plan_gsi.h"
#include "neki/plan_explain.h"
#include "neki/plan_settings.h"
#include "plan_int.h"

static bool
streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static void
router_plan(struct pctx *c, enum plan_action act)
{
	c->out->kind = PLAN_ROUTER;
	c->out->op = PLAN_OP_NONE;
	c->out->action = act;
	c->out->level = PLAN_FANOUT_SINGLE;
}

/* ---- transactions ---- */

static bool
check_tx_options(struct pctx *c, const struct stmt_tx *tx)
{
	if (tx->isolation == STMT_ISO_SERIALIZABLE)
		return nk_error_nk013(c->err, 24);
	if (tx->deferrable == 1)
		return nk_error_nk013(c->err, 25);
	return true;
}

static bool
plan_tx(struct pctx *c)
{
	const struct stmt_tx *tx = c->s->tx;

	switch (tx->kind) {
	case STMT_TX_PREPARE:
	case STMT_TX_COMMIT_PREPARED:
	case STMT_TX_ROLLBACK_PREPARED:
		return nk_error_nk013(c->err, 23);
	default:
		break;
	}
	if (tx->chain)
		return nk_error_nk013(c->err, 22);
	if (!check_tx_options(c, tx))
		return false;
	router_plan(c, PLAN_ACT_TX);
	return true;
}

/* ---- __neki.* settings ---- */

struct neki_setting {
	const char *name;		/* after "__neki." */
	const char *values[4];		/* accepted values, first = default; NULL: free text */
};

static const struct neki_setting neki_settings[] = {
	{ "tx_mode", { "multi", "single", "atomic" } },
	{ "fanout", { "scatter", "multi", "single" } },
	{ "shard", { NULL } },
	{ "target", { "primary", "replica", "rdonly" } },
	{ "replica_recency", { "prefer", "require", "off" } },
	{ "replica_locality", { "prefer", "require", "off" } },
	{ "replica_affinity", { "none", "session" } },
};

static const struct neki_setting *
neki_find(const char *name)
{
	if (!name || strncmp(name, "__neki.", 7) != 0)
		return NULL;
	for (size_t i = 0; i < NK_ARRAY_LEN(neki_settings); i++)
		if (strcmp(neki_settings[i].name, name + 7) == 0)
			return &neki_settings[i];
	return NULL;
}

static bool
bad_value(struct nk_error *err, const char *name, const char *value,
	  const struct neki_setting *st)
{
	char hint[128] = "";
	size_t len = 0;

	nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
		     "invalid value for parameter \"%s\": \"%s\"", name, value);
	for (size_t i = 0; i < 4 && st->values[i]; i++)
		len += (size_t)snprintf(hint + len, sizeof(hint) - len, "%s%s", i ? ", " : "",
					st->values[i]);
	nk_error_hint(err, "Available values: %s.", hint);
	return false;
}

/* Store <v> in the field of <sess> for setting <st>. */
static void
neki_store(struct plan_session *sess, const struct neki_setting *st, const char *v)
{
	char *dst = NULL;
	size_t cap = 16;

	if (streq(st->name, "tx_mode"))
		sess->tx_mode = streq(v, "single") ? PLAN_TX_SINGLE :
				streq(v, "atomic") ? PLAN_TX_ATOMIC : PLAN_TX_MULTI;
	else if (streq(st->name, "fanout"))
		sess->fanout = streq(v, "single") ? PLAN_FANOUT_SINGLE :
			       streq(v, "multi") ? PLAN_FANOUT_MULTI : PLAN_FANOUT_SCATTER;
	else if (streq(st->name, "shard"))
		dst = sess->shard, cap = sizeof(sess->shard);
	else if (streq(st->name, "target"))
		dst = sess->target;
	else if (streq(st->name, "replica_recency"))
		dst = sess->replica_recency;
	else if (streq(st->name, "replica_locality"))
		dst = sess->replica_locality;
	else
		dst = sess->replica_affinity;
	if (dst)
		snprintf(dst, cap, "%s", v);
}

/* plan_neki_apply: see neki/plan_settings.h. */
bool
plan_neki_apply(struct plan_session *sess, const char *name, const char *value,
		struct nk_error *err)
{
	const struct neki_setting *st = neki_find(name);
	char low[PLAN_SHARD_MAX];
	size_t i;

	if (!st)
		return true;
	if (sess->in_transaction) {
		nk_error_set(err, ERRCODE_ACTIVE_SQL_TRANSACTION,
			     "parameter \"%s\" cannot be changed inside a transaction",
			     name);
		nk_error_hint(err, "Set __neki settings before BEGIN, in a separate statement.");
		return false;
	}
	if (!value)
		value = st->values[0] ? st->values[0] : "";
	if (!st->values[0]) {
		if (strlen(value) >= sizeof(sess->shard))
			return nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
					    "invalid value for parameter \"%s\": \"%s\"",
					    name, value);
		neki_store(sess, st, value);
		return true;
	}
	for (i = 0; value[i] && i + 1 < sizeof(low); i++)
		low[i] = (char)tolower((unsigned char)value[i]);
	low[i] = '\0';
	for (i = 0; i < 4 && st->values[i]; i++) {
		if (!streq(low, st->values[i]))
			continue;
		neki_store(sess, st, st->values[i]);
		return true;
	}
	return bad_value(err, name, value, st);
}

/* plan_neki_show: see neki/plan_settings.h. */
const char *
plan_neki_show(const struct plan_session *sess, const char *name)
{
	const struct neki_setting *st = neki_find(name);

	if (!st)
		return NULL;
	if (streq(st->name, "tx_mode"))
		return sess->tx_mode == PLAN_TX_SINGLE ? "single" :
		       sess->tx_mode == PLAN_TX_ATOMIC ? "atomic" : "multi";
	if (streq(st->name, "fanout"))
		return plan_fanout_str(sess->fanout);
	if (streq(st->name, "shard"))
		return sess->shard;
	if (streq(st->name, "target"))
		return sess->target;
	if (streq(st->name, "replica_recency"))
		return sess->replica_recency;
	if (streq(st->name, "replica_locality"))
		return sess->replica_locality;
	return sess->replica_affinity;
}

/* plan_session_init: see plan.h. */
void
plan_session_init(struct plan_session *s, const char *db)
{
	memset(s, 0, sizeof(*s));
	s->db = db;
	s->schema = "public";
	strcpy(s->target, "primary");
	strcpy(s->replica_recency, "prefer");
	strcpy(s->replica_locality, "prefer");
	strcpy(s->replica_affinity, "none");
}

/* True when <uid> is a shard of some group of the topology. */
static bool
topo_has_shard(const void *img, const char *uid)
{
	for (uint32_t g = 0; g < topo_image_group_count(img); g++)
		for (uint32_t k = 0; k < topo_image_group_shard_count(img, g); k++)
			if (streq(topo_image_group_shard(img, g, k), uid))
				return true;
	return false;
}

/* plan_neki_is_setting: see neki/plan_settings.h. */
bool
plan_neki_is_setting(const char *name)
{
	return neki_find(name) != NULL;
}

/* plan_neki_apply_checked: see neki/plan_settings.h. */
bool
plan_neki_apply_checked(struct plan_session *sess, const void *img, const char *name,
			const char *value, struct nk_error *err)
{
	if (!plan_neki_apply(sess, name, value, err))
		return false;
	if (streq(name, "__neki.shard") && sess->shard[0] && !topo_has_shard(img, sess->shard)) {
		nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
			     "invalid value for parameter \"%s\": \"%s\"", name,
			     sess->shard);
		nk_error_detail(err, "The data topology has no shard \"%s\".", sess->shard);
		return false;
	}
	return true;
}

static bool
plan_neki_set(struct pctx *c, const struct stmt_set *set)
{
	struct plan_session probe = *c->in->sess;
	const char *v = set->kind == STMT_SET_VALUE ? set->value : NULL;

	if (!plan_neki_apply_checked(&probe, c->img, set->name, v, c->err))
		return false;
	router_plan(c, PLAN_ACT_NEKI_SET);
	return true;
}

/* plan_check_setting: see plan_int.h. */
bool
plan_check_setting(struct pctx *c, const char *name, const char *value)
{
	bool on;

	if (!name || !value || strcasecmp(name, "standard_conforming_strings") != 0 ||
	    !plan_bool_text(value, &on) || on)
		return true;
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "standard_conforming_strings = off is unavailable on a "
		     "routed database");
	nk_error_detail(c->err, "The router reads every '...' literal as a standard string "
			"(backslash is an ordinary character); with the setting off the shards "
			"would read backslash escapes in them, and the router could route by "
			"another value than they see.");
	nk_error_hint(c->err, "Write backslash escapes as E'...' strings.");
	return false;
}

static bool
plan_set(struct pctx *c)
{
	const struct stmt_set *set = c->s->set;

	if (set->kind == STMT_SET_VALUE && !plan_check_setting(c, set->name, set->value))
		return false;

	if (streq(set->name, "session_authorization"))
		return nk_error_nk013(c->err, 27);
	if (set->kind == STMT_SET_CURRENT)
		return nk_error_nk013(c->err, 28);
	if (set->kind == STMT_SET_SNAPSHOT)
		return nk_error_nk013(c->err, 29);
	if ((set->kind == STMT_SET_TRANSACTION || set->kind == STMT_SET_SESSION_CHARACTERISTICS) &&
	    c->s->tx && !check_tx_options(c, c->s->tx))
		return false;
	if (set->kind == STMT_SET_SHOW) {
		c->out->show_value = plan_neki_show(c->in->sess, set->name);
		router_plan(c, c->out->show_value ? PLAN_ACT_NEKI_SHOW : PLAN_ACT_SHOW);
		return true;
	}
	if (neki_find(set->name))
		return plan_neki_set(c, set);
	router_plan(c, PLAN_ACT_SET);
	return true;
}

/* ---- COPY ---- */

static bool
is_utf8_name(const char *enc)
{
	char buf[16];
	size_t n = 0;

	for (const char *p = enc; *p && n + 1 < sizeof(buf); p++)
		if (*p != '-' && *p != '_')
			buf[n++] = (char)tolower((unsigned char)*p);
	buf[n] = '\0';
	return streq(buf, "utf8") || streq(buf, "unicode");
}

/* plan_binary_text: see plan_int.h. */
bool
plan_binary_text(struct pctx *c, uint32_t oid, const char *data, int32_t len, const char **out)
{
	char *text = plan_binary_value(oid, data, len);

	*out = text != NULL ? rarena_strndup(c->a, text, strlen(text)) : NULL;
	free(text);
	return *out != NULL || (text != NULL && nk_error_oom(c->err));
}

/* plan_owner_gsi: see plan_int.h. */
bool
plan_owner_gsi(const struct pctx *c, const struct prel *p, const char *column)
{
	struct topo_img_gsi g;

	for (uint32_t i = 0; i < topo_image_gsi_count(c->img); i++) {
		topo_image_gsi(c->img, i, &g);
		if (!streq(g.db, c->in->sess->db) || !streq(g.owner_table, p->r->name) ||
		    (g.schema && !streq(g.schema, p->schema)))
			continue;
		for (uint32_t k = 0; k < topo_image_list_len(c->img, g.columns); k++)
			if (streq(topo_image_list_str(c->img, g.columns, k), column))
				return true;
		for (uint32_t k = 0; g.enabled && k < topo_image_list_len(c->img,
									 g.owner_pk_columns); k++)
			if (streq(topo_image_list_str(c->img, g.owner_pk_columns, k), column))
				return true;
	}
	return false;
}

/* Position of the shard key in COPY's input columns, or -1. */
/* plan_copy_field: see plan_int.h. */
int
plan_copy_field(const struct pctx *c, const struct prel *p, const char *col)
{
	const struct stmt_copy *cp = c->s->copy;
	const struct plan_catalog *cat = c->in->cat;

	for (uint32_t i = 0; i < cp->ncols; i++)
		if (streq(cp->cols[i], col))
			return (int)i;
	for (uint32_t i = 0; !cp->ncols && cat && cat->column_name; i++) {
		const char *name = cat->column_name(cat->arg, p->schema, p->r->name, i + 1);

		if (!name)
			break;
		if (streq(name, col))
			return (int)i;
	}
	return -1;
}

/*
 * COPY FROM with a column list omitting a column whose value comes from a sequence (identity
 * or serial): a sharded table's shards would draw from their own copies of the sequence
 * (51), a reference table's copies would differ (46).
 */
static bool
copy_omits_sequence(struct pctx *c, const struct prel *p)
{
	const struct stmt_copy *cp = c->s->copy;
	const struct plan_catalog *cat = c->in->cat;
	struct cat_column col;

	if (!cp->is_from || !cp->ncols || !cat || !cat->column)
		return false;
	for (uint32_t n = 1; cat->column(cat->arg, p->schema, p->r->name, n, &col); n++) {
		bool given = false;

		for (uint32_t i = 0; i < cp->ncols; i++)
			given = given || streq(cp->cols[i], col.name);
		if (!given && col.seq.name && !col.generated && (col.identity || col.has_default))
			return true;
	}
	return false;
}

static bool
copy_sharded(struct pctx *c, struct prel *p)
{
	const struct stmt_copy *cp = c->s->copy;
	struct plan *o = c->out;

	if (cp->has_file || cp->is_program)
		return nk_error_nk013(c->err, 41);
	o->group = topo_image_group_uid(c->img, p->res.group);
	if (!plan_shards_from_bits(c, p->res.group, NULL))
		return false;
	o->kind = PLAN_SCATTER;
	o->op = PLAN_OP_SCATTER;
	o->level = PLAN_FANOUT_SINGLE;		/* COPY is not a SELECT/DML shape */
	if (!cp->is_from)
		return true;
	if (cp->has_sharded_only_bad_opt)
		return nk_error_nk013(c->err, 52);
	if (cp->encoding && !is_utf8_name(cp->encoding))
		return nk_error_nk013(c->err, 53);
	if (p->expr->ncolumns > 1)
		return nk_error_nk013(c->err, 45);
	if (!plan_gsi_copy(c, p))		/* (the rows' lookup rows: plan.gsi) */
		return false;
	if (copy_omits_sequence(c, p))
		return nk_error_nk013(c->err, 51);
	o->op = PLAN_OP_COPY;
	o->has_key = true;
	o->key.group = p->res.group;
	o->key.index = p->res.index;
	o->key.col_type = p->col_type;
	o->key.column = p->key_col;
	o->key.col_pos = plan_copy_field(c, p, p->key_col);
	if (o->key.col_pos < 0)
		return nk_error_set(c->err, NK_ERRCODE_SHARD_KEY_MISSING,
				    "shard-key column \"%s\" of primary index 0 "
				    "is required but missing from COPY", p->key_col);
	return p->typed || nk_error_set(c->err, ERRCODE_UNDEFINED_OBJECT,
					"type of shard-key column \"%s\" is "
					"unknown", p->key_col);
}

static bool
plan_copy(struct pctx *c)
{
	const struct stmt_copy *cp = c->s->copy;
	const struct plan_catalog *cat = c->in->cat;
	struct prel *p;

	if (c->in->extended)
		return nk_error_nk013(c->err, 55);
	if (c->s->nstatements > 1 || c->in->multi_statement)
		return nk_error_nk013(c->err, 54);
	if (cp->has_query)
		return nk_error_nk013(c->err, cp->is_from ? 48 : 49);
	if (cp->is_program && !cp->is_from)
		return nk_error_nk013(c->err, 47);
	if (cp->has_where && cp->is_from)
		return nk_error_nk013(c->err, 50);
	if (!plan_resolve_rels(c) || c->nrels == 0)
		return c->nrels == 0 ? nk_error_nk013(c->err, 20) : false;
	p = &c->rels[0];
	if (!c->in->sess->shard[0] && !plan_gsi_refuse_lookups(c))
		return false;
	if (cp->is_from && cat && cat->relkind && cat->relkind(cat->arg, p->schema, p->r->name) == 'm')
		return nk_error_nk013(c->err, 56);
	if (p->sharded)
		return copy_sharded(c, p);
	if (p->res.kind == TOPO_REL_REFERENCE && (cp->has_file || cp->is_program))
		return nk_error_nk013(c->err, 43);
	if (p->res.kind == TOPO_REL_REFERENCE && copy_omits_sequence(c, p))
		return nk_error_nk013(c->err, 46);
	return plan_decide(c);
}

/* ---- EXPLAIN ---- */

/* plan_explained_text: see neki/plan_explain.h. */
const char *
plan_explained_text(const char *key)
{
	const char *p = key;
	int depth = 0;

	while (isspace((unsigned char)*p))
		p++;
	if (strncasecmp(p, "explain", 7) != 0)
		return key;
	p += 7;
	while (isspace((unsigned char)*p))
		p++;
	if (*p != '(')
		return key;
	for (; *p; p++) {
		depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
		if (depth == 0)
			break;
	}
	if (*p)
		p++;
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

static bool
plan_explain_stmt(struct pctx *c)
{
	const struct stmt_explain *e = c->s->explain;
	struct plan_session sess = *c->in->sess;
	struct plan_input in = *c->in;
	struct plan *ip;

	if (e->reject)
		return nk_error_nk013(c->err, e->reject);
	ip = rarena_alloc(c->a, sizeof(*ip));
	if (!ip)
		return nk_error_oom(c->err);
	if (e->neki_plan && !e->analyze)
		sess.fanout = PLAN_FANOUT_SCATTER;	/* the limit applies to ANALYZE only */
	sess.explain = !e->analyze;
	in.sess = &sess;
	if (!plan_build(c->a, e->inner, &in, ip, c->err)) {
		if (e->neki_plan && !e->analyze) {	/* (route_subq.c shows what is read first) */
			c->out->materialize = ip->materialize;
			c->out->broadcast = ip->broadcast;
		}
		return false;
	}
	ip->query = plan_explained_text(ip->query);
	if (e->analyze && ip->gsi && ip->gsi->kind != PLAN_GSI_READ) {
		nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "EXPLAIN ANALYZE of a write to the owner of global secondary index "
			     "\"%s\" is not supported", ip->gsi->name);
		nk_error_hint(c->err, "Run the statement itself (the router writes its lookup "
			      "rows with it), or EXPLAIN without ANALYZE.");
		return false;
	}
	if (e->neki_plan) {
		router_plan(c, PLAN_ACT_EXPLAIN);
		c->out->inner = ip;
		return true;
	}
	if (ip->kind != PLAN_SINGLE) {
		nk_error_set(c->err, NK_ERRCODE_NEEDS_ROUTER_PROCESSING,
			     "This statement requires Neki router processing");
		nk_error_hint(c->err, "Use `EXPLAIN (NEKI_PLAN)` (with ANALYZE to execute) to see "
			      "Neki's plan");
		return false;
	}
	*c->out = *ip;
	c->out->stmt = c->s;
	c->out->inner = NULL;
	c->out->gsi = NULL;	/* (EXPLAIN alone writes nothing: no lookup step) */
	return true;
}

/* ---- DDL and other statements ---- */

/* Every shard of the database: the authoritative one first, the rest by uid. */
static bool
plan_all_shards(struct pctx *c)
{
	const char *auth = topo_image_range_shard(c->img, topo_image_authoritative(c->img), 0);
	uint32_t k = 0;

	for (uint32_t g = 0; g < topo_image_group_count(c->img); g++)
		if (!plan_shards_from_bits(c, g, NULL))
			return false;
	while (k < c->out->nshards && !streq(c->out->shards[k], auth))
		k++;
	for (; k > 0 && k < c->out->nshards; k--) {
		const char *t = c->out->shards[k];

		c->out->shards[k] = c->out->shards[k - 1];
		c->out->shards[k - 1] = t;
	}
	c->out->kind = PLAN_ALL_SHARDS;
	c->out->op = PLAN_OP_ALL_SHARDS;
	c->out->level = PLAN_FANOUT_SINGLE;	/* DDL is exempt from __neki.fanout */
	return true;
}

/* A libc locale this process can load (CREATE DATABASE ... LOCALE): 332 when not. */
static bool
locale_available(const char *name)
{
	locale_t l;

	if (strcasecmp(name, "C") == 0 || strcasecmp(name, "POSIX") == 0 || !name[0])
		return true;
	l = newlocale(LC_COLLATE_MASK | LC_CTYPE_MASK, name, (locale_t)0);
	if (!l)
		return false;
	freelocale(l);
	return true;
}

/* Does a shard-key column of sharded table <schema>.<name> have enum type <ty>? */
static bool
key_has_type(const struct pctx *c, const char *schema, const char *name)
{
	const struct plan_catalog *cat = c->in->cat;
	const struct stmt *s = c->s;
	struct topo_img_rel res;
	const struct ks_expr *e;

	topo_image_resolve_table(c->img, c->in->sess->db, schema, name, &res);
	if (res.kind != TOPO_REL_TABLE || res.index == TOPO_IMG_NONE ||
	    !(e = topo_image_index_expr(c->img, res.index)))
		return false;
	for (uint32_t i = 0; i < e->ncolumns; i++) {
		uint32_t oid = cat->column_type(cat->arg, schema, name, e->columns[i]);
		const char *ts, *tn;

		if (oid && cat->type_name(cat->arg, oid, &ts, &tn) && streq(tn, s->enum_rename) &&
		    (!s->enum_schema || streq(ts, s->enum_schema)))
			return true;
	}
	return false;
}

/* ALTER TYPE ... RENAME VALUE of an enum a shard key uses (its rows would route
 * elsewhere: enums hash by label): 333. */
static bool
check_enum_rename(struct pctx *c)
{
	const struct plan_catalog *cat = c->in->cat;
	const char *schema, *name;

	if (!cat || !cat->table_at || !cat->type_name)
		return true;
	for (uint32_t i = 0; cat->table_at(cat->arg, i, &schema, &name); i++)
		if (key_has_type(c, schema, name))
			return nk_error_nk013(c->err, 333);
	return true;
}

static bool
refuse_ctas(struct pctx *c, const char *table, const char *detail)
{
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "CREATE TABLE AS over sharded table \"%s\" is unavailable",
		     table);
	nk_error_detail(c->err, "%s", detail);
	nk_error_hint(c->err, "Create the table, then fill it with INSERT INTO ... SELECT.");
	return false;
}

/* STMT_CTAS_COPY from <src> into <t>: the new table's shard key is the source's. */
static bool
ctas_keeps_key(const struct pctx *c, const struct prel *t, const struct prel *src)
{
	for (uint32_t i = 0; i < c->s->nctas_cols; i++) {
		const struct stmt_ctas_col *k = &c->s->ctas_cols[i];

		if (streq(k->out, "*") ? streq(t->key_col, src->key_col) :
		    streq(k->out, t->key_col))
			return streq(k->out, "*") || streq(k->col, src->key_col);
	}
	return false;
}

/*
 * CREATE TABLE AS runs on every shard, each over its own rows: right only when the new
 * table is sharded like its one source and copies its rows with their shard key
 * (STMT_CTAS_COPY, ctas_keeps_key), or gets no rows. A
 * query over a sharded table (or a view of one) otherwise, or a sharded new table filled
 * from anything else, is refused.
 */
static bool
check_ctas(struct pctx *c)
{
	const struct prel *t, *src;

	if (c->s->ctas == STMT_CTAS_NONE || c->s->ctas == STMT_CTAS_NO_DATA)
		return true;
	if (!plan_resolve_rels(c) || c->nrels == 0)
		return !nk_error_is_set(c->err);
	t = &c->rels[0];
	src = c->nrels == 2 ? &c->rels[1] : NULL;
	if (t->sharded && !(c->s->ctas == STMT_CTAS_COPY && src && plan_colocated(c, t, src) &&
			    ctas_keeps_key(c, t, src)))
		return refuse_ctas(c, t->r->name, "Each shard would keep every row its query "
				   "returns, not those of its own key range.");
	for (uint32_t i = 1; !t->sharded && i < c->nrels; i++)
		if (c->rels[i].sharded || plan_view_of_sharded(c, &c->rels[i]))
			return refuse_ctas(c, c->rels[i].r->name, "Each shard would build the new "
					   "table from its own rows only.");
	c->nrels = 0;
	return true;
}

/* DDL the topology or the router's environment forbids: 336, 332, 333. */
static bool
check_ddl(struct pctx *c)
{
	const struct stmt *s = c->s;

	if (s->db_locale && !locale_available(s->db_locale))
		return nk_error_nk013(c->err, 332);
	if (s->enum_rename && !check_enum_rename(c))
		return false;
	if (!check_ctas(c))
		return false;
	if (!s->gen_expr_col || !plan_resolve_rels(c) || c->nrels == 0)
		return !nk_error_is_set(c->err);
	for (uint32_t i = 0; c->rels[0].sharded && i < c->rels[0].expr->ncolumns; i++)
		if (streq(c->rels[0].expr->columns[i], s->gen_expr_col))
			return nk_error_nk013(c->err, 336);
	c->nrels = 0;
	return true;
}

/*
 * The router learns of user-defined aggregates from the committed catalog (calls of one are
 * 212 across shards): one created or renamed in an open transaction would be taken for a
 * plain function until the commit.
 */
static bool
refuse_aggregate_ddl(struct pctx *c)
{
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "%s inside a transaction block is unavailable",
		     streq(c->s->tag, "DefineStmt") ? "CREATE AGGREGATE" : "ALTER AGGREGATE");
	nk_error_detail(c->err, "The router knows an aggregate once it is committed; until "
			"then a call of it across shards would be planned as a plain function's.");
	nk_error_hint(c->err, "Run it outside a transaction block.");
	return false;
}

/* plan_utility: see plan_int.h. */
bool
plan_utility(struct pctx *c)
{
	switch (c->s->kind) {
	case STMT_EMPTY:
		router_plan(c, PLAN_ACT_EMPTY);
		return true;
	case STMT_TX:
		return plan_tx(c);
	case STMT_SET:
	case STMT_RESET:
	case STMT_SHOW:
		return plan_set(c);
	case STMT_COPY:
		if (c->in->sess->shard[0])
			return nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "COPY is unavailable while __neki.shard is set");
		return plan_copy(c);
	case STMT_EXPLAIN:
		return plan_explain_stmt(c);
	case STMT_DDL:
		if (c->in->sess->shard[0])
			return nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "schema changes are unavailable while "
					    "__neki.shard is set");
		if (c->s->names_aggregate && c->in->sess->in_transaction)
			return refuse_aggregate_ddl(c);
		return check_ddl(c) && plan_gsi_truncate(c) && plan_all_shards(c);
	case STMT_MAINT:
	case STMT_PRIV:
		return plan_all_shards(c);
	case STMT_SESSION:
		if (c->s->cursor)
			return plan_cursor(c);
		router_plan(c, PLAN_ACT_SESSION);
		return true;
	default:
		return nk_error_nk013(c->err, 20);
	}
}

/* ---- limits every plan passes ---- */

/* plan_check_session: see plan_int.h (__neki.fanout, __neki.tx_mode single). */
bool
plan_check_session(struct pctx *c)
{
	const struct plan_session *sess = c->in->sess;
	const struct plan *o = c->out;
	bool data = o->kind == PLAN_SINGLE || o->kind == PLAN_SHARD_SET ||
		    o->kind == PLAN_SCATTER || o->kind == PLAN_EVERY_COPY;

	if (!plan_check_target(c))
		return false;
	if (data && o->kind != PLAN_EVERY_COPY && o->level < sess->fanout)
		return nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "statement's fan-out (%s) exceeds __neki.fanout (%s)",
				    plan_fanout_str(o->level), plan_fanout_str(sess->fanout));
	if (!data || !sess->in_transaction || sess->tx_mode != PLAN_TX_SINGLE)
		return true;
	for (uint32_t i = 0; i < o->nshards; i++) {
		const char *first = sess->tx_shard ? sess->tx_shard : o->shards[0];

		if (!streq(o->shards[i], first))
			return nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
					    "statement would add shard \"%s\" to "
					    "the transaction, but __neki.tx_mode is single",
					    o->shards[i]);
	}
	return true;
}

/* The shard of one value of the plan's key column (taken over by this function). */
static bool
route_key_value(const struct plan_input *in, const struct plan *p, struct ks_value *col,
		const char **shard, struct nk_error *err)
{
	const struct ks_expr *e = topo_image_index_expr(in->topo, p->key.index);
	struct ks_value key;
	uint32_t range;
	bool ok;

	if (e->ncolumns > 1) {		/* one value cannot route it (V3); no plan asks */
		ks_value_cleanup(col);
		return nk_error_nk013(err, 10);
	}
	if (ks_expr_is_column(e)) {
		ok = topo_image_route(in->topo, p->key.group, p->key.index, col, &range, err);
	} else {
		ok = ks_expr_eval(e, col, &key, err) &&
		     topo_image_route(in->topo, p->key.group, p->key.index, &key, &range, err);
		if (ok)
			ks_value_cleanup(&key);
	}
	ks_value_cleanup(col);
	if (ok)
		*shard = topo_image_range_shard(in->topo, p->key.group, range);
	return ok;
}

/* plan_route_text: see plan.h. */
bool
plan_route_text(const struct plan_input *in, const struct plan *p, const char *text,
		size_t len, const char **shard, struct nk_error *err)
{
	struct ks_value col;

	if (!p->has_key)
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR, "plan has no shard key");
	if (!ks_value_from_text(p->key.col_type, text, len, &in->sess->text_ctx, &col, err))
		return false;
	return route_key_value(in, p, &col, shard, err);
}

/* plan_route_binary: see plan.h. */
bool
plan_route_binary(const struct plan_input *in, const struct plan *p, const uint8_t *data,
		  size_t len, const char **shard, struct nk_error *err)
{
	struct ks_value col;

	if (!p->has_key)
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR, "plan has no shard key");
	if (!ks_value_from_binary(p->key.col_type, data, len, &col, err))
		return false;
	return route_key_value(in, p, &col, shard, err);
}

const char *
plan_fanout_str(enum plan_fanout f)
{
	return f == PLAN_FANOUT_SINGLE ? "single" : f == PLAN_FANOUT_MULTI ? "multi" : "scatter";
}

const char *
plan_op_str(enum plan_op op)
{
	static const char *const names[] = {
		"EqualUnique", "IN", "Scatter", "Unsharded", "Reference", "ReferenceWrite", "Any",
		"Direct", "AllShards", "InsertSplit", "Copy", "Function", "InsertSelect", "None",
	};

	return (unsigned)op < NK_ARRAY_LEN(names) ? names[op] : "?";
}

const char *
plan_kind_str(enum plan_kind k)
{
	static const char *const names[] = { "single", "shard set", "scatter", "every copy",
					     "all shards", "router" };

	return (unsigned)k < NK_ARRAY_LEN(names) ? names[k] : "?";
}
