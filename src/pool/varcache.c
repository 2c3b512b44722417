/*
 * varcache.c - session parameters that survive pooling ("varcache", pgbouncer's name).
 *
 * Tracked: client_encoding, DateStyle, TimeZone, standard_conforming_strings,
 * application_name, plus every name in track_extra_parameters (default IntervalStyle).
 * Values come from the startup packet, `options`, and the ParameterStatus the server sends
 * after a client's SET. search_path is not reported by Postgres 15, so it is followed by
 * recognising, in query texts, SET/RESET search_path, SELECT set_config('search_path', 'v',
 * false) and the savepoint statements (SAVEPOINT, RELEASE, ROLLBACK TO) that decide whether a
 * SET survives (a light lexer: comments, quotes and dollar quotes are skipped, statements split
 * at top-level semicolons); session_sp.c applies them as Postgres does.
 * Before a link serves a client, varcache_diff_sql() builds one "SET a=...; SET b=..." for
 * the values that differ. Entry points: varcache_set(), varcache_diff_sql(),
 * varcache_scan_query(), varcache_configure().
 */
#include "neki/base.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "neki/varcache.h"

#include "neki/config.h"
#include "neki/intern.h"
#include "neki/link.h"
#include "neki/log.h"
#include "neki/sqlscan.h"

static const char *const var_fixed[] = {
	"client_encoding", "DateStyle", "TimeZone", "standard_conforming_strings",
	"application_name",
};

static char var_names[VAR_MAX][64];	/* the tracked names, fixed ones first */
static const char *var_ptrs[VAR_MAX];	/* var_names[i], as link_track_params() takes them */
static size_t var_count;

_Static_assert(VAR_MAX <= LINK_TRACK_MAX, "every tracked parameter has a link slot");
static const struct cfg *var_cfg;	/* weak: the config the table was built from */

/* Index of <name> among the first <n> names, -1 when absent. */
static int
var_find(const char *name, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (strcasecmp(var_names[i], name) == 0)
			return (int)i;
	}
	return -1;
}

void
varcache_configure(const struct cfg *c)
{
	const char *p = c != NULL ? c->pool.track_extra_parameters : "IntervalStyle";

	var_count = 0;
	for (size_t i = 0; i < NK_ARRAY_LEN(var_fixed); i++)
		snprintf(var_names[var_count++], sizeof(var_names[0]), "%s", var_fixed[i]);
	while (p != NULL && *p != '\0' && var_count < VAR_MAX) {
		size_t len;

		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		len = strcspn(p, ", \t");
		if (len > 0 && len < sizeof(var_names[0])) {
			memcpy(var_names[var_count], p, len);
			var_names[var_count][len] = '\0';
			if (var_find(var_names[var_count], var_count) < 0)
				var_count++;
		}
		p += len;
	}
	for (size_t i = 0; i < var_count; i++)
		var_ptrs[i] = var_names[i];
	link_track_params(var_ptrs, var_count);
	var_cfg = c;
}

static void
varcache_ensure(void)
{
	const struct cfg *c = cfg_current();

	if (var_count == 0 || (c != NULL && c != var_cfg))
		varcache_configure(c);
}

size_t
varcache_count(void)
{
	varcache_ensure();
	return var_count;
}

const char *
varcache_name(size_t i)
{
	NK_ASSERT(i < var_count);
	return var_names[i];
}

int
varcache_index(const char *name)
{
	varcache_ensure();
	return var_find(name, var_count);
}

bool
varcache_set(struct varcache *vc, const char *name, const char *value)
{
	int i = varcache_index(name);
	const char *v;

	if (i < 0)
		return false;
	if ((v = intern_ref(value)) == NULL)
		return false;
	intern_unref(vc->val[i]);	/* the same string when unchanged: still referenced */
	vc->val[i] = v;
	return true;
}

void
varcache_cleanup(struct varcache *vc)
{
	for (size_t i = 0; i < VAR_MAX; i++) {
		intern_unref(vc->val[i]);
		vc->val[i] = NULL;
	}
	free(vc->search_path);
	vc->search_path = NULL;
}

/* ---- building the SET batch ---- */

struct sqlbuf {
	char *p;
	size_t len, cap;
	bool overflow;
};

