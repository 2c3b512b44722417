/*
 * tzfile.c - named time zones for timestamptz routing values: reads the system's TZif files
 * (/usr/share/zoneinfo, the files Debian's Postgres uses too) and their POSIX-TZ footer for
 * instants past the last transition, and turns a local wall-clock time into its UTC offset
 * the way Postgres does (in a spring-forward gap the offset before the transition, in a
 * fall-back overlap the one after it).
 *
 * Entry point: ksi_tz_local_offset(). Loaded zones are cached for the life of the process.
 */
#include "neki/base.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "keyspace_int.h"

#define TZ_DIR "/usr/share/zoneinfo"
#define TZ_NAME_MAX 64
#define TZ_CACHE 8
#define TZ_FILE_MAX (1 << 20)
#define UNIX_2000 INT64_C(946684800)	/* 2000-01-01 in Unix seconds */

/* One rule date of a POSIX TZ string: "Mm.w.d/time". */
struct tz_when {
	int mon, week, wday;
	int32_t secs;		/* local time of day of the switch */
};

struct tz_zone {
	char name[TZ_NAME_MAX];
	int64_t *times;		/* transitions, Unix seconds, ascending */
	uint8_t *types;		/* type of each transition */
	int32_t *utoff;		/* offset of each type, seconds east */
	uint32_t ntimes, ntypes;
	bool has_rule, rule_dst;	/* footer present; it has a DST part */
	int32_t std_off, dst_off;	/* footer offsets, seconds east */
	struct tz_when start, end;	/* footer DST start (std time) and end (dst time) */
};

static struct tz_zone *cache[TZ_CACHE];

static int64_t
be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return n == 4 ? (int64_t)(int32_t)v : (int64_t)v;
}

/* "[+-]hh[:mm[:ss]]" as seconds; returns the characters read, 0 on error. */
static size_t
posix_time(const char *s, int32_t *out)
{
	size_t i = 0;
	int sign = 1;
	int32_t parts[3] = { 0, 0, 0 };

	if (s[i] == '+' || s[i] == '-')
		sign = s[i++] == '-' ? -1 : 1;
	for (int k = 0; k < 3; k++) {
		if (!isdigit((unsigned char)s[i]))
			return k == 0 ? 0 : i - 1;
		while (isdigit((unsigned char)s[i]))
			parts[k] = parts[k] * 10 + (s[i++] - '0');
		if (s[i] != ':' || k == 2)
			break;
		i++;
	}
	*out = sign * (parts[0] * 3600 + parts[1] * 60 + parts[2]);
	return i;
}

/* Zone abbreviation: letters, or "<...>". Returns the characters read, 0 on error. */
static size_t
posix_name(const char *s)
{
	size_t i = 0;

	if (s[0] == '<') {
		while (s[i] && s[i] != '>')
			i++;
		return s[i] == '>' ? i + 1 : 0;
	}
	while (isalpha((unsigned char)s[i]))
		i++;
	return i >= 3 ? i : 0;
}

/* ",Mm.w.d[/time]". Returns the characters read, 0 on error (J and n forms unsupported). */
static size_t
posix_when(const char *s, struct tz_when *w)
{
	int n = 0;
	size_t i;

	if (sscanf(s, ",M%d.%d.%d%n", &w->mon, &w->week, &w->wday, &n) != 3 || n == 0)
		return 0;
	i = (size_t)n;
	w->secs = 7200;
	if (s[i] == '/') {
		size_t t = posix_time(s + i + 1, &w->secs);

		if (t == 0)
			return 0;
		i += 1 + t;
	}
	return w->mon >= 1 && w->mon <= 12 && w->week >= 1 && w->week <= 5 && w->wday >= 0 &&
			       w->wday <= 6 ? i : 0;
}

