/*
 * result.c - the replies the console sends: a row set (RowDescription, DataRows,
 * CommandComplete), errors and notices, accumulated in one pktbuf that the console
 * connection then queues on its socket. All messages come from pktbuf's writers. Each
 * error is logged as a pooler error (log_pooler_errors), as pgbouncer's console does.
 */
#include "neki/base.h"

#include "admin_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/config.h"
#include "neki/log.h"

/* pg_type.typlen of the types the console uses. */
static int16_t
type_len(enum adm_type t)
{
	switch (t) {
	case ADM_T_BOOL: return 1;
	case ADM_T_INT8: return 8;
	case ADM_T_FLOAT8: return 8;
	case ADM_T_INT4: return 4;
	case ADM_T_TIMESTAMPTZ: return 8;
	case ADM_T_BYTEA:
	case ADM_T_TEXT:
	case ADM_T_NUMERIC:
		return -1;
	}
	return -1;
}

void
adm_result_init(struct adm_result *r)
{
	memset(r, 0, sizeof(*r));
	pktbuf_init(&r->pb, 512);
}

void
adm_result_cleanup(struct adm_result *r)
{
	pktbuf_cleanup(&r->pb);
	free(r->error);
}

void
adm_result_select(struct adm_result *r, const char (*names)[ADM_NAME_MAX], size_t n)
{
	r->sel = names;
	r->nsel = n;
}

/* Map the selected names onto <cols>; a name the function lacks is remembered in bad_col. */
static void
map_selected(struct adm_result *r, const struct adm_col *cols, size_t n)
{
	r->ncols = 0;
	for (size_t s = 0; s < r->nsel; s++) {
		size_t k;

		for (k = 0; k < n && strcmp(cols[k].name, r->sel[s]) != 0; k++)
			;
		if (k == n) {
			snprintf(r->bad_col, sizeof(r->bad_col), "%s", r->sel[s]);
			k = 0;
		}
		r->map[r->ncols++] = k;
	}
}

void
adm_result_columns(struct adm_result *r, const struct adm_col *cols, size_t n)
{
	struct proto_column pc[ADM_RESULT_MAX_COLS];

	NK_ASSERT(n <= NK_ARRAY_LEN(pc));
	if (r->sel != NULL) {
		map_selected(r, cols, n);
	} else {
		NK_ASSERT(n <= NK_ARRAY_LEN(r->map));
		for (size_t i = 0; i < n; i++)
			r->map[i] = i;
		r->ncols = n;
	}
	for (size_t i = 0; i < r->ncols; i++) {
		const struct adm_col *c = &cols[r->map[i]];

		pc[i] = (struct proto_column){
			.name = c->name, .type_oid = (uint32_t)c->type,
			.typlen = type_len(c->type), .typmod = -1, .format = 0,
		};
	}
	pktbuf_write_row_description(&r->pb, pc, r->ncols);
	r->nrows = 0;
}

void
adm_result_row(struct adm_result *r, const char *const *vals)
{
	const char *sent[ADM_RESULT_MAX_COLS];

	for (size_t i = 0; i < r->ncols; i++)
		sent[i] = vals[r->map[i]];
	pktbuf_write_data_row_text(&r->pb, sent, r->ncols);
	r->nrows++;
}

void
adm_result_complete(struct adm_result *r, const char *tag, bool with_count)
{
	char buf[64];

	if (with_count) {
		snprintf(buf, sizeof(buf), "%s %" PRIu64, tag, r->nrows);
		tag = buf;
	}
	pktbuf_write_command_complete(&r->pb, tag);
}

void
adm_pooler_error(const struct nk_error *err)
{
	if (cfg_current()->log.log_pooler_errors)
		log_warn("pooler error: %s", err->message);
}

void
adm_result_error(struct adm_result *r, const struct nk_error *err)
{
	adm_pooler_error(err);
	pktbuf_write_error(&r->pb, err);
	if (r->error == NULL && (r->error = malloc(sizeof(*r->error))) != NULL)
		*r->error = *err;
}

void
adm_result_notice(struct adm_result *r, const struct nk_error *err)
{
	pktbuf_write_notice(&r->pb, err);
}
