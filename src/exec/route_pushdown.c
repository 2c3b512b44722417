/*
 * route_pushdown.c - the filters that go with a table the router reads first. A table that
 * the shards cannot join (a join off the shard key) is read through the router as `(SELECT
 * * FROM name AS alias WHERE ...)` (route_subq.c): the conjuncts of its query level's WHERE
 * (not for the nullable side of an outer join) and of the ON of the inner or LEFT join whose
 * right operand it is that read only that table's columns go into that read, so only the
 * rows the statement can keep come through the router, as Postgres applies a restriction at
 * the table's scan.
 *
 * A conjunct is taken only when it is known to mean the same inside the read as in the
 * statement: every word of it is an SQL keyword, an immutable function, a type name after
 * `::` / AS, a collation after COLLATE, or a column the catalog finds in the table
 * (unqualified: in the statement it resolves to that table's column, or the statement is
 * ambiguous and fails either way; qualified: by the table's alias, or its name when it has
 * none); a "quoted" name is always a column. Anything else (a
 * subquery, another table's or the outer query's column, a volatile or unknown call, a word
 * this reader does not know) leaves the conjunct in the statement only. The statement keeps
 * its whole WHERE, so a conjunct copied into the read is applied twice to the same values.
 *
 * The read selects the columns whose names occur as words of the statement (a superset of
 * those it reads), or `*` when a star, a whole-row value, NATURAL or a column list could
 * read the others (route_pushdown_columns()).
 */
#include "neki/base.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "neki/memstream.h"
#include "neki/sqlscan.h"
#include "route_pull.h"
#include "route_pushdown.h"
#include "route_sqltext.h"

#define PD_WORD_MAX 64

/* The words that may stand in a conjunct: SQL's keywords of expressions. */
static const char *const pd_keywords[] = {
	"and", "or", "not", "is", "null", "true", "false", "unknown", "like", "ilike",
	"similar", "to", "escape", "between", "symmetric", "asymmetric", "in", "case", "when",
	"then", "else", "end", "distinct", "from", "isnull", "notnull", "any", "all", "some",
	"array", "collate", "at", "for", "leading", "trailing", "both", "cast", "as",
};

/* Words that are keywords next to a constant or another of them (`date '2024-01-01'`,
 * `interval '3' month`, `extract(year from d)`, `at time zone`), else maybe columns. */
static const char *const pd_context_words[] = {
	"date", "time", "timestamp", "interval", "year", "month", "day", "hour", "minute",
	"second", "zone",
};

/* Calls that give the same result for the same arguments (and the expression forms written
 * as calls), so evaluating them in the read and again in the statement changes nothing. */
static const char *const pd_calls[] = {
	"in", "any", "all", "some", "and", "or", "not", "cast", "coalesce", "nullif",
	"greatest", "least", "extract", "date_part", "position", "substring", "substr", "trim",
	"btrim", "ltrim", "rtrim", "overlay", "lower", "upper", "length", "char_length",
	"character_length", "octet_length", "abs", "round", "trunc", "floor", "ceil", "ceiling",
	"mod", "left", "right", "lpad", "rpad", "replace", "strpos", "sqrt", "power", "sign",
	"md5",
};

/* The words a type name may go on with (`double precision`, `timestamp with time zone`). */
static const char *const pd_type_words[] = {
	"precision", "varying", "with", "without", "time", "zone",
};

static bool
in_list(const char *w, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(w, list[i]) == 0)
			return true;
	return false;
}

/* A word of SQL (or a "quoted" name) at <p> of <sql>, <e> the end of the span read:
 * folded to lower case unless quoted, into <w>, its first PD_WORD_MAX - 1 bytes (as
 * Postgres truncates a name to 63). The end of it, or NULL when none is there. */
static const char *
read_word(const char *sql, const char *p, const char *e, char *w)
{
	const char *q = sql_skip_item(sql, p);
	size_t n = 0;

	if (*p == '"' && q != p) {
		for (const char *c = p + 1; c < q - 1 && n + 1 < PD_WORD_MAX; c++) {
			w[n++] = *c;
			c += c[0] == '"';	/* ("" is a quote) */
		}
		w[n] = '\0';
		return q <= e ? q : NULL;
	}
	if (!sql_ident_char(*p) || isdigit((unsigned char)*p) || *p == '$')
		return NULL;
	for (q = p; q < e && sql_ident_char(*q); q++)
		if (n + 1 < PD_WORD_MAX)
			w[n++] = (char)tolower((unsigned char)*q);
	w[n] = '\0';
	return q;
}

