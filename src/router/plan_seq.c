/*
 * plan_seq.c - sequence values the router supplies (spec 6.1, DESIGN.md 4): an INSERT into
 * a sharded or reference table that omits an identity or serial column gets a fill for it
 * (the executor takes one value per row from the sequence's batches, reserved on its home
 * shard, and sends the INSERT rewritten by plan_rewrite()), so the shards never draw from
 * their local copies of the sequence and ids are unique across shards and equal on every
 * reference copy. When the shard key itself is filled, each row routes by its new value
 * (plan_fill_route()); INSERT ... SELECT takes one per source row (plan_insel.c).
 * nextval('seq') is evaluated by the router where it runs once per call: a SELECT without
 * tables and INSERT VALUES cells; in a WHERE it is 146, in UPDATE SET 147, anywhere else
 * (per row) 101.
 */
#include "neki/base.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "plan_int.h"

/* Home shard and CACHE of sequence <schema>.<name> owned by <owner> (may be NULL). */
static bool
seq_home(struct pctx *c, const char *schema, const char *name, const struct prel *owner,
	 const char **home, int64_t *cache)
{
	const struct plan_catalog *cat = c->in->cat;
	struct topo_seq_owner own = { owner ? owner->schema : NULL, owner ? owner->r->name : NULL };
	uint32_t g = topo_image_resolve_sequence(c->img, c->in->sess->db, schema, name, &own,
						 owner ? 1 : 0);

	if (g == TOPO_IMG_NONE)
		return nk_error_set(c->err, ERRCODE_UNDEFINED_OBJECT,
				    "sequence \"%s.%s\" has no shard group in the "
				    "data topology", schema, name);
	*home = topo_image_range_shard(c->img, g, 0);
	*cache = cat && cat->seq_cache ? cat->seq_cache(cat->arg, schema, name) : 0;
	return true;
}

/* Column <name> is given by the INSERT (listed, or positional before the values end). */
static bool
column_given(const struct stmt_insert *ins, const char *name, uint32_t attnum)
{
	if (!ins->cols)
		return attnum <= ins->ncols;
	for (uint32_t i = 0; i < ins->ncols; i++)
		if (ins->cols[i] && strcmp(ins->cols[i], name) == 0)
			return true;
	return false;
}

static bool
add_fill(struct pctx *c, struct prel *t, const struct cat_column *col)
{
	struct plan *o = c->out;
	struct plan_fill *f, *grown = rarena_alloc(c->a, (o->nfills + 1) * sizeof(*grown));

	if (!grown)
		return nk_error_oom(c->err);
	if (o->nfills)
		memcpy(grown, o->fills, o->nfills * sizeof(*grown));
	o->fills = grown;
	f = &o->fills[o->nfills++];
	f->column = rarena_strdup(c->a, col->name);
	f->seq_schema = rarena_strdup(c->a, col->seq.schema);
	f->seq_name = rarena_strdup(c->a, col->seq.name);
	if (!f->column || !f->seq_schema || !f->seq_name)
		return nk_error_oom(c->err);
	f->is_key = t->sharded && strcmp(col->name, t->key_col) == 0;
	f->cell = -1;
	o->route_by_fill = o->route_by_fill || f->is_key;
	return seq_home(c, f->seq_schema, f->seq_name, t, &f->home, &f->cache);
}

/*
 * The cell of a given column <name> (attnum) in each VALUES row when some row says DEFAULT
 * there (the shard would draw from its own copy of the sequence); -1 otherwise.
 */
static int32_t
default_cell(const struct stmt_insert *ins, const char *name, uint32_t attnum)
{
	uint32_t cell = attnum - 1;

	if (ins->cols)
		for (cell = 0; cell < ins->ncols; cell++)
			if (ins->cols[cell] && strcmp(ins->cols[cell], name) == 0)
				break;
	if (cell >= ins->ncols)
		return -1;
	for (uint32_t r = 0; r < ins->nrows; r++)
		if (ins->rows[r].cells[cell].kind == STMT_V_DEFAULT)
			return (int32_t)cell;
	return -1;
}

/* The columns positional VALUES give (the executor writes them out with the fills). */
static bool
positional_cols(struct pctx *c, const struct prel *t)
{
	const struct plan_catalog *cat = c->in->cat;
	uint32_t n = c->s->insert->ncols;

	c->out->cols = rarena_alloc(c->a, (n + 1) * sizeof(*c->out->cols));
	if (!c->out->cols)
		return nk_error_oom(c->err);
	for (uint32_t i = 0; i < n; i++) {
		const char *name = cat->column_name ? cat->column_name(cat->arg, t->schema,
								       t->r->name, i + 1) : NULL;

		if (!name)
			return nk_error_set(c->err, ERRCODE_SYNTAX_ERROR,
					    "INSERT has more expressions than target "
					    "columns");
		c->out->cols[i] = name;
	}
	c->out->ncols = n;
	return true;
}

