/*
 * route_subq.c - a subquery that the statement's shards cannot evaluate each on its own rows
 * (`SELECT exists(SELECT 1 FROM orders WHERE total > 999)`, `WHERE total > (SELECT
 * avg(total) FROM orders)`, `id IN (SELECT ... FROM other_sharded ...)`, a derived table or
 * WITH query with GROUP BY, LIMIT, DISTINCT or UNION over every shard's rows): the router
 * evaluates it first, as a statement of its own routed like any other (one shard, or every
 * shard with the merge step), and its rows replace it in the text as a VALUES list of the
 * same column names and types; the statement then runs again with that constant in place
 * of the subquery, and is planned as one whose subquery reads no sharded table. The
 * planner names the subquery (plan.materialize: the innermost one holding the refused
 * part); nothing reaches the client from its run. Tables that cannot meet on one shard
 * (a join off the shard key) are read the same way: the planner names one of them
 * (plan.broadcast), which the statement reads again as `(SELECT <columns> FROM name) name`,
 * a derived table the next round evaluates; a later round that would read the same text
 * again takes the rows of the first (struct rsubq_read). A subquery that
 * reads a column of its outer query cannot run on its own (42P01 / 42703 there): the
 * statement keeps the planner's refusal. Several such subqueries are evaluated one after the
 * other (ROUTE_SUBQ_ROUNDS at most). At an Execute (extended protocol) the subquery runs as
 * a simple Query, the bound values it reads written in as typed constants (a binary one of
 * a type the router cannot read: 0A000), and the statement again at the Execute, its Parse
 * carrying the new text (route_ext_composed(); a value it no longer reads declared text). Entry points: route_subq_start(), route_subq_take(), route_subq_answer(),
 * route_subq_keep(), route_subq_finished(), route_subq_free().
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include "neki/catalog_image.h"
#include "neki/memstream.h"
#include "neki/merge.h"
#include "neki/parse.h"
#include "neki/proto.h"
#include "neki/sqlscan.h"
#include "neki/plan_explain.h"
#include "route_int.h"
#include "route_client.h"
#include "route_exec.h"
#include "route_gsi.h"
#include "route_pull.h"
#include "route_pushdown.h"
#include "route_sqltext.h"
#include "route_subq.h"

#define ROUTE_SUBQ_ROUNDS 16		/* rounds of one statement (two per table read) */
#define ROUTE_SUBQ_COLS 64		/* columns of one subquery's result */
#define ROUTE_SUBQ_TYPE_MAX 160		/* a type's SQL name */
#define ROUTE_SUBQ_DEPTH 64		/* parentheses followed to find a derived table */
#define ROUTE_SUBQ_READS 8		/* table reads of one statement remembered */

/* A table the statement reads first (table_select()'s text) and, once read, its rows as the
 * text that takes its place: a second read of the same text in a later round (the same table,
 * columns and conditions, as TPC-H Q17's lineitem) takes them instead of reading again. */
struct rsubq_read {
	char *text;			/* owned */
	char *values;			/* owned: NULL until read */
};

struct rsubq {
	char *sql;			/* owned: the statement's text */
	size_t start, end;		/* the subquery's bytes in it, '(' to ')' */
	struct nk_error refusal;	/* the planner's, kept when the subquery is correlated */
	uint32_t rounds;		/* subqueries evaluated for the statement */
	bool capture;			/* the subquery runs: its answer is kept here */
	bool ext;			/* the statement is an Execute (extended protocol): the
					 * subquery runs as a simple Query, the statement again
					 * at the Execute's resume */
	char *next;			/* owned: the text to route next (route_subq_take) */
	/* the subquery's result, as SQL text */
	uint16_t ncols;
	char (*types)[ROUTE_SUBQ_TYPE_MAX];	/* owned: each column's type, as SQL */
	char *names;			/* owned: the select list "c1 AS "n1", ..." */
	FILE *rows;			/* the VALUES rows written so far */
	char *rows_buf;
	size_t rows_len;
	uint64_t nrows;
	struct rsubq_read reads[ROUTE_SUBQ_READS];	/* the statement's table reads */
	uint32_t nreads;
	size_t reads_bytes;		/* of their values: at most router_work_mem */
	struct rsubq_read *reading;	/* the one the capture evaluates; NULL */
};

static void
rows_close(struct rsubq *q)
{
	if (q->rows != NULL)
		fclose(q->rows);
	q->rows = NULL;
	free(q->rows_buf);
	q->rows_buf = NULL;
	q->rows_len = 0;
}

/* The subquery's run is over: the session's own again. */
static void
capture_end(struct route *r, struct rsubq *q)
{
	if (q->capture && q->ext)
		r->x.ext_exec = true;	/* (the Execute's again) */
	q->capture = r->x.subq_capture = false;
	q->reading = NULL;
	rows_close(q);
}

