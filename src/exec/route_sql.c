/*
 * route_sql.c - texts of a routed session: the VALUES rows of an INSERT (a lexical scan
 * that knows quotes, dollar quotes, comments and parentheses) to build each shard's part of
 * a split INSERT, CommandComplete tags, ErrorResponses of shards, and the DETAIL naming
 * the shards a statement reached; the statements of a simple Query (route_query_split():
 * one statement without the scanner's split) and the extra field of a router's error
 * (route_err_field()). Pure functions of their arguments but those two (the route's Query).
 */
#include "neki/base.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/memstream.h"
#include "neki/merge.h"
#include "neki/plan_gsi.h"
#include "neki/proto.h"
#include "neki/sqlscan.h"
#include "route_int.h"
#include "route_sqltext.h"

void
route_sql_params(const char *sql, bool *used, uint32_t max)
{
	for (const char *p = sql; *p != '\0';) {
		const char *e = sql_skip_item(sql, p);
		unsigned long n;
		char *end;

		if (e != p) {
			p = e;
			continue;
		}
		if (*p == '$' && isdigit((unsigned char)p[1]) &&
		    (p == sql || (!isalnum((unsigned char)p[-1]) && p[-1] != '_'))) {
			n = strtoul(p + 1, &end, 10);
			if (n >= 1 && n <= max)
				used[n - 1] = true;
			p = end;
			continue;
		}
		p++;
	}
}

static bool
rsql_word_at(const char *sql, const char *p, const char *word)
{
	size_t n = strlen(word);

	return strncasecmp(p, word, n) == 0 && !isalnum((unsigned char)p[n]) && p[n] != '_' &&
	       (p == sql || (!isalnum((unsigned char)p[-1]) && p[-1] != '_'));
}

/* The keywords that end a WHERE condition at its level. */
static const char *const rsql_where_ends[] = {
	"group", "having", "window", "order", "limit", "offset", "fetch", "for", "union",
	"intersect", "except", "returning",
};

/* route_sql_clause_at: see route_sqltext.h. */
bool
route_sql_clause_at(const char *sql, const char *p)
{
	if (p > sql && sql_ident_char(p[-1]))
		return false;
	for (size_t i = 0; i < NK_ARRAY_LEN(rsql_where_ends); i++) {
		size_t n = strlen(rsql_where_ends[i]);

		if (strncasecmp(p, rsql_where_ends[i], n) == 0 && !sql_ident_char(p[n]))
			return true;
	}
	return false;
}

/* route_sql_where_end: see route_sqltext.h. */
const char *
route_sql_where_end(const char *sql, const char *p)
{
	int depth = 0;

	for (; *p != '\0' && *p != ';' && !(*p == ')' && depth == 0); p++) {
		const char *q = sql_skip_item(sql, p);

		if (q != p) {
			p = q - 1;
			continue;
		}
		depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
		if (depth == 0 && route_sql_clause_at(sql, p))
			return p;
	}
	return p;
}

/* The first top-level VALUES keyword of <sql>, or NULL. */
static const char *
rsql_find_values(const char *sql)
{
	int depth = 0;

	for (const char *p = sql; *p != '\0';) {
		const char *e = sql_skip_item(sql, p);

		if (e != p) {
			p = e;
			continue;
		}
		if (*p == '(')
			depth++;
		else if (*p == ')')
			depth--;
		else if (depth == 0 && rsql_word_at(sql, p, "values"))
			return p + 6;
		p++;
	}
	return NULL;
}

/* The ")" closing the "(" at <p>, or NULL. */
static const char *
rsql_close_paren(const char *sql, const char *p)
{
	int depth = 0;

	while (*p != '\0') {
		const char *e = sql_skip_item(sql, p);

		if (e != p) {
			p = e;
			continue;
		}
		if (*p == '(')
			depth++;
		else if (*p == ')' && --depth == 0)
			return p;
		p++;
	}
	return NULL;
}

