/*
 * json.c - the topology JSON reader (JSON text -> struct topo_model) and the canonical
 * writer (model -> JSON text with a stable key order). The only cJSON user of the model.
 *
 * The reader records every structural problem as a finding with its JSON path (unknown or
 * duplicate keys, wrong JSON types, missing required keys) and keeps going, so one call
 * reports all of them. Entry points: topo_parse(), topo_to_json().
 */
#include "neki/base.h"

#include "neki/topology.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "topo_int.h"

struct jr {
	struct topo_model *m;
	struct topo_findings *f;
	char path[TOPO_PATH_MAX];	/* JSON path of the node being read */
	size_t plen;
};

/* Account for <n> characters just written at the end of the path (clamped). */
static size_t
jr_grow(struct jr *r, size_t mark, int n)
{
	if (n > 0)
		r->plen = mark + (size_t)n < sizeof(r->path) ? mark + (size_t)n :
							       sizeof(r->path) - 1;
	return mark;
}

/* Append ".key" (or "key" at the root) to the path; returns the mark to pop back to. */
static size_t
jr_key(struct jr *r, const char *key)
{
	size_t mark = r->plen;

	return jr_grow(r, mark, snprintf(r->path + mark, sizeof(r->path) - mark, "%s%s",
					 mark ? "." : "", key));
}

static size_t
jr_idx(struct jr *r, size_t i)
{
	size_t mark = r->plen;

	return jr_grow(r, mark, snprintf(r->path + mark, sizeof(r->path) - mark, "[%zu]", i));
}

static void
jr_pop(struct jr *r, size_t mark)
{
	r->plen = mark;
	r->path[mark] = '\0';
}

static void NK_PRINTF(3, 4)
jr_err(struct jr *r, const char *rule, const char *fmt, ...)
{
	char msg[NK_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	topo_findings_add(r->f, r->plen ? r->path : "(root)", rule, ERRCODE_INVALID_PARAMETER_VALUE,
			  false, "%s", msg);
}

static bool
jr_nomem(struct jr *r)
{
	jr_err(r, "json/out-of-memory", "out of memory while reading the data topology");
	return false;
}

static const char *
json_kind(const cJSON *n)
{
	if (cJSON_IsObject(n))
		return "an object";
	if (cJSON_IsArray(n))
		return "an array";
	if (cJSON_IsString(n))
		return "a string";
	if (cJSON_IsNumber(n))
		return "a number";
	if (cJSON_IsBool(n))
		return "a boolean";
	return "null";
}

static bool
jr_expect(struct jr *r, const cJSON *n, bool ok, const char *want)
{
	if (!ok)
		jr_err(r, "json/type", "must be %s, not %s", want, json_kind(n));
	return ok;
}

/* Report keys of <obj> that are not in <allowed> (NULL-terminated) or appear twice. */
static void
jr_check_keys(struct jr *r, const cJSON *obj, const char *const *allowed)
{
	const cJSON *c, *d;

	cJSON_ArrayForEach(c, obj) {
		size_t mark = jr_key(r, c->string);
		size_t i;

		for (i = 0; allowed && allowed[i]; i++)
			if (strcmp(allowed[i], c->string) == 0)
				break;
		if (allowed && !allowed[i])
			jr_err(r, "json/unknown-key", "unknown key \"%s\"", c->string);
		for (d = obj->child; d != c; d = d->next)
			if (strcmp(d->string, c->string) == 0) {
				jr_err(r, "json/duplicate-key", "duplicate key \"%s\"", c->string);
				break;
			}
		jr_pop(r, mark);
	}
}

/* Required-or-optional string member; NULL when absent or invalid (finding recorded). */
static const char *
jr_str(struct jr *r, const cJSON *obj, const char *key, bool required)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, key);
	size_t mark = jr_key(r, key);
	const char *s = NULL;

	if (!n) {
		if (required)
			jr_err(r, "json/required", "missing required key \"%s\"", key);
	} else if (jr_expect(r, n, cJSON_IsString(n), "a string")) {
		if (n->valuestring[0] == '\0')
			jr_err(r, "json/empty", "must not be empty");
		else if (!(s = topo_strdup(r->m, n->valuestring)))
			jr_nomem(r);
	}
	jr_pop(r, mark);
	return s;
}