/* route_subq_settle: see route_subq.h. */
void
route_subq_settle(struct route *r, enum rstep rc)
{
	if (r->x.subq != NULL && r->x.subq->capture && rc != RSTEP_ASYNC)
		capture_end(r, r->x.subq);	/* (refused before anything was sent) */
}

/* route_subq_reads_free: see route_subq.h. */
void
route_subq_reads_free(struct route *r)
{
	struct rsubq *q = r->x.subq;

	if (q == NULL)
		return;
	for (uint32_t i = 0; i < q->nreads; i++) {
		free(q->reads[i].text);
		free(q->reads[i].values);
	}
	q->nreads = 0;
	q->reads_bytes = 0;
	q->reading = NULL;
}

void
route_subq_free(struct route *r)
{
	struct rsubq *q = r->x.subq;

	if (q == NULL)
		return;
	capture_end(r, q);
	route_subq_reads_free(r);
	free(q->sql);
	free(q->next);
	free(q->types);
	free(q->names);
	free(q);
	r->x.subq = NULL;
}

/* route_subq_take: see route_subq.h. */
char *
route_subq_take(struct route *r, bool *simple)
{
	char *next;

	*simple = false;
	if (r->x.subq == NULL)
		return NULL;
	if (r->x.subq->next == NULL) {	/* a later statement: the last one's state goes */
		route_subq_free(r);
		return NULL;
	}
	next = r->x.subq->next;
	r->x.subq->next = NULL;
	if (r->x.subq->capture && r->x.subq->ext) {
		*simple = true;
		r->x.ext_exec = false;	/* (until route_subq_finished()) */
	}
	return next;
}

/* ---- the subquery's place in the text ---- */

/* The first '(' at or after <p> outside quotes and comments, or NULL. */
static const char *
next_open(const char *sql, const char *p)
{
	while (*p != '\0' && *p != '(') {
		const char *e = sql_skip_item(sql, p);

		p = e != p ? e : p + 1;
	}
	return *p == '(' ? p : NULL;
}

/* Just after the parenthesis closing the one at <p>, or NULL. */
static const char *
past_group(const char *sql, const char *p)
{
	for (int depth = 0; *p != '\0';) {
		const char *e = sql_skip_item(sql, p);

		if (e != p) {
			p = e;
			continue;
		}
		depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
		p++;
		if (depth == 0)
			return p;
	}
	return NULL;
}

/* <p> past white space and comments. */
static const char *
past_blanks(const char *sql, const char *p)
{
	for (;;) {
		const char *e = sql_skip_item(sql, p);

		if (e != p && (p[0] == '-' || p[0] == '/'))	/* a comment */
			p = e;
		else if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f')
			p++;
		else
			return p;
	}
}

/* A WITH query's name at <p>, and its column list if any: just after them. */
static const char *
past_cte_name(const char *sql, const char *p)
{
	const char *e = sql_skip_item(sql, p);	/* a "quoted" name */

	if (e == p)
		while (sql_ident_char(*e))
			e++;
	e = past_blanks(sql, e);
	return *e == '(' ? past_group(sql, e) : e;
}

/* Is one of <words> at <p>? */
static bool
word_at(const char *p, const char *const *words, size_t nwords)
{
	for (size_t i = 0; i < nwords; i++) {
		size_t n = strlen(words[i]);

		if (strncasecmp(p, words[i], n) == 0 && !sql_ident_char(p[n]))
			return true;
	}
	return false;
}

/* Is the group opening at <p> a whole parenthesised query: one starts inside it (SELECT,
 * VALUES, WITH, TABLE, or a parenthesised arm), and no set operation or ORDER BY / LIMIT
 * continues it after? (Inner groups are tried first: an arm is never taken for more.) */
static bool
whole_query(const char *sql, const char *p)
{
	static const char *const starts[] = { "select", "values", "with", "table" };
	static const char *const goes_on[] = { "union", "intersect", "except", "order",
					       "limit", "offset", "fetch", "for" };
	const char *in = past_blanks(sql, p + 1), *close;

	if ((*in != '(' && !word_at(in, starts, NK_ARRAY_LEN(starts))) ||
	    (close = past_group(sql, p)) == NULL)
		return false;
	return !word_at(past_blanks(sql, close), goes_on, NK_ARRAY_LEN(goes_on));
}

/* The '(' of the innermost whole parenthesised query holding offset <loc> (a derived
 * table's first token), or NULL. */
static const char *
query_open_before(const char *sql, size_t loc)
{
	const char *open[ROUTE_SUBQ_DEPTH];
	size_t depth = 0;

	for (const char *p = sql; *p != '\0' && (size_t)(p - sql) < loc;) {
		const char *e = sql_skip_item(sql, p);

		if (e != p) {
			p = e;
			continue;
		}
		if (*p == '(' && depth < ROUTE_SUBQ_DEPTH)
			open[depth] = p;
		depth += *p == '(' ? 1 : *p == ')' && depth > 0 ? -1 : 0;
		p++;
	}
	if (depth > ROUTE_SUBQ_DEPTH)
		return NULL;	/* (deeper than followed: not evaluated) */
	while (depth > 0) {
		const char *p = open[--depth];

		if (whole_query(sql, p))
			return p;
	}
	return NULL;
}