static const char *
blanks(const char *sql, const char *p, const char *e)
{
	while (p < e) {
		const char *q = sql_skip_item(sql, p);

		if (q != p && (p[0] == '-' || p[0] == '/'))	/* a comment */
			p = q;
		else if (isspace((unsigned char)*p))
			p++;
		else
			break;
	}
	return p;
}

/* A type name at <p> (after `::` or AS): the end of it, or NULL when there is none. */
static const char *
past_type(const char *sql, const char *p, const char *e)
{
	char w[PD_WORD_MAX];
	const char *q;

	if ((q = read_word(sql, blanks(sql, p, e), e, w)) == NULL)
		return NULL;
	while (*(p = blanks(sql, q, e)) == '.' && (q = read_word(sql, blanks(sql, p + 1, e), e,
								  w)) != NULL)
		;
	if (*p == '(') {		/* numeric(10, 2) */
		while (p < e && *p != ')')
			p++;
		p = p < e ? p + 1 : p;
	}
	for (;;) {
		p = blanks(sql, p, e);
		if (p + 1 < e && p[0] == '[' && p[1] == ']')
			p += 2;
		else if ((q = read_word(sql, p, e, w)) != NULL &&
			 in_list(w, pd_type_words, NK_ARRAY_LEN(pd_type_words)))
			p = q;
		else
			return p;
	}
}

/* What a conjunct is read against: the table and the name that qualifies its columns. */
struct pd_table {
	const struct stmt_rel *rel;
	const char *schema;		/* its schema, or the session's first */
	const struct plan_catalog *cat;
};

static bool
is_column(const struct pd_table *t, const char *name)
{
	return t->cat->column_type != NULL &&
	       t->cat->column_type(t->cat->arg, t->schema, t->rel->name, name) != 0;
}

/* Word <w> ending at <q> of a conjunct ending at <e> ("quoted" when <quoted>: a name, never
 * a keyword): may it stand there? *<next> is where reading goes on. <prev_const>: the item
 * before was a constant; <prev>: the word before. */
static bool
word_ok(const struct pd_table *t, const char *sql, const char *w, bool quoted, const char *q,
	const char *e, bool prev_const, const char *prev, const char **next)
{
	const char *n = blanks(sql, q, e);
	char w2[PD_WORD_MAX];

	*next = q;
	if (*n == '.') {		/* qualifier.column */
		const char *own = t->rel->alias ? t->rel->alias : t->rel->name;
		const char *c = read_word(sql, blanks(sql, n + 1, e), e, w2);

		if (c == NULL || strcmp(w, own) != 0 || *blanks(sql, c, e) == '.' ||
		    !is_column(t, w2))
			return false;
		*next = c;
		return true;
	}
	if (quoted)
		return *n != '(' && is_column(t, w);
	if (*n == '(')
		return in_list(w, pd_calls, NK_ARRAY_LEN(pd_calls));
	if (strcmp(w, "as") == 0 || strcmp(w, "collate") == 0)	/* (a type, a collation) */
		return (*next = past_type(sql, q, e)) != NULL;
	if (in_list(w, pd_keywords, NK_ARRAY_LEN(pd_keywords)))
		return true;
	if (in_list(w, pd_context_words, NK_ARRAY_LEN(pd_context_words))) {
		const char *c = read_word(sql, n, e, w2);
		static const char *const before[] = { "to", "time", "at" };
		static const char *const after[] = { "from", "zone", "to", "with", "without" };

		if (*n == '\'' || prev_const || in_list(prev, before, NK_ARRAY_LEN(before)) ||
		    (c != NULL && in_list(w2, after, NK_ARRAY_LEN(after))))
			return true;
	}
	return is_column(t, w);
}

