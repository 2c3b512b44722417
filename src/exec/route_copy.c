/*
 * route_copy.c - COPY through a sharded database (see route_copy_int.h for COPY FROM).
 * COPY FROM: route_copy_from() starts it on every target (outside a transaction block and
 * with several targets in the Query's implicit transaction: all rows or none),
 * route_copy_on_link() reads the shards' answers, route_copy_on_client() the client's
 * CopyData / CopyDone / CopyFail, route_copy_finished() ends it. COPY TO over several
 * shards: route_copy_out_pkt() lets one CopyOutResponse, one header (CSV/text HEADER, the
 * binary signature), one binary trailer and one CopyDone through.
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/pktbuf.h"
#include "neki/plan_gsi.h"
#include "neki/proto.h"
#include "neki/proc.h"
#include "route_int.h"
#include "route_client.h"
#include "route_copy.h"
#include "route_copy_int.h"
#include "route_exec.h"
#include "route_gsi.h"
#include "route_sqltext.h"

#define COPY_FLUSH_BYTES (64 * 1024)	/* a shard's CopyData is sent at this size */
#define COPY_QUEUE_HIGH (1024 * 1024)	/* stop reading the client above this queue */
#define COPY_QUEUE_LOW (256 * 1024)	/* ... and go on below this one */
#define COPY_RING (1u << 18)		/* lines remembered per shard for error CONTEXT */
#define COPY_ROW_MAX (1024u * 1024 * 1024)
#define COPY_PRINT_MAX 100		/* row text in a CONTEXT, as Postgres */
#define COPY_BIN_HEADER 19

static const uint8_t copy_signature[11] = "PGCOPY\n\377\r\n";

/* ---- helpers ---- */

static uint32_t
copy_target_of(const struct route *r, const struct rshard *sh)
{
	for (uint32_t i = 0; i < r->x.ntg; i++)
		if (&r->sh[r->x.tg[i]] == sh)
			return i;
	return r->x.ntg;
}

static bool
copy_grow(uint8_t **buf, size_t *cap, size_t need)
{
	size_t ncap = *cap ? *cap : 4096;
	uint8_t *nb;

	if (need <= *cap)
		return true;
	while (ncap < need)
		ncap *= 2;
	if ((nb = realloc(*buf, ncap)) == NULL)
		return false;
	*buf = nb;
	*cap = ncap;
	return true;
}

/* Send a whole message to target <t>'s link. */
static bool
copy_link_send(struct route *r, uint32_t t, const void *msg, size_t len)
{
	struct link *l = r->sh[r->x.tg[t]].link;

	return l != NULL && link_send(l, msg, len);
}

/* The first error of the COPY (later ones are consequences). */
static void
copy_set_err(struct rcopy *c, const struct nk_error *err)
{
	if (c->has_err)
		return;
	c->err = *err;
	c->err.severity = NK_SEV_ERROR;
	c->has_err = true;
}

/* "COPY t, line N: "row"" for an error the router found in a row. */
static void
copy_context(struct rcopy *c, struct nk_error *err, const uint8_t *row, size_t len,
	     const char *column, const uint8_t *val, size_t vlen)
{
	const uint8_t *txt = column != NULL ? val : row;
	size_t n = column != NULL ? vlen : copy_row_content(&c->scan, len);
	int w;

	w = snprintf(err->where, sizeof(err->where), "COPY %s, line %llu", c->table,
		     (unsigned long long)c->line);
	if (w < 0 || (size_t)w >= sizeof(err->where) || c->opts.fmt == COPY_FMT_BINARY) {
		if (column != NULL && w > 0 && (size_t)w < sizeof(err->where))
			snprintf(err->where + w, sizeof(err->where) - (size_t)w, ", column %s",
				 column);
		return;
	}
	snprintf(err->where + w, sizeof(err->where) - (size_t)w, "%s%s: \"%.*s%s\"",
		 column != NULL ? ", column " : "", column != NULL ? column : "",
		 (int)(n > COPY_PRINT_MAX ? COPY_PRINT_MAX : n), (const char *)txt,
		 n > COPY_PRINT_MAX ? "..." : "");
}

/* ---- aborting ---- */

/* Stop every shard's COPY (CopyFail to those in it); the first error is what counts. */
static void
copy_abort(struct route *r, struct rcopy *c)
{
	struct pktbuf pb;

	if (c->aborted)
		return;
	c->aborted = true;
	pktbuf_init(&pb, 64);
	pktbuf_write_copy_fail(&pb, "COPY aborted by the router: another shard failed");
	for (uint32_t i = 0; i < r->x.ntg; i++) {
		struct rcopy_target *t = &c->t[i];

		t->len = 0;
		if (t->st != COPY_T_IN)
			continue;
		t->st = COPY_T_ENDING;
		if (!pktbuf_failed(&pb))
			(void)copy_link_send(r, i, pb.buf, pb.len);
	}
	pktbuf_cleanup(&pb);
}

