/*
 * parse_util.c - utility statements of the libpg_query JSON tree: transaction control with
 * its options, SET/RESET/SHOW (and the SET TRANSACTION family), COPY with its options,
 * EXPLAIN with its options and the explained statement, and the classification of DDL and
 * other utility statements. The NK013 codes that the statement alone decides for DDL (spec
 * 4.2, 300-338, plus 1/20/28) are set here in stmt->reject; codes that need the topology,
 * the session or the protocol are the planner's (plan_util.c).
 */
#include "neki/base.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "parse_int.h"

static bool
streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static void
reject(struct pb *b, int code)
{
	if (!b->s->reject)
		b->s->reject = code;
}

/* Text of a DefElem/SET argument: strings as is, numbers from the source. */
static const char *
arg_text(struct pb *b, const cJSON *n)
{
	struct stmt_value v;

	if (jsval(n))
		return pb_strdup(b, jsval(n));
	if (jas(n, "Integer"))
		return jint(jbody(n), "ival", 0) ? "1" : "0";
	if (jas(n, "Boolean"))
		return jbool(jbody(n), "boolval") ? "true" : "false";
	{
		const struct parse_norm *saved = b->norm;

		b->norm = NULL;		/* utility values stay text */
		pb_value(b, n, 0, &v);
		b->norm = saved;
	}
	return v.kind == STMT_V_CONST ? v.text : NULL;
}

static bool
ival_of(const cJSON *arg)
{
	const cJSON *c = jas(arg, "A_Const");

	if (c)
		return jint(jget(c, "ival"), "ival", 0) != 0 ||
		       jbool(jget(c, "boolval"), "boolval");
	return jint(jas(arg, "Integer"), "ival", 0) != 0;
}

static enum stmt_isolation
isolation_from(const char *s)
{
	if (streq(s, "read uncommitted"))
		return STMT_ISO_READ_UNCOMMITTED;
	if (streq(s, "read committed"))
		return STMT_ISO_READ_COMMITTED;
	if (streq(s, "repeatable read"))
		return STMT_ISO_REPEATABLE_READ;
	if (streq(s, "serializable"))
		return STMT_ISO_SERIALIZABLE;
	return STMT_ISO_DEFAULT;
}

/* Transaction options (BEGIN, START TRANSACTION, SET TRANSACTION, SESSION CHARACTERISTICS). */
static void
tx_options(struct pb *b, const cJSON *opts, struct stmt_tx *tx)
{
	const cJSON *o;

	tx->read_only = -1;
	tx->deferrable = -1;
	cJSON_ArrayForEach(o, opts) {
		const cJSON *d = jas(o, "DefElem");
		const char *name = jstr(d, "defname");

		if (streq(name, "transaction_isolation"))
			tx->isolation = isolation_from(arg_text(b, jget(d, "arg")));
		else if (streq(name, "transaction_read_only"))
			tx->read_only = ival_of(jget(d, "arg"));
		else if (streq(name, "transaction_deferrable"))
			tx->deferrable = ival_of(jget(d, "arg"));
	}
}

static void
pb_transaction(struct pb *b, const cJSON *t)
{
	static const struct {
		const char *name;
		enum stmt_tx_kind kind;
	} kinds[] = {
		{ "TRANS_STMT_BEGIN", STMT_TX_BEGIN }, { "TRANS_STMT_START", STMT_TX_BEGIN },
		{ "TRANS_STMT_COMMIT", STMT_TX_COMMIT }, { "TRANS_STMT_ROLLBACK", STMT_TX_ROLLBACK },
		{ "TRANS_STMT_SAVEPOINT", STMT_TX_SAVEPOINT },
		{ "TRANS_STMT_RELEASE", STMT_TX_RELEASE },
		{ "TRANS_STMT_ROLLBACK_TO", STMT_TX_ROLLBACK_TO },
		{ "TRANS_STMT_PREPARE", STMT_TX_PREPARE },
		{ "TRANS_STMT_COMMIT_PREPARED", STMT_TX_COMMIT_PREPARED },
		{ "TRANS_STMT_ROLLBACK_PREPARED", STMT_TX_ROLLBACK_PREPARED },
	};
	const char *kind = jstr(t, "kind");
	struct stmt_tx *tx = pb_alloc(b, sizeof(*tx));

	if (!tx)
		return;
	b->s->kind = STMT_TX;
	b->s->tx = tx;
	for (size_t i = 0; i < NK_ARRAY_LEN(kinds); i++)
		if (streq(kind, kinds[i].name))
			tx->kind = kinds[i].kind;
	tx_options(b, jget(t, "options"), tx);
	tx->chain = jbool(t, "chain");
	tx->name = pb_strdup(b, jstr(t, "savepoint_name") ? jstr(t, "savepoint_name") :
							    jstr(t, "gid"));
}