/* May conjunct [p, e) of <sql> filter table <t>'s rows on their own? */
static bool
conjunct_ok(const struct pd_table *t, const char *sql, const char *p, const char *e)
{
	char w[PD_WORD_MAX], prev[PD_WORD_MAX] = "";
	bool prev_const = false;

	while ((p = blanks(sql, p, e)) < e) {
		const char *q = sql_skip_item(sql, p);

		if (q != p && *p != '"') {		/* a string constant */
			p = q;
			prev_const = true;
			continue;
		}
		if (p[0] == ':' && p + 1 < e && p[1] == ':') {
			if ((p = past_type(sql, p + 2, e)) == NULL)
				return false;
			prev_const = false;
			continue;
		}
		if (*p == ';')
			return false;
		if ((q = read_word(sql, p, e, w)) == NULL) {	/* an operator, a number, $n */
			p++;
			while (p < e && isdigit((unsigned char)p[-1]) && sql_ident_char(*p))
				p++;	/* (1e5, $12: not a word) */
			prev_const = false;
			continue;
		}
		if (!word_ok(t, sql, w, *p == '"', q, e, prev_const, prev, &p))
			return false;
		memcpy(prev, w, sizeof(prev));
		prev_const = false;
	}
	return true;
}

/* The WHERE condition of the query level whose FROM list goes on after <e>: its span
 * [*ws, *we), or false when that level has none (a clause keyword, its closing
 * parenthesis or the end comes first). */
static bool
level_where(const char *sql, const char *e, const char *end, const char **ws, const char **we)
{
	int depth = 0;

	for (const char *p = e; *p != '\0' && *p != ';'; p++) {
		const char *q = sql_skip_item(sql, p);
		char w[PD_WORD_MAX];

		if (q != p) {
			p = q - 1;
			continue;
		}
		if (*p == '(' || *p == ')') {
			if ((depth += *p == '(' ? 1 : -1) < 0)
				return false;
			continue;
		}
		if (depth != 0 || (p > sql && sql_ident_char(p[-1])) ||
		    (q = read_word(sql, p, end, w)) == NULL)
			continue;
		if (strcmp(w, "where") == 0) {
			*ws = q;
			*we = route_sql_where_end(sql, q);
			return true;
		}
		if (route_sql_clause_at(sql, p))
			return false;
		p = q - 1;
	}
	return false;
}

/* Append conjunct [p, e) as `(c)` to <f> (its bound values written in): false when it
 * cannot be (a value the router cannot read) or on no memory. */
static bool
put_conjunct(FILE *f, bool first, const char *p, const char *e,
	     const struct plan_param *params, uint32_t nparams)
{
	struct nk_error err;
	char *c, *inl;

	while (p < e && isspace((unsigned char)*p))
		p++;
	while (e > p && isspace((unsigned char)e[-1]))
		e--;
	if ((c = strndup(p, (size_t)(e - p))) == NULL)
		return false;
	if (route_sql_has_param(c, 0, strlen(c))) {
		inl = params != NULL ? route_sql_inline_params(c, params, nparams, &err) : NULL;
		free(c);
		if ((c = inl) == NULL)
			return false;
	}
	fprintf(f, "%s(%s%s)", first ? "" : " AND ", c, strstr(c, "--") ? "\n" : "");
	free(c);
	return true;
}

/* The conjuncts of WHERE span [p, we) that table <t> may take, written to <f>; their count,
 * or -1 when the WHERE is an OR at its top (it has no conjuncts of its own). */
static int
put_conjuncts(FILE *f, const struct pd_table *t, const char *sql, const char *p,
	      const char *we, const struct plan_param *params, uint32_t nparams)
{
	const char *start = p;
	int depth = 0, cases = 0, n = 0;
	bool between = false;

	for (;; p++) {
		const char *q = p < we ? sql_skip_item(sql, p) : p;
		char w[PD_WORD_MAX];
		bool split = p >= we;

		if (q != p) {
			p = q - 1;
			continue;
		}
		if (!split && (*p == '(' || *p == ')')) {
			depth += *p == '(' ? 1 : -1;
			continue;
		}
		if (!split && (depth != 0 || (p > sql && sql_ident_char(p[-1])) ||
			       (q = read_word(sql, p, we, w)) == NULL))
			continue;
		if (!split) {
			cases += strcmp(w, "case") == 0 ? 1 : strcmp(w, "end") == 0 ? -1 : 0;
			if (cases == 0 && strcmp(w, "or") == 0)
				return -1;
			if (cases == 0 && strcmp(w, "between") == 0)
				between = true;
			else if (cases == 0 && strcmp(w, "and") == 0 && between)
				between = false;	/* (BETWEEN a AND b: one conjunct) */
			else if (cases == 0 && strcmp(w, "and") == 0)
				split = true;
		}
		if (split && conjunct_ok(t, sql, start, p) &&
		    put_conjunct(f, n == 0, start, p, params, nparams))
			n++;
		if (p >= we)
			return n;
		if (split)
			start = q;
		p = q - 1;
	}
}