/* Parse a POSIX TZ footer such as "EST5EDT,M3.2.0,M11.1.0" or "<+03>-3". */
static bool
parse_footer(const char *s, struct tz_zone *z)
{
	size_t i = posix_name(s), n;
	int32_t west;

	if (i == 0 || (n = posix_time(s + i, &west)) == 0)
		return false;
	i += n;
	z->std_off = -west;
	z->has_rule = true;
	if (s[i] == '\0')
		return true;
	if ((n = posix_name(s + i)) == 0)
		return false;
	i += n;
	z->dst_off = z->std_off + 3600;
	if (s[i] != ',' && (n = posix_time(s + i, &west)) != 0) {
		z->dst_off = -west;
		i += n;
	}
	if ((n = posix_when(s + i, &z->start)) == 0)
		return false;
	i += n;
	if ((n = posix_when(s + i, &z->end)) == 0)
		return false;
	z->rule_dst = true;
	return s[i + n] == '\0';
}

/* Read the v2+ (64-bit) body of TZif <p>/<len> into <z>. */
static bool
parse_tzif(const uint8_t *p, size_t len, struct tz_zone *z)
{
	const uint8_t *h = p, *d, *foot;
	size_t v1, cnt[6];

	if (len < 44 || memcmp(p, "TZif", 4) != 0 || p[4] < '2')
		return false;
	for (int k = 0; k < 6; k++)
		cnt[k] = (size_t)be(p + 20 + 4 * k, 4);
	v1 = 44 + cnt[3] * 5 + cnt[4] * 6 + cnt[5] + cnt[2] * 8 + cnt[1] + cnt[0];
	if (v1 + 44 > len || memcmp(p + v1, "TZif", 4) != 0)
		return false;
	h = p + v1;
	for (int k = 0; k < 6; k++)
		cnt[k] = (size_t)be(h + 20 + 4 * k, 4);
	d = h + 44;
	foot = d + cnt[3] * 9 + cnt[4] * 6 + cnt[5] + cnt[2] * 12 + cnt[1] + cnt[0];
	if (foot > p + len || cnt[4] == 0)
		return false;
	z->ntimes = (uint32_t)cnt[3];
	z->ntypes = (uint32_t)cnt[4];
	z->times = malloc(cnt[3] * sizeof(int64_t) + 1);
	z->types = malloc(cnt[3] + 1);
	z->utoff = malloc(cnt[4] * sizeof(int32_t));
	if (!z->times || !z->types || !z->utoff)
		return false;
	for (size_t i = 0; i < cnt[3]; i++) {
		z->times[i] = be(d + 8 * i, 8);
		z->types[i] = d[cnt[3] * 8 + i];
		if (z->types[i] >= cnt[4])
			return false;
	}
	for (size_t i = 0; i < cnt[4]; i++)
		z->utoff[i] = (int32_t)be(d + cnt[3] * 9 + 6 * i, 4);
	if (foot < p + len && *foot == '\n') {
		const uint8_t *e = memchr(foot + 1, '\n', (size_t)(p + len - foot - 1));
		char rule[128];

		if (e && e > foot + 1 && (size_t)(e - foot - 1) < sizeof(rule)) {
			memcpy(rule, foot + 1, (size_t)(e - foot - 1));
			rule[e - foot - 1] = '\0';
			if (!parse_footer(rule, z))
				z->has_rule = false;
		}
	}
	return true;
}

static void
zone_free(struct tz_zone *z)
{
	if (z) {
		free(z->times);
		free(z->types);
		free(z->utoff);
		free(z);
	}
}

/* A zone name may only hold the characters of tzdata names and never climb with "..". */
static bool
zone_name_ok(const char *name)
{
	if (!*name || name[0] == '/' || strstr(name, "..") || strlen(name) >= TZ_NAME_MAX)
		return false;
	for (const char *c = name; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("/_+-", *c))
			return false;
	return true;
}

static struct tz_zone *
zone_load(const char *name)
{
	char path[sizeof(TZ_DIR) + TZ_NAME_MAX + 1];
	struct tz_zone *z = calloc(1, sizeof(*z));
	uint8_t *buf = malloc(TZ_FILE_MAX);
	FILE *fp;
	size_t n = 0;
	bool ok = false;

	snprintf(path, sizeof(path), "%s/%s", TZ_DIR, name);
	fp = z && buf ? fopen(path, "rb") : NULL;
	if (fp) {
		n = fread(buf, 1, TZ_FILE_MAX, fp);
		fclose(fp);
		ok = parse_tzif(buf, n, z);
	}
	free(buf);
	if (!ok) {
		zone_free(z);
		return NULL;
	}
	snprintf(z->name, sizeof(z->name), "%s", name);
	return z;
}

