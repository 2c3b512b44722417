/*
 * pgtime.c - Postgres text input for date, timestamp and timestamptz routing values.
 *
 * Accepted forms (the ISO forms clients and drivers send): "YYYY-MM-DD", optionally followed
 * by "T" or spaces and "HH:MM[:SS[.ffffff]]", an optional zone ("Z", "UTC", "GMT",
 * "+HH", "+HHMM", "+HH:MM", "+HH:MM:SS", or a tzdata name such as "Europe/Berlin", see
 * tzfile.c), an optional "BC"/"AD"; and the special words "infinity", "-infinity" and
 * "epoch". timestamp ignores a zone as Postgres does; timestamptz without a zone uses the
 * session's zone from struct ks_text_ctx. The moving words ("now", "today") are refused:
 * they cannot give a stable key.
 */
#include "neki/base.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "keyspace_int.h"

/* Postgres limits: Julian day 0 (4714-11-24 BC) and the end of year 294276 / 5874897. */
#define DATE_MIN_DAYS INT64_C(-2451545)
#define DATE_END_DAYS INT64_C(2145031949)
#define TS_MIN INT64_C(-211813488000000000)
#define TS_END INT64_C(9223371331200000000)
#define DAYS_1970_TO_2000 10957

struct dt_parts {
	int64_t year;
	int mon, day;
	int hour, min, sec;
	int64_t usec;
	bool bc;		/* year is BC: astronomical year is 1 - year */
	bool has_tz;
	int32_t tz_secs;	/* seconds east of UTC */
	char tz_name[64];	/* named zone ("Europe/Berlin"); empty when none */
};

struct dt_cursor {
	const char *s;
	size_t len, pos;
};

/* ksi_days_from_civil: see keyspace_int.h (civil-from-days algorithm run backwards). */
int64_t
ksi_days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468 - DAYS_1970_TO_2000;
}