static void
copy_fail_row(struct route *r, struct rcopy *c, struct nk_error *err)
{
	copy_set_err(c, err);
	copy_abort(r, c);
}

/* ---- sending rows ---- */

static bool
copy_flush(struct route *r, struct rcopy *c, uint32_t i)
{
	struct rcopy_target *t = &c->t[i];
	uint32_t n = (uint32_t)(t->len - 1);

	if (t->len <= 5)
		return true;
	t->buf[0] = 'd';
	t->buf[1] = (uint8_t)(n >> 24);
	t->buf[2] = (uint8_t)(n >> 16);
	t->buf[3] = (uint8_t)(n >> 8);
	t->buf[4] = (uint8_t)n;
	t->len = 0;
	return copy_link_send(r, i, t->buf, n + 1);
}

/* Append one row to target <i>'s next CopyData (the shard counts its lines as the input
 * does: a CSV row may count more than one, c->scan.row_lines more). */
static bool
copy_put(struct route *r, struct rcopy *c, uint32_t i, const uint8_t *row, size_t len)
{
	struct rcopy_target *t = &c->t[i];

	if (t->st != COPY_T_IN)
		return true;
	if (!copy_grow(&t->buf, &t->cap, (t->len ? t->len : 5) + len))
		return false;
	if (t->len == 0)
		t->len = 5;
	memcpy(t->buf + t->len, row, len);
	t->len += len;
	for (uint32_t k = c->scan.row_lines + 1; k > 0; k--) {
		t->lines++;
		if (t->ring != NULL)
			t->ring[t->lines % COPY_RING] = (uint32_t)c->line + 1 - k;
	}
	return t->len < COPY_FLUSH_BYTES || copy_flush(r, c, i);
}

/* The target of a routing value's shard (pointers into the pinned image are stable). */
static bool
copy_target_of_shard(struct route *r, struct rcopy *c, const char *uid, uint32_t *out)
{
	for (uint32_t k = 0; k < c->nshard_ptr; k++)
		if (c->shard_ptr[k] == uid) {
			*out = c->shard_tg[k];
			return true;
		}
	for (uint32_t i = 0; i < r->x.ntg; i++) {
		if (!route_streq(r->sh[r->x.tg[i]].uid, uid))
			continue;
		if (c->nshard_ptr < 32) {
			c->shard_ptr[c->nshard_ptr] = uid;
			c->shard_tg[c->nshard_ptr++] = i;
		}
		*out = i;
		return true;
	}
	return false;
}

/* The target of one complete row; false with <err> (the row is bad). */
static bool
copy_route_row(struct route *r, struct rcopy *c, const uint8_t *row, size_t len,
	       uint32_t *tg, struct nk_error *err)
{
	const uint8_t *val = NULL;
	size_t vlen = 0;
	const char *uid;
	bool ok;

	if (!copy_grow(&c->val, &c->vcap, len + 1))
		return nk_error_oom(err);
	switch (copy_row_key(&c->opts, row, c->opts.fmt == COPY_FMT_BINARY ? len :
			     copy_row_content(&c->scan, len), c->val, &val, &vlen)) {
	case COPY_KEY_NULL:
		nk_error_set(err, ERRCODE_NOT_NULL_VIOLATION,
			     "null value in column \"%s\" of relation \"%s\" "
			     "violates not-null constraint", c->key_col, c->table);
		copy_context(c, err, row, len, NULL, NULL, 0);
		return false;
	case COPY_KEY_MISSING:
		nk_error_set(err, ERRCODE_BAD_COPY_FILE_FORMAT,
			     "missing data for column \"%s\"", c->key_col);
		copy_context(c, err, row, len, NULL, NULL, 0);
		return false;
	case COPY_KEY_OK:
		break;
	}
	ok = c->opts.fmt == COPY_FMT_BINARY ?
	     plan_route_binary(&c->in, &c->plan, val, vlen, &uid, err) :
	     plan_route_text(&c->in, &c->plan, (const char *)val, vlen, &uid, err);
	if (ok && !copy_target_of_shard(r, c, uid, tg))
		ok = nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				  "shard \"%s\" is not a target of this COPY", uid);
	if (!ok)
		copy_context(c, err, row, len, c->key_col, val, vlen);
	return ok;
}

/* Field <k> of plan.gsi's of complete row <row>/<len> as text (malloc'd) into *<out>
 * (NULL for NULL); false with <err>. */
