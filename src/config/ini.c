/*
 * ini.c - the pgbouncer.ini syntax, and nothing about what the keys mean.
 *
 * A file is read line by line:
 *   - blank lines and lines whose first non-blank character is ';' or '#' are
 *     skipped (a ';' or '#' later in a line is an ordinary character);
 *   - "[name]" starts a section (a ';'/'#' comment may follow the ']');
 *   - "%include file" reads another file in place (path relative to the current
 *     working directory, as pgbouncer does; at most INI_MAX_INCLUDE_DEPTH levels;
 *     a file that includes itself, directly or not, is an error);
 *   - "key = value": the key is [A-Za-z0-9_.*-]+ or quoted ('key' or "key", a
 *     doubled quote stands for one); blanks around '=' are allowed; the value runs
 *     to the end of the line with trailing whitespace trimmed.
 * Names are case-sensitive. Entry points: ini_parse_file(), ini_parse_string().
 */
#include "neki/base.h"

#include "config_int.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* State shared by a file and the files it includes. */
struct ini_ctx {
	ini_item_fn cb;
	void *arg;
	int depth;				/* current %include depth */
	char *stack[INI_MAX_INCLUDE_DEPTH + 1];	/* owned: real paths being read */
};

/* One line being parsed: a mutable copy, with its location. */
struct ini_line {
	char *p;		/* cursor into the line (NUL-terminated) */
	const char *file;
	int line;
};

static bool ini_parse_text(struct ini_ctx *ctx, const char *file, const char *text,
			   struct nk_error *err);

/* Append " in configuration (<file>:<line>)" to err's message and set err->where. */
void
ini_error_locate(struct nk_error *err, const char *file, int line)
{
	size_t len;

	if (!err)
		return;
	len = strlen(err->message);
	snprintf(err->message + len, sizeof(err->message) - len,
		 " in configuration (%s:%d)", file, line);
	snprintf(err->where, sizeof(err->where), "%s:%d", file, line);
}

/* Set a syntax error at <ln> with <detail> saying what was expected. */
static bool
ini_syntax_error(struct nk_error *err, const struct ini_line *ln, const char *detail)
{
	nk_error_set(err, CFG_SQLSTATE, "syntax error");
	ini_error_locate(err, ln->file, ln->line);
	nk_error_detail(err, "%s", detail);
	return false;
}

/* A character of a bare key: [A-Za-z0-9_.*-]. */
static bool
ini_is_key_char(int ch)
{
	return isalnum(ch) || ch == '_' || ch == '.' || ch == '*' || ch == '-';
}

/* Skip spaces and tabs. */
static char *
ini_skip_blank(char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* Trim trailing whitespace (including '\r') of <s> in place. */
static void
ini_rtrim(char *s)
{
	size_t n = strlen(s);

	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
}

/*
 * Unquote a key starting at the opening quote <ln->p> in place; a doubled quote
 * stands for one quote character. Returns the key or NULL when unterminated.
 */
static char *
ini_unquote_key(struct ini_line *ln)
{
	char q = *ln->p;
	char *src = ln->p + 1, *dst = ln->p + 1, *key = ln->p + 1;

	for (;;) {
		if (*src == '\0')
			return NULL;
		if (*src == q) {
			if (src[1] != q)
				break;
			src++;
		}
		*dst++ = *src++;
	}
	ln->p = src + 1;
	*dst = '\0';
	return key;
}

/* Parse "[name]" at <ln->p>. */
static bool
ini_section_line(struct ini_ctx *ctx, struct ini_line *ln, struct nk_error *err)
{
	char *name = ln->p + 1;
	char *end = strchr(name, ']');
	char *rest;
	struct ini_item it = { INI_SECTION, name, NULL, ln->file, ln->line };

	if (!end)
		return ini_syntax_error(err, ln, "a section header is \"[name]\"");
	*end = '\0';
	rest = ini_skip_blank(end + 1);
	ini_rtrim(rest);
	if (*rest != '\0' && *rest != ';' && *rest != '#')
		return ini_syntax_error(err, ln, "only a comment may follow \"]\"");
	if (!ctx->cb(ctx->arg, &it, err)) {
		ini_error_locate(err, ln->file, ln->line);
		return false;
	}
	return true;
}

/* Parse "key = value" at <ln->p>. */
static bool
ini_keyval_line(struct ini_ctx *ctx, struct ini_line *ln, struct nk_error *err)
{
	char *key = ln->p, *key_end, *value;
	struct ini_item it = { INI_KEYVAL, NULL, NULL, ln->file, ln->line };

	if (*ln->p == '\'' || *ln->p == '"') {
		key = ini_unquote_key(ln);
		if (!key)
			return ini_syntax_error(err, ln, "a quoted key needs its closing quote");
		if (*key == '\0')
			return ini_syntax_error(err, ln, "a quoted key cannot be empty");
		key_end = NULL;
	} else {
		while (ini_is_key_char((unsigned char)*ln->p))
			ln->p++;
		key_end = ln->p;
		if (key_end == key)
			return ini_syntax_error(err, ln, "expected \"key = value\", \"[section]\" "
						"or \"%include file\"; a key is made of "
						"A-Z a-z 0-9 _ . * - or is quoted");
	}
	ln->p = ini_skip_blank(ln->p);
	if (*ln->p != '=')
		return ini_syntax_error(err, ln, "expected \"=\" after the key");
	if (key_end)
		*key_end = '\0';
	value = ini_skip_blank(ln->p + 1);
	ini_rtrim(value);
	it.name = key;
	it.value = value;
	if (!ctx->cb(ctx->arg, &it, err)) {
		ini_error_locate(err, ln->file, ln->line);
		return false;
	}
	return true;
}

/* Read all of <path> into a new NUL-terminated buffer; NULL with errno set on failure. */
static char *
ini_read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f)
		return NULL;
	do {
		if (cap - len < 4096) {
			char *nb = realloc(buf, cap + 65536);

			if (!nb) {
				free(buf);
				fclose(f);
				errno = ENOMEM;
				return NULL;
			}
			buf = nb;
			cap += 65536;
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
	} while (n > 0);
	if (ferror(f)) {
		int saved = errno ? errno : EIO;

		free(buf);
		fclose(f);
		errno = saved;
		return NULL;
	}
	fclose(f);
	buf[len] = '\0';
	return buf;
}