static bool
is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int
days_in_month(int64_t y, int m)
{
	static const int dim[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	return m == 2 && is_leap(y) ? 29 : dim[m - 1];
}

static bool
cur_end(const struct dt_cursor *c)
{
	return c->pos >= c->len;
}

static char
cur_peek(const struct dt_cursor *c)
{
	return cur_end(c) ? '\0' : c->s[c->pos];
}

static void
cur_skip_space(struct dt_cursor *c)
{
	while (!cur_end(c) && isspace((unsigned char)c->s[c->pos]))
		c->pos++;
}

/* Read 1..<maxd> digits into <*out>; returns the number read (0: none). */
static int
cur_digits(struct dt_cursor *c, int maxd, int64_t *out)
{
	int n = 0;

	*out = 0;
	while (n < maxd && !cur_end(c) && isdigit((unsigned char)c->s[c->pos])) {
		*out = *out * 10 + (c->s[c->pos++] - '0');
		n++;
	}
	return n;
}

/* Case-insensitive match of the word <w> at the cursor; consumes it on success. */
static bool
cur_word(struct dt_cursor *c, const char *w)
{
	size_t n = strlen(w);

	if (c->len - c->pos < n || strncasecmp(c->s + c->pos, w, n) != 0)
		return false;
	if (c->pos + n < c->len && isalpha((unsigned char)c->s[c->pos + n]))
		return false;
	c->pos += n;
	return true;
}

static bool
parse_date_part(struct dt_cursor *c, struct dt_parts *p)
{
	int64_t v;

	if (cur_digits(c, 9, &p->year) == 0 || cur_peek(c) != '-')
		return false;
	c->pos++;
	if (cur_digits(c, 2, &v) == 0 || cur_peek(c) != '-')
		return false;
	p->mon = (int)v;
	c->pos++;
	if (cur_digits(c, 2, &v) == 0)
		return false;
	p->day = (int)v;
	return true;
}

/* ".ffff": rounded to microseconds as Postgres does (rint of the fraction x 10^6). */
static void
parse_fraction(struct dt_cursor *c, struct dt_parts *p)
{
	char buf[32] = "0.";
	size_t n = 2;

	c->pos++;
	while (!cur_end(c) && isdigit((unsigned char)c->s[c->pos])) {
		if (n < sizeof(buf) - 1)
			buf[n++] = c->s[c->pos];
		c->pos++;
	}
	buf[n] = '\0';
	p->usec = (int64_t)rint(strtod(buf, NULL) * 1000000.0);
}

static bool
parse_time_part(struct dt_cursor *c, struct dt_parts *p)
{
	int64_t v;

	if (cur_digits(c, 2, &v) == 0 || cur_peek(c) != ':')
		return false;
	p->hour = (int)v;
	c->pos++;
	if (cur_digits(c, 2, &v) == 0)
		return false;
	p->min = (int)v;
	if (cur_peek(c) != ':')
		return true;
	c->pos++;
	if (cur_digits(c, 2, &v) == 0)
		return false;
	p->sec = (int)v;
	if (cur_peek(c) == '.')
		parse_fraction(c, p);
	return true;
}

/* "+HH", "+HHMM", "+HH:MM", "+HH:MM:SS", "+HHMMSS" (also with '-'). */
static bool
parse_numeric_zone(struct dt_cursor *c, struct dt_parts *p)
{
	int sign = c->s[c->pos++] == '-' ? -1 : 1;
	int64_t h, m = 0, s = 0;
	int nd = cur_digits(c, 6, &h);

	if (nd == 4 || nd == 6) {
		s = nd == 6 ? h % 100 : 0;
		h = nd == 6 ? h / 100 : h;
		m = h % 100;
		h /= 100;
	} else if (nd == 1 || nd == 2) {
		if (cur_peek(c) == ':') {
			c->pos++;
			if (cur_digits(c, 2, &m) != 2)
				return false;
			if (cur_peek(c) == ':') {
				c->pos++;
				if (cur_digits(c, 2, &s) != 2)
					return false;
			}
		}
	} else {
		return false;
	}
	if (h > 15 || m > 59 || s > 59)
		return false;
	p->has_tz = true;
	p->tz_secs = sign * (int32_t)(h * 3600 + m * 60 + s);
	return true;
}

/* A zone name: tzdata characters up to the next space. */
static bool
parse_zone_name(struct dt_cursor *c, struct dt_parts *p)
{
	size_t n = 0;

	while (!cur_end(c) && (isalnum((unsigned char)c->s[c->pos]) ||
			       strchr("/_+-", c->s[c->pos]))) {
		if (n + 1 >= sizeof(p->tz_name))
			return false;
		p->tz_name[n++] = c->s[c->pos++];
	}
	p->tz_name[n] = '\0';
	return n > 0;
}

static bool
parse_zone(struct dt_cursor *c, struct dt_parts *p)
{
	char ch = cur_peek(c);

	if (ch == '+' || ch == '-')
		return parse_numeric_zone(c, p);
	if (cur_word(c, "z") || cur_word(c, "utc") || cur_word(c, "gmt")) {
		p->has_tz = true;
		p->tz_secs = 0;
		return true;
	}
	return isalpha((unsigned char)ch) && parse_zone_name(c, p);
}

/* True when "BC" or "AD" is next (not consumed). */
static bool
at_era(const struct dt_cursor *c)
{
	struct dt_cursor t = *c;

	return cur_word(&t, "bc") || cur_word(&t, "ad");
}

/* date [T|space time] [zone] [BC|AD]; returns false on any leftover text. */
static bool
parse_datetime(struct dt_cursor *c, struct dt_parts *p)
{
	memset(p, 0, sizeof(*p));
	if (!parse_date_part(c, p))
		return false;
	if (cur_peek(c) == 'T' || cur_peek(c) == 't') {
		c->pos++;
		if (!parse_time_part(c, p))
			return false;
	} else {
		cur_skip_space(c);
		if (isdigit((unsigned char)cur_peek(c)) && !parse_time_part(c, p))
			return false;
	}
	cur_skip_space(c);
	if (!cur_end(c) && !at_era(c) && !parse_zone(c, p))
		return false;
	cur_skip_space(c);
	if (cur_word(c, "bc")) {
		p->bc = true;
	} else {
		(void)cur_word(c, "ad");
	}
	cur_skip_space(c);
	return cur_end(c);
}

/* Check the fields and turn a BC year into an astronomical one (1 BC = year 0). */
static bool
parts_in_range(struct dt_parts *p)
{
	if (p->year == 0 || p->mon < 1 || p->mon > 12)
		return false;
	if (p->bc) {
		p->year = 1 - p->year;
		p->bc = false;
	}
	if (p->day < 1 || p->day > days_in_month(p->year, p->mon))
		return false;
	if (p->hour > 24 || p->min > 59 || p->sec > 60)
		return false;
	return p->hour < 24 || (p->min == 0 && p->sec == 0 && p->usec == 0);
}

enum dt_special {
	DT_NONE = 0,
	DT_NOBEGIN,
	DT_NOEND,
	DT_EPOCH,
	DT_MOVING,
};

static enum dt_special
special_word(const char *s, size_t len)
{
	struct dt_cursor c = { s, len, 0 };
	enum dt_special sp = DT_NONE;

	if (cur_word(&c, "infinity") || cur_word(&c, "+infinity"))
		sp = DT_NOEND;
	else if (cur_word(&c, "-infinity"))
		sp = DT_NOBEGIN;
	else if (cur_word(&c, "epoch"))
		sp = DT_EPOCH;
	else if (cur_word(&c, "now") || cur_word(&c, "today") || cur_word(&c, "tomorrow") ||
		 cur_word(&c, "yesterday"))
		sp = DT_MOVING;
	return cur_end(&c) ? sp : DT_NONE;
}

/* Trimmed view of the input and its special word, or a parse into <p>. */
static bool
parse_input(const char **s, size_t *len, enum dt_special *sp, struct dt_parts *p,
	    bool *range_ok)
{
	struct dt_cursor c;

	while (*len > 0 && isspace((unsigned char)**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len > 0 && isspace((unsigned char)(*s)[*len - 1]))
		(*len)--;
	*sp = special_word(*s, *len);
	*range_ok = true;
	if (*sp != DT_NONE)
		return true;
	c = (struct dt_cursor){ *s, *len, 0 };
	if (!parse_datetime(&c, p))
		return false;
	*range_ok = parts_in_range(p);
	return true;
}

static bool
moving_error(struct nk_error *err, const char *s, size_t len)
{
	return nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
			    "shard key value \"%.*s\" is not a constant and cannot be routed",
			    (int)len, s);
}

static bool
field_range_error(struct nk_error *err, const char *s, size_t len)
{
	return nk_error_set(err, ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
			    "date/time field value out of range: \"%.*s\"",
			    (int)(len > 200 ? 200 : len), s);
}

/* ksi_text_date: see keyspace_int.h. A time or zone after the date is ignored. */
bool
ksi_text_date(const char *s, size_t len, struct ks_value *out, struct nk_error *err)
{
	struct dt_parts p;
	enum dt_special sp;
	bool range_ok;
	int64_t days;

	if (!parse_input(&s, &len, &sp, &p, &range_ok))
		return ksi_syntax_error(err, "date", s, len);
	if (sp == DT_MOVING)
		return moving_error(err, s, len);
	if (sp != DT_NONE) {
		out->i = sp == DT_NOBEGIN ? KSI_DATE_NOBEGIN :
			 sp == DT_NOEND ? KSI_DATE_NOEND : -DAYS_1970_TO_2000;
		return true;
	}
	if (!range_ok)
		return field_range_error(err, s, len);
	days = ksi_days_from_civil(p.year, p.mon, p.day);
	if (days < DATE_MIN_DAYS || days >= DATE_END_DAYS)
		return nk_error_set(err, ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
				    "date out of range: \"%.*s\"", (int)len, s);
	out->i = days;
	return true;
}

/*
 * UTC offset for local time <local> (seconds since 2000): the literal's own zone, else the
 * session's named zone, else the session's fixed offset. An unknown zone name is an error
 * even for timestamp without time zone, as in Postgres.
 */
static bool
zone_offset(const struct dt_parts *p, const struct ks_text_ctx *ctx, int64_t local,
	    int32_t *tz, struct nk_error *err)
{
	const char *name = p->tz_name[0] ? p->tz_name : NULL;

	if (p->has_tz) {
		*tz = p->tz_secs;
		return true;
	}
	if (!name && ctx && ctx->tz_name)
		name = ctx->tz_name;
	if (!name) {
		*tz = ctx ? ctx->tz_offset_secs : 0;
		return true;
	}
	if (!ksi_tz_local_offset(name, local, tz))
		return nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
				    "time zone \"%s\" not recognized", name);
	return true;
}

