/*
 * route_merge.c - a SELECT over several shards whose result needs a merge step (ORDER BY,
 * LIMIT/OFFSET, aggregates, GROUP BY, HAVING, DISTINCT, UNION): the executor sends the
 * rewritten shard query of the merge spec (plan_merge_cached) to every target in parallel,
 * reads every target as its answers come, feeds every shard's RowDescription / DataRow /
 * CommandComplete into the merge (merge.h) and streams what the merge lets out; a shard the
 * merge holds enough rows of, or every shard while the client's queue is long, is paused
 * (back-pressure). In the extended protocol the shards get the client's Bind values and
 * result formats (route_ext_merge_msgs). When the merge asks for its final combine query,
 * that query runs on the first target and its result is fed as MERGE_FINAL. The merge is
 * freed with the exec (route_exec_reset), so on errors, cancels and disconnects as well.
 * Entry points: route_merge_setup(), route_merge_feed(), route_merge_final(),
 * route_merge_free(), route_merge_may_read(), route_merge_resume(), route_on_send_done(),
 * route_db_collation().
 */
#include "neki/base.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "neki/catalog_image.h"
#include "neki/link.h"
#include "neki/merge.h"
#include "neki/pktbuf.h"
#include "route_int.h"
#include "route_client.h"
#include "route_exec.h"
#include "route_ext.h"
#include "route_insel.h"
#include "route_merge.h"
#include "route_pull.h"
#include "route_sqltext.h"
#include "route_subq.h"

#define ROUTE_MERGE_QUEUE_MAX 256	/* rows the merge holds of one shard before pausing it */
#define ROUTE_MERGE_CLIENT_MAX (256 * 1024)	/* client queue bytes before holding shards */

const char *
route_db_collation(const struct cat_view *cv)
{
	struct cat_img_db d;

	if (cv->img == NULL || cv->db == CAT_IMG_NONE)
		return NULL;
	cat_image_db(cv->img, cv->db, &d);
	return d.collate;
}

/* Enum type <oid> of the authoritative shard in the catalog of database <arg>: its labels in
 * sort order and its quoted name (merge_options.find_enum). */
static bool
find_enum(void *arg, uint32_t oid, struct merge_enum *out)
{
	struct cat_view cv;
	struct cat_img_type ty;
	uint32_t t;
	char *qs = NULL, *qn = NULL;
	bool ok = false;

	cat_view_acquire(&cv, arg);
	t = cv.img != NULL ? cat_image_find_type(cv.img, cv.db, oid) : CAT_IMG_NONE;
	if (t != CAT_IMG_NONE)
		cat_image_type(cv.img, t, &ty);
	if (t != CAT_IMG_NONE && ty.typtype == CAT_TYPTYPE_ENUM &&
	    (qs = route_quote_ident(ty.schema)) != NULL &&
	    (qn = route_quote_ident(ty.name)) != NULL &&
	    asprintf(&out->sql_name, "%s.%s", qs, qn) >= 0 &&
	    (out->labels = calloc(ty.nlabels ? ty.nlabels : 1, sizeof(char *))) != NULL) {
		ok = true;
		for (out->nlabels = 0; ok && out->nlabels < ty.nlabels; out->nlabels++)
			ok = (out->labels[out->nlabels] =
				      strdup(cat_image_type_label(cv.img, t, out->nlabels))) != NULL;
	}
	free(qs);
	free(qn);
	cat_view_release(&cv);
	if (!ok)
		merge_enum_free(out);	/* (not an enum, or no memory: compared as before) */
	return ok;
}

/* route_merges_type: see route_int.h. */
bool
route_merges_type(void *arg, uint32_t oid)
{
	const struct cat_view *cv = arg;
	struct cat_img_type ty;
	uint32_t t;

	if (merge_orders_type(oid))
		return true;
	t = cv->img != NULL ? cat_image_find_type(cv->img, cv->db, oid) : CAT_IMG_NONE;
	if (t == CAT_IMG_NONE)
		return true;	/* (not in the catalog: the merge decides when values come) */
	cat_image_type(cv->img, t, &ty);
	return ty.typtype == CAT_TYPTYPE_ENUM;
}

/* route_merge_options: see route_int.h. */
struct merge_options
route_merge_options(struct route *r)
{
	return (struct merge_options){ .collation = r->x.collate, .limit = -1, .offset = 0,
				       .mem_max = r->c.cfg->neki.router_work_mem,
				       .find_enum = find_enum, .find_arg = r->db };
}