/* Comma-joined text of SET's arguments. */
static const char *
set_value_text(struct pb *b, const cJSON *args)
{
	char buf[1024];
	size_t len = 0;
	const cJSON *a;

	buf[0] = '\0';
	cJSON_ArrayForEach(a, args) {
		const char *t = arg_text(b, a);

		if (!t)
			return NULL;
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", len ? ", " : "", t);
		if (len >= sizeof(buf))
			return NULL;
	}
	return pb_strdup(b, buf);
}

static void
pb_set(struct pb *b, const cJSON *v)
{
	const char *kind = jstr(v, "kind"), *name = jstr(v, "name");
	struct stmt_set *set = pb_alloc(b, sizeof(*set));

	if (!set)
		return;
	b->s->set = set;
	b->s->kind = STMT_SET;
	set->name = pb_strdup(b, name);
	set->is_local = jbool(v, "is_local");
	set->is_neki = name && strncmp(name, "__neki.", 7) == 0;
	if (streq(kind, "VAR_SET_VALUE")) {
		set->kind = STMT_SET_VALUE;
		set->value = set_value_text(b, jget(v, "args"));
	} else if (streq(kind, "VAR_SET_DEFAULT")) {
		set->kind = STMT_SET_DEFAULT;
	} else if (streq(kind, "VAR_SET_CURRENT")) {
		set->kind = STMT_SET_CURRENT;
	} else if (streq(kind, "VAR_RESET")) {
		set->kind = STMT_SET_RESET;
		b->s->kind = STMT_RESET;
	} else if (streq(kind, "VAR_RESET_ALL")) {
		set->kind = STMT_SET_RESET_ALL;
		b->s->kind = STMT_RESET;
	} else if (streq(name, "TRANSACTION SNAPSHOT")) {
		set->kind = STMT_SET_SNAPSHOT;
	} else if (streq(name, "TRANSACTION") || streq(name, "SESSION CHARACTERISTICS")) {
		set->kind = streq(name, "TRANSACTION") ? STMT_SET_TRANSACTION :
							 STMT_SET_SESSION_CHARACTERISTICS;
		b->s->tx = pb_alloc(b, sizeof(*b->s->tx));
		if (b->s->tx)
			tx_options(b, jget(v, "args"), b->s->tx);
	}
}

static void
pb_show(struct pb *b, const cJSON *v)
{
	struct stmt_set *set = pb_alloc(b, sizeof(*set));

	if (!set)
		return;
	b->s->kind = STMT_SHOW;
	b->s->set = set;
	set->kind = STMT_SET_SHOW;
	set->name = pb_strdup(b, jstr(v, "name"));
	set->is_neki = set->name && strncmp(set->name, "__neki.", 7) == 0;
}