static bool
jr_bool(struct jr *r, const cJSON *obj, const char *key)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, key);
	size_t mark = jr_key(r, key);
	bool v = false;

	if (n && jr_expect(r, n, cJSON_IsBool(n), "a boolean"))
		v = cJSON_IsTrue(n);
	jr_pop(r, mark);
	return v;
}

/* Array-of-strings member; returns whether the key is present. */
static bool
jr_strlist(struct jr *r, const cJSON *obj, const char *key, bool required,
	   struct topo_strlist *out)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, key), *c;
	size_t mark = jr_key(r, key), i = 0;

	memset(out, 0, sizeof(*out));
	if (!n || !jr_expect(r, n, cJSON_IsArray(n), "an array of strings")) {
		if (!n && required)
			jr_err(r, "json/required", "missing required key \"%s\"", key);
		jr_pop(r, mark);
		return n != NULL;
	}
	out->v = topo_alloc(r->m, (size_t)cJSON_GetArraySize(n) * sizeof(*out->v) + 1);
	if (!out->v)
		jr_nomem(r);
	cJSON_ArrayForEach(c, n) {
		size_t m2 = jr_idx(r, i++);

		if (out->v && jr_expect(r, c, cJSON_IsString(c), "a string") &&
		    !(out->v[out->n++] = topo_strdup(r->m, c->valuestring)))
			jr_nomem(r);
		jr_pop(r, m2);
	}
	jr_pop(r, mark);
	return true;
}

/* Zeroed array of <n> elements of <size> in the arena (n may be 0). */
static void *
jr_array(struct jr *r, size_t n, size_t size)
{
	void *p = topo_alloc(r->m, n * size + 1);

	if (!p)
		jr_nomem(r);
	return p;
}

/* Member <key> of <obj> when it is an object (finding otherwise); NULL when absent. */
static const cJSON *
jr_object(struct jr *r, const cJSON *obj, const char *key, bool required)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, key);
	size_t mark = jr_key(r, key);
	bool ok = true;

	if (!n && required)
		jr_err(r, "json/required", "missing required key \"%s\"", key);
	else if (n)
		ok = jr_expect(r, n, cJSON_IsObject(n), "an object");
	jr_pop(r, mark);
	return ok ? n : NULL;
}

/* A key-range bound: a string, or an integral JSON number (decimal bounds of range groups). */
static const char *
jr_bound(struct jr *r, const cJSON *obj, const char *key)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, key);
	size_t mark;
	char buf[32];

	if (!n || !cJSON_IsNumber(n))
		return jr_str(r, obj, key, false);
	mark = jr_key(r, key);
	if (n->valuedouble != floor(n->valuedouble) || fabs(n->valuedouble) > 9007199254740992.0) {
		jr_err(r, "json/type", "must be a string, or an integer of at most 2^53");
		jr_pop(r, mark);
		return NULL;
	}
	jr_pop(r, mark);
	snprintf(buf, sizeof(buf), "%.0f", n->valuedouble);
	return topo_strdup(r->m, buf);
}

static void
read_range(struct jr *r, const cJSON *n, struct topo_key_range *kr)
{
	static const char *const keys[] = { "shard_uid", "start", "end", NULL };

	if (!jr_expect(r, n, cJSON_IsObject(n), "an object"))
		return;
	jr_check_keys(r, n, keys);
	kr->shard_uid = jr_str(r, n, "shard_uid", true);
	kr->start_text = jr_bound(r, n, "start");
	kr->end_text = jr_bound(r, n, "end");
}