void
route_merge_free(struct route *r)
{
	merge_free(r->x.merge);
	r->x.merge = NULL;
	r->x.merge_final = false;
	r->x.merge_streams = false;
}

/*
 * Simple protocol: the spec of <sql>'s normalised text (its literals $k), so that the same
 * statement with other values finds it in the cache; LIMIT / OFFSET bound from the literals
 * (into <in>), the shard text with them written back. False (nothing set) when the text has
 * a comment (the key has none), no literal, a $n of its own, or a normalised form the spec
 * cannot be built from (a typed literal such as `interval '1 day'`: that failure is cached
 * too): the text itself then.
 */
static bool
merge_by_key(struct route *r, const char *sql, struct plan_input *in, char **shard_sql)
{
	struct parse_norm *n = rarena_alloc(r->arena, sizeof(*n));
	struct plan_param *params;
	struct nk_error e;

	if (strstr(sql, "--") != NULL || strstr(sql, "/*") != NULL)
		return false;		/* (its comments go to the shards: a planner hint) */
	if (n != NULL && sql == r->x.ms.stmt_sql)
		*n = r->x.ms.stmt_norm;	/* (the statement's own: normalised once) */
	else if (n != NULL && !parse_normalize(r->arena, sql, n))
		return false;
	if (n == NULL || n->nlits == 0 || n->nparams > 0 ||
	    (params = rarena_alloc(r->arena, n->nlits * sizeof(*params))) == NULL ||
	    !plan_merge_cached(r->arena, n->key, &r->x.ms.spec, &e))
		return false;
	for (uint32_t k = 0; k < n->nlits; k++)
		params[k] = (struct plan_param){ (const uint8_t *)n->lits[k].value,
						 (int32_t)strlen(n->lits[k].value), false, 0 };
	in->params = params;
	in->nparams = n->nlits;
	if ((r->x.ms.src = rarena_strdup(r->arena, sql)) == NULL ||
	    (*shard_sql = route_sql_inline_literals(r->x.ms.spec.shard_sql, n, sql, &e)) == NULL)
		return false;
	r->x.ms.norm = n;
	return true;
}

bool
route_merge_setup(struct route *r, const char *sql, struct nk_error *err)
{
	struct plan_input in;
	struct merge_options opt = route_merge_options(r);
	char *keyed = NULL;
	bool ok;

	memset(&in, 0, sizeof(in));	/* simple protocol: LIMIT/OFFSET are constants */
	r->x.ms.norm = NULL;
	if (r->x.ext_exec) {	/* (a row limit goes through route_pull.c) */
		in.params = r->x.ext_params;
		in.nparams = r->x.ext_nparams;
		opt.omit_rowdesc = !r->x.ext_describe;
	}
	if (!r->x.ext_exec && merge_by_key(r, sql, &in, &keyed)) {
		ok = plan_merge_bind(&r->x.ms.spec, &in, &opt.limit, &opt.offset, err) &&
		     (route_keep_sql(r, keyed) || nk_error_oom(err));
		free(keyed);
		if (!ok)
			return false;
	} else if (!plan_merge_cached(r->arena, sql, &r->x.ms.spec, err) ||
		   !plan_merge_bind(&r->x.ms.spec, &in, &opt.limit, &opt.offset, err) ||
		   (r->x.ext_exec && !route_ext_merge_msgs(r, r->x.ms.spec.shard_sql, false, err))) {
		return false;
	} else if (!route_keep_sql(r, r->x.ms.spec.shard_sql)) {
		return nk_error_oom(err);
	}
	route_merge_free(r);
	if ((r->x.merge = merge_new(&r->x.ms.spec, r->x.ntg, &opt, err)) == NULL)
		return false;
	r->x.combine = RX_MERGE;
	r->x.merge_streams = true;
	r->x.ndone = 0;
	return true;
}

bool
route_merge_may_read(struct route *r, uint32_t k)
{
	if (r->x.has_err || r->x.merge == NULL || merge_state(r->x.merge) != MERGE_NEED_ROWS)
		return true;	/* draining: nothing more is kept */
	return !r->x.client_full && merge_queued(r->x.merge, k) < ROUTE_MERGE_QUEUE_MAX;
}

void
route_merge_resume(struct route *r)
{
	for (uint32_t k = 0; k < r->x.ntg; k++) {
		struct rshard *sh = &r->sh[r->x.tg[k]];

		if (sh->held && sh->link != NULL && route_merge_may_read(r, k)) {
			sh->held = false;
			sbuf_continue(link_sbuf(sh->link));
		}
	}
}