/* <sql> past `EXPLAIN [(options)] [ANALYZE] [VERBOSE]` (its statement's first token). */
static const char *
past_explain(const char *sql)
{
	static const char *const explain[] = { "explain" };
	static const char *const opts[] = { "analyze", "analyse", "verbose" };
	const char *p = past_blanks(sql, sql);

	if (!word_at(p, explain, 1))
		return p;
	p = past_blanks(sql, p + 7);
	if (*p == '(' && (p = past_group(sql, p)) == NULL)
		return sql + strlen(sql);
	for (p = past_blanks(sql, p); word_at(p, opts, 3); p = past_blanks(sql, p))
		while (sql_ident_char(*p))
			p++;
	return p;
}

/* The end of arm text [arm, p) without its trailing blanks. */
static size_t
arm_end(const char *sql, const char *arm, const char *p)
{
	while (p > arm && (p[-1] == ' ' || p[-1] == '\t' || p[-1] == '\n' || p[-1] == '\r'))
		p--;
	return (size_t)(p - sql);
}

/*
 * The arm of the top level's set operation holding offset <loc> (plan_top_arm()):
 * [*start, *end). The arms run from the first SELECT / VALUES / TABLE or '(' (after a WITH
 * list: the first SELECT, VALUES or TABLE) to each UNION / INTERSECT / EXCEPT, the last one
 * up to the ORDER BY / LIMIT / OFFSET / FETCH / FOR of the whole, a ';' or the end.
 */
static bool
top_arm_span(const char *sql, size_t loc, size_t *start, size_t *end)
{
	static const char *const setops[] = { "union", "intersect", "except" };
	static const char *const tail[] = { "order", "limit", "offset", "fetch", "for" };
	static const char *const heads[] = { "select", "values", "table" };
	static const char *const with[] = { "with" }, *const quant[] = { "all", "distinct" };
	const char *p = past_explain(sql), *arm = word_at(p, with, 1) ? NULL : p;
	size_t depth = 0;

	if (arm != NULL && *arm != '(' && !word_at(arm, heads, 3))
		return false;	/* (DECLARE ... CURSOR FOR: not here) */
	while (*p != '\0' && !(depth == 0 && *p == ';')) {
		const char *e = sql_skip_item(sql, p);
		bool word = depth == 0 && sql_ident_char(*p) && (p == sql || !sql_ident_char(p[-1]));

		if (e != p) {
			p = e;
			continue;
		}
		if (word && arm == NULL && word_at(p, heads, 3)) {
			arm = p;
		} else if (word && arm != NULL && word_at(p, setops, 3)) {
			if ((size_t)(arm - sql) <= loc && loc < (size_t)(p - sql))
				break;
			while (sql_ident_char(*p))
				p++;
			p = past_blanks(sql, p);
			if (word_at(p, quant, 2))
				while (sql_ident_char(*p))
					p++;
			arm = past_blanks(sql, p);
			p = arm;
			continue;
		} else if (word && arm != NULL && word_at(p, tail, 5)) {
			break;
		}
		if (*p == '(')
			depth++;
		else if (*p == ')' && depth > 0)
			depth--;
		p++;
	}
	if (arm == NULL || (size_t)(arm - sql) > loc || loc >= (size_t)(p - sql))
		return false;
	*start = (size_t)(arm - sql);
	*end = arm_end(sql, arm, p);
	return *end > *start;
}

/*
 * The parenthesised text of scope <sc> in <sql>: [*start, *end). A subquery in an
 * expression is the first group after its SubLink's offset (EXISTS, IN, the operator, ANY,
 * or the '(' itself); a WITH query's, the first after its name and column list; a derived
 * table's, the innermost parenthesised query holding its first token; an arm of the top
 * level's set operation, its text (*<bare> when it is not parenthesised).
 */
static bool
subq_span(const char *sql, const struct stmt_scope *sc, size_t *start, size_t *end, bool *bare)
{
	const char *p, *close;

	*bare = false;
	if (sc->loc < 0 || (size_t)sc->loc >= strlen(sql))
		return false;
	if (sc->kind == STMT_SC_SETOP) {
		if (!top_arm_span(sql, (size_t)sc->loc, start, end))
			return false;
		p = sql + *start;
		*bare = *p != '(' || past_group(sql, p) != sql + *end;
		return true;
	}
	p = sql + sc->loc;
	if (sc->kind == STMT_SC_CTE && (p = past_cte_name(sql, p)) == NULL)
		return false;
	if (sc->kind == STMT_SC_FROM || sc->kind == STMT_SC_LATERAL)
		p = query_open_before(sql, (size_t)sc->loc);
	else
		p = next_open(sql, p);
	if (p == NULL || (close = past_group(sql, p)) == NULL)
		return false;
	*start = (size_t)(p - sql);
	*end = (size_t)(close - sql);
	return true;
}

