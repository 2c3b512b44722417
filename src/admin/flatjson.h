/*
 * flatjson.h - the flat JSON objects neki itself reads (src/admin/flatjson.c): options,
 * the cache file's wrapper.
 */
#ifndef NEKI_ADMIN_FLATJSON_H
#define NEKI_ADMIN_FLATJSON_H

#include "neki/base.h"

#include <stddef.h>

#define ADM_JSON_MAX_KEYS 16

enum adm_json_kind {
	ADM_JSON_NULL = 0,
	ADM_JSON_STRING = 1,
	ADM_JSON_NUMBER = 2,
	ADM_JSON_BOOL = 3,
	ADM_JSON_NESTED = 4,	/* an object or array (text holds it verbatim) */
};

struct adm_json_member {
	char *key;			/* owned, unescaped */
	enum adm_json_kind kind;
	char *text;			/* owned: unescaped string, number text, "true"/"false" */
};

struct adm_json_obj {
	struct adm_json_member m[ADM_JSON_MAX_KEYS];
	size_t n;
};

/*
 * Parse <text> as one JSON object of scalar members (nested values are kept verbatim).
 * Returns false with <err> (22P02 "invalid input syntax for type json") otherwise.
 */
NK_MUSTCHECK bool adm_json_parse(const char *text, struct adm_json_obj *obj, struct nk_error *err);
void adm_json_cleanup(struct adm_json_obj *obj);
/* The member <key>, or NULL. */
const struct adm_json_member *adm_json_get(const struct adm_json_obj *obj, const char *key);

/* Append <s> to <out> as a JSON string (quoted, escaped). <out> grows; false on no memory. */
NK_MUSTCHECK bool adm_json_put_string(char **out, size_t *len, size_t *cap, const char *s);
/* Append <s> as is. */
NK_MUSTCHECK bool adm_json_put_raw(char **out, size_t *len, size_t *cap, const char *s);

#endif /* NEKI_ADMIN_FLATJSON_H */