/* plan_fills: see plan_int.h. */
bool
plan_fills(struct pctx *c, struct prel *t)
{
	const struct plan_catalog *cat = c->in->cat;
	const struct stmt_insert *ins = c->s->insert;
	struct cat_column col;

	if (!cat || !cat->column || (!t->sharded && t->res.kind != TOPO_REL_REFERENCE))
		return true;	/* an unsharded table's shard holds its sequences (spec 2.3) */
	for (uint32_t attnum = 1; cat->column(cat->arg, t->schema, t->r->name, attnum, &col);
	     attnum++) {
		int32_t cell = -1;

		if (!col.seq.name || col.generated || (!col.identity && !col.has_default))
			continue;
		if (column_given(ins, col.name, attnum) &&
		    ((t->sharded && strcmp(col.name, t->key_col) == 0) ||	/* DEFAULT: 120 */
		     (cell = default_cell(ins, col.name, attnum)) < 0))
			continue;
		if (!add_fill(c, t, &col))
			return false;
		c->out->fills[c->out->nfills - 1].cell = cell;
		c->out->fills[c->out->nfills - 1].attnum = attnum;
	}
	if (c->out->nfills == 0)
		return true;
	if (c->s->flags & STMT_F_FROM_SELECT)
		return true;	/* one value per source row: the router runs it (plan_insel.c) */
	if (ins->nrows == 0)
		return nk_error_nk013(c->err, 120);	/* DEFAULT VALUES */
	c->out->nrows = ins->nrows;
	return ins->cols || positional_cols(c, t);
}

/* plan_fill_key_plan: see plan_int.h. The shards are known once the values are. */
bool
plan_fill_key_plan(struct pctx *c, struct prel *t)
{
	struct plan *o = c->out;

	o->group = topo_image_group_uid(c->img, t->res.group);
	o->kind = PLAN_SHARD_SET;
	o->op = PLAN_OP_INSERT_SPLIT;
	o->level = c->s->insert->nrows == 1 ? PLAN_FANOUT_SINGLE : PLAN_FANOUT_MULTI;
	o->has_key = true;
	o->key.group = t->res.group;
	o->key.index = t->res.index;
	o->key.col_type = t->col_type;
	o->key.column = t->key_col;
	o->key.col_pos = -1;
	return t->typed || nk_error_set(c->err, ERRCODE_UNDEFINED_OBJECT,
					"type of shard-key column \"%s\" of "
					"table \"%s\" is unknown", t->key_col, t->r->name);
}

/* plan_fill_route: see plan.h. */
bool
plan_fill_route(struct rarena *a, const struct plan_input *in, struct plan *p,
		const int64_t *values, struct nk_error *err)
{
	struct pctx c;
	uint32_t f = 0;

	while (f < p->nfills && !p->fills[f].is_key)
		f++;
	if (f == p->nfills || !p->route_by_fill)
		return true;
	memset(&c, 0, sizeof(c));
	c.a = a;
	c.in = in;
	c.img = in->topo;
	c.err = err;
	c.out = p;
	p->nshards = 0;
	p->nparts = 0;
	p->parts = rarena_alloc(a, (p->nrows + 1) * sizeof(*p->parts));
	if (!p->parts)
		return nk_error_oom(err);
	for (uint32_t r = 0; r < p->nrows; r++) {
		char text[32];
		const char *shard;
		uint32_t k = 0;

		snprintf(text, sizeof(text), "%lld", (long long)values[(size_t)f * p->nrows + r]);
		if (!plan_route_text(in, p, text, strlen(text), &shard, err))
			return false;
		while (k < p->nparts && strcmp(p->parts[k].shard, shard) != 0)
			k++;
		if (k == p->nparts) {
			p->parts[k].shard = shard;
			p->parts[k].rows = rarena_alloc(a, p->nrows * sizeof(uint32_t));
			if (!p->parts[k].rows)
				return nk_error_oom(err);
			p->nparts++;
			if (!plan_add_shard(&c, shard))
				return false;
		}
		p->parts[k].rows[p->parts[k].nrows++] = r;
	}
	if (p->nshards == 1)
		p->kind = PLAN_SINGLE, p->op = PLAN_OP_EQUAL_UNIQUE;
	return plan_check_session(&c);
}

/* ---- nextval('seq') ---- */

/* One identifier of a regclass text at <*p>: "quoted" kept, unquoted lowercased. */
static bool
regclass_ident(const char **p, char *out, size_t cap)
{
	size_t n = 0;
	const char *s = *p;

	if (*s == '"') {
		for (s++; *s && !(*s == '"' && s[1] != '"'); s++) {
			if (*s == '"')
				s++;
			if (n + 1 >= cap)
				return false;
			out[n++] = *s;
		}
		if (*s != '"')
			return false;
		s++;
	} else {
		for (; *s && *s != '.'; s++) {
			if (n + 1 >= cap || isspace((unsigned char)*s))
				return false;
			out[n++] = (char)tolower((unsigned char)*s);
		}
	}
	out[n] = '\0';
	*p = s;
	return n > 0;
}