static void
read_group(struct jr *r, const cJSON *n, struct topo_shard_group *g)
{
	static const char *const keys[] = { "uid", "default_shard_index", "key_ranges", NULL };
	const cJSON *kr = cJSON_GetObjectItemCaseSensitive(n, "key_ranges"), *c;
	size_t mark, i = 0;

	if (!jr_expect(r, n, cJSON_IsObject(n), "an object"))
		return;
	jr_check_keys(r, n, keys);
	g->uid = jr_str(r, n, "uid", true);
	g->default_shard_index = jr_str(r, n, "default_shard_index", false);
	mark = jr_key(r, "key_ranges");
	if (!kr)
		jr_err(r, "json/required", "missing required key \"key_ranges\"");
	else if (jr_expect(r, kr, cJSON_IsArray(kr), "an array") &&
		 (g->ranges = jr_array(r, (size_t)cJSON_GetArraySize(kr), sizeof(*g->ranges)))) {
		cJSON_ArrayForEach(c, kr) {
			size_t m2 = jr_idx(r, i);

			read_range(r, c, &g->ranges[i++]);
			jr_pop(r, m2);
		}
		g->nranges = i;
	}
	jr_pop(r, mark);
}

static void
read_groups(struct jr *r, const cJSON *root)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "shard_groups"), *c;
	size_t mark = jr_key(r, "shard_groups"), i = 0;

	if (arr && jr_expect(r, arr, cJSON_IsArray(arr), "an array") &&
	    (r->m->groups = jr_array(r, (size_t)cJSON_GetArraySize(arr), sizeof(*r->m->groups)))) {
		cJSON_ArrayForEach(c, arr) {
			size_t m2 = jr_idx(r, i);

			read_group(r, c, &r->m->groups[i++]);
			jr_pop(r, m2);
		}
		r->m->ngroups = i;
	}
	jr_pop(r, mark);
}

static void
read_index_params(struct jr *r, const cJSON *n, struct topo_shard_index *ix)
{
	static const char *const keys[] = { "modulus", NULL };
	const cJSON *p = jr_object(r, n, "index_params", false), *mod;
	size_t mark;

	if (!p)
		return;
	ix->has_params = true;
	mark = jr_key(r, "index_params");
	jr_check_keys(r, p, keys);
	mod = cJSON_GetObjectItemCaseSensitive(p, "modulus");
	if (mod) {
		size_t m2 = jr_key(r, "modulus");

		ix->has_modulus = true;
		if (jr_expect(r, mod, cJSON_IsNumber(mod), "a number") &&
		    mod->valuedouble == floor(mod->valuedouble) && fabs(mod->valuedouble) < 9.2e18)
			ix->modulus = (int64_t)mod->valuedouble;
		else if (cJSON_IsNumber(mod))
			jr_err(r, "shard-index/modulus", "modulus must be a positive integer");
		jr_pop(r, m2);
	}
	jr_pop(r, mark);
}

/* Number of entries of a JSON map or array. */
#define JR_MAP_SIZE(map) ((size_t)cJSON_GetArraySize(map))

static void
read_index(struct jr *r, const cJSON *n, struct topo_shard_index *ix)
{
	static const char *const keys[] = { "type", "columns", "index_params", NULL };

	if (!jr_expect(r, n, cJSON_IsObject(n), "an object"))
		return;
	jr_check_keys(r, n, keys);
	ix->type_text = jr_str(r, n, "type", true);
	jr_strlist(r, n, "columns", true, &ix->columns);
	read_index_params(r, n, ix);
}

static void
read_indexes(struct jr *r, const cJSON *root)
{
	const cJSON *map = jr_object(r, root, "shard_indexes", false), *c;
	size_t mark = jr_key(r, "shard_indexes"), i = 0;

	if (map && (r->m->indexes = jr_array(r, JR_MAP_SIZE(map), sizeof(*r->m->indexes)))) {
		jr_check_keys(r, map, NULL);
		cJSON_ArrayForEach(c, map) {
			size_t m2 = jr_key(r, c->string);

			r->m->indexes[i].name = topo_strdup(r->m, c->string);
			read_index(r, c, &r->m->indexes[i++]);
			jr_pop(r, m2);
		}
		r->m->nindexes = i;
	}
	jr_pop(r, mark);
}