static bool
copy_gsi_field(struct rcopy *c, uint32_t k, const uint8_t *row, size_t len, char **out,
	       struct nk_error *err)
{
	const struct plan_gsi_field *f = &c->plan.gsi->fields[k];
	const uint8_t *val = NULL;
	size_t vlen = 0;
	bool binary = c->opts.fmt == COPY_FMT_BINARY;

	*out = NULL;
	switch (copy_row_key(&c->gsi_opts[k], row, binary ? len :
			     copy_row_content(&c->scan, len), c->val, &val, &vlen)) {
	case COPY_KEY_NULL:
		return true;
	case COPY_KEY_MISSING:
		nk_error_set(err, ERRCODE_BAD_COPY_FILE_FORMAT, "missing data for column \"%s\"",
			     f->column);
		copy_context(c, err, row, len, NULL, NULL, 0);
		return false;
	case COPY_KEY_OK:
		break;
	}
	*out = binary ? plan_binary_value(f->type_oid, (const char *)val, (int32_t)vlen) :
	       strndup((const char *)val, vlen);
	if (*out != NULL)
		return true;
	if (!binary)
		return nk_error_oom(err);
	nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED, "the router cannot read the binary "
		     "value of column \"%s\" (type %u) for its global secondary index",
		     f->column, f->type_oid);
	nk_error_hint(err, "COPY the rows in text or CSV format.");
	copy_context(c, err, row, len, NULL, NULL, 0);
	return false;
}

/* The lookup columns of one complete row, kept for its lookup rows (route_gsi.c). */
static bool
copy_gsi_fields(struct route *r, struct rcopy *c, const uint8_t *row, size_t len,
		struct nk_error *err)
{
	uint32_t n = c->plan.gsi->nfields;
	char **vals = calloc(n, sizeof(*vals));
	bool ok = vals != NULL;

	for (uint32_t k = 0; ok && k < n; k++)
		ok = copy_gsi_field(c, k, row, len, &vals[k], err);
	if (ok)
		ok = route_gsi_copy_keep(r, vals, err);
	else if (vals != NULL)
		for (uint32_t k = 0; k < n; k++)
			free(vals[k]);
	else
		nk_error_oom(err);
	free(vals);
	return ok;
}

/* Every target gets this row (header lines, the binary header). */
static bool
copy_put_all(struct route *r, struct rcopy *c, const uint8_t *row, size_t len)
{
	for (uint32_t i = 0; i < r->x.ntg; i++)
		if (!copy_put(r, c, i, row, len))
			return false;
	return true;
}

/* One complete row of the input. */
static bool
copy_row(struct route *r, struct rcopy *c, const uint8_t *row, size_t len)
{
	struct nk_error err;
	uint32_t tg = 0;

	if (c->opts.fmt == COPY_FMT_BINARY) {
		if (c->scan.header_row) {
			if (len < sizeof(copy_signature) ||
			    memcmp(row, copy_signature, sizeof(copy_signature)) != 0) {
				nk_error_set(&err, ERRCODE_BAD_COPY_FILE_FORMAT,
					     "COPY file signature not recognized");
				copy_fail_row(r, c, &err);
				return true;
			}
			return copy_put_all(r, c, row, len);
		}
		if (c->scan.trailer) {
			c->eod = c->bin_trailer = true;
			return true;
		}
	}
	c->line += 1 + c->scan.row_lines;	/* Postgres' line number (CSV quotes count) */
	if (c->line == 1 + c->scan.row_lines && c->header)
		return copy_put_all(r, c, row, len);
	if (!copy_route_row(r, c, row, len, &tg, &err) ||
	    (c->gsi_opts != NULL && !copy_gsi_fields(r, c, row, len, &err))) {
		copy_fail_row(r, c, &err);
		return true;
	}
	return copy_put(r, c, tg, row, len);
}

/* The scan found a bad line end or end-of-data marker: Postgres' error, on its line. */
static void
copy_scan_error(struct route *r, struct rcopy *c)
{
	struct nk_error err;

	nk_error_set(&err, ERRCODE_BAD_COPY_FILE_FORMAT, "%s", c->scan.err);
	if (c->scan.hint != NULL)
		nk_error_hint(&err, "%s", c->scan.hint);
	snprintf(err.where, sizeof(err.where), "COPY %s, line %llu", c->table,
		 (unsigned long long)(c->line + 1 + c->scan.lines));
	copy_fail_row(r, c, &err);
}

/* The end-of-data marker after <pos> + <end> bytes of <p>: the bytes of its line before it
 * (the carried ones first) are the last row. */
static bool
copy_marker(struct route *r, struct rcopy *c, const uint8_t *p, size_t end)
{
	size_t keep = (size_t)c->scan.marker;

	c->eod = true;
	if (keep == 0)
		return true;
	if (c->clen > 0) {
		if (!copy_grow(&c->carry, &c->ccap, c->clen + end))
			return false;
		memcpy(c->carry + c->clen, p, end);
		c->clen = 0;
		p = c->carry;
	}
	return copy_row(r, c, p, keep);
}