static const char *
rsql_skip_blank(const char *sql, const char *p)
{
	for (;;) {
		const char *e;

		while (isspace((unsigned char)*p))
			p++;
		if ((p[0] == '-' && p[1] == '-') || (p[0] == '/' && p[1] == '*')) {
			e = sql_skip_item(sql, p);
			p = e;
			continue;
		}
		return p;
	}
}

bool
route_values_rows(const char *sql, uint32_t *starts, uint32_t *lens, uint32_t max, uint32_t *n)
{
	const char *p = rsql_find_values(sql);

	*n = 0;
	if (p == NULL)
		return false;
	for (;;) {
		const char *close;

		p = rsql_skip_blank(sql, p);
		if (*p != '(' || (close = rsql_close_paren(sql, p)) == NULL || *n == max)
			return false;
		starts[*n] = (uint32_t)(p - sql);
		lens[*n] = (uint32_t)(close + 1 - p);
		(*n)++;
		p = rsql_skip_blank(sql, close + 1);
		if (*p != ',')
			return true;
		p++;
	}
}

char *
route_insert_part(const char *sql, const uint32_t *starts, const uint32_t *lens, uint32_t nall,
		  const uint32_t *rows, uint32_t n)
{
	size_t head = starts[0], tail_at = starts[nall - 1] + lens[nall - 1];
	size_t size = head + strlen(sql + tail_at) + 1, off;
	char *out;

	for (uint32_t i = 0; i < n; i++)
		size += lens[rows[i]] + 2;
	if ((out = malloc(size)) == NULL)
		return NULL;
	memcpy(out, sql, head);
	off = head;
	for (uint32_t i = 0; i < n; i++) {
		if (i > 0) {
			memcpy(out + off, ", ", 2);
			off += 2;
		}
		memcpy(out + off, sql + starts[rows[i]], lens[rows[i]]);
		off += lens[rows[i]];
	}
	strcpy(out + off, sql + tail_at);
	return out;
}

void
route_tag_split(const char *tag, char *head, size_t cap, uint64_t *count, bool *has_count)
{
	const char *sp = strrchr(tag, ' ');
	size_t n;

	*has_count = false;
	*count = 0;
	if (sp != NULL && sp[1] != '\0' && strspn(sp + 1, "0123456789") == strlen(sp + 1)) {
		*has_count = true;
		*count = strtoull(sp + 1, NULL, 10);
		n = (size_t)(sp - tag);
	} else {
		n = strlen(tag);
	}
	if (n >= cap)
		n = cap - 1;
	memcpy(head, tag, n);
	head[n] = '\0';
}

void
route_error_from_msg(const uint8_t *msg, uint32_t len, struct nk_error *out)
{
	struct proto_server_error se;
	struct nk_error e;

	nk_error_set(out, ERRCODE_INTERNAL_ERROR, "a shard failed");
	if (len < 5 || !proto_parse_server_error(msg + 5, len - 5, &se, &e))
		return;
	proto_server_error_to_nk(&se, out);
	out->severity = NK_SEV_ERROR;
}

void
route_detail_shards(struct route *r, struct nk_error *err, const char *what, uint32_t from,
		    uint32_t upto)
{
	size_t off = strlen(err->detail);
	int w;

	if (off > 0 && off + 1 < sizeof(err->detail)) {
		err->detail[off++] = ' ';
		err->detail[off] = '\0';
	}
	if (from >= upto) {
		w = snprintf(err->detail + off, sizeof(err->detail) - off, "%s on no shard.", what);
		(void)w;
		return;
	}
	w = snprintf(err->detail + off, sizeof(err->detail) - off, "%s on shard%s ", what,
		     upto - from > 1 ? "s" : "");
	for (uint32_t i = from; i < upto && w > 0 && (size_t)w < sizeof(err->detail) - off; i++) {
		off += (size_t)w;
		w = snprintf(err->detail + off, sizeof(err->detail) - off, "%s%s%s",
			     i > from ? ", " : "", r->sh[r->x.tg[i]].uid, i + 1 == upto ? "." : "");
	}
}