static void
read_table(struct jr *r, const cJSON *n, struct topo_table *t)
{
	static const char *const keys[] = { "shard_group", "shard_index", "secondary_indexes",
					    NULL };
	static const char *const sikeys[] = { "name", "columns", NULL };
	const cJSON *sis = cJSON_GetObjectItemCaseSensitive(n, "secondary_indexes"), *c;
	size_t mark, i = 0;

	if (!jr_expect(r, n, cJSON_IsObject(n), "an object"))
		return;
	jr_check_keys(r, n, keys);
	t->shard_group = jr_str(r, n, "shard_group", false);
	t->shard_index = jr_str(r, n, "shard_index", false);
	if (!sis)
		return;
	mark = jr_key(r, "secondary_indexes");
	if (jr_expect(r, sis, cJSON_IsArray(sis), "an array") &&
	    (t->sis = jr_array(r, JR_MAP_SIZE(sis), sizeof(*t->sis)))) {
		cJSON_ArrayForEach(c, sis) {
			size_t m2 = jr_idx(r, i);

			if (jr_expect(r, c, cJSON_IsObject(c), "an object")) {
				jr_check_keys(r, c, sikeys);
				t->sis[i].name = jr_str(r, c, "name", true);
				jr_strlist(r, c, "columns", true, &t->sis[i].columns);
			}
			i++;
			jr_pop(r, m2);
		}
		t->nsis = i;
	}
	jr_pop(r, mark);
}

static void
read_ref(struct jr *r, const cJSON *n, struct topo_ref_table *t)
{
	static const char *const keys[] = { "shard_groups", NULL };

	if (!jr_expect(r, n, cJSON_IsObject(n), "an object"))
		return;
	jr_check_keys(r, n, keys);
	t->has_groups = jr_strlist(r, n, "shard_groups", false, &t->shard_groups);
}

static void
read_seq(struct jr *r, const cJSON *n, struct topo_sequence *q)
{
	static const char *const keys[] = { "shard_group", NULL };

	if (!jr_expect(r, n, cJSON_IsObject(n), "an object"))
		return;
	jr_check_keys(r, n, keys);
	q->shard_group = jr_str(r, n, "shard_group", false);
}

typedef void (*jr_entry_fn)(struct jr *r, const cJSON *n, void *entry);

/* Read the map <key> of <obj> into a new array of name-first entries of <size> bytes. */
static void *
read_map(struct jr *r, const cJSON *obj, const char *key, size_t size, jr_entry_fn fn,
	 size_t *count)
{
	const cJSON *map = jr_object(r, obj, key, false), *c;
	size_t mark = jr_key(r, key), i = 0;
	char *arr = NULL;

	*count = 0;
	if (map && (arr = jr_array(r, JR_MAP_SIZE(map), size))) {
		jr_check_keys(r, map, NULL);
		cJSON_ArrayForEach(c, map) {
			size_t m2 = jr_key(r, c->string);
			void *entry = arr + i++ * size;

			*(const char **)entry = topo_strdup(r->m, c->string);
			fn(r, c, entry);
			jr_pop(r, m2);
		}
		*count = i;
	}
	jr_pop(r, mark);
	return arr;
}

static void
read_table_cb(struct jr *r, const cJSON *n, void *e)
{
	read_table(r, n, e);
}

static void
read_ref_cb(struct jr *r, const cJSON *n, void *e)
{
	read_ref(r, n, e);
}

static void
read_seq_cb(struct jr *r, const cJSON *n, void *e)
{
	read_seq(r, n, e);
}