/* The end of a join's ON condition starting at <p>: the next join of its level (JOIN,
 * INNER, LEFT, RIGHT, FULL, CROSS, NATURAL), its WHERE or another clause, a ',' or the ')'
 * closing its level, or the end of the statement. */
static const char *
on_end(const char *sql, const char *p, const char *end)
{
	static const char *const next[] = { "join", "inner", "left", "right", "full", "cross",
					    "natural", "where", "on", "using" };
	int depth = 0;

	for (; *p != '\0' && *p != ';' && !((*p == ')' || *p == ',') && depth == 0); p++) {
		const char *q = sql_skip_item(sql, p);
		char w[PD_WORD_MAX];

		if (q != p) {
			p = q - 1;
			continue;
		}
		depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
		if (depth != 0 || (p > sql && sql_ident_char(p[-1])) ||
		    (q = read_word(sql, p, end, w)) == NULL)
			continue;
		if (route_sql_clause_at(sql, p) || (in_list(w, next, NK_ARRAY_LEN(next)) &&
						    *blanks(sql, q, end) != '('))
			return p;	/* (left(s, 1) is a call) */
		p = q - 1;
	}
	return p;
}

/* Where table <rel>'s alias stands in <sql> (after its name and an optional AS), or NULL
 * when it has none. */
static const char *
alias_at(const char *sql, const struct stmt_rel *rel)
{
	const char *e = rel->alias != NULL ? route_sql_rel_name_end(sql, rel) : NULL, *end, *q;
	char w[PD_WORD_MAX];

	if (e == NULL)
		return NULL;
	end = e + strlen(e);
	e = blanks(sql, e, end);
	if (*e != '"' && (q = read_word(sql, e, end, w)) != NULL && strcmp(w, "as") == 0)
		e = blanks(sql, q, end);
	return e;
}

/* Where <sql> goes on after table <rel>'s alias and the blanks after it, or NULL when it has
 * none. */
static const char *
after_alias(const char *sql, const struct stmt_rel *rel)
{
	const char *a = alias_at(sql, rel), *end, *q;
	char w[PD_WORD_MAX];

	if (a == NULL)
		return NULL;
	end = a + strlen(a);
	return (q = read_word(sql, a, end, w)) != NULL ? blanks(sql, q, end) : NULL;
}

/*
 * The ON condition of the join whose right operand is table <own>->rels[<ri>] (its name
 * ending at <e>), when that join is inner or LEFT: its ON only decides which of the
 * table's rows pair with the other side's, so its conjuncts over the table alone may drop
 * the table's other rows first (the nullable side's too). Its span [*os, *oe), or false:
 * another kind of join, USING / NATURAL, an alias with a column list, ON not right after.
 */
static bool
join_on(const char *sql, const struct stmt *own, uint32_t ri, const char *e, const char *end,
	const char **os, const char **oe)
{
	const struct stmt_node *j = NULL;
	const char *p = blanks(sql, e, end), *q;
	char w[PD_WORD_MAX];

	for (uint32_t i = 0; i < own->nnodes; i++) {
		const struct stmt_node *n = &own->nodes[i];

		if (n->kind == STMT_N_JOIN && n->right >= 0 && (uint32_t)n->right < own->nnodes &&
		    own->nodes[n->right].kind == STMT_N_REL && own->nodes[n->right].ref == ri)
			j = n;
	}
	if (j == NULL || j->on == NULL || (j->join != STMT_J_INNER && j->join != STMT_J_LEFT))
		return false;
	if (own->rels[ri].alias != NULL && (p = after_alias(sql, &own->rels[ri])) == NULL)
		return false;	/* ([AS] alias) */
	if ((q = read_word(sql, p, end, w)) == NULL || strcmp(w, "on") != 0)
		return false;
	*os = q;
	*oe = on_end(sql, q, end);
	return true;
}

/* The conjuncts of condition [p, e) that table <t> may take, as `(c1) AND (c2)` (malloc'd),
 * or NULL: none, an OR at its top, no memory. */