/* The cached zone <name>, loading it (evicting the oldest) on a miss; NULL if unknown. */
static const struct tz_zone *
zone_get(const char *name)
{
	struct tz_zone *z;

	for (int i = 0; i < TZ_CACHE && cache[i]; i++)
		if (strcmp(cache[i]->name, name) == 0)
			return cache[i];
	if (!zone_name_ok(name) || !(z = zone_load(name)))
		return NULL;
	zone_free(cache[TZ_CACHE - 1]);
	memmove(cache + 1, cache, (TZ_CACHE - 1) * sizeof(cache[0]));
	cache[0] = z;
	return z;
}

/* Local seconds since 2000 of the rule date <w> in <year>. */
static int64_t
rule_local(const struct tz_when *w, int64_t year)
{
	int64_t first = ksi_days_from_civil(year, w->mon, 1);
	int wday_first = (int)(((first + 6) % 7 + 7) % 7);	/* 2000-01-01 was a Saturday */
	int day = 1 + (w->wday - wday_first + 7) % 7 + 7 * (w->week - 1);
	int dim = (int)(ksi_days_from_civil(w->mon == 12 ? year + 1 : year,
					    w->mon == 12 ? 1 : w->mon + 1, 1) - first);

	while (day > dim)
		day -= 7;
	return (first + day - 1) * 86400 + w->secs;
}

/* Offset from the footer rule at UTC instant <t2000> (seconds since 2000). */
static int32_t
rule_offset(const struct tz_zone *z, int64_t t2000)
{
	int64_t days = t2000 / 86400 - (t2000 % 86400 < 0), year = 2000 + days / 366, s, e;

	if (!z->rule_dst)
		return z->std_off;
	while (ksi_days_from_civil(year + 1, 1, 1) <= days)
		year++;
	while (ksi_days_from_civil(year, 1, 1) > days)
		year--;
	s = rule_local(&z->start, year) - z->std_off;
	e = rule_local(&z->end, year) - z->dst_off;
	if (s < e)
		return t2000 >= s && t2000 < e ? z->dst_off : z->std_off;
	return t2000 >= e && t2000 < s ? z->std_off : z->dst_off;
}

/* Offset in effect at UTC instant <t2000>. */
static int32_t
zone_offset(const struct tz_zone *z, int64_t t2000)
{
	int64_t unix_secs = t2000 + UNIX_2000;
	uint32_t lo = 0, hi = z->ntimes;

	if (z->ntimes == 0 || unix_secs < z->times[0])
		return z->ntimes == 0 && z->has_rule ? rule_offset(z, t2000) : z->utoff[0];
	if (unix_secs >= z->times[z->ntimes - 1] && z->has_rule)
		return rule_offset(z, t2000);
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (z->times[mid] <= unix_secs)
			lo = mid;
		else
			hi = mid;
	}
	return z->utoff[z->types[lo]];
}

/* ksi_tz_local_offset: see keyspace_int.h. */
bool
ksi_tz_local_offset(const char *name, int64_t local2000, int32_t *offset)
{
	const struct tz_zone *z;
	int32_t before, after;
	bool before_ok, after_ok;

	if (strcasecmp(name, "UTC") == 0 || strcasecmp(name, "GMT") == 0 ||
	    strcasecmp(name, "Etc/UTC") == 0 || strcasecmp(name, "Z") == 0) {
		*offset = 0;
		return true;
	}
	if (!(z = zone_get(name)))
		return false;
	before = zone_offset(z, local2000 - 86400);
	after = zone_offset(z, local2000 + 86400);
	before_ok = zone_offset(z, local2000 - before) == before;
	after_ok = zone_offset(z, local2000 - after) == after;
	if (before == after || (before_ok && !after_ok) || (!before_ok && !after_ok))
		*offset = before;	/* normal time, or a spring-forward gap */
	else
		*offset = after;	/* a fall-back overlap, or only "after" fits */
	return true;
}