static void
sqlbuf_add(struct sqlbuf *b, const char *s, size_t n)
{
	if (b->overflow || b->len + n + 1 > b->cap) {
		b->overflow = true;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
sqlbuf_str(struct sqlbuf *b, const char *s)
{
	sqlbuf_add(b, s, strlen(s));
}

/* Append <v> as a string literal: quotes doubled; E'' with doubled backslashes if needed. */
static void
sqlbuf_literal(struct sqlbuf *b, const char *v)
{
	bool esc = strchr(v, '\\') != NULL;

	sqlbuf_str(b, esc ? "E'" : "'");
	for (; *v != '\0'; v++) {
		if (*v == '\'' || (*v == '\\' && esc))
			sqlbuf_add(b, v, 1);
		sqlbuf_add(b, v, 1);
	}
	sqlbuf_str(b, "'");
}

static bool
str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

int
varcache_diff_sql(const struct varcache *vc, struct link *l, const char *link_sp, char *sql,
		  size_t cap)
{
	struct sqlbuf b = { sql, 0, cap, false };
	const char *const *have;
	int n = 0;

	varcache_ensure();
	have = l != NULL ? link_tracked(l) : NULL;
	for (size_t i = 0; i < var_count; i++) {
		const char *want = vc->val[i];

		if (want == NULL || (have != NULL && have[i] == want))	/* both interned */
			continue;
		sqlbuf_str(&b, "SET ");
		sqlbuf_str(&b, var_names[i]);
		sqlbuf_str(&b, "=");
		sqlbuf_literal(&b, want);
		sqlbuf_str(&b, ";");
		n++;
	}
	if (!str_eq(vc->search_path, link_sp)) {
		sqlbuf_str(&b, "SET search_path TO ");
		sqlbuf_str(&b, vc->search_path != NULL ? vc->search_path : "DEFAULT");
		sqlbuf_str(&b, ";");
		n++;
	}
	return b.overflow ? -1 : n;
}

/* ---- the query lexer ---- */

struct lexer {
	const char *start;	/* borrowed: the whole text */
	const char *p, *end;
};

/* The end of the string, quoted identifier, dollar quote or comment at lx->p (neki/sqlscan.h),
 * with its kind; lx->p itself when none starts there. */
static const char *
lex_item_end(const struct lexer *lx, enum sql_item *kind)
{
	size_t i = (size_t)(lx->p - lx->start), n = (size_t)(lx->end - lx->start);

	return lx->start + sql_scan_item(lx->start, i, n, kind);
}

/* Skip whitespace and comments (nested block comments, as Postgres allows). */
static void
lex_skip_space(struct lexer *lx)
{
	while (lx->p < lx->end) {
		enum sql_item it;
		const char *e;

		if (isspace((unsigned char)*lx->p)) {
			lx->p++;
			continue;
		}
		e = lex_item_end(lx, &it);
		if (it != SQL_ITEM_COMMENT)
			return;
		lx->p = e;
	}
}

/* The next word (letters, digits, _ and $) compared to <kw>, case-insensitive; consumed. */
static bool
lex_word(struct lexer *lx, const char *kw)
{
	size_t n = strlen(kw);
	const char *q;

	lex_skip_space(lx);
	if ((size_t)(lx->end - lx->p) < n || strncasecmp(lx->p, kw, n) != 0)
		return false;
	q = lx->p + n;
	if (q < lx->end && (isalnum((unsigned char)*q) || *q == '_' || *q == '$'))
		return false;
	lx->p = q;
	return true;
}

/* Move to the end of the current statement (a top-level ';' or the end). */
static void
lex_to_stmt_end(struct lexer *lx)
{
	while (lx->p < lx->end && *lx->p != ';') {
		enum sql_item it;
		const char *e = lex_item_end(lx, &it);

		lx->p = it != SQL_ITEM_NONE ? e : lx->p + 1;
	}
}

/* Append an op (the oldest goes when the list is full); its arg is set by the caller. */
static struct query_op *
fx_op(struct query_effects *fx, enum sp_op_kind kind)
{
	struct query_op *op;

	if (fx->n_ops == QFX_OPS_MAX) {
		memmove(&fx->ops[0], &fx->ops[1], (QFX_OPS_MAX - 1) * sizeof(fx->ops[0]));
		fx->n_ops--;
	}
	op = &fx->ops[fx->n_ops++];
	op->kind = kind;
	op->arg[0] = '\0';
	return op;
}

/* SET [SESSION] search_path {TO | =} value: record the value text. */
static void
lex_set_stmt(struct lexer *lx, struct query_effects *fx)
{
	const char *start, *stop;
	size_t len;

	if (lex_word(lx, "LOCAL"))
		return;
	(void)lex_word(lx, "SESSION");
	if (!lex_word(lx, "search_path"))
		return;
	lex_skip_space(lx);
	if (lx->p < lx->end && *lx->p == '=')
		lx->p++;
	else if (!lex_word(lx, "TO"))
		return;
	lex_skip_space(lx);
	start = lx->p;
	lex_to_stmt_end(lx);
	stop = lx->p;
	while (stop > start && isspace((unsigned char)stop[-1]))
		stop--;
	len = (size_t)(stop - start);
	if (len == 7 && strncasecmp(start, "DEFAULT", 7) == 0) {
		(void)fx_op(fx, SP_OP_RESET);
	} else if (len > 0 && len < sizeof(fx->ops[0].arg)) {
		struct query_op *op = fx_op(fx, SP_OP_SET);

		memcpy(op->arg, start, len);
		op->arg[len] = '\0';
	}
}

/* The character <c> (after space); consumed. */
static bool
lex_char(struct lexer *lx, char c)
{
	lex_skip_space(lx);
	if (lx->p >= lx->end || *lx->p != c)
		return false;
	lx->p++;
	return true;
}

/* A standard string literal '...' ('' inside) into <out>; false when absent or too long. */
static bool
lex_string(struct lexer *lx, char *out, size_t cap)
{
	size_t n = 0;

	if (!lex_char(lx, '\''))
		return false;
	while (lx->p < lx->end) {
		char c = *lx->p++;

		if (c == '\'' && (lx->p >= lx->end || *lx->p != '\'')) {
			out[n] = '\0';
			return true;
		}
		if (c == '\'')
			lx->p++;
		if (n + 1 >= cap)
			return false;
		out[n++] = c;
	}
	return false;
}

/* A savepoint name: "quoted" kept as written, otherwise folded to lower case. */
static bool
lex_name(struct lexer *lx, char *out, size_t cap)
{
	size_t n = 0;

	lex_skip_space(lx);
	if (lx->p < lx->end && *lx->p == '"') {
		lx->p++;
		while (lx->p < lx->end && n + 1 < cap) {
			char c = *lx->p++;

			if (c == '"' && (lx->p >= lx->end || *lx->p != '"'))
				break;
			if (c == '"')
				lx->p++;
			out[n++] = c;
		}
	} else {
		while (lx->p < lx->end && n + 1 < cap &&
		       (isalnum((unsigned char)*lx->p) || *lx->p == '_' || *lx->p == '$'))
			out[n++] = (char)tolower((unsigned char)*lx->p++);
	}
	out[n] = '\0';
	return n > 0;
}

/* SAVEPOINT / RELEASE / ROLLBACK TO: <kind> with the name that follows. */
static void
lex_savepoint_op(struct lexer *lx, struct query_effects *fx, enum sp_op_kind kind)
{
	char name[64];

	if (kind != SP_OP_SAVEPOINT)
		(void)lex_word(lx, "SAVEPOINT");
	if (lex_name(lx, name, sizeof(name)))
		memcpy(fx_op(fx, kind)->arg, name, strlen(name) + 1);
}

/* SELECT [pg_catalog.]set_config('search_path', 'value', false): a session-wide SET. */
static void
lex_select_stmt(struct lexer *lx, struct query_effects *fx)
{
	char name[16], value[sizeof(fx->ops[0].arg)];

	lex_skip_space(lx);
	if (lx->p >= lx->end || ((*lx->p | 0x20) != 'p' && (*lx->p | 0x20) != 's'))
		return;		/* neither pg_catalog. nor set_config */
	if (lex_word(lx, "pg_catalog") && !lex_char(lx, '.'))
		return;
	if (!lex_word(lx, "set_config") || !lex_char(lx, '(') ||
	    !lex_string(lx, name, sizeof(name)) || strcasecmp(name, "search_path") != 0 ||
	    !lex_char(lx, ',') || !lex_string(lx, value, sizeof(value)) || !lex_char(lx, ',') ||
	    !lex_word(lx, "false") || !lex_char(lx, ')') || value[0] == '\0')
		return;
	memcpy(fx_op(fx, SP_OP_SET)->arg, value, strlen(value) + 1);
}

/* The word at lx->p (letters and '_') in lower case into <out>; its length, 0 when there is
 * none or it does not fit (no keyword below is that long). lx->p is not moved. */
static size_t
lex_peek_word(const struct lexer *lx, char *out, size_t cap)
{
	size_t n = 0;

	while (lx->p + n < lx->end && (isalpha((unsigned char)lx->p[n]) || lx->p[n] == '_')) {
		if (n + 1 >= cap)
			return 0;
		out[n] = (char)(lx->p[n] | 0x20);
		n++;
	}
	out[n] = '\0';
	if (lx->p + n < lx->end && (isdigit((unsigned char)lx->p[n]) || lx->p[n] == '$'))
		return 0;	/* a longer identifier */
	return n;
}

/* What the statement starting at lx->p does (lx->p is left inside it). */
static void
lex_statement_head(struct lexer *lx, struct query_effects *fx)
{
	char w[12];
	size_t n;

	lex_skip_space(lx);
	if (lx->p >= lx->end)
		return;
	switch (*lx->p | 0x20) {	/* every keyword below starts with one of these */
	case 's':
	case 'r':
	case 'd':
		break;
	default:
		return;
	}
	if ((n = lex_peek_word(lx, w, sizeof(w))) == 0)
		return;
	lx->p += n;
	if (n == 3 && memcmp(w, "set", 3) == 0) {
		lex_set_stmt(lx, fx);
	} else if (n == 6 && memcmp(w, "select", 6) == 0) {
		lex_select_stmt(lx, fx);
	} else if (strcmp(w, "savepoint") == 0) {
		lex_savepoint_op(lx, fx, SP_OP_SAVEPOINT);
	} else if (strcmp(w, "release") == 0) {
		lex_savepoint_op(lx, fx, SP_OP_RELEASE);
	} else if (strcmp(w, "rollback") == 0) {
		if (!lex_word(lx, "WORK"))
			(void)lex_word(lx, "TRANSACTION");
		if (lex_word(lx, "TO"))
			lex_savepoint_op(lx, fx, SP_OP_ROLLBACK_TO);
	} else if (strcmp(w, "reset") == 0) {
		if (lex_word(lx, "search_path") || lex_word(lx, "ALL"))
			(void)fx_op(fx, SP_OP_RESET);
	} else if (strcmp(w, "discard") == 0) {
		if (lex_word(lx, "ALL")) {
			fx->discard_all = true;
			(void)fx_op(fx, SP_OP_RESET);
		}
	} else if (strcmp(w, "deallocate") == 0) {
		(void)lex_word(lx, "PREPARE");
		if (lex_word(lx, "ALL"))
			fx->deallocate_all = true;
	}
}

/*
 * Is <sql>[0..len) one statement for certain: no ';' but a final one followed only by
 * whitespace? (A ';' inside a literal or comment just takes the general path.)
 */
static bool
lex_is_one_statement(const char *sql, size_t len)
{
	const char *semi = memchr(sql, ';', len);

	if (semi == NULL)
		return true;
	for (const char *p = semi + 1; p < sql + len; p++)
		if (!isspace((unsigned char)*p))
			return false;
	return true;
}

void
varcache_scan_query(const char *sql, size_t len, struct query_effects *fx)
{
	struct lexer lx = { sql, sql, sql + len };

	fx->discard_all = fx->deallocate_all = false;
	fx->n_ops = 0;
	if (len > 0 && sql[len - 1] == '\0')
		lx.end--;
	if (lex_is_one_statement(sql, (size_t)(lx.end - sql))) {
		lex_statement_head(&lx, fx);	/* the common case: no need to find its end */
		return;
	}
	while (lx.p < lx.end) {
		lex_statement_head(&lx, fx);
		lex_to_stmt_end(&lx);
		if (lx.p < lx.end)
			lx.p++;	/* the ';' */
	}
}