/* The rows of one CopyData body (a row may have begun in an earlier one). */
static bool
copy_feed(struct route *r, struct rcopy *c, const uint8_t *p, size_t n)
{
	size_t pos = 0, end;
	enum copy_scan_rc rc;

	while (pos < n && !c->eod && !c->aborted) {
		rc = copy_scan_row(&c->opts, &c->scan, p + pos, n - pos, &end);
		if (rc == COPY_SCAN_ERROR) {
			copy_scan_error(r, c);
			return true;
		}
		if (rc == COPY_SCAN_EOD)
			return copy_marker(r, c, p + pos, end);
		if (rc == COPY_SCAN_MORE) {
			if (c->clen + (n - pos) > COPY_ROW_MAX) {
				struct nk_error err;

				nk_error_set(&err, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
					     "a COPY row is longer than 1 GB");
				copy_fail_row(r, c, &err);
				return true;
			}
			if (!copy_grow(&c->carry, &c->ccap, c->clen + (n - pos)))
				return false;
			memcpy(c->carry + c->clen, p + pos, n - pos);
			c->clen += n - pos;
			return true;
		}
		if (c->clen > 0) {
			if (!copy_grow(&c->carry, &c->ccap, c->clen + end))
				return false;
			memcpy(c->carry + c->clen, p + pos, end);
			c->clen += end;
			if (!copy_row(r, c, c->carry, c->clen))
				return false;
			c->clen = 0;
		} else if (!copy_row(r, c, p + pos, end)) {
			return false;
		}
		pos += end;
	}
	return true;
}

/* ---- the shards' answers ---- */

/* "COPY t, line K" of a shard's CONTEXT renumbered to the input's line. */
static void
copy_renumber(struct rcopy *c, uint32_t i, struct nk_error *err)
{
	struct rcopy_target *t = &c->t[i];
	char *at = strstr(err->where, "COPY "), *ln, *endp, rest[NK_ERR_MSG_MAX];
	unsigned long long k, line;

	if (at == NULL || (ln = strstr(at, ", line ")) == NULL || t->ring == NULL)
		return;
	k = strtoull(ln + 7, &endp, 10);
	if (endp == ln + 7 || k == 0 || k > t->lines || t->lines - k >= COPY_RING)
		return;
	line = c->line - (uint32_t)((uint32_t)c->line - t->ring[k % COPY_RING]);
	snprintf(rest, sizeof(rest), "%s", endp);
	snprintf(ln, sizeof(err->where) - (size_t)(ln - err->where), ", line %llu%s", line, rest);
}

static bool
copy_on_error(struct route *r, struct rcopy *c, uint32_t i, const struct sbuf_pkt *pkt)
{
	struct nk_error e;

	route_error_from_msg(pkt->data, pkt->len, &e);
	if (c->routed)
		copy_renumber(c, i, &e);
	if (!c->has_err && r->x.ntg > 1)
		route_detail_shards(r, &e, "Raised", i, i + 1);
	if (c->t[i].st != COPY_T_DONE)
		c->t[i].st = COPY_T_ENDING;
	copy_set_err(c, &e);
	copy_abort(r, c);
	return true;
}

/* Every target answered CopyInResponse: the client gets one and may send. */
static bool
copy_begin_input(struct route *r, struct rcopy *c)
{
	struct pktbuf pb;

	c->started = true;
	pktbuf_init(&pb, c->glen);
	pktbuf_put_bytes(&pb, c->gmsg, c->glen);
	if (!route_send(r, &pb))
		return false;
	sbuf_flush(r->c.sb);		/* (corked) the client waits for it */
	sbuf_continue(r->c.sb);
	return true;
}

static bool
copy_on_in_response(struct route *r, struct rcopy *c, uint32_t i, const struct sbuf_pkt *pkt)
{
	struct pktbuf pb;

	c->ngot++;
	c->t[i].st = COPY_T_IN;
	if (c->gmsg == NULL && (c->gmsg = malloc(pkt->len)) != NULL) {
		memcpy(c->gmsg, pkt->data, pkt->len);
		c->glen = pkt->len;
	}
	if (c->aborted) {		/* another shard failed already */
		c->t[i].st = COPY_T_ENDING;
		pktbuf_init(&pb, 64);
		pktbuf_write_copy_fail(&pb, "COPY aborted by the router: another shard failed");
		if (!pktbuf_failed(&pb))
			(void)copy_link_send(r, i, pb.buf, pb.len);
		pktbuf_cleanup(&pb);
		return true;
	}
	if (c->gmsg == NULL) {
		route_client_fatal(r, "out of memory");
		return false;
	}
	return c->ngot < r->x.ntg || copy_begin_input(r, c);
}