/* The sequence regclass text <text> names ("s", "public.s", "\"S\""), in the arena. */
static bool
text_seq(struct pctx *c, const char *text, const char **schema, const char **name)
{
	char a[128], b[128];
	const char *p = text;

	if (!regclass_ident(&p, a, sizeof(a)))
		return false;
	if (*p == '.') {
		p++;
		if (!regclass_ident(&p, b, sizeof(b)) || *p)
			return false;
		*schema = rarena_strdup(c->a, a);
		*name = rarena_strdup(c->a, b);
	} else {
		if (*p)
			return false;
		*schema = c->in->sess->schema;
		*name = rarena_strdup(c->a, a);
	}
	return *schema && *name;
}

/* The sequence a nextval() string literal (token <t>) names. */
static bool
literal_seq(struct pctx *c, const char *sql, const struct ptok *t, const char **schema,
	    const char **name)
{
	char text[256];
	size_t n = 0;

	for (uint32_t i = 1; i + 1 < t->len && n + 1 < sizeof(text); i++) {
		text[n++] = sql[t->start + i];
		if (sql[t->start + i] == '\'')
			i++;	/* '' */
	}
	text[n] = '\0';
	return text_seq(c, text, schema, name);
}

static bool
add_nextval(struct pctx *c, const char *sql, const struct ptok *t, uint32_t i, uint32_t arg,
	    uint32_t end, enum plan_seq_fn fn)
{
	struct plan *o = c->out;
	struct plan_nextval *nv, *grown = rarena_alloc(c->a, (o->nnextvals + 1) * sizeof(*grown));

	if (!grown)
		return nk_error_oom(c->err);
	if (o->nnextvals)
		memcpy(grown, o->nextvals, o->nnextvals * sizeof(*grown));
	o->nextvals = grown;
	nv = &o->nextvals[o->nnextvals++];
	if (i >= 2 && ptok_is(sql, &t[i - 1], "."))
		i -= 2;	/* pg_catalog.nextval */
	nv->fn = fn;
	nv->start = t[i].start;
	nv->len = t[end].start + 1 - t[i].start;
	nv->seq_schema = nv->seq_name = nv->home = NULL;
	nv->cache = 0;
	if (fn == PLAN_SEQ_LASTVAL)
		return true;
	if (fn == PLAN_SEQ_CURRVAL)
		return (t[arg].kind == 's' &&
			literal_seq(c, sql, &t[arg], &nv->seq_schema, &nv->seq_name)) ||
		       nk_error_nk013(c->err, 101);
	if (t[arg].kind != 's' || !literal_seq(c, sql, &t[arg], &nv->seq_schema, &nv->seq_name))
		return nk_error_nk013(c->err, 101);
	return seq_home(c, nv->seq_schema, nv->seq_name, NULL, &nv->home, &nv->cache);
}

/* plan_nextvals: see plan_int.h. */
bool
plan_nextvals(struct pctx *c)
{
	const char *sql = c->in->sql ? c->in->sql : c->s->sql;
	uint32_t f = c->s->flags, n, arg, end;
	struct ptok *t;

	static const char *const fnames[] = { "nextval", "currval", "lastval" };
	bool any = false;

	for (size_t k = 0; k < NK_ARRAY_LEN(fnames); k++)
		any = any || stmt_calls(c->s, fnames[k]);
	if (!any)
		return true;
	if (f & STMT_F_SEQ_WHERE)
		return nk_error_nk013(c->err, 146);
	if (f & STMT_F_SEQ_SET)
		return nk_error_nk013(c->err, 147);
	if ((f & STMT_F_SEQ_ROW) && !(c->s->kind == STMT_SELECT && c->s->nrels == 0))
		return nk_error_nk013(c->err, 101);
	if (!plan_lex(c->a, sql, &t, &n))
		return nk_error_oom(c->err);
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < NK_ARRAY_LEN(fnames); k++)
			if (plan_find_nextval(sql, t, n, i, fnames[k], &arg, &end) &&
			    !add_nextval(c, sql, t, i, arg, end, (enum plan_seq_fn)k))
				return false;
	return c->out->nnextvals > 0 || nk_error_nk013(c->err, 101);
}

/* ---- setval('seq', value [, is_called]) ---- */

