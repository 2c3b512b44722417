# router module files: the libpg_query adapter (parse*.c), normalisation, planning,
# rejections, the plan cache and the EXPLAIN (NEKI_PLAN) printer
libneki_a_SOURCES += src/router/parse.c src/router/parse_dml.c src/router/parse_expr.c src/router/parse_util.c \
	src/router/normalize.c src/router/parse_plpgsql.c \
	src/router/parse_cursor.c src/router/parse_guard.c
noinst_HEADERS += include/neki/router.h include/neki/parse.h include/neki/parse_kinds.h src/router/parse_int.h \
	include/neki/normalize.h include/neki/parse_split.h
libneki_a_SOURCES += src/router/plan.c src/router/plan_insert.c src/router/plan_util.c \
	src/router/plan_cache.c src/router/explain.c src/router/sequence.c \
	src/router/plan_seq.c src/router/plan_rewrite.c src/router/plan_fn.c \
	src/router/plan_cursor.c src/router/plan_insel.c \
	src/router/plan_dist.c src/router/plan_memo.c src/router/plan_decide.c \
	src/router/plan_gsi.c src/router/plan_gsi_insert.c src/router/plan_gsi_cost.c \
	src/router/target.c
noinst_HEADERS += include/neki/plan.h include/neki/plan_gsi.h include/neki/plan_cache.h \
	include/neki/plan_cursor.h include/neki/plan_explain.h include/neki/plan_merge.h \
	include/neki/plan_settings.h src/router/plan_int.h src/router/plan_gsi_int.h include/neki/sequence.h \
	include/neki/target.h
# the merge spec of multi-shard SELECTs and the shard query rewrite (src/merge runs it)
libneki_a_SOURCES += src/router/plan_merge.c src/router/plan_merge_agg.c \
	src/router/plan_merge_text.c src/router/plan_merge_cache.c
noinst_HEADERS += src/router/plan_merge_int.h