static bool
copy_target_done(struct route *r, struct rcopy *c, uint32_t i)
{
	c->t[i].st = COPY_T_DONE;
	r->sh[r->x.tg[i]].done = true;
	for (uint32_t k = 0; k < r->x.ntg; k++)
		if (c->t[k].st != COPY_T_DONE)
			return true;
	event_active(r->ev, EV_TIMEOUT, 0);
	return true;
}

bool
route_copy_on_link(struct route *r, struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	struct rcopy *c = r->x.copy;
	uint32_t i = copy_target_of(r, sh);
	const char *tag;
	struct nk_error e;
	bool has_count;

	if (i == r->x.ntg || pkt->type == 'N') {
		if (i < r->x.ntg) {
			sbuf_forward(link_sbuf(l), r->c.sb, pkt->len);
			return true;
		}
		sbuf_skip(link_sbuf(l), pkt->len);
		return true;
	}
	if (pkt->type != 'Z' && pkt->avail < pkt->len) {
		if (sbuf_hold(link_sbuf(l), pkt->len))
			return true;
		route_client_fatal(r, "server sent too big packet");
		return false;
	}
	switch (pkt->type) {
	case 'G':
		if (!copy_on_in_response(r, c, i, pkt))
			return false;
		break;
	case 'E':
		copy_on_error(r, c, i, pkt);
		break;
	case 'C':
		if (proto_parse_command_complete(pkt->data + 5, pkt->len - 5, &tag, &e)) {
			route_tag_split(tag, sh->tag, sizeof(sh->tag), &sh->count, &has_count);
			sh->counted = has_count;
		}
		break;
	case 'Z':
		sbuf_skip(link_sbuf(l), pkt->len);
		return copy_target_done(r, c, i);
	default:			/* ParameterStatus, anything else: not the client's */
		break;
	}
	sbuf_skip(link_sbuf(l), pkt->len);
	return true;
}

void
route_copy_link_lost(struct route *r, struct rshard *sh)
{
	struct rcopy *c = r->x.copy;
	uint32_t i = copy_target_of(r, sh);

	if (i == r->x.ntg)
		return;
	c->t[i].st = COPY_T_ENDING;
	copy_set_err(c, &r->x.err);
	copy_abort(r, c);
	(void)copy_target_done(r, c, i);
}

/* ---- the client's messages ---- */

static void copy_wait_cb(evutil_socket_t fd, short what, void *arg);

/* A shard's send queue is long: stop reading the client until it drained. */
static bool
copy_backlogged(struct route *r, struct rcopy *c, size_t limit)
{
	for (uint32_t i = 0; i < r->x.ntg; i++) {
		struct link *l = r->sh[r->x.tg[i]].link;

		if (c->t[i].st == COPY_T_IN && l != NULL && sbuf_queued(link_sbuf(l)) > limit)
			return true;
	}
	return false;
}

static void
copy_wait_cb(evutil_socket_t fd, short what, void *arg)
{
	struct route *r = arg;
	struct timeval tv = { 0, 1000 };

	(void)fd;
	(void)what;
	if (r->x.copy == NULL || route_client_closed(r))
		return;
	if (copy_backlogged(r, r->x.copy, COPY_QUEUE_LOW))
		evtimer_add(r->x.copy->ev_wait, &tv);
	else
		sbuf_continue(r->c.sb);
}

/* CopyDone: the last row, the buffered rows, then CopyDone (and the binary trailer). */
static bool
copy_input_done(struct route *r, struct rcopy *c)
{
	struct pktbuf pb;

	c->client_done = true;
	if (c->routed && !c->aborted && !c->eod && c->opts.fmt != COPY_FMT_BINARY) {
		switch (copy_scan_finish(&c->opts, &c->scan)) {	/* a last row without line end */
		case COPY_SCAN_ERROR:
			copy_scan_error(r, c);
			break;
		case COPY_SCAN_ROW:
			if (!copy_row(r, c, c->carry, c->clen))
				return false;
			break;
		default:
			break;
		}
		c->clen = 0;
	} else if (c->routed && !c->aborted && !c->eod && c->clen > 0) {
		struct nk_error err;

		nk_error_set(&err, ERRCODE_BAD_COPY_FILE_FORMAT, "unexpected EOF in COPY data");
		copy_fail_row(r, c, &err);
		c->clen = 0;
	}
	if (c->aborted)
		return true;
	pktbuf_init(&pb, 16);
	if (c->bin_trailer)
		pktbuf_write_copy_data(&pb, "\377\377", 2);
	pktbuf_write_copy_done(&pb);
	for (uint32_t i = 0; i < r->x.ntg && !pktbuf_failed(&pb); i++) {
		if (c->t[i].st != COPY_T_IN)
			continue;
		c->t[i].st = COPY_T_ENDING;
		if (!copy_flush(r, c, i) || !copy_link_send(r, i, pb.buf, pb.len)) {
			pktbuf_cleanup(&pb);
			return false;
		}
	}
	pktbuf_cleanup(&pb);
	return true;
}