static void
read_schema_cb(struct jr *r, const cJSON *n, void *e)
{
	static const char *const keys[] = { "default_shard_group", "tables", "reference_tables",
					    "sequences", NULL };
	struct topo_schema *s = e;

	if (!jr_expect(r, n, cJSON_IsObject(n), "an object"))
		return;
	jr_check_keys(r, n, keys);
	s->default_shard_group = jr_str(r, n, "default_shard_group", false);
	s->tables = read_map(r, n, "tables", sizeof(*s->tables), read_table_cb, &s->ntables);
	s->refs = read_map(r, n, "reference_tables", sizeof(*s->refs), read_ref_cb, &s->nrefs);
	s->seqs = read_map(r, n, "sequences", sizeof(*s->seqs), read_seq_cb, &s->nseqs);
}

static void
read_gsi_cb(struct jr *r, const cJSON *n, void *e)
{
	static const char *const keys[] = { "schema", "table", "owner_table", "columns",
					    "owner_sk_columns", "owner_pk_columns", "unique",
					    "ignore_null", "enabled", "write_only", NULL };
	struct topo_gsi *g = e;

	if (!jr_expect(r, n, cJSON_IsObject(n), "an object"))
		return;
	jr_check_keys(r, n, keys);
	g->schema = jr_str(r, n, "schema", false);
	g->table = jr_str(r, n, "table", true);
	g->owner_table = jr_str(r, n, "owner_table", true);
	jr_strlist(r, n, "columns", true, &g->columns);
	g->has_owner_sk = jr_strlist(r, n, "owner_sk_columns", false, &g->owner_sk_columns);
	g->has_owner_pk = jr_strlist(r, n, "owner_pk_columns", false, &g->owner_pk_columns);
	g->unique = jr_bool(r, n, "unique");
	g->ignore_null = jr_bool(r, n, "ignore_null");
	g->enabled = jr_bool(r, n, "enabled");
	g->write_only = jr_bool(r, n, "write_only");
}

static void
read_database_cb(struct jr *r, const cJSON *n, void *e)
{
	static const char *const keys[] = { "default_shard_group", "schemas",
					    "global_secondary_indexes", NULL };
	struct topo_database *d = e;

	if (!jr_expect(r, n, cJSON_IsObject(n), "an object"))
		return;
	jr_check_keys(r, n, keys);
	d->default_shard_group = jr_str(r, n, "default_shard_group", false);
	d->schemas = read_map(r, n, "schemas", sizeof(*d->schemas), read_schema_cb, &d->nschemas);
	d->gsis = read_map(r, n, "global_secondary_indexes", sizeof(*d->gsis), read_gsi_cb,
			   &d->ngsis);
}

static void
read_root(struct jr *r, const cJSON *root)
{
	static const char *const keys[] = { "databases", "shard_groups", "shard_indexes",
					    "authoritative_shard_group", "default_shard_group",
					    NULL };
	struct topo_model *m = r->m;

	if (!jr_expect(r, root, cJSON_IsObject(root), "an object"))
		return;
	jr_check_keys(r, root, keys);
	m->dbs = read_map(r, root, "databases", sizeof(*m->dbs), read_database_cb, &m->ndbs);
	read_groups(r, root);
	read_indexes(r, root);
	m->authoritative_shard_group = jr_str(r, root, "authoritative_shard_group", true);
	m->default_shard_group = jr_str(r, root, "default_shard_group", false);
	if (!cJSON_GetObjectItemCaseSensitive(root, "shard_groups")) {
		size_t mark = jr_key(r, "shard_groups");

		jr_err(r, "json/required", "missing required key \"shard_groups\"");
		jr_pop(r, mark);
	}
}