static void
subq_resume(struct route *r)
{
	struct timeval tv = { 0, 0 };

	r->hold.resume = r->x.subq->ext ? ROUTE_RESUME_EXEC : ROUTE_RESUME_NEXT;
	if (r->x.subq->ext)
		r->busy = true;	/* the client waits with its Execute (route_ext_exec_resume) */
	evtimer_add(r->hold.ev_poll, &tv);
}

/* Does [p, e) hold word <w>? */
static bool
holds_word(const char *sql, const char *p, const char *e, const char *w)
{
	for (; p < e; p++) {
		const char *q = sql_skip_item(sql, p);

		if (q != p)
			p = q - 1;
		else if ((p == sql || !sql_ident_char(p[-1])) && word_at(p, &w, 1))
			return true;
	}
	return false;
}

/*
 * The WHERE condition of the top level that reads table <rel> (stmt.rels[<ri>]) as its only
 * FROM item: its span [*ws, *we) after `WHERE`, which the table's derived text takes over (so
 * only the rows it keeps come through the router). False when there is none to move: another
 * FROM item, a column list after the alias, a subquery in it.
 */
static bool
top_where(const char *sql, const struct stmt *own, uint32_t ri, const char *e, const char **ws,
	  const char **we)
{
	static const char *const as[] = { "as" }, *const where[] = { "where" };
	const struct stmt_node *nd;
	const char *p = e;
	int32_t from = own->nscopes > 0 ? own->scopes[0].from : -1;

	if (own->kind != STMT_SELECT || own->rels[ri].scope != 0 || from < 0 ||
	    (uint32_t)from >= own->nnodes)
		return false;
	nd = &own->nodes[from];
	if (nd->kind != STMT_N_REL || nd->ref != ri || nd->next >= 0)
		return false;
	if (own->rels[ri].alias != NULL) {	/* [AS] alias */
		p = past_blanks(sql, p);
		p = past_blanks(sql, word_at(p, as, 1) ? p + 2 : p);
		p = *p == '"' ? sql_skip_item(sql, p) : p;
		while (sql_ident_char(*p))
			p++;
	}
	p = past_blanks(sql, p);
	if (!word_at(p, where, 1))
		return false;
	*ws = past_blanks(sql, p + 5);
	*we = route_sql_where_end(sql, *ws);
	while (*we > *ws && ((*we)[-1] == ' ' || (*we)[-1] == '\t' || (*we)[-1] == '\n'))
		(*we)--;
	return !holds_word(sql, *ws, *we, "select");
}

/* What the router reads of table stmt.rels[<ri>] (a plain FROM item at its offset): `SELECT
 * <columns> FROM name [AS alias WHERE ...]` (malloc'd; NULL on no memory), the columns those
 * the statement may read (route_pushdown_columns(); `*` for all), the top level's WHERE
 * moved in when the table is its only FROM item (copied, its bound values <params> written
 * in, when it reads some: the statement keeps it then); *<rest>: where the statement goes
 * on after what the derived table replaces, *<alias>: the name to give it there (NULL: the
 * text after *<rest> has it). */
static char *
table_select(const char *sql, const struct stmt *own, uint32_t ri, const char **rest,
	     char **alias, const struct plan_param *params, uint32_t nparams,
	     const struct plan_input *in)
{
	const struct stmt_rel *rel = &own->rels[ri];
	const char *p = sql + rel->loc, *e = route_sql_rel_name_end(sql, rel);
	const char *ws = NULL, *we = NULL;
	char *out, *cond = NULL, *cols;
	int n;

	*alias = NULL;
	if (e == NULL || (*alias = route_quote_ident(rel->alias ? rel->alias : rel->name)) == NULL)
		return NULL;
	if (top_where(sql, own, ri, e, &ws, &we) &&
	    (cond = strndup(ws, (size_t)(we - ws))) != NULL &&
	    route_sql_has_param(cond, 0, strlen(cond))) {
		struct nk_error err;
		char *inlined = route_sql_inline_params(cond, params, nparams, &err);

		free(cond);	/* (a value the router cannot read: the table whole) */
		cond = inlined;
		ws = we = NULL;	/* (the statement keeps its WHERE) */
	}
	if (cond == NULL && ws == NULL)	/* (a join: the conjuncts of this table only) */
		cond = route_pushdown_where(sql, own, ri, e, in, params, nparams);
	cols = route_pushdown_columns(sql, own, ri, in);	/* (NULL: every column) */
	if (cond != NULL) {
		n = asprintf(&out, "SELECT %s FROM %.*s%s%s WHERE %s%s", cols ? cols : "*",
			     (int)(e - p), p, rel->alias ? " AS " : "", rel->alias ? *alias : "",
			     cond, strstr(cond, "--") ? "\n" : "");	/* (ends it) */
		*rest = we != NULL ? we : e;
	} else {
		n = asprintf(&out, "SELECT %s FROM %.*s", cols ? cols : "*", (int)(e - p), p);
		*rest = e;
	}
	if (*rest == e && rel->alias != NULL) {
		free(*alias);
		*alias = NULL;
	}
	free(cond);
	free(cols);
	if (n < 0) {
		free(*alias);
		return *alias = NULL, NULL;
	}
	return out;
}