void
route_on_send_done(struct route *r)
{
	if (route_insel_client_ready(r))
		return;		/* an INSERT ... SELECT round waited for the client */
	if (r->x.pull.wait) {	/* a router-side portal's next round */
		route_pull_resume(r);
		return;
	}
	if (!r->x.client_full)
		return;
	r->x.client_full = false;
	sbuf_set_notify_send_done(r->c.sb, false);
	if (r->x.merge_streams)
		route_merge_resume(r);
}

/* The client reads slower than the shards answer: hold the shards until its queue drains. */
static void
route_merge_client_check(struct route *r)
{
	if (r->x.client_full || sbuf_queued(r->c.sb) < ROUTE_MERGE_CLIENT_MAX)
		return;
	r->x.client_full = true;
	sbuf_set_notify_send_done(r->c.sb, true);
}

/* The merge refused a shard's result: the statement fails (first error wins). */
static void
route_merge_refused(struct route *r, const struct nk_error *err)
{
	if (r->x.has_err)
		return;
	r->x.err = *err;
	r->x.err.severity = NK_SEV_ERROR;
	r->x.has_err = true;
}

/* DataRows among the messages <buf>[0..len). */
static uint64_t
route_count_rows(const uint8_t *buf, size_t len)
{
	uint64_t n = 0;

	for (size_t o = 0; o + 5 <= len;) {
		const uint8_t *m = buf + o;

		n += m[0] == 'D';
		o += 1 + (((size_t)m[1] << 24) | ((size_t)m[2] << 16) | ((size_t)m[3] << 8) | m[4]);
	}
	return n;
}

bool
route_merge_feed(struct route *r, const struct sbuf_pkt *pkt)
{
	uint32_t shard = r->x.merge_final ? MERGE_FINAL : r->x.reading;
	struct nk_error err;
	struct pktbuf pb;

	if (r->x.has_err || r->x.merge == NULL)
		return true;		/* the statement failed: the rest is dropped */
	if (!merge_feed(r->x.merge, shard, pkt->type, pkt->data + 5, pkt->len - 5, &err)) {
		route_merge_refused(r, &err);
		return true;
	}
	pktbuf_init(&pb, 256);
	if (!merge_pull(r->x.merge, &pb, &err)) {
		pktbuf_cleanup(&pb);
		route_merge_refused(r, &err);
		return true;
	}
	if (r->x.an.on)		/* EXPLAIN ANALYZE: the result is counted, not sent */
		r->x.an.rows += route_count_rows(pb.buf, pb.len);
	if (pb.len == 0 || r->x.an.on || r->x.subq_capture) {	/* (a subquery's: kept) */
		bool ok = !r->x.subq_capture || route_subq_keep(r, pb.buf, pb.len);

		pktbuf_cleanup(&pb);
		return ok;
	}
	r->c.stats->total_sent += pb.len;
	if (!route_send(r, &pb))
		return false;
	route_merge_client_check(r);
	return true;
}

bool
route_merge_final(struct route *r)
{
	struct rshard *sh = &r->sh[r->x.tg[0]];
	const char *sql;
	struct nk_error err;

	if (r->x.merge == NULL || merge_state(r->x.merge) != MERGE_NEED_FINAL || r->x.merge_final)
		return false;
	sql = merge_final_sql(r->x.merge);
	free(sh->sql);
	sh->sql = NULL;
	if (r->x.ext_exec) {	/* with the client's values: HAVING may use parameters */
		if (!route_ext_merge_msgs(r, sql, true, &err)) {
			route_merge_refused(r, &err);
			event_active(r->ev, EV_TIMEOUT, 0);
			return true;
		}
	} else if ((sh->sql = r->x.ms.norm != NULL ?	/* (its $k: the statement's literals) */
		    route_sql_inline_literals(sql, r->x.ms.norm, r->x.ms.src, &err) : strdup(sql)) == NULL) {
		route_client_fatal(r, "out of memory");
		return true;
	}
	for (uint32_t i = 1; i < r->x.ntg; i++)
		r->sh[r->x.tg[i]].target = false;
	sh->sent = sh->done = sh->failed = false;
	r->x.ntg = 1;
	r->x.merge_final = true;
	r->x.merge_streams = false;
	if (!route_exec_start(r, &err)) {
		route_merge_refused(r, &err);
		event_active(r->ev, EV_TIMEOUT, 0);
	}
	return true;
}