/* topo_parse: see topology.h. */
struct topo_model *
topo_parse(const char *json, size_t len, struct topo_findings *f)
{
	struct jr r = { .f = f };
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);

	if (!root) {
		size_t at = end && end >= json ? (size_t)(end - json) : 0;

		topo_findings_add(f, "(root)", "json/syntax", ERRCODE_INVALID_TEXT_REPRESENTATION,
				  false,
				  "invalid JSON at character %zu", at + 1);
		return NULL;
	}
	r.m = topo_model_new();
	if (!r.m) {
		cJSON_Delete(root);
		topo_findings_add(f, "(root)", "json/out-of-memory", ERRCODE_OUT_OF_MEMORY, false,
				  "out of memory while reading the data topology");
		return NULL;
	}
	read_root(&r, root);
	cJSON_Delete(root);
	topo_model_sort(r.m);
	topo_link(r.m, f);
	return r.m;
}

/* ---- canonical writer ---- */

struct jw {
	bool failed;	/* sticky: some cJSON allocation failed */
};

static cJSON *
jw_obj(struct jw *w, cJSON *parent, const char *key)
{
	cJSON *o = cJSON_AddObjectToObject(parent, key);

	w->failed |= o == NULL;
	return o;
}

static void
jw_str(struct jw *w, cJSON *obj, const char *key, const char *v)
{
	if (v && obj)
		w->failed |= cJSON_AddStringToObject(obj, key, v) == NULL;
}

static void
jw_bool(struct jw *w, cJSON *obj, const char *key, bool v)
{
	if (obj)
		w->failed |= cJSON_AddBoolToObject(obj, key, v) == NULL;
}

static void
jw_list(struct jw *w, cJSON *obj, const char *key, const struct topo_strlist *l)
{
	cJSON *a = obj ? cJSON_AddArrayToObject(obj, key) : NULL;

	w->failed |= a == NULL;
	for (size_t i = 0; a && i < l->n; i++) {
		cJSON *s = cJSON_CreateString(l->v[i]);

		w->failed |= s == NULL;
		if (s)
			cJSON_AddItemToArray(a, s);
	}
}

static void
write_table(struct jw *w, cJSON *tables, const struct topo_table *t)
{
	cJSON *o = jw_obj(w, tables, t->name), *arr;

	jw_str(w, o, "shard_group", t->shard_group);
	jw_str(w, o, "shard_index", t->shard_index);
	if (!o || t->nsis == 0)
		return;
	arr = cJSON_AddArrayToObject(o, "secondary_indexes");
	w->failed |= arr == NULL;
	for (size_t i = 0; arr && i < t->nsis; i++) {
		cJSON *si = cJSON_CreateObject();

		w->failed |= si == NULL;
		if (!si)
			break;
		cJSON_AddItemToArray(arr, si);
		jw_str(w, si, "name", t->sis[i].name);
		jw_list(w, si, "columns", &t->sis[i].columns);
	}
}

static void
write_schema(struct jw *w, cJSON *schemas, const struct topo_schema *s)
{
	cJSON *o = jw_obj(w, schemas, s->name), *m;

	jw_str(w, o, "default_shard_group", s->default_shard_group);
	if (s->ntables && (m = jw_obj(w, o, "tables")))
		for (size_t i = 0; i < s->ntables; i++)
			write_table(w, m, &s->tables[i]);
	if (s->nrefs && (m = jw_obj(w, o, "reference_tables")))
		for (size_t i = 0; i < s->nrefs; i++) {
			cJSON *r = jw_obj(w, m, s->refs[i].name);

			if (s->refs[i].has_groups)
				jw_list(w, r, "shard_groups", &s->refs[i].shard_groups);
		}
	if (s->nseqs && (m = jw_obj(w, o, "sequences")))
		for (size_t i = 0; i < s->nseqs; i++)
			jw_str(w, jw_obj(w, m, s->seqs[i].name), "shard_group",
			       s->seqs[i].shard_group);
}