/* CopyFail from the client: every shard's COPY fails with its message. */
static void
copy_client_fail(struct route *r, struct rcopy *c, const struct sbuf_pkt *pkt)
{
	const char *msg = "";
	struct nk_error e;
	struct pktbuf pb;

	c->client_done = true;
	if (c->aborted)
		return;
	if (!proto_parse_copy_fail(pkt->data + 5, pkt->len - 5, &msg, &e))
		msg = "";
	c->aborted = true;
	pktbuf_init(&pb, 64);
	pktbuf_write_copy_fail(&pb, msg);
	for (uint32_t i = 0; i < r->x.ntg && !pktbuf_failed(&pb); i++) {
		if (c->t[i].st != COPY_T_IN)
			continue;
		c->t[i].st = COPY_T_ENDING;
		(void)copy_link_send(r, i, pb.buf, pb.len);
	}
	pktbuf_cleanup(&pb);
}

/* CopyData: routed rows, or the message to every target. */
static bool
copy_data(struct route *r, struct rcopy *c, const struct sbuf_pkt *pkt)
{
	if (c->aborted || c->eod)
		return true;
	if (c->routed)
		return copy_feed(r, c, pkt->data + 5, pkt->len - 5);
	for (uint32_t i = 0; i < r->x.ntg; i++)
		if (c->t[i].st == COPY_T_IN && !copy_link_send(r, i, pkt->data, pkt->len))
			return false;
	return true;
}

/* A message the COPY protocol does not allow: the COPY fails (as Postgres). */
static void
copy_bad_msg(struct route *r, struct rcopy *c, uint8_t type)
{
	struct nk_error e;

	nk_error_set(&e, ERRCODE_PROTOCOL_VIOLATION,
		     "unexpected message type 0x%02X during COPY from stdin", type);
	copy_fail_row(r, c, &e);
}

bool
route_copy_on_client(struct route *r, const struct sbuf_pkt *pkt)
{
	struct rcopy *c = r->x.copy;
	struct sbuf *sb = r->c.sb;
	struct timeval tv = { 0, 1000 };

	if (!c->started || c->client_done)
		return false;		/* not yet / no more: the next statement waits */
	if (pkt->type == 'd' && !c->aborted && copy_backlogged(r, c, COPY_QUEUE_HIGH)) {
		evtimer_add(c->ev_wait, &tv);
		return false;
	}
	if (pkt->avail < pkt->len && !(pkt->type == 'd' && (c->aborted || c->eod))) {
		if (sbuf_hold(sb, pkt->len))
			return true;
		route_client_fatal(r, "client sent too big packet");
		return false;
	}
	r->c.stats->total_received += pkt->len;
	switch (pkt->type) {
	case 'd':
		if (!copy_data(r, c, pkt)) {
			sbuf_skip(sb, pkt->len);
			route_client_fatal(r, "out of memory");
			return false;
		}
		sbuf_skip(sb, pkt->len);
		return true;
	case 'c':
		sbuf_skip(sb, pkt->len);
		if (!copy_input_done(r, c))
			route_client_fatal(r, "could not send to a shard");
		return false;
	case 'f':
		copy_client_fail(r, c, pkt);
		sbuf_skip(sb, pkt->len);
		return false;
	case 'H':
	case 'S':
		sbuf_skip(sb, pkt->len);
		return true;
	default:
		sbuf_skip(sb, pkt->len);
		copy_bad_msg(r, c, pkt->type);
		c->client_done = true;
		return false;
	}
}

/* ---- start and end ---- */

void
route_copy_free(struct route *r)
{
	struct rcopy *c = r->x.copy;

	if (c == NULL)
		return;
	for (uint32_t i = 0; i < 32; i++) {
		free(c->t[i].buf);
		free(c->t[i].ring);
	}
	if (c->pinned)
		shm_topo_unpin(&c->ref);
	if (c->ev_wait != NULL)
		event_free(c->ev_wait);
	free(c->gmsg);
	free(c->carry);
	free(c->val);
	free(c->gsi_opts);
	free(c);
	r->x.copy = NULL;
}

/* Does the CSV column list <cols> (or *) name the key column? */
static bool
copy_force_has(const char *const *cols, uint32_t n, bool all, const char *key)
{
	for (uint32_t i = 0; i < n; i++)
		if (route_streq(cols[i], key))
			return true;
	return all;
}