static char *
span_conjuncts(const struct pd_table *t, const char *sql, const char *p, const char *e,
	       const struct plan_param *params, uint32_t nparams)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = nk_memstream(&out, &len);
	int n;

	if (f == NULL)
		return NULL;
	n = put_conjuncts(f, t, sql, p, e, params, nparams);
	if (fclose(f) != 0 || n <= 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* route_pushdown_where: see route_pushdown.h. */
char *
route_pushdown_where(const char *sql, const struct stmt *own, uint32_t ri, const char *e,
		     const struct plan_input *in, const struct plan_param *params,
		     uint32_t nparams)
{
	const struct stmt_rel *rel = &own->rels[ri];
	struct pd_table t = { rel, rel->schema, in != NULL ? in->cat : NULL };
	const char *ws, *we, *end = e + strlen(e);
	char *where = NULL, *on = NULL, *out;

	if (t.schema == NULL && in != NULL && in->sess != NULL)
		t.schema = in->sess->schema;
	if ((own->kind != STMT_SELECT && own->kind != STMT_UPDATE && own->kind != STMT_DELETE) ||
	    t.cat == NULL || t.schema == NULL)
		return NULL;	/* (UPDATE ... FROM, DELETE ... USING: their WHERE joins too) */
	if (!rel->outer_join && level_where(sql, e, end, &ws, &we))
		where = span_conjuncts(&t, sql, ws, we, params, nparams);
	if (join_on(sql, own, ri, e, end, &ws, &we))
		on = span_conjuncts(&t, sql, ws, we, params, nparams);
	if (where == NULL || on == NULL)
		return where != NULL ? where : on;
	if (asprintf(&out, "%s AND %s", where, on) < 0)
		out = NULL;
	free(where);
	free(on);
	return out;
}

/* ---- the columns a read needs ---- */

#define PD_COLS_MAX 1600	/* Postgres' MaxHeapAttributeNumber */

/* What a column scan of the statement has seen: the last three items before the current. */
enum pd_item {
	PD_NONE = 0,
	PD_WORD,		/* a name or keyword (pw holds it) */
	PD_VALUE,		/* a constant, a "quoted" name */
	PD_OPEN,		/* ( */
	PD_CLOSE,		/* ) or ] */
	PD_DOT,
	PD_COMMA,
	PD_OTHER,		/* an operator, ; */
};

struct pd_cols {
	const struct stmt *own;
	const char *ref;		/* the name that qualifies the table's columns */
	const char **name;		/* the table's columns, in order */
	bool *used;
	uint32_t n;
	enum pd_item prev[3];		/* [0] the item before, [1] the one before it, ... */
	char pw[3][PD_WORD_MAX];	/* ... their words */
	bool distinct_on;		/* DISTINCT ON seen: `) *` may be a select list */
};

/* Is the word at <p> a FROM item's name (a table's, at its offset) or a table's alias
 * declaration? */
static bool
declares(const struct stmt *own, const char *sql, const char *p)
{
	for (uint32_t i = 0; i < own->nrels; i++)
		if ((own->rels[i].loc >= 0 && p == sql + own->rels[i].loc) ||
		    p == alias_at(sql, &own->rels[i]))
			return true;
	return false;
}

/* A `*` at <p>: may the table's columns be left out of what it expands to? A multiplication,
 * count(*), another table's `x.*` and EXISTS (SELECT * ...) read none of them. */
static bool
star_ok(const struct pd_cols *c, const char *sql, const char *p, const char *end)
{
	const char *n = blanks(sql, p + 1, end);

	switch (c->prev[0]) {
	case PD_DOT:
		return c->prev[1] == PD_WORD && strcmp(c->pw[1], c->ref) != 0;
	case PD_OPEN:
		return *n == ')';	/* count(*) */
	case PD_VALUE:
		return true;
	case PD_CLOSE:
		return !c->distinct_on;	/* (DISTINCT ON (x) * is a select list) */
	case PD_WORD:
		if (strcmp(c->pw[0], "select") == 0)
			return c->prev[1] == PD_OPEN && c->prev[2] == PD_WORD &&
			       strcmp(c->pw[2], "exists") == 0;
		return strcmp(c->pw[0], "distinct") != 0 && strcmp(c->pw[0], "all") != 0 &&
		       strcmp(c->pw[0], "returning") != 0;
	default:
		return false;
	}
}

static void
pd_push(struct pd_cols *c, enum pd_item it, const char *w)
{
	for (int k = 2; k > 0; k--) {
		c->prev[k] = c->prev[k - 1];
		memcpy(c->pw[k], c->pw[k - 1], PD_WORD_MAX);
	}
	c->prev[0] = it;
	snprintf(c->pw[0], PD_WORD_MAX, "%s", w != NULL ? w : "");
}

/* A word <w> of the statement at <p>, ending at <q> (<end>: the text's end): mark the
 * columns it may name; false when the table may be read as a whole row, by NATURAL or
 * TABLE. */
static bool
pd_word(struct pd_cols *c, const char *sql, const char *p, const char *q, const char *end,
	const char *w, bool quoted)
{
	const char *n = blanks(sql, q, end);

	for (uint32_t i = 0; i < c->n; i++)
		if (!c->used[i] && strcasecmp(w, c->name[i]) == 0)
			c->used[i] = true;
	if (!quoted && (strcmp(w, "natural") == 0 || strcmp(w, "table") == 0))
		return false;
	if (!quoted && strcmp(w, "on") == 0 && c->prev[0] == PD_WORD &&
	    strcmp(c->pw[0], "distinct") == 0)
		c->distinct_on = true;
	return strcmp(w, c->ref) != 0 || *n == '.' || c->prev[0] == PD_DOT ||
	       declares(c->own, sql, p);
}

/* Scan <sql>: false when every column must be read. */
static bool
pd_scan(struct pd_cols *c, const char *sql)
{
	const char *end = sql + strlen(sql);

	for (const char *p = blanks(sql, sql, end); p < end; p = blanks(sql, p, end)) {
		char w[PD_WORD_MAX];
		const char *q = read_word(sql, p, end, w);

		if (q != NULL) {
			if (!pd_word(c, sql, p, q, end, w, *p == '"'))
				return false;
			pd_push(c, *p == '"' ? PD_VALUE : PD_WORD, w);
			p = q;
			continue;
		}
		if (*p == '*' && !star_ok(c, sql, p, end))
			return false;
		q = sql_skip_item(sql, p);
		if (q != p) {			/* a string or dollar quote */
			pd_push(c, PD_VALUE, NULL);
			p = q;
			continue;
		}
		if (isdigit((unsigned char)*p) || *p == '$') {
			while (p < end && (sql_ident_char(*p) || *p == '.'))
				p++;
			pd_push(c, PD_VALUE, NULL);
			continue;
		}
		pd_push(c, *p == '(' ? PD_OPEN : *p == ')' || *p == ']' ? PD_CLOSE :
			   *p == '.' ? PD_DOT : *p == ',' ? PD_COMMA : PD_OTHER, NULL);
		p++;
	}
	return true;
}

/* The select list of the used columns, quoted ("a", "b"); the first column when none is
 * (malloc'd; NULL on no memory). */
static char *
pd_list(const struct pd_cols *c)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = nk_memstream(&out, &len);
	bool any = false, ok = f != NULL;

	for (uint32_t i = 0; i < c->n && ok; i++) {
		char *q;

		if (!c->used[i] && (any || i + 1 < c->n))
			continue;
		q = route_quote_ident(c->name[c->used[i] ? i : 0]);
		ok = q != NULL && fprintf(f, "%s%s", any ? ", " : "", q) >= 0;
		free(q);
		any = true;
	}
	if (f == NULL || fclose(f) != 0 || !ok) {
		free(out);
		return NULL;
	}
	return out;
}