/* plan_bool_text: see plan_int.h. */
bool
plan_bool_text(const char *s, bool *out)
{
	static const struct {
		const char *word;
		size_t min;
		bool value;
	} words[] = {
		{ "true", 1, true }, { "false", 1, false }, { "yes", 1, true }, { "no", 1, false },
		{ "on", 2, true }, { "off", 2, false }, { "1", 1, true }, { "0", 1, false },
	};
	size_t n = strlen(s);

	for (size_t i = 0; i < NK_ARRAY_LEN(words); i++) {
		if (n >= words[i].min && n <= strlen(words[i].word) &&
		    strncasecmp(s, words[i].word, n) == 0) {
			*out = words[i].value;
			return true;
		}
	}
	return false;
}

/* setval()'s arguments must be constants the router reads: 0A000 naming the fix. */
static bool
setval_refuse(struct pctx *c, const char *what)
{
	nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
		     "setval() on a sharded database needs %s", what);
	nk_error_hint(c->err, "Compute the value first and pass it as a literal or a parameter.");
	return false;
}

/* is_called of a setval() call: absent (true), a constant or a parameter; *<known> false
 * for NULL (setval() is strict: nothing happens) or text that is no boolean (the shard
 * raises its error). */
static bool
setval_called(struct pctx *c, const struct stmt_call *call, bool *is_called, bool *known)
{
	const struct stmt_value *v = &call->args[2];
	const char *text;
	bool is_null;

	*is_called = *known = true;
	if (call->nargs < 3)
		return true;
	if (v->kind == STMT_V_SLOT && v->is_param && v->slot < c->in->nparams &&
	    c->in->params[v->slot].binary) {
		const struct plan_param *pp = &c->in->params[v->slot];

		*known = pp->len == 1;
		*is_called = *known && pp->data[0] != 0;
		return true;
	}
	if (v->kind == STMT_V_EXPR || v->kind == STMT_V_DEFAULT)
		return setval_refuse(c, "a constant is_called argument");
	if (!plan_value_text(c, v, &text, &is_null))
		return false;
	*known = !is_null && text && plan_bool_text(text, is_called);
	return true;
}

/* Append <sv> to the plan's setval() calls. */
static bool
setval_add(struct pctx *c, const struct plan_setval *sv)
{
	struct plan *o = c->out;
	struct plan_setval *grown = rarena_alloc(c->a, (o->nsetvals + 1) * sizeof(*grown));

	if (!grown)
		return nk_error_oom(c->err);
	if (o->nsetvals)
		memcpy(grown, o->setvals, o->nsetvals * sizeof(*grown));
	grown[o->nsetvals] = *sv;
	o->setvals = grown;
	o->nsetvals++;
	return true;
}

/*
 * plan_setval: see plan_int.h. The value is read as the router's bigint; a call the shard
 * will refuse or ignore (NULL arguments, a value of another type, a wrong signature) runs
 * there unrecorded.
 */
bool
plan_setval(struct pctx *c, const struct stmt_call *call, const char **home)
{
	struct plan_setval sv;
	const char *text;
	int64_t cache;
	bool is_null, known;

	*home = NULL;
	if (stmt_calls(c->s, "nextval") || stmt_calls(c->s, "currval") ||
	    stmt_calls(c->s, "lastval")) {
		nk_error_set(c->err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "setval() and nextval(), currval() or lastval() in one "
			     "statement are not supported on a sharded database");
		nk_error_hint(c->err, "Call them in separate statements.");
		return false;
	}
	if (call->named || call->nargs < 2 || call->nargs > 3)
		return true;	/* not setval(regclass, bigint [, bool]): the shard says so */
	if (call->args[0].kind != STMT_V_SLOT && call->args[0].kind != STMT_V_CONST)
		return setval_refuse(c, "the sequence as a constant");
	if (call->args[1].kind == STMT_V_EXPR && !call->args[1].has_subquery && c->nrels > 0)
		return nk_error_nk013(c->err, 101);	/* a value per row of the tables */
	if (call->args[1].kind == STMT_V_EXPR || call->args[1].kind == STMT_V_DEFAULT)
		return setval_refuse(c, "a constant value");
	if (!plan_value_text(c, &call->args[0], &text, &is_null))
		return false;
	if (is_null || !text)
		return true;	/* strict: setval(NULL, ...) is NULL */
	memset(&sv, 0, sizeof(sv));
	if (!text_seq(c, text, &sv.seq_schema, &sv.seq_name))
		return nk_error_set(c->err, ERRCODE_UNDEFINED_TABLE,
				    "relation \"%s\" does not exist", text);
	if (!seq_home(c, sv.seq_schema, sv.seq_name, NULL, home, &cache))
		return false;
	if (!plan_value_int(c, &call->args[1], KS_TYPE_INT8, &sv.value, &is_null)) {
		nk_error_clear(c->err);		/* not a bigint: the shard raises its error */
		return true;
	}
	if (!setval_called(c, call, &sv.is_called, &known))
		return false;
	return is_null || !known || setval_add(c, &sv);
}