static void
write_gsi(struct jw *w, cJSON *gsis, const struct topo_gsi *g)
{
	cJSON *o = jw_obj(w, gsis, g->name);

	jw_str(w, o, "schema", g->schema);
	jw_str(w, o, "table", g->table);
	jw_str(w, o, "owner_table", g->owner_table);
	jw_list(w, o, "columns", &g->columns);
	if (g->has_owner_sk)
		jw_list(w, o, "owner_sk_columns", &g->owner_sk_columns);
	if (g->has_owner_pk)
		jw_list(w, o, "owner_pk_columns", &g->owner_pk_columns);
	jw_bool(w, o, "unique", g->unique);
	jw_bool(w, o, "ignore_null", g->ignore_null);
	jw_bool(w, o, "enabled", g->enabled);
	if (g->write_only)
		jw_bool(w, o, "write_only", true);
}

static void
write_databases(struct jw *w, cJSON *root, const struct topo_model *m)
{
	cJSON *dbs = m->ndbs ? jw_obj(w, root, "databases") : NULL, *o, *sub;

	for (size_t d = 0; dbs && d < m->ndbs; d++) {
		const struct topo_database *db = &m->dbs[d];

		o = jw_obj(w, dbs, db->name);
		jw_str(w, o, "default_shard_group", db->default_shard_group);
		if (db->nschemas && (sub = jw_obj(w, o, "schemas")))
			for (size_t s = 0; s < db->nschemas; s++)
				write_schema(w, sub, &db->schemas[s]);
		if (db->ngsis && (sub = jw_obj(w, o, "global_secondary_indexes")))
			for (size_t g = 0; g < db->ngsis; g++)
				write_gsi(w, sub, &db->gsis[g]);
	}
}

static void
write_group(struct jw *w, cJSON *arr, const struct topo_shard_group *g)
{
	cJSON *o = cJSON_CreateObject(), *ranges;

	w->failed |= o == NULL;
	if (!o)
		return;
	cJSON_AddItemToArray(arr, o);
	jw_str(w, o, "uid", g->uid);
	jw_str(w, o, "default_shard_index", g->default_shard_index);
	ranges = cJSON_AddArrayToObject(o, "key_ranges");
	w->failed |= ranges == NULL;
	for (size_t i = 0; ranges && i < g->nranges; i++) {
		cJSON *r = cJSON_CreateObject();

		w->failed |= r == NULL;
		if (!r)
			return;
		cJSON_AddItemToArray(ranges, r);
		jw_str(w, r, "shard_uid", g->ranges[i].shard_uid);
		jw_str(w, r, "start", g->ranges[i].start_text);
		jw_str(w, r, "end", g->ranges[i].end_text);
	}
}

static void
write_index(struct jw *w, cJSON *map, const struct topo_shard_index *ix)
{
	cJSON *o = jw_obj(w, map, ix->name), *p;

	jw_str(w, o, "type", ix->type_text);
	jw_list(w, o, "columns", &ix->columns);
	if (ix->has_params && (p = jw_obj(w, o, "index_params")) && ix->has_modulus)
		w->failed |= cJSON_AddNumberToObject(p, "modulus", (double)ix->modulus) == NULL;
}

/* topo_to_json: see topology.h. */
char *
topo_to_json(const struct topo_model *m, bool pretty)
{
	struct jw w = { false };
	cJSON *root = cJSON_CreateObject(), *arr, *map;
	char *text = NULL;

	if (!root)
		return NULL;
	write_databases(&w, root, m);
	arr = cJSON_AddArrayToObject(root, "shard_groups");
	w.failed |= arr == NULL;
	for (size_t i = 0; arr && i < m->ngroups; i++)
		write_group(&w, arr, &m->groups[i]);
	if (m->nindexes && (map = jw_obj(&w, root, "shard_indexes")))
		for (size_t i = 0; i < m->nindexes; i++)
			write_index(&w, map, &m->indexes[i]);
	jw_str(&w, root, "authoritative_shard_group", m->authoritative_shard_group);
	jw_str(&w, root, "default_shard_group", m->default_shard_group);
	if (!w.failed)
		text = pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return text;
}