/* The input options the router needs; false with <err> for ones it cannot read. */
static bool
copy_options(struct rcopy *c, const struct stmt_copy *cp, struct nk_error *err)
{
	struct copy_opts *o = &c->opts;
	bool csv = route_streq(cp->format, "csv");

	o->fmt = csv ? COPY_FMT_CSV : route_streq(cp->format, "binary") ? COPY_FMT_BINARY :
		 COPY_FMT_TEXT;
	o->delim = cp->delimiter != NULL ? cp->delimiter[0] : csv ? ',' : '\t';
	o->quote = cp->quote != NULL ? cp->quote[0] : '"';
	o->escape = cp->escape != NULL ? cp->escape[0] : o->quote;
	if (o->escape == o->quote)
		o->escape = '\0';
	o->null_str = cp->null_string != NULL ? cp->null_string : csv ? "" : "\\N";
	o->null_len = strlen(o->null_str);
	o->key_pos = (uint32_t)c->plan.key.col_pos;
	o->force_null = copy_force_has(cp->force_null, cp->nforce_null, cp->force_null_all,
				       c->key_col);
	o->force_not_null = copy_force_has(cp->force_not_null, cp->nforce_not_null,
					   cp->force_not_null_all, c->key_col);
	c->header = cp->header && o->fmt != COPY_FMT_BINARY;
	if ((cp->delimiter != NULL && strlen(cp->delimiter) != 1) ||
	    (cp->quote != NULL && strlen(cp->quote) != 1) ||
	    (cp->escape != NULL && strlen(cp->escape) != 1))
		return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "COPY delimiter, quote and escape must be "
				    "single one-byte characters");
	return true;
}

/* The owner of an enabled GSI (plan.gsi, r->x.gsi kept by route_gsi_step()): how each of
 * its fields is read from a row. */
static bool
copy_gsi_options(struct route *r, struct rcopy *c, const struct stmt_copy *cp,
		 struct nk_error *err)
{
	const struct plan_gsi *g = c->plan.gsi;

	if (g == NULL || g->kind != PLAN_GSI_COPY || r->x.gsi == NULL)
		return true;
	if ((c->gsi_opts = calloc(g->nfields, sizeof(*c->gsi_opts))) == NULL)
		return nk_error_oom(err);
	for (uint32_t k = 0; k < g->nfields; k++) {
		struct copy_opts *o = &c->gsi_opts[k];

		*o = c->opts;
		o->key_pos = g->fields[k].field;
		o->force_null = copy_force_has(cp->force_null, cp->nforce_null,
					       cp->force_null_all, g->fields[k].column);
		o->force_not_null = copy_force_has(cp->force_not_null, cp->nforce_not_null,
						   cp->force_not_null_all, g->fields[k].column);
	}
	return true;
}

/* A sharded table's COPY: rows are routed by key (the topology stays pinned till the end). */
static bool
copy_routed_setup(struct route *r, struct rcopy *c, const struct plan *p, const void *img,
		  struct nk_error *err)
{
	if (!shm_topo_pin(&c->ref))
		return nk_error_set(err, ERRCODE_CONNECTION_EXCEPTION,
				    "no data topology is published");
	c->pinned = true;
	if (c->ref.data != img)
		return nk_error_set(err, ERRCODE_T_R_SERIALIZATION_FAILURE,
				    "the data topology changed while the COPY "
				    "started");
	c->routed = true;
	c->plan = *p;
	c->in.topo = c->ref.data;
	c->in.sess = &r->ps;
	snprintf(c->key_col, sizeof(c->key_col), "%s", p->key.column);
	if (!copy_options(c, p->stmt->copy, err) || !copy_gsi_options(r, c, p->stmt->copy, err))
		return false;
	for (uint32_t i = 0; i < r->x.ntg; i++)
		if ((c->t[i].ring = calloc(COPY_RING, sizeof(uint32_t))) == NULL)
			return nk_error_oom(err);
	return true;
}

bool
route_copy_from(struct route *r, const struct plan *p, const char *sql, const void *img,
		struct nk_error *err)
{
	struct rcopy *c;

	if (p->nshards > 32)
		return nk_error_set(err, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
				    "too many shards for one COPY");
	if (!route_exec_setup(r, p->shards, p->nshards, sql, err))
		return false;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return nk_error_oom(err);
	r->x.copy = c;
	snprintf(c->table, sizeof(c->table), "%s",
		 p->stmt->nrels > 0 && p->stmt->rels[0].name != NULL ? p->stmt->rels[0].name : "");
	c->ev_wait = evtimer_new(r->c.base, copy_wait_cb, r);
	if (c->ev_wait == NULL) {
		route_copy_free(r);
		return nk_error_oom(err);
	}
	if (p->op == PLAN_OP_COPY && !copy_routed_setup(r, c, p, img, err)) {
		route_copy_free(r);
		return false;
	}
	/* all rows or none: the Query's implicit transaction on every shard */
	if (r->tx == 'I' && r->x.ntg > 1 && !route_implicit_begin(r)) {
		route_copy_free(r);
		return nk_error_oom(err);
	}
	r->x.combine = RX_SUM;
	r->busy = true;
	if (route_exec_start(r, err))
		return true;
	route_copy_free(r);
	return false;
}

