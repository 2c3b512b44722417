/*
 * ident.c - auth_ident_file: user name maps for cert and peer authentication.
 *
 * Each line `MAPNAME SYSTEM-USERNAME DATABASE-USERNAME` lets the system user
 * (certificate CN, peer user) log in as the database user when an hba rule says
 * map=MAPNAME. pgbouncer's subset of pg_ident.conf: literal names only (a
 * leading '/' regular expression is refused), no includes; a DATABASE-USERNAME of
 * all (not quoted) stands for every database user. Without a map,
 * cert and peer require the two names to be equal; that rule is the caller's.
 */
#include "neki/base.h"

#include "neki/auth.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ident_entry {
	char *map;		/* owned */
	char *sysuser;		/* owned */
	char *dbuser;		/* owned */
	bool db_all;		/* DATABASE-USERNAME was the keyword all: any user */
};

struct ident_map {
	struct ident_entry *e;	/* owned */
	size_t n, cap;
};

/*
 * Next field of <*p> (white-space separated, optionally double-quoted) copied
 * into <out>; false at the end of the line or a '#'.
 */
static bool
ident_field(const char **p, char *out, size_t outlen, bool *quoted)
{
	const char *s = *p;
	size_t n = 0;

	*quoted = false;
	while (*s && isspace((unsigned char)*s))
		s++;
	if (*s == '\0' || *s == '#')
		return false;
	if (*s == '"') {
		const char *q = strchr(s + 1, '"');

		if (!q || (size_t)(q - s - 1) >= outlen)
			return false;
		n = (size_t)(q - s - 1);
		memcpy(out, s + 1, n);
		s = q + 1;
		*quoted = true;
	} else {
		while (*s && !isspace((unsigned char)*s) && *s != '#' && n < outlen - 1)
			out[n++] = *s++;
	}
	out[n] = '\0';
	*p = s;
	return true;
}

static bool
ident_add(struct ident_map *m, const char *map, const char *sys, const char *db, bool db_all)
{
	struct ident_entry *e;

	if (m->n == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 8;
		struct ident_entry *ne = realloc(m->e, ncap * sizeof(*ne));

		if (!ne)
			return false;
		m->e = ne;
		m->cap = ncap;
	}
	e = &m->e[m->n];
	e->map = strdup(map);
	e->sysuser = strdup(sys);
	e->dbuser = strdup(db);
	e->db_all = db_all;
	if (!e->map || !e->sysuser || !e->dbuser) {
		free(e->map);
		free(e->sysuser);
		free(e->dbuser);
		return false;
	}
	m->n++;
	return true;
}

/* One line: 0 blank, 1 added, -1 bad shape (reason in *<why>), -2 out of memory. */
static int
ident_line(struct ident_map *m, const char *line, const char **why)
{
	char map[256], sys[256], db[256], extra[8];
	const char *p = line;
	bool q, db_q;

	if (!ident_field(&p, map, sizeof(map), &q))
		return 0;
	if (!ident_field(&p, sys, sizeof(sys), &q) || !ident_field(&p, db, sizeof(db), &db_q)) {
		*why = "expected MAPNAME SYSTEM-USERNAME DATABASE-USERNAME";
		return -1;
	}
	if (ident_field(&p, extra, sizeof(extra), &q)) {
		*why = "extra fields after DATABASE-USERNAME";
		return -1;
	}
	if (sys[0] == '/') {
		*why = "regular expressions are not supported";
		return -1;
	}
	return ident_add(m, map, sys, db, !db_q && strcmp(db, "all") == 0) ? 1 : -2;
}

/* Parse ident map text; see neki/auth.h. */
struct ident_map *
ident_map_parse(const char *text, hba_warn_fn warn, void *warn_arg)
{
	struct ident_map *m = calloc(1, sizeof(*m));
	const char *p = text;
	int lineno = 0;

	while (m && *p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *line = strndup(p, len);
		const char *why = "out of memory";
		int r;

		lineno++;
		p += len + (nl ? 1 : 0);
		r = line ? ident_line(m, line, &why) : -2;
		free(line);
		if (r == -2) {
			ident_map_free(m);
			return NULL;
		}
		if (r < 0 && warn)
			warn(warn_arg, lineno, why);
	}
	return m;
}

/* Read <path> whole and parse it. */
struct ident_map *
ident_map_load(const char *path, hba_warn_fn warn, void *warn_arg, struct nk_error *err)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0;
	ssize_t n;
	struct ident_map *m;

	if (!f) {
		nk_error_set(err, ERRCODE_UNDEFINED_FILE,
			     "could not open auth_ident_file \"%s\": %s", path,
			     strerror(errno));
		return NULL;
	}
	n = getdelim(&buf, &cap, '\0', f);
	fclose(f);
	m = ident_map_parse(n > 0 ? buf : "", warn, warn_arg);
	free(buf);
	if (!m)
		nk_error_oom(err);
	return m;
}

/* Free <m>; NULL is fine. */
void
ident_map_free(struct ident_map *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->e[i].map);
		free(m->e[i].sysuser);
		free(m->e[i].dbuser);
	}
	free(m->e);
	free(m);
}

/* Linear search for a (map, sysuser, dbuser) line (or map, sysuser, all). */
bool
ident_map_allows(const struct ident_map *m, const char *map, const char *sysuser,
		 const char *dbuser)
{
	for (size_t i = 0; m && i < m->n; i++) {
		const struct ident_entry *e = &m->e[i];

		if (strcmp(e->map, map) == 0 && strcmp(e->sysuser, sysuser) == 0 &&
		    (e->db_all || strcmp(e->dbuser, dbuser) == 0))
			return true;
	}
	return false;
}