/* ksi_text_timestamp: see keyspace_int.h. */
bool
ksi_text_timestamp(enum ks_type type, const char *s, size_t len, const struct ks_text_ctx *ctx,
		   struct ks_value *out, struct nk_error *err)
{
	const char *tname = type == KS_TYPE_TIMESTAMPTZ ? "timestamp with time zone" :
							  "timestamp without time zone";
	struct dt_parts p;
	enum dt_special sp;
	bool range_ok;
	int64_t days, ts, local;
	int32_t tz;

	if (!parse_input(&s, &len, &sp, &p, &range_ok))
		return ksi_syntax_error(err, tname, s, len);
	if (sp == DT_MOVING)
		return moving_error(err, s, len);
	if (sp != DT_NONE) {
		out->i = sp == DT_NOBEGIN ? KSI_TS_NOBEGIN :
			 sp == DT_NOEND ? KSI_TS_NOEND : -DAYS_1970_TO_2000 * KSI_USECS_PER_DAY;
		return true;
	}
	if (!range_ok)
		return field_range_error(err, s, len);
	days = ksi_days_from_civil(p.year, p.mon, p.day);
	if (days < DATE_MIN_DAYS || days > TS_END / KSI_USECS_PER_DAY)
		return nk_error_set(err, ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
				    "timestamp out of range: \"%.*s\"", (int)len, s);
	local = days * 86400 + (int64_t)p.hour * 3600 + p.min * 60 + p.sec;
	if (!zone_offset(&p, ctx, local, &tz, err))
		return false;
	ts = local * 1000000 + p.usec;
	if (type == KS_TYPE_TIMESTAMPTZ)
		ts -= (int64_t)tz * 1000000;
	if (ts < TS_MIN || ts >= TS_END)
		return nk_error_set(err, ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
				    "timestamp out of range: \"%.*s\"", (int)len, s);
	out->i = ts;
	return true;
}