/* Every target answered (or the exec failed before sending): report, end the statement. */
void
route_copy_finished(struct route *r)
{
	struct rcopy *c = r->x.copy;
	struct nk_error err;
	bool failed = c->has_err || r->x.has_err;
	uint64_t total = 0;
	char tag[64];

	if (c->has_err)
		err = c->err;
	else if (r->x.has_err)
		err = r->x.err;
	else if (c->aborted)
		nk_error_set(&err, ERRCODE_QUERY_CANCELED, "COPY was aborted");
	failed = failed || c->aborted;
	for (uint32_t i = 0; i < r->x.ntg; i++)
		total += r->sh[r->x.tg[i]].count;
	if (!c->routed && r->x.ntg > 0)
		total = r->sh[r->x.tg[0]].count;
	snprintf(tag, sizeof(tag), "COPY %llu", (unsigned long long)total);
	route_copy_free(r);
	if (!failed && r->x.gsi != NULL) {	/* the rows' lookup rows, then the answer */
		if (route_gsi_copied(r))
			return;
		failed = r->x.has_err;
		err = r->x.err;
	}
	route_gsi_free(r);
	route_copy_done(r, tag, failed ? &err : NULL);
}

/* ---- COPY TO over several shards ---- */

void
route_copy_out_setup(struct route *r, const struct stmt_copy *cp)
{
	r->x.cout.on = true;
	r->x.cout.binary = route_streq(cp->format, "binary");
	r->x.cout.header = cp->header && !r->x.cout.binary;
	r->x.cout.pos = UINT32_MAX;
}

/* A binary CopyData of target r->x.pos: its header part kept once, its trailer once. */
static bool
copy_out_binary(struct route *r, struct link *l, const struct sbuf_pkt *pkt)
{
	const uint8_t *b = pkt->data + 5;
	size_t blen = pkt->len - 5, hdr = 0, keep_from = 0, keep_to = blen;
	struct pktbuf pb;

	if (r->x.cout.bytes < COPY_BIN_HEADER) {
		hdr = COPY_BIN_HEADER - r->x.cout.bytes < blen ? COPY_BIN_HEADER - r->x.cout.bytes : blen;
		if (r->x.pos > 0)
			keep_from = hdr;
	}
	r->x.cout.bytes += blen;
	if (r->x.pos + 1 < r->x.ntg && blen - hdr == 2 && b[blen - 2] == 0xff && b[blen - 1] == 0xff)
		keep_to = blen - 2;	/* the trailer: only the last shard's */
	if (keep_from == 0 && keep_to == blen) {
		r->c.stats->total_sent += pkt->len;
		sbuf_forward(link_sbuf(l), r->c.sb, pkt->len);
		return true;
	}
	sbuf_skip(link_sbuf(l), pkt->len);
	if (keep_to <= keep_from)
		return true;
	pktbuf_init(&pb, keep_to - keep_from + 8);
	pktbuf_write_copy_data(&pb, b + keep_from, keep_to - keep_from);
	return route_send(r, &pb);
}

bool
route_copy_out_pkt(struct route *r, struct rshard *sh, struct link *l, const struct sbuf_pkt *pkt)
{
	bool keep;

	if (r->x.cout.pos != r->x.pos) {
		r->x.cout.pos = r->x.pos;
		r->x.cout.bytes = 0;
		r->x.cout.ndata = 0;
	}
	if (pkt->type == 'd' && r->x.cout.binary) {
		if (pkt->avail < pkt->len) {
			if (sbuf_hold(link_sbuf(l), pkt->len))
				return true;
			route_client_fatal(r, "server sent too big packet");
			return false;
		}
		return copy_out_binary(r, l, pkt);
	}
	if (pkt->type == 'H')
		keep = r->x.pos == 0;
	else if (pkt->type == 'c')
		keep = r->x.pos + 1 == r->x.ntg;
	else		/* 'd': a text or CSV header line comes from the first shard only */
		keep = !(r->x.cout.header && r->x.pos > 0 && r->x.cout.ndata++ == 0);
	if (!keep) {
		sbuf_skip(link_sbuf(l), pkt->len);
		return true;
	}
	r->c.stats->total_sent += pkt->len;
	sbuf_forward(link_sbuf(l), r->c.sb, pkt->len);
	return true;
}