/* The statement's text with table stmt.rels[<ri>] read as the derived table `(SELECT
 * <columns> FROM name ...) AS alias` (table_select(); malloc'd), or NULL; *<read>: the read's
 * text (malloc'd; NULL). */
static char *
wrapped_sql(const struct route *r, const char *sql, const struct stmt *own, uint32_t ri,
	    const struct plan_input *in, char **read)
{
	const char *rest, *p = sql + own->rels[ri].loc;
	char *alias, *first = table_select(sql, own, ri, &rest, &alias,
					   r->x.ext_exec ? r->x.ext_params : NULL,
					   r->x.ext_exec ? r->x.ext_nparams : 0, in), *out;
	int n;

	*read = first;
	if (first == NULL)
		return NULL;
	n = asprintf(&out, "%.*s(%s)%s%s %s", (int)(p - sql), sql, first, alias ? " AS " : "",
		     alias ? alias : "", rest);
	free(alias);
	return n < 0 ? NULL : out;
}

/* The statement's read of <text>, or NULL when it has none. */
static struct rsubq_read *
read_find(struct rsubq *q, const char *text)
{
	for (uint32_t i = 0; q != NULL && i < q->nreads; i++)
		if (strcmp(q->reads[i].text, text) == 0)
			return &q->reads[i];
	return NULL;
}

/* The statement's read of <text> (taken over) is remembered, once. */
static void
read_note(struct rsubq *q, char *text)
{
	if (text == NULL || read_find(q, text) != NULL || q->nreads == ROUTE_SUBQ_READS)
		free(text);
	else
		q->reads[q->nreads++] = (struct rsubq_read){ text, NULL };
}

/* The query of span [start, end) of <sql>: inside its parentheses, or all of it when <bare>
 * (an arm that has none); malloc'd, NULL on no memory. */
static char *
span_query(const char *sql, size_t start, size_t end, bool bare)
{
	return bare ? strndup(sql + start, end - start) :
		      strndup(sql + start + 1, end - start - 2);
}

/* The text inside the parentheses [start, end) of <sql>, the subquery to run on its own
 * (malloc'd): at an Execute, with the bound values it reads written in as constants. NULL
 * with <err> (a binary value the router cannot read) or without (no memory: oom set). */
static char *
subq_text(struct route *r, const char *sql, size_t start, size_t end, bool bare,
	  struct nk_error *err)
{
	char *text = span_query(sql, start, end, bare), *inlined;

	if (text == NULL)
		return nk_error_oom(err), NULL;
	if (!r->x.ext_exec || !route_sql_has_param(text, 0, strlen(text)))
		return text;
	inlined = route_sql_inline_params(text, r->x.ext_params, r->x.ext_nparams, err);
	free(text);
	return inlined;
}

/* The state of the statement's evaluations (rounds kept), its next text <next> (owned). */
static struct rsubq *
subq_next(struct route *r, const char *sql, char *next, struct nk_error *err)
{
	struct rsubq *q = r->x.subq;

	if (next == NULL || (q == NULL && (q = r->x.subq = calloc(1, sizeof(*q))) == NULL)) {
		free(next);
		return nk_error_oom(err), NULL;
	}
	free(q->sql);
	free(q->next);
	q->next = next;
	if ((q->sql = strdup(sql)) == NULL) {
		route_subq_free(r);
		return nk_error_oom(err), NULL;
	}
	q->rounds++;
	q->ext = r->x.ext_exec;
	return q;
}