const char *
route_sql_skip_token(const char *sql, const char *p)
{
	return sql_skip_item(sql, p);
}

/* route_sql_has_param: see route_int.h. */
bool
route_sql_has_param(const char *sql, size_t start, size_t end)
{
	for (const char *p = sql + start; p < sql + end;) {
		const char *e = sql_skip_item(sql, p);

		if (e != p) {
			p = e;
			continue;
		}
		if (p[0] == '$' && p[1] >= '0' && p[1] <= '9' && (p == sql || !sql_ident_char(p[-1])))
			return true;
		p++;
	}
	return false;
}

/* Bound value <v> as a constant of its declared type; false for a binary one the router
 * cannot read. */
static bool
put_param(FILE *f, const struct plan_param *v)
{
	const char *type = v->type_oid ? merge_type_sql(v->type_oid) : NULL;

	if (v->len < 0) {
		fputs("NULL", f);
		return true;
	}
	char *text = v->binary ? plan_binary_value(v->type_oid, (const char *)v->data, v->len) :
		     NULL;

	if (v->binary && text == NULL)
		return false;
	fputc('(', f);
	if (text != NULL)
		sql_put_literal(f, text, strlen(text));
	else
		sql_put_literal(f, (const char *)v->data, (size_t)v->len);
	free(text);
	if (type != NULL)
		fprintf(f, "::%s", type);
	fputc(')', f);
	return true;
}

/* <sql> without a final ';', each $n (outside quotes and comments) written by <put>(f, n,
 * <ctx>, err) (false with <err>), into a new string; NULL with <err>. */
static char *
inline_dollars(const char *sql, bool (*put)(FILE *, unsigned long, const void *,
					    struct nk_error *),
	       const void *ctx, struct nk_error *err)
{
	char *out = NULL;
	size_t len = 0, end = strlen(sql);
	FILE *f = nk_memstream(&out, &len);
	const char *p = sql, *run = sql;	/* (the text since the last $n: one write) */
	bool ok = f != NULL;

	while (end > 0 && (sql[end - 1] == ';' || sql[end - 1] == ' ' || sql[end - 1] == '\n' ||
			   sql[end - 1] == '\t' || sql[end - 1] == '\r'))
		end--;

	while (ok && p < sql + end) {
		const char *e = sql_skip_item(sql, p);
		char *digits;

		if (e == p && p[0] == '$' && p[1] >= '0' && p[1] <= '9' &&
		    (p == sql || !sql_ident_char(p[-1]))) {
			fwrite(run, 1, (size_t)(p - run), f);
			ok = put(f, strtoul(p + 1, &digits, 10), ctx, err);
			p = run = digits;
			continue;
		}
		p = e != p ? e : p + 1;
	}
	if (ok && f != NULL)
		fwrite(run, 1, (size_t)(p - run), f);
	if (f == NULL || fclose(f) != 0) {
		free(out);
		return nk_error_oom(err), NULL;
	}
	if (!ok) {
		free(out);
		return NULL;
	}
	return out;
}

struct bound_params {
	const struct plan_param *params;
	uint32_t n;
};

static bool
put_bound(FILE *f, unsigned long n, const void *ctx, struct nk_error *err)
{
	const struct bound_params *b = ctx;

	if (n >= 1 && n <= b->n && put_param(f, &b->params[n - 1]))
		return true;
	return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
			    "the router cannot write parameter $%lu into the statement it runs "
			    "for this one: its binary format is not one it reads", n);
}

/* route_sql_inline_params: see route_int.h. */
char *
route_sql_inline_params(const char *sql, const struct plan_param *params, uint32_t nparams,
	      struct nk_error *err)
{
	struct bound_params b = { params, nparams };

	return inline_dollars(sql, put_bound, &b, err);
}