/* Fail when <real> is already on the include stack (a loop). */
static bool
ini_check_loop(const struct ini_ctx *ctx, const char *path, const char *real,
	       struct nk_error *err)
{
	for (int i = 0; i < ctx->depth; i++) {
		if (ctx->stack[i] && strcmp(ctx->stack[i], real) == 0) {
			nk_error_set(err, CFG_SQLSTATE, "%%include loop: \"%s\" is already "
				     "being read", path);
			nk_error_detail(err, "a configuration file cannot include itself, "
					"directly or through other files");
			return false;
		}
	}
	return true;
}

/* Read and parse <path> at the current depth (the caller locates errors). */
static bool
ini_parse_path(struct ini_ctx *ctx, const char *path, struct nk_error *err)
{
	char *text, *real;
	bool ok;

	text = ini_read_file(path);
	if (!text)
		return nk_error_set(err, CFG_SQLSTATE, "could not open configuration file "
				    "\"%s\": %s", path, strerror(errno));
	real = realpath(path, NULL);
	if (!real)
		real = strdup(path);
	if (!real) {
		free(text);
		return nk_error_set(err, CFG_SQLSTATE, "out of memory");
	}
	if (!ini_check_loop(ctx, path, real, err)) {
		free(real);
		free(text);
		return false;
	}
	ctx->stack[ctx->depth] = real;
	ok = ini_parse_text(ctx, path, text, err);
	ctx->stack[ctx->depth] = NULL;
	free(real);
	free(text);
	return ok;
}

/* Handle "%include file" at <ln->p> (which starts with "%include"). */
static bool
ini_include_line(struct ini_ctx *ctx, struct ini_line *ln, struct nk_error *err)
{
	char *path = ini_skip_blank(ln->p + strlen("%include"));
	bool ok;

	ini_rtrim(path);
	if (*path == '\0')
		return ini_syntax_error(err, ln, "%include needs a file name");
	if (ctx->depth >= INI_MAX_INCLUDE_DEPTH) {
		nk_error_set(err, CFG_SQLSTATE, "%%include nesting is too deep (more than %d "
			     "levels) while including \"%s\"", INI_MAX_INCLUDE_DEPTH, path);
		ini_error_locate(err, ln->file, ln->line);
		return false;
	}
	ctx->depth++;
	ok = ini_parse_path(ctx, path, err);
	ctx->depth--;
	if (!ok && err && err->where[0] == '\0')
		ini_error_locate(err, ln->file, ln->line);
	return ok;
}

/* True when <p> starts a "%include" directive. */
static bool
ini_is_include(const char *p)
{
	size_t n = strlen("%include");

	return strncmp(p, "%include", n) == 0 && (p[n] == ' ' || p[n] == '\t' ||
						  p[n] == '\0' || p[n] == '\r');
}

/* Parse one line (a mutable copy) of <file>. */
static bool
ini_parse_line(struct ini_ctx *ctx, struct ini_line *ln, struct nk_error *err)
{
	ln->p = ini_skip_blank(ln->p);
	ini_rtrim(ln->p);
	if (*ln->p == '\0' || *ln->p == ';' || *ln->p == '#')
		return true;
	if (*ln->p == '[')
		return ini_section_line(ctx, ln, err);
	if (ini_is_include(ln->p))
		return ini_include_line(ctx, ln, err);
	return ini_keyval_line(ctx, ln, err);
}

/* Parse every line of <text>, which came from <file>. */
static bool
ini_parse_text(struct ini_ctx *ctx, const char *file, const char *text, struct nk_error *err)
{
	const char *p = text;
	char *copy = NULL;
	size_t cap = 0;
	int lineno = 0;
	bool ok = true;

	while (ok && *p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		struct ini_line ln;

		lineno++;
		if (len + 1 > cap) {
			char *nc = realloc(copy, len + 1);

			if (!nc) {
				free(copy);
				return nk_error_set(err, CFG_SQLSTATE, "out of memory");
			}
			copy = nc;
			cap = len + 1;
		}
		memcpy(copy, p, len);
		copy[len] = '\0';
		ln = (struct ini_line){ copy, file, lineno };
		ok = ini_parse_line(ctx, &ln, err);
		p = nl ? nl + 1 : p + len;
	}
	free(copy);
	return ok;
}

/*
 * Parse the file <path>, calling <cb> for each section header and key in order.
 * Returns false with <err> set (message ending in "(file:line)" when a line is at
 * fault) on the first error.
 */
bool
ini_parse_file(const char *path, ini_item_fn cb, void *arg, struct nk_error *err)
{
	struct ini_ctx ctx = { .cb = cb, .arg = arg };

	nk_error_clear(err);
	return ini_parse_path(&ctx, path, err);
}

/* As ini_parse_file() for the text <text>; <name> stands for the file name in errors. */
bool
ini_parse_string(const char *name, const char *text, ini_item_fn cb, void *arg,
		 struct nk_error *err)
{
	struct ini_ctx ctx = { .cb = cb, .arg = arg };

	nk_error_clear(err);
	return ini_parse_text(&ctx, name, text, err);
}