/* <s> as a JSON string. */
static void
put_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* The plan of <text> alone (as EXPLAIN (NEKI_PLAN) prints it; malloc'd), or NULL with
 * <err> (its own refusal). */
static char *
part_plan(struct route *r, const char *text, const struct plan_input *in, bool json,
	  struct nk_error *err)
{
	struct parse_norm norm;
	struct plan_input pin = *in;
	const struct stmt *st;
	struct plan p;

	if (!parse_normalize(r->arena, text, &norm))
		return nk_error_oom(err), NULL;
	pin.norm = &norm;
	pin.sql = text;
	pin.unknown = NULL;
	if ((st = parse_statement(r->arena, text, &norm, err)) == NULL ||
	    !plan_build(r->arena, st, &pin, &p, err))
		return NULL;
	return plan_explain(&p, json);
}

/* route_subq_explain: see route_subq.h. */
char *
route_subq_explain(struct route *r, const struct stmt *st, const char *sql,
		   const struct parse_norm *norm, const struct plan_input *in, const struct plan *p)
{
	const struct stmt *own = st, *inner;
	bool json = st->explain != NULL && !st->explain->format_text;
	char *first = NULL, *plan, *out = NULL;
	size_t start, end, len = 0;
	struct nk_error err;
	bool bare;
	FILE *f;

	if (st->sql == NULL || strcmp(st->sql, sql) != 0)
		own = parse_statement(r->arena, sql, norm, &err);
	inner = own != NULL && own->explain != NULL ? own->explain->inner : NULL;
	if (inner != NULL && p->materialize > 0 && p->materialize < inner->nscopes &&
	    subq_span(sql, &inner->scopes[p->materialize], &start, &end, &bare))
		first = span_query(sql, start, end, bare);
	else if (inner != NULL && p->materialize == 0 && p->broadcast > 0 &&
		 p->broadcast <= inner->nrels) {
		const char *rest;
		char *alias;

		first = table_select(sql, inner, p->broadcast - 1, &rest, &alias, NULL, 0, in);
		free(alias);
	}
	if (first == NULL || (f = nk_memstream(&out, &len)) == NULL) {
		free(first);
		return NULL;
	}
	plan = part_plan(r, first, in, json, &err);
	if (json) {
		fputs("[{\"Router Evaluation\": {\"Evaluated First\": ", f);
		put_json_str(f, first);
		fprintf(f, ", \"Plan\": %s, \"Then\": \"the statement with its rows in its place, "
			"planned again\"}}]", plan != NULL ? plan : "null");
	} else {
		fprintf(f, "Router Evaluation\n  Evaluated First: %s\n", first);
		for (char *l = plan; l != NULL && *l != '\0';) {
			char *nl = strchr(l, '\n');

			fprintf(f, "    %.*s\n", nl ? (int)(nl - l) : (int)strlen(l), l);
			l = nl ? nl + 1 : NULL;
		}
		if (plan == NULL)
			fprintf(f, "    (refused on its own: %s)\n", err.message);
		fputs("  Then: the statement with its rows in its place, planned again", f);
	}
	free(plan);
	free(first);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* Span [start, end) of <sql> is a table read the statement made already (<rd>): its rows go
 * in its place without reading again (<text> freed). */
static enum rstep
read_again(struct route *r, const char *sql, size_t start, size_t end,
	   const struct rsubq_read *rd, char *text)
{
	struct nk_error err;
	char *next;

	free(text);
	if (asprintf(&next, "%.*s%s%s", (int)start, sql, rd->values, sql + end) < 0)
		next = NULL;
	if (subq_next(r, sql, next, &err) == NULL)
		return route_fail(r, &err);
	subq_resume(r);
	return RSTEP_ASYNC;
}

/* route_subq_start: see route_subq.h. */
enum rstep
route_subq_start(struct route *r, const struct stmt *st, const char *sql,
		 const struct parse_norm *norm, const struct plan *p,
		 const struct plan_input *in, const struct nk_error *refusal)
{
	struct rsubq *q = r->x.subq;
	const struct stmt *own = st;
	struct rsubq_read *rd;
	struct nk_error err;
	size_t start, end;
	bool bare;
	char *text;

	nk_error_clear(&err);
	if (q != NULL && (q->capture || q->rounds >= ROUTE_SUBQ_ROUNDS))
		return route_fail(r, refusal);	/* (a subquery inside the one evaluated) */
	if (st->sql == NULL || strcmp(st->sql, sql) != 0)	/* (the cached model's text
								 * differs: its offsets too) */
		own = parse_statement(r->arena, sql, norm, &err);
	if (own != NULL && own->cursor != NULL && own->cursor->query != NULL)
		own = own->cursor->query;	/* DECLARE: its query's (offsets in <sql>) */
	if (own != NULL && p->materialize == 0 && p->broadcast > 0 &&
	    p->broadcast <= own->nrels) {	/* the table as a derived table, planned again */
		char *read, *next = wrapped_sql(r, sql, own, p->broadcast - 1, in, &read);

		if ((q = subq_next(r, sql, next, &err)) == NULL) {
			free(read);
			return route_fail(r, refusal);
		}
		read_note(q, read);
		subq_resume(r);
		return RSTEP_ASYNC;
	}
	if (own == NULL || p->materialize >= own->nscopes ||
	    !subq_span(sql, &own->scopes[p->materialize], &start, &end, &bare) ||
	    (text = subq_text(r, sql, start, end, bare, &err)) == NULL)
		return route_fail(r, nk_error_is_set(&err) ? &err : refusal);
	if ((rd = read_find(q, text)) != NULL && rd->values != NULL)
		return read_again(r, sql, start, end, rd, text);
	if ((q = subq_next(r, sql, text, &err)) == NULL)
		return route_fail(r, &err);
	q->reading = rd;
	q->start = start;
	q->end = end;
	q->refusal = *refusal;
	q->capture = r->x.subq_capture = true;
	q->ncols = 0;
	q->nrows = 0;
	rows_close(q);
	subq_resume(r);		/* (the subquery, routed as a statement of its own) */
	return RSTEP_ASYNC;
}

/* ---- its answer ---- */

/* route_subq_refused: see route_subq.h. */
bool
route_subq_refused(struct route *r, const struct nk_error *err)
{
	if (!r->x.has_err) {
		r->x.err = *err;
		r->x.has_err = true;
	}
	return true;
}

static bool
too_big(struct route *r, size_t bytes)
{
	struct nk_error e;

	nk_error_set(&e, ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
		     "the result of a subquery the router evaluates is larger "
		     "than router_work_mem allows");
	nk_error_detail(&e, "Its rows passed %zu bytes; router_work_mem is %lld bytes.", bytes,
			(long long)r->c.cfg->neki.router_work_mem);
	nk_error_hint(&e, "Raise router_work_mem, narrow the subquery, or correlate it on the "
		      "shard key so that each shard evaluates it.");
	return route_subq_refused(r, &e);
}

/* route_subq_type_sql: see route_subq.h. */
bool
route_subq_type_sql(struct route *r, uint32_t oid, char *out, size_t len)
{
	const char *name = merge_type_sql(oid), *schema = NULL;
	struct cat_view cv;
	bool ok = true;

	if (name != NULL) {
		snprintf(out, len, "%s", name);
		return true;
	}
	cat_view_acquire(&cv, r->db);
	if (cat_view_type_name(&cv, oid, &schema, &name)) {
		char *qs = route_quote_ident(schema), *qn = route_quote_ident(name);

		ok = qs != NULL && qn != NULL &&
		     (size_t)snprintf(out, len, "%s.%s", qs, qn) < len;
		free(qs);
		free(qn);
	} else {
		ok = false;
	}
	cat_view_release(&cv);
	return ok;
}

static bool
keep_desc(struct route *r, struct rsubq *q, const uint8_t *body, size_t len)
{
	struct proto_column cols[ROUTE_SUBQ_COLS];
	struct proto_rowdesc_msg m;
	struct nk_error e;
	FILE *f;
	size_t n, names_len = 0;

	if (q->ncols > 0 || r->x.has_err)
		return true;		/* (every shard's: the first one's) */
	if (!proto_parse_row_description(body, len, &m, &e))
		return route_subq_refused(r, &e);
	n = proto_rowdesc_columns(&m, cols, ROUTE_SUBQ_COLS);
	if (n == 0 || n < m.ncols)
		return route_subq_refused(r, (nk_error_set(&e, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "a subquery the router evaluates may return 1 to %d columns",
				    ROUTE_SUBQ_COLS), &e));
	free(q->types);
	free(q->names);
	q->names = NULL;
	if ((q->types = calloc(n, sizeof(*q->types))) == NULL ||
	    (f = nk_memstream(&q->names, &names_len)) == NULL)
		return route_subq_refused(r, (nk_error_oom(&e), &e));
	for (size_t k = 0; k < n; k++) {
		char *qn = route_quote_ident(cols[k].name);

		fprintf(f, "%sc%zu AS %s", k ? ", " : "", k + 1, qn ? qn : "\"?column?\"");
		free(qn);
		if (!route_subq_type_sql(r, cols[k].type_oid, q->types[k], sizeof(q->types[k]))) {
			fclose(f);
			nk_error_set(&e, ERRCODE_FEATURE_NOT_SUPPORTED,
				     "the router cannot write a value of type %u, column \"%s\" "
				     "of a subquery it evaluates", cols[k].type_oid, cols[k].name);
			nk_error_hint(&e, "Cast the column to a built-in type in the subquery.");
			return route_subq_refused(r, &e);
		}
	}
	if (fclose(f) != 0 || (q->rows = nk_memstream(&q->rows_buf, &q->rows_len)) == NULL)
		return route_subq_refused(r, (nk_error_oom(&e), &e));
	q->ncols = (uint16_t)n;
	return true;
}

static bool
keep_row(struct route *r, struct rsubq *q, const uint8_t *body, size_t len)
{
	struct proto_value vals[ROUTE_SUBQ_COLS];
	struct proto_datarow_msg m;
	struct nk_error e;

	if (r->x.has_err || q->rows == NULL)
		return true;
	if (!proto_parse_data_row(body, len, &m, &e))
		return route_subq_refused(r, &e);
	if (m.ncols != q->ncols || proto_datarow_values(&m, vals, ROUTE_SUBQ_COLS) != q->ncols)
		return route_subq_refused(r, (nk_error_set(&e, ERRCODE_PROTOCOL_VIOLATION,
				    "a shard's row has %u columns, its description %u",
				    m.ncols, q->ncols), &e));
	fputs(q->nrows ? ", (" : "(", q->rows);
	for (uint16_t k = 0; k < q->ncols; k++) {
		fputs(k ? ", " : "", q->rows);
		if (vals[k].p == NULL)
			fputs("NULL", q->rows);
		else
			sql_put_literal(q->rows, (const char *)vals[k].p, vals[k].len);
		fprintf(q->rows, "::%s", q->types[k]);
	}
	fputc(')', q->rows);
	q->nrows++;
	if (fflush(q->rows) != 0)
		return route_subq_refused(r, (nk_error_oom(&e), &e));
	if (r->c.cfg->neki.router_work_mem > 0 && (int64_t)q->rows_len > r->c.cfg->neki.router_work_mem)
		return too_big(r, q->rows_len);
	return true;
}

/* route_subq_keep: see route_subq.h. */
bool
route_subq_keep(struct route *r, const uint8_t *buf, size_t len)
{
	bool gsi = route_gsi_capturing(r);	/* (a step of a global secondary index) */

	for (size_t o = 0; o + 5 <= len;) {
		const uint8_t *m = buf + o;
		size_t n = ((size_t)m[1] << 24) | ((size_t)m[2] << 16) | ((size_t)m[3] << 8) | m[4];
		bool ok = true;

		if (n < 4 || o + 1 + n > len)
			break;
		if (gsi && (m[0] == 'T' || m[0] == 'D'))
			ok = route_gsi_keep(r, m[0], m + 5, n - 4);
		else if (m[0] == 'T')
			ok = keep_desc(r, r->x.subq, m + 5, n - 4);
		else if (m[0] == 'D')
			ok = keep_row(r, r->x.subq, m + 5, n - 4);
		if (!ok)
			return false;
		o += 1 + n;
	}
	return true;
}

/* route_subq_answer: see route_subq.h. */
bool
route_subq_answer(struct route *r, struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	if (pkt->avail < pkt->len) {
		if (sbuf_hold(link_sbuf(l), pkt->len))
			return true;
		route_client_fatal(r, "server sent too big packet");
		return false;
	}
	if (!route_subq_keep(r, pkt->data, pkt->len))
		return false;
	sbuf_skip(link_sbuf(l), pkt->len);
	return true;
}

/* ---- the statement again ---- */

/* The subquery's rows as a parenthesised SELECT of the same columns: malloc'd, or NULL. */
static char *
values_sql(struct rsubq *q)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	if (q->rows == NULL || fflush(q->rows) != 0 || (f = nk_memstream(&out, &len)) == NULL)
		return NULL;
	fputs("(WITH __neki_rows(", f);
	for (uint16_t k = 0; k < q->ncols; k++)
		fprintf(f, "%sc%u", k ? ", " : "", k + 1u);
	fputs(") AS MATERIALIZED (VALUES ", f);	/* (read again cheaply: a correlated
						 * subquery over them scans a tuplestore) */
	if (q->nrows > 0) {
		fwrite(q->rows_buf, 1, q->rows_len, f);
	} else {
		fputc('(', f);
		for (uint16_t k = 0; k < q->ncols; k++)
			fprintf(f, "%sNULL::%s", k ? ", " : "", q->types[k]);
		fputc(')', f);
	}
	fprintf(f, ") SELECT %s FROM __neki_rows AS __neki_subquery%s)", q->names,
		q->nrows > 0 ? "" : " WHERE false");
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* Did the subquery fail because it reads its outer query's columns? */
static bool
is_correlated(const struct nk_error *err)
{
	return strcmp(err->sqlstate, ERRCODE_UNDEFINED_TABLE) == 0 ||
	       strcmp(err->sqlstate, ERRCODE_UNDEFINED_COLUMN) == 0;
}

/* route_subq_finished: see route_subq.h. */
bool
route_subq_finished(struct route *r)
{
	struct rsubq *q = r->x.subq;
	char *mid;
	struct nk_error e;

	if (route_gsi_capturing(r))
		return route_gsi_finished(r);
	if (q == NULL || !q->capture)
		return false;
	if (r->x.has_err) {	/* the statement fails (route_after_error() follows) */
		if (is_correlated(&r->x.err))
			r->x.err = q->refusal;
		capture_end(r, q);
		return false;
	}
	if (q->ncols == 0) {
		nk_error_set(&e, ERRCODE_INTERNAL_ERROR,
			     "the subquery the router evaluated returned no description");
		return route_subq_refused(r, &e), false;
	}
	mid = values_sql(q);
	if (mid != NULL && q->reading != NULL && q->reading->values == NULL &&
	    q->reads_bytes + strlen(mid) <= (size_t)r->c.cfg->neki.router_work_mem &&
	    (q->reading->values = strdup(mid)) != NULL)	/* (for a read of it again) */
		q->reads_bytes += strlen(mid);
	capture_end(r, q);
	if (mid == NULL ||
	    asprintf(&q->next, "%.*s%s%s", (int)q->start, q->sql, mid, q->sql + q->end) == -1) {
		q->next = NULL;
		free(mid);
		return route_subq_refused(r, (nk_error_oom(&e), &e)), false;
	}
	free(mid);
	route_exec_reset(r);
	subq_resume(r);		/* (the statement, with the subquery's rows in its place) */
	return true;
}