/* (the literals of a normalised text: slot k is $k, the text has no $n of its own) */
static bool
put_literal(FILE *f, unsigned long n, const void *ctx, struct nk_error *err)
{
	const struct parse_norm *norm = ((const void *const *)ctx)[0];
	const char *src = ((const void *const *)ctx)[1];

	if (n < 1 || n > norm->nlits)
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR, "$%lu is not a literal of the "
				    "statement", n);
	fwrite(src + norm->lits[n - 1].start, 1, norm->lits[n - 1].len, f);
	return true;
}

/* route_sql_inline_literals: see route_int.h. */
char *
route_sql_inline_literals(const char *text, const struct parse_norm *norm, const char *src,
			  struct nk_error *err)
{
	const void *ctx[2] = { norm, src };

	return inline_dollars(text, put_literal, ctx, err);
}

/* (a statement's slots: its bound parameters, then its normalised literals) */
struct slot_values {
	const struct parse_norm *norm;
	const char *src;
	struct bound_params b;
	bool *has_null;
};

static bool
put_slot(FILE *f, unsigned long n, const void *ctx, struct nk_error *err)
{
	const struct slot_values *s = ctx;
	const void *lits[2] = { s->norm, s->src };

	if (n < 1 || n > s->norm->nparams)
		return put_literal(f, n - s->norm->nparams, lits, err);
	if (n <= s->b.n && s->b.params[n - 1].len < 0)
		*s->has_null = true;
	return put_bound(f, n, &s->b, err);
}

/* route_sql_inline_slots: see route_sqltext.h. */
char *
route_sql_inline_slots(const char *text, const struct parse_norm *norm, const char *src,
		       const struct plan_param *params, uint32_t nparams, bool *has_null,
		       struct nk_error *err)
{
	struct slot_values s = { norm, src, { params, nparams }, has_null };

	*has_null = false;
	return inline_dollars(text, put_slot, &s, err);
}

/* ---- the statements of a Query, error fields ---- */

/*
 * Does <sql> (<len> bytes, before a final ';') hold one statement for sure: no other ';', no
 * construct the quick look below could misread ($-quotes, nested comments, backslashes), and
 * (<semi>) the final ';' not inside an unterminated string?
 */
static bool
route_one_stmt(const char *sql, size_t len, bool semi)
{
	const char *p = sql, *end = sql + len;

	if (memchr(sql, ';', len) != NULL)
		return false;
	if (!semi || strcspn(sql, "'\"-/$\\") >= len)
		return true;	/* no ';' but a final one that nothing could quote: one */
	if (memchr(sql, '$', len) != NULL || memchr(sql, '\\', len) != NULL)
		return false;
	while (p < end) {
		const char *e;

		if (p[0] == '/' && p + 1 < end && p[1] == '*')
			return false;
		if (*p != '\'' && *p != '"' && !(p[0] == '-' && p + 1 < end && p[1] == '-')) {
			p++;
			continue;
		}
		e = route_sql_skip_token(sql, p);
		if (semi && *p != '-' && (e > end || e[-1] != *p || e == p + 1))
			return false;	/* the ';' may be inside the string */
		p = e;
	}
	return true;
}

/* route_query_split: see route_int.h. */
bool
route_query_split(struct route *r, struct nk_error *err)
{
	size_t len = strlen(r->query);
	bool semi;

	while (len > 0 && isspace((unsigned char)r->query[len - 1]))
		len--;
	semi = len > 0 && r->query[len - 1] == ';';
	if (!route_one_stmt(r->query, semi ? len - 1 : len, semi))
		return parse_split(r->query_arena, r->query, &r->spans, &r->nspans, err);
	len -= semi;
	r->nspans = len > strspn(r->query, " \t\n\r\f\v") ? 1 : 0;
	r->spans = rarena_alloc(r->query_arena, sizeof(*r->spans));
	if (r->spans == NULL)
		return nk_error_oom(err);
	r->spans[0] = (struct parse_span){ 0, (uint32_t)len };
	return true;
}