static const char *
lower_dup(struct pb *b, const char *s)
{
	char *t = (char *)pb_strdup(b, s);

	for (char *p = t; p && *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return t;
}

/* FORCE_NULL / FORCE_NOT_NULL: a column list, or * (every column). */
static void
copy_force_list(struct pb *b, const cJSON *arg, const char ***cols, uint32_t *n, bool *all)
{
	const cJSON *list = jas(arg, "List"), *it;
	uint32_t i = 0;

	if (jas(arg, "A_Star") || !list) {
		*all = jas(arg, "A_Star") != NULL;
		return;
	}
	*cols = pb_alloc(b, (size_t)(cJSON_GetArraySize(jget(list, "items")) + 1) * sizeof(char *));
	if (!*cols)
		return;
	cJSON_ArrayForEach(it, jget(list, "items"))
		if (jsval(it))
			(*cols)[i++] = pb_strdup(b, jsval(it));
	*n = i;
}

static bool
copy_bool_arg(struct pb *b, const cJSON *arg)
{
	const char *v = arg ? arg_text(b, arg) : NULL;

	return !v || !(streq(v, "false") || streq(v, "off") || streq(v, "0") || streq(v, "no"));
}

static void
copy_option(struct pb *b, struct stmt_copy *c, const cJSON *d)
{
	const char *name = jstr(d, "defname");
	const cJSON *arg = jget(d, "arg");

	if (streq(name, "format"))
		c->format = lower_dup(b, arg_text(b, arg));
	else if (streq(name, "encoding"))
		c->encoding = pb_strdup(b, arg_text(b, arg));
	else if (streq(name, "on_error") || streq(name, "reject_limit") ||
		 streq(name, "log_verbosity"))
		c->has_sharded_only_bad_opt = true;
	else if (streq(name, "header"))
		c->header = copy_bool_arg(b, arg);
	else if (streq(name, "delimiter"))
		c->delimiter = arg_text(b, arg);
	else if (streq(name, "null"))
		c->null_string = arg_text(b, arg);
	else if (streq(name, "quote"))
		c->quote = arg_text(b, arg);
	else if (streq(name, "escape"))
		c->escape = arg_text(b, arg);
	else if (streq(name, "force_null"))
		copy_force_list(b, arg, &c->force_null, &c->nforce_null, &c->force_null_all);
	else if (streq(name, "force_not_null"))
		copy_force_list(b, arg, &c->force_not_null, &c->nforce_not_null,
				&c->force_not_null_all);
}

static void
pb_copy(struct pb *b, const cJSON *cp)
{
	struct stmt_copy *c = pb_alloc(b, sizeof(*c));
	const cJSON *it;
	struct stmt_rel *r;
	int n = cJSON_GetArraySize(jget(cp, "attlist")), i = 0;

	if (!c)
		return;
	b->s->kind = STMT_COPY;
	b->s->copy = c;
	c->is_from = jbool(cp, "is_from");
	c->is_program = jbool(cp, "is_program");
	c->has_file = jstr(cp, "filename") != NULL;
	c->has_query = jget(cp, "query") != NULL;
	c->has_where = jget(cp, "whereClause") != NULL;
	c->format = "text";
	if (jget(cp, "relation")) {
		r = pb_push(b, (void **)&b->s->rels, &b->s->nrels, &b->rel_cap, sizeof(*r));
		if (r) {
			r->schema = pb_strdup(b, jstr(jget(cp, "relation"), "schemaname"));
			r->name = pb_strdup(b, jstr(jget(cp, "relation"), "relname"));
			r->is_target = c->is_from;
			r->only = !jbool(jget(cp, "relation"), "inh");
		}
	}
	if (jas(jget(cp, "query"), "SelectStmt"))
		pb_select(b, jbody(jget(cp, "query")), pb_scope_new(b, 0, STMT_SC_OTHER), false);
	if (n > 0) {
		c->cols = pb_alloc(b, (size_t)n * sizeof(char *));
		if (c->cols)
			cJSON_ArrayForEach(it, jget(cp, "attlist"))
				c->cols[i++] = pb_strdup(b, jsval(it));
		c->ncols = (uint32_t)n;
	}
	cJSON_ArrayForEach(it, jget(cp, "options"))
		copy_option(b, c, jas(it, "DefElem"));
}

/* EXPLAIN options: the ones NEKI_PLAN understands, the ones Postgres has, bad formats. */
static void
explain_option(struct pb *b, struct stmt_explain *e, const cJSON *d)
{
	static const char *const passed[] = { "verbose", "summary", "timing", "costs" };
	const char *name = jstr(d, "defname"), *arg = arg_text(b, jget(d, "arg"));
	bool off = arg && (streq(arg, "false") || streq(arg, "off") || streq(arg, "0"));

	if (streq(name, "neki_plan")) {
		e->neki_plan = !off;
	} else if (streq(name, "neki_pg_plan")) {
		if (!off && !e->reject)
			e->reject = 32;	/* (a shard's Postgres plan beside neki's: not built yet) */
	} else if (streq(name, "analyze")) {
		e->analyze = !off;
	} else if (streq(name, "format")) {
		const char *f = lower_dup(b, arg);

		e->format_text = streq(f, "text");
		e->format_json = streq(f, "json");
		if (!e->format_text && !e->format_json && !e->reject)
			e->reject = 33;
	} else {
		bool ok = false;

		for (size_t i = 0; i < NK_ARRAY_LEN(passed); i++)
			ok = ok || streq(name, passed[i]);
		if (streq(name, "costs"))
			e->costs_off = off;
		if (!ok && !e->reject)
			e->reject = 32;
	}
}

static void
pb_explain(struct pb *b, const cJSON *ex)
{
	struct stmt_explain *e = pb_alloc(b, sizeof(*e));
	const cJSON *q = jget(ex, "query"), *o;
	const char *tag = jtag(q);
	struct pb inner;

	if (!e)
		return;
	b->s->kind = STMT_EXPLAIN;
	b->s->explain = e;
	cJSON_ArrayForEach(o, jget(ex, "options"))
		explain_option(b, e, jas(o, "DefElem"));
	memset(&inner, 0, sizeof(inner));
	inner.cur_node = -1;
	inner.a = b->a;
	inner.sql = b->sql;
	inner.norm = b->norm;
	inner.s = pb_alloc(b, sizeof(*inner.s));
	if (!inner.s)
		return;
	inner.s->sql = b->sql;
	inner.s->nparams = b->s->nparams;
	inner.s->nslots = b->s->nslots;
	inner.s->nstatements = 1;
	pb_statement(&inner, q);
	b->oom = b->oom || inner.oom;
	e->inner = inner.s;
	if (!streq(tag, "SelectStmt") && !streq(tag, "InsertStmt") && !streq(tag, "UpdateStmt") &&
	    !streq(tag, "DeleteStmt") && !e->reject && e->neki_plan)
		e->reject = 30;
	if ((inner.s->flags & STMT_F_WRITING_CTE) && !e->reject && e->neki_plan)
		e->reject = 31;
}

/* ---- DDL classification and the codes the statement alone decides ---- */

/* A table named by a DDL statement: recorded as a target relation. */
static void
ddl_rel(struct pb *b, const cJSON *rv)
{
	struct stmt_rel *r;
	const char *p = jstr(rv, "relpersistence");

	if (!rv)
		return;
	r = pb_push(b, (void **)&b->s->rels, &b->s->nrels, &b->rel_cap, sizeof(*r));
	if (!r)
		return;
	r->schema = pb_strdup(b, jstr(rv, "schemaname"));
	r->name = pb_strdup(b, jstr(rv, "relname"));
	r->is_target = true;
	if (streq(p, "t") || streq(r->schema, "pg_temp"))
		reject(b, 338);
}

static bool
defelem_present(const cJSON *opts, const char *name)
{
	const cJSON *o;

	cJSON_ArrayForEach(o, opts)
		if (streq(jstr(jas(o, "DefElem"), "defname"), name))
			return true;
	return false;
}

static void
ddl_alter_table(struct pb *b, const cJSON *at)
{
	static const struct {
		const char *subtype;
		int code;
	} cmds[] = {
		{ "AT_SetStorage", 334 }, { "AT_SetCompression", 335 },
		{ "AT_SetStatistics", 323 }, { "AT_SetTableSpace", 308 },
		{ "AT_AlterColumnGenericOptions", 324 }, { "AT_GenericOptions", 324 },
	};
	const char *objtype = jstr(at, "objtype");
	const cJSON *c;

	ddl_rel(b, jget(at, "relation"));
	if (streq(objtype, "OBJECT_TYPE"))
		reject(b, 319);
	if (streq(objtype, "OBJECT_FOREIGN_TABLE"))
		reject(b, 314);
	cJSON_ArrayForEach(c, jget(at, "cmds")) {
		const char *sub = jstr(jas(c, "AlterTableCmd"), "subtype");

		if (streq(sub, "AT_DropExpression"))
			b->s->gen_expr_col = pb_strdup(b, jstr(jas(c, "AlterTableCmd"), "name"));

		for (size_t i = 0; i < NK_ARRAY_LEN(cmds); i++)
			if (streq(sub, cmds[i].subtype))
				reject(b, cmds[i].code);
	}
}

static void
ddl_create_table(struct pb *b, const cJSON *cs)
{
	const cJSON *el;

	ddl_rel(b, jget(cs, "relation"));
	if (jstr(cs, "tablespacename"))
		reject(b, 308);
	cJSON_ArrayForEach(el, jget(cs, "tableElts"))
		if (jstr(jas(el, "ColumnDef"), "compression"))
			reject(b, 335);
}

/* CREATE FUNCTION / PROCEDURE: only LANGUAGE sql and plpgsql (325 / 326). */
static void
ddl_function(struct pb *b, const cJSON *f)
{
	const cJSON *o;

	cJSON_ArrayForEach(o, jget(f, "options")) {
		const cJSON *d = jas(o, "DefElem");
		const char *lang;

		if (!streq(jstr(d, "defname"), "language"))
			continue;
		lang = lower_dup(b, arg_text(b, jget(d, "arg")));
		if (lang && !streq(lang, "sql") && !streq(lang, "plpgsql"))
			reject(b, jbool(f, "is_procedure") ? 326 : 325);
	}
}

static void
ddl_define(struct pb *b, const cJSON *d)
{
	static const struct {
		const char *kind;
		int code;
	} kinds[] = {
		{ "OBJECT_TSCONFIGURATION", 302 }, { "OBJECT_TSDICTIONARY", 303 },
		{ "OBJECT_TSPARSER", 316 }, { "OBJECT_TSTEMPLATE", 317 },
		{ "OBJECT_COLLATION", 310 },
	};
	const char *kind = jstr(d, "kind");

	b->s->names_aggregate = streq(kind, "OBJECT_AGGREGATE");
	for (size_t i = 0; i < NK_ARRAY_LEN(kinds); i++)
		if (streq(kind, kinds[i].kind))
			reject(b, kinds[i].code);
}

/* Object types whose DROP/ALTER/COMMENT is refused like their CREATE. */
static int
objtype_code(const char *objtype)
{
	static const struct {
		const char *type;
		int code;
	} types[] = {
		{ "OBJECT_FDW", 312 }, { "OBJECT_FOREIGN_SERVER", 313 },
		{ "OBJECT_FOREIGN_TABLE", 314 }, { "OBJECT_EVENT_TRIGGER", 304 },
		{ "OBJECT_RULE", 305 }, { "OBJECT_LARGEOBJECT", 306 },
		{ "OBJECT_TABLESPACE", 308 },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(types); i++)
		if (streq(objtype, types[i].type))
			return types[i].code;
	return 0;
}

/* Statement tags refused outright, with their code. */
static int
tag_code(const char *tag)
{
	static const struct {
		const char *tag;
		int code;
	} tags[] = {
		{ "CreateOpClassStmt", 300 }, { "CreateOpFamilyStmt", 301 },
		{ "AlterOpFamilyStmt", 301 }, { "CreateEventTrigStmt", 304 },
		{ "AlterEventTrigStmt", 304 }, { "RuleStmt", 305 },
		{ "CreateTableSpaceStmt", 308 }, { "DropTableSpaceStmt", 308 },
		{ "AlterTableSpaceOptionsStmt", 308 }, { "AlterTableMoveAllStmt", 308 },
		{ "CreateAmStmt", 309 }, { "CreateConversionStmt", 311 },
		{ "CreateFdwStmt", 312 }, { "AlterFdwStmt", 312 },
		{ "CreateForeignServerStmt", 313 }, { "AlterForeignServerStmt", 313 },
		{ "CreateForeignTableStmt", 314 }, { "CreateUserMappingStmt", 315 },
		{ "AlterUserMappingStmt", 315 }, { "DropUserMappingStmt", 315 },
		{ "CreateTransformStmt", 318 }, { "LoadStmt", 320 },
		{ "ImportForeignSchemaStmt", 321 }, { "AlterSystemStmt", 20 },
		{ "DoStmt", 20 }, { "CallStmt", 20 }, { "CreateSubscriptionStmt", 20 },
		{ "AlterSubscriptionStmt", 20 }, { "DropSubscriptionStmt", 20 },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(tags); i++)
		if (streq(tag, tags[i].tag))
			return tags[i].code;
	return 0;
}

/* CREATE/ALTER DATABASE options: IS_TEMPLATE (330), TABLESPACE (331), the libc locale. */
static void
ddl_database(struct pb *b, const cJSON *d)
{
	static const char *const locale_opts[] = { "locale", "lc_collate", "lc_ctype" };
	const cJSON *o;
	bool icu = false;

	cJSON_ArrayForEach(o, jget(d, "options")) {
		const cJSON *e = jas(o, "DefElem");
		const char *name = jstr(e, "defname"), *arg = arg_text(b, jget(e, "arg"));

		if (streq(name, "locale_provider") && arg && strcasecmp(arg, "libc") != 0)
			icu = true;
		for (size_t i = 0; i < NK_ARRAY_LEN(locale_opts); i++)
			if (streq(name, locale_opts[i]) && arg && !b->s->db_locale)
				b->s->db_locale = arg;
	}
	if (icu)
		b->s->db_locale = NULL;
	if (defelem_present(jget(d, "options"), "is_template"))
		reject(b, 330);
	if (defelem_present(jget(d, "options"), "tablespace"))
		reject(b, 331);
}

/* Parameterless CREATE LANGUAGE parses as CREATE EXTENSION: tell them apart by the text. */
static bool
text_is_create_language(const char *sql)
{
	static const char *const opt[] = { "or", "replace", "trusted", "procedural" };
	const char *p = sql;
	char w[16];
	int n = 0;

	for (;;) {
		size_t len = 0;

		while (isspace((unsigned char)*p))
			p++;
		while (isalpha((unsigned char)*p) && len + 1 < sizeof(w))
			w[len++] = (char)tolower((unsigned char)*p++);
		w[len] = '\0';
		if (n == 0 && !streq(w, "create"))
			return false;
		if (n > 0 && streq(w, "language"))
			return true;
		if (n > 0) {
			bool ok = false;

			for (size_t i = 0; i < NK_ARRAY_LEN(opt); i++)
				ok = ok || streq(w, opt[i]);
			if (!ok)
				return false;
		}
		n++;
	}
}

static bool
m_advisory(const char *key, const cJSON *node)
{
	const char *name = pb_last_name(jget(node, "funcname"));

	return strcmp(key, "FuncCall") == 0 && name && pb_advisory_name(name);
}

/* ALTER TYPE <name> RENAME VALUE: the planner checks the type against the shard keys. */
static void
ddl_enum_rename(struct pb *b, const cJSON *names)
{
	int n = cJSON_GetArraySize(names);

	b->s->enum_rename = pb_strdup(b, pb_last_name(names));
	if (n >= 2)
		b->s->enum_schema = pb_strdup(b, jsval(cJSON_GetArrayItem(names, n - 2)));
}

/* <rt> (a ResTarget of a CREATE TABLE AS query) as a column of the new table in <c>. */
static void
ctas_col(struct pb *b, const cJSON *rt, struct stmt_ctas_col *c)
{
	const cJSON *fields = jget(jas(jget(rt, "val"), "ColumnRef"), "fields");
	int nf = cJSON_GetArraySize(fields);
	const cJSON *last = nf > 0 ? cJSON_GetArrayItem(fields, nf - 1) : NULL;

	if (last && jas(last, "A_Star")) {
		c->out = "*";
		return;
	}
	c->col = jsval(last) ? pb_strdup(b, jsval(last)) : NULL;
	c->out = jstr(rt, "name") ? pb_strdup(b, jstr(rt, "name")) : c->col;
}

/*
 * The shape of CREATE TABLE AS <body>: a copy of one table's rows is `SELECT <list> FROM t`
 * with at most a WHERE clause and no column names (each shard can copy its own rows; the
 * planner checks the shard key passes through). Its select list goes to b->s->ctas_cols.
 */
static enum stmt_ctas
ctas_shape(struct pb *b, const cJSON *body)
{
	const cJSON *into = jget(body, "into"), *q = jas(jget(body, "query"), "SelectStmt");
	const cJSON *t = jget(q, "targetList"), *f = jget(q, "fromClause"), *x;
	int n = cJSON_GetArraySize(t);

	if (jbool(into, "skipData"))
		return STMT_CTAS_NO_DATA;
	if (!q || jget(into, "colNames") || n < 1 || cJSON_GetArraySize(f) != 1 ||
	    !jas(cJSON_GetArrayItem(f, 0), "RangeVar"))
		return STMT_CTAS_QUERY;
	cJSON_ArrayForEach(x, q)
		if (!streq(x->string, "targetList") && !streq(x->string, "fromClause") &&
		    !streq(x->string, "whereClause") && !streq(x->string, "op") &&
		    !(streq(x->string, "limitOption") &&
		      streq(x->valuestring, "LIMIT_OPTION_DEFAULT")))
			return STMT_CTAS_QUERY;
	b->s->ctas_cols = pb_alloc(b, (size_t)n * sizeof(*b->s->ctas_cols));
	if (!b->s->ctas_cols)
		return STMT_CTAS_QUERY;
	cJSON_ArrayForEach(x, t)
		ctas_col(b, jas(x, "ResTarget"), &b->s->ctas_cols[b->s->nctas_cols++]);
	return STMT_CTAS_COPY;
}

static void
ddl_misc(struct pb *b, const char *tag, const cJSON *body)
{
	const cJSON *set;

	if (streq(tag, "CreateExtensionStmt") && text_is_create_language(b->sql))
		reject(b, 307);
	else if (streq(tag, "CreatePLangStmt"))
		reject(b, jget(body, "plhandler") ? 327 : 307);
	else if (streq(tag, "AlterDomainStmt"))
		reject(b, 329);
	else if (streq(tag, "RenameStmt") && streq(jstr(body, "renameType"),
						    "OBJECT_DOMCONSTRAINT"))
		reject(b, 328);
	else if ((streq(tag, "RenameStmt") && streq(jstr(body, "renameType"), "OBJECT_AGGREGATE")) ||
		 (streq(tag, "AlterObjectSchemaStmt") &&
		  streq(jstr(body, "objectType"), "OBJECT_AGGREGATE")))
		b->s->names_aggregate = true;
	else if (streq(tag, "CreatedbStmt") || streq(tag, "AlterDatabaseStmt"))
		ddl_database(b, body);
	else if (streq(tag, "AlterDatabaseSetStmt") || streq(tag, "AlterRoleSetStmt")) {
		set = jget(body, "setstmt");
		if (streq(jstr(set, "kind"), "VAR_SET_CURRENT"))
			reject(b, 28);
	} else if (streq(tag, "DefineStmt"))
		ddl_define(b, body);
	else if (streq(tag, "CreateFunctionStmt"))
		ddl_function(b, body);
	else if (streq(tag, "DropStmt"))
		reject(b, objtype_code(jstr(body, "removeType")));
	else if (streq(tag, "CommentStmt") || streq(tag, "AlterOwnerStmt") ||
		 streq(tag, "SecLabelStmt"))
		reject(b, objtype_code(jstr(body, "objtype")));
	else if (streq(tag, "GrantStmt") && streq(jstr(body, "objtype"), "OBJECT_LARGEOBJECT"))
		reject(b, 306);
	else if (streq(tag, "CreateSeqStmt") || streq(tag, "AlterSeqStmt"))
		ddl_rel(b, jget(body, "sequence"));
	else if (streq(tag, "ViewStmt"))
		ddl_rel(b, jget(body, "view"));
	else if (streq(tag, "AlterEnumStmt") && jstr(body, "oldVal"))
		ddl_enum_rename(b, jget(body, "typeName"));
	else if (streq(tag, "CreateTableAsStmt")) {
		ddl_rel(b, jget(jget(body, "into"), "rel"));
		if (pb_find(jget(body, "query"), m_advisory))
			reject(b, 139);
		if (jstr(jget(body, "into"), "tableSpaceName"))
			reject(b, 308);
		if (streq(jstr(body, "objtype"), "OBJECT_TABLE"))
			b->s->ctas = ctas_shape(b, body);
	} else if (streq(tag, "IndexStmt")) {
		ddl_rel(b, jget(body, "relation"));
		if (jstr(body, "tableSpace"))
			reject(b, 308);
	}
}

static enum stmt_kind
utility_kind(const char *tag)
{
	static const char *const maint[] = { "VacuumStmt", "ReindexStmt", "ClusterStmt",
					     "CheckPointStmt" };
	static const char *const priv[] = { "GrantStmt", "GrantRoleStmt", "CommentStmt",
					    "SecLabelStmt", "CreatePublicationStmt",
					    "AlterPublicationStmt", "AlterDefaultPrivilegesStmt" };
	static const char *const session[] = {
		"PrepareStmt", "ExecuteStmt", "DeallocateStmt", "DiscardStmt", "ListenStmt",
		"UnlistenStmt", "NotifyStmt", "DeclareCursorStmt", "FetchStmt", "ClosePortalStmt",
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(maint); i++)
		if (streq(tag, maint[i]))
			return STMT_MAINT;
	for (size_t i = 0; i < NK_ARRAY_LEN(priv); i++)
		if (streq(tag, priv[i]))
			return STMT_PRIV;
	for (size_t i = 0; i < NK_ARRAY_LEN(session); i++)
		if (streq(tag, session[i]))
			return STMT_SESSION;
	if (strncmp(tag, "Create", 6) == 0 || strncmp(tag, "Alter", 5) == 0 ||
	    strncmp(tag, "Drop", 4) == 0 || streq(tag, "IndexStmt") || streq(tag, "RenameStmt") ||
	    streq(tag, "DefineStmt") || streq(tag, "ViewStmt") || streq(tag, "TruncateStmt") ||
	    streq(tag, "CompositeTypeStmt") || streq(tag, "RefreshMatViewStmt") ||
	    streq(tag, "RuleStmt") || streq(tag, "ReassignOwnedStmt") ||
	    streq(tag, "DropOwnedStmt"))
		return STMT_DDL;
	return STMT_OTHER;
}

static void
pb_truncate(struct pb *b, const cJSON *t)
{
	const cJSON *r;

	cJSON_ArrayForEach(r, jget(t, "relations"))
		ddl_rel(b, jas(r, "RangeVar"));
	if (jbool(t, "restart_seqs") && streq(jstr(t, "behavior"), "DROP_CASCADE"))
		reject(b, 131);
}

/* pb_utility: see parse_int.h. */
void
pb_utility(struct pb *b, const char *tag, const cJSON *body)
{
	if (streq(tag, "TransactionStmt"))
		pb_transaction(b, body);
	else if (streq(tag, "VariableSetStmt"))
		pb_set(b, body);
	else if (streq(tag, "VariableShowStmt"))
		pb_show(b, body);
	else if (streq(tag, "CopyStmt"))
		pb_copy(b, body);
	else if (streq(tag, "ExplainStmt"))
		pb_explain(b, body);
	else if (streq(tag, "DeclareCursorStmt") || streq(tag, "FetchStmt") ||
		 streq(tag, "ClosePortalStmt"))
		pb_cursor(b, tag, body);
	if (b->s->kind != STMT_EMPTY)
		return;
	b->s->kind = utility_kind(tag);
	if (streq(tag, "DoStmt"))
		reject(b, pb_plpgsql_code(body));	/* 0: 20 below */
	reject(b, tag_code(tag));
	if (streq(tag, "CreateStmt"))
		ddl_create_table(b, body);
	else if (streq(tag, "AlterTableStmt"))
		ddl_alter_table(b, body);
	else if (streq(tag, "TruncateStmt"))
		pb_truncate(b, body);
	else
		ddl_misc(b, tag, body);
	pb_walk(b, body, 0, false);
}
