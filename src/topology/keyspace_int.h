/*
 * keyspace_int.h - helpers shared by keyspace.c (types, hashing, binary input) and
 * pgtext.c (Postgres text input). Private to src/topology.
 */
#ifndef NEKI_TOPOLOGY_KEYSPACE_INT_H
#define NEKI_TOPOLOGY_KEYSPACE_INT_H

#include "neki/base.h"

#include "neki/error.h"
#include "neki/keyspace.h"

/* Largest decimal exponent a numeric may carry (Postgres: 131072 digits before the point). */
#define KSI_NUMERIC_MAX_POINT 140000

/* date / timestamp special values, as Postgres stores them */
#define KSI_DATE_NOBEGIN INT32_MIN
#define KSI_DATE_NOEND INT32_MAX
#define KSI_TS_NOBEGIN INT64_MIN
#define KSI_TS_NOEND INT64_MAX
#define KSI_USECS_PER_DAY INT64_C(86400000000)

/*
 * Store in <out> the canonical decimal text of the number 0.<digits> x 10^<point>, negative
 * when <neg> (digits are ASCII '0'..'9', <ndigits> of them, leading/trailing zeros allowed).
 * Returns false (and fills <err>, 22003) when the exponent is out of range or on no memory.
 */
bool ksi_numeric_canonical(bool neg, const char *digits, size_t ndigits, int64_t point,
			   struct ks_value *out, struct nk_error *err) NK_MUSTCHECK;

/* Make <out> the numeric special value <text> ("NaN", "Infinity", "-Infinity"). */
void ksi_numeric_special(struct ks_value *out, const char *text);

/* Days since 2000-01-01 of the proleptic Gregorian date <y>-<m>-<d> (year 0 = 1 BC). */
int64_t ksi_days_from_civil(int64_t y, int m, int d);

/* Value of hex digit <c>, -1 when <c> is not one. */
int ksi_hex_digit(char c);

/* Value of hex digit <c>, -1 when <c> is not one (pgtext.c). */
int ksi_hex_digit(char c);

/* Fill <err> with Postgres' "invalid input syntax for type <tname>" for <s>/<len>. */
bool ksi_syntax_error(struct nk_error *err, const char *tname, const char *s, size_t len);

/* Postgres date / timestamp / timestamptz text input (pgtime.c); see ks_value_from_text(). */
bool ksi_text_date(const char *s, size_t len, struct ks_value *out, struct nk_error *err)
	NK_MUSTCHECK;
bool ksi_text_timestamp(enum ks_type type, const char *s, size_t len,
			const struct ks_text_ctx *ctx, struct ks_value *out,
			struct nk_error *err) NK_MUSTCHECK;

/*
 * UTC offset (seconds east) of local wall-clock time <local2000> (seconds since 2000-01-01 as
 * read on the zone's clocks) in the named zone <name> ("UTC", "Europe/Berlin", ...), as
 * Postgres resolves it: in a spring-forward gap the offset before the transition, in a
 * fall-back overlap the offset after it. False when the zone is unknown (tzfile.c).
 */
bool ksi_tz_local_offset(const char *name, int64_t local2000, int32_t *offset) NK_MUSTCHECK;

#endif /* NEKI_TOPOLOGY_KEYSPACE_INT_H */