/* Characters (UTF-8) of the Query before its current statement (0 outside a Query). */
static unsigned long
route_stmt_chars_before(const struct route *r)
{
	unsigned long n = 0;

	if (r->spans != NULL && r->cur < r->nspans)
		for (uint32_t i = 0; i < r->spans[r->cur].start; i++)
			n += ((unsigned char)r->query[i] & 0xc0) != 0x80;
	return n;
}

/* Is the text sent to the shards the Query's current statement as the client wrote it (not
 * rewritten by the router: a shard's error positions are then the client's)? */
static bool
route_stmt_as_written(const struct route *r)
{
	const struct parse_span *sp;

	if (r->x.ext_exec || r->spans == NULL || r->cur >= r->nspans || r->x.stmt_sql == NULL)
		return false;
	sp = &r->spans[r->cur];
	return strlen(r->x.stmt_sql) == sp->len &&
	       memcmp(r->x.stmt_sql, r->query + sp->start, sp->len) == 0;
}

/* route_error_keep_position: see route_int.h. */
void
route_error_keep_position(const struct route *r, const uint8_t *msg, uint32_t len,
			  struct nk_error *err)
{
	struct proto_server_error se;
	struct nk_error e;

	if (err->where[0] != '\0' || len < 5 || !route_stmt_as_written(r) ||
	    !proto_parse_server_error(msg + 5, len - 5, &se, &e) || se.position == NULL ||
	    se.position[0] == '\0' || strspn(se.position, "0123456789") != strlen(se.position))
		return;
	snprintf(err->where, sizeof(err->where), "%s", se.position);
}

/* route_shard_err_in_query: see route_int.h. */
bool
route_shard_err_in_query(const struct route *r, const uint8_t *msg, uint32_t len,
			 struct pktbuf *pb)
{
	uint32_t at = 5;
	char buf[24];

	if (!route_stmt_as_written(r) || r->spans[r->cur].start == 0)
		return false;
	pktbuf_begin(pb, 'E');
	while (at < len && msg[at] != '\0') {
		const char *v = (const char *)msg + at + 1;
		size_t vlen = strnlen(v, len - at - 1);

		if (at + 1 + vlen >= len)
			break;	/* (malformed: no terminator; what came before is kept) */
		pktbuf_put_byte(pb, msg[at]);
		if (msg[at] == 'P') {
			snprintf(buf, sizeof(buf), "%lu",
				 strtoul(v, NULL, 10) + route_stmt_chars_before(r));
			v = buf;
		}
		pktbuf_put_string(pb, v);
		at += 2 + (uint32_t)vlen;
	}
	pktbuf_put_byte(pb, 0);
	pktbuf_end(pb);
	return true;
}

/* route_err_field: see route_int.h. */
bool
route_err_field(const struct route *r, const struct nk_error *err, bool in_query,
		struct proto_err_field *f, char *buf, size_t cap)
{
	unsigned long pos;

	if (err->where[0] == '\0')
		return false;
	if (strspn(err->where, "0123456789") != strlen(err->where)) {
		*f = (struct proto_err_field){ 'W', err->where };	/* a shard's CONTEXT */
		return true;
	}
	/* a syntax error's cursor (characters, from 1) in the statement: in the client's text */
	pos = strtoul(err->where, NULL, 10);
	if (in_query)
		pos += route_stmt_chars_before(r);
	snprintf(buf, cap, "%lu", pos);
	*f = (struct proto_err_field){ 'P', buf };
	return true;
}

/* route_sql_rel_name_end: see route_sqltext.h. */
const char *
route_sql_rel_name_end(const char *sql, const struct stmt_rel *rel)
{
	const char *p, *e;

	if (rel->loc < 0 || (size_t)rel->loc >= strlen(sql))
		return NULL;
	for (p = e = sql + rel->loc;; e++) {
		const char *q = sql_skip_item(sql, e);

		if (q != e && *e == '"')
			e = q;
		else
			while (sql_ident_char(*e))
				e++;
		if (*e != '.')
			break;
	}
	return e == p ? NULL : e;
}