/* route_pushdown_columns: see route_pushdown.h. */
char *
route_pushdown_columns(const char *sql, const struct stmt *own, uint32_t ri,
		       const struct plan_input *in)
{
	const struct stmt_rel *rel = &own->rels[ri];
	const struct plan_catalog *cat = in != NULL ? in->cat : NULL;
	const char *schema = rel->schema, *names[PD_COLS_MAX];
	bool used[PD_COLS_MAX] = { false };
	struct pd_cols c = { own, rel->alias != NULL ? rel->alias : rel->name, names, used, 0,
			     { PD_NONE }, { "" }, false };
	const char *a = after_alias(sql, rel);

	if (schema == NULL && in != NULL && in->sess != NULL)
		schema = in->sess->schema;
	if (cat == NULL || cat->column_name == NULL || schema == NULL)
		return NULL;
	if (a != NULL && *a == '(')
		return NULL;	/* (AS x (a, b): its columns renamed) */
	while (c.n < PD_COLS_MAX &&
	       (names[c.n] = cat->column_name(cat->arg, schema, rel->name, c.n + 1)) != NULL)
		c.n++;
	if (c.n == 0 || c.n == PD_COLS_MAX || !pd_scan(&c, sql))
		return NULL;
	for (uint32_t i = 0; i < c.n; i++)
		if (!used[i])
			return pd_list(&c);
	return NULL;	/* (every column: `*`) */
}
