/*
 * route_sqltext.h - the executor's SQL text helpers (src/exec/route_sql.c): the VALUES
 * splitter, parameters and literals written into a text, command tags (none of which need a
 * session), a shard's error read, and the split of a Query into its statements.
 */
#ifndef NEKI_EXEC_ROUTE_SQLTEXT_H
#define NEKI_EXEC_ROUTE_SQLTEXT_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/plan.h"

struct route;

/*
 * Split INSERT ... VALUES <sql> into prefix, rows and suffix: <starts>/<lens> receive up to
 * <max> row spans (each "(...)"), *<n> the row count. False when the text has no VALUES list.
 */
bool route_values_rows(const char *sql, uint32_t *starts, uint32_t *lens, uint32_t max,
		       uint32_t *n);
/* <sql> with only the VALUES rows <rows>[0..n) (malloc'd; NULL on no memory). */
char *route_insert_part(const char *sql, const uint32_t *starts, const uint32_t *lens,
			uint32_t nall, const uint32_t *rows, uint32_t n);
/* Mark in <used>[0..max) the parameters $n (n <= max) that <sql> references; does [start,
 * end) of <sql> hold one (outside quotes and comments)? */
void route_sql_params(const char *sql, bool *used, uint32_t max);
bool route_sql_has_param(const char *sql, size_t start, size_t end);
/* <sql> with each $n written as its bound value <params>[n-1], a typed constant, without a
 * final ';' (malloc'd); NULL with <err> (0A000: a binary value the router cannot read). */
char *route_sql_inline_params(const char *sql, const struct plan_param *params,
			      uint32_t nparams, struct nk_error *err);
/* <text> (a rewrite of <src>'s normalised form <norm>, which has no $n of its own) with each
 * $k written as literal k's token from <src>, without a final ';' (malloc'd); NULL with
 * <err>. */
char *route_sql_inline_literals(const char *text, const struct parse_norm *norm,
				const char *src, struct nk_error *err);
/* <text> with each $k written as slot k - 1 of the statement <src> (normalised as <norm>,
 * bound values <params>): a bound value as route_sql_inline_params() writes it, a literal
 * as its token; *<has_null>: a bound value was NULL. Malloc'd; NULL with <err>. */
char *route_sql_inline_slots(const char *text, const struct parse_norm *norm, const char *src,
			     const struct plan_param *params, uint32_t nparams, bool *has_null,
			     struct nk_error *err);
/* Does a clause keyword that ends a WHERE condition (GROUP, ORDER, LIMIT, UNION, ...)
 * start at <p> of <sql>? The end of a WHERE condition starting at <p>: the first such
 * keyword, ';' or closing parenthesis of its level. */
bool route_sql_clause_at(const char *sql, const char *p);
const char *route_sql_where_end(const char *sql, const char *p);
/* The end of table <rel>'s `[schema .] name` at its offset in <sql>, or NULL. */
const char *route_sql_rel_name_end(const char *sql, const struct stmt_rel *rel);
/* Split a CommandComplete tag "INSERT 0 5" into its words before the count and the count. */
void route_tag_split(const char *tag, char *head, size_t cap, uint64_t *count, bool *has_count);

/* Read an ErrorResponse message (whole, with type and length) into <out>. */
void route_error_from_msg(const uint8_t *msg, uint32_t len, struct nk_error *out);
/* Append "<word> on shards a, b" of the targets [0, upto) to <err>'s DETAIL. */
void route_detail_shards(struct route *r, struct nk_error *err, const char *what,
			 uint32_t from, uint32_t upto);

/*
 * The statements of r->query into r->spans / r->nspans (in r->query_arena): a text of one
 * statement (no ';' but maybe a final one) needs no scanner's split (its syntax errors come
 * from its analysis; whitespace before it is kept, so the shard's error positions stay those
 * of the client's text); any other goes through parse_split(). False with <err> set.
 */
NK_MUSTCHECK bool route_query_split(struct route *r, struct nk_error *err);

#endif /* NEKI_EXEC_ROUTE_SQLTEXT_H */
