/*
 * advisor.c - __neki.check_schema([database]): the schema readiness advisor. For every
 * database of the topology (or the one named) it reads the user tables on the authoritative
 * shard, resolves each through the topology (group, shard key columns, reference table),
 * then runs the rules as one query over pg_catalog there, the resolved tables given as a
 * VALUES list. Rows: (object, rule, severity, advice); none when the schema follows every
 * rule (doc/topology.md, "check_schema"). Entry point: advisor_check_schema().
 */
#include "neki/base.h"

#include "admin_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/log.h"
#include "neki/memstream.h"
#include "neki/shm.h"
#include "neki/topology.h"
#include "neki/proc.h"

/* The user tables of the database (query 1). */
static const char tables_sql[] =
	"SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
	" ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition"
	" AND n.nspname NOT IN ('pg_catalog', 'information_schema', '__neki')"
	" AND n.nspname !~ '^pg_(toast|temp)' ORDER BY 1, 2";

/*
 * The rules (query 2), after "WITH t(sch, tbl, grp, kind, keycols) AS (VALUES ...),
 * g(sch, owner, cols) AS (VALUES ...)": kind is sharded, unsharded or reference; keycols the
 * shard key's plain columns (NULL for an expression key); g the unique GSIs.
 */
static const char rules_sql[] =
	" , r AS (SELECT t.*, c.oid AS relid FROM t JOIN pg_catalog.pg_namespace n ON"
	"   n.nspname = t.sch JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND"
	"   c.relname = t.tbl),"
	" cons AS (SELECT r.*, k.oid AS conid, k.conname, k.contype, k.confrelid,"
	"   (SELECT array_agg(a.attname::text ORDER BY u.o) FROM unnest(k.conkey) WITH"
	"    ORDINALITY u(n, o) JOIN pg_catalog.pg_attribute a ON a.attrelid = r.relid AND"
	"    a.attnum = u.n) AS cols FROM r JOIN pg_catalog.pg_constraint k ON"
	"   k.conrelid = r.relid),"
	" key AS (SELECT r.*, a.attname, a.atttypid, a.attidentity,"
	"   pg_catalog.pg_get_expr(d.adbin, d.adrelid) AS def FROM r JOIN"
	"   pg_catalog.pg_attribute a ON a.attrelid = r.relid AND a.attname = ANY (r.keycols)"
	"   LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = r.relid AND d.adnum = a.attnum"
	"   WHERE r.kind = 'sharded')"
	" SELECT format('%I.%I', sch, tbl), 'pk-leads-with-shard-key', 'warning',"
	"   format('make the primary key of %I.%I start with its shard key (%s): PRIMARY KEY"
	" (%s, ...) keeps each key''s rows and lookups on one shard', sch, tbl,"
	"   array_to_string(keycols, ', '), array_to_string(keycols, ', '))"
	"   FROM r WHERE kind = 'sharded' AND keycols IS NOT NULL AND NOT EXISTS (SELECT 1"
	"   FROM cons WHERE cons.relid = r.relid AND contype = 'p' AND"
	"   cols[1:cardinality(r.keycols)] = r.keycols)"
	" UNION ALL SELECT format('%I.%I.%I', c.sch, c.tbl, c.conname), 'fk-across-shard-groups',"
	"   'error', format('foreign key %I references %s, which is not in shard group %s"
	" nor a reference table there: its rows may live on another shard', c.conname,"
	"   c.confrelid::regclass, c.grp) FROM cons c LEFT JOIN r f ON f.relid = c.confrelid"
	"   WHERE c.contype = 'f' AND c.kind = 'sharded' AND (f.relid IS NULL OR"
	"   (f.kind <> 'reference' AND f.grp IS DISTINCT FROM c.grp))"
	" UNION ALL SELECT format('%I.%I.%I', c.sch, c.tbl, c.conname),"
	"   'fk-without-shard-key', 'error', format('add the shard key (%s) to foreign key %I:"
	" a reference that leaves it out may point to another shard',"
	"   array_to_string(c.keycols, ', '), c.conname) FROM cons c JOIN r f ON"
	"   f.relid = c.confrelid WHERE c.contype = 'f' AND c.kind = 'sharded' AND f.kind ="
	"   'sharded' AND f.grp = c.grp AND c.keycols IS NOT NULL AND NOT c.cols @> c.keycols"
	" UNION ALL SELECT format('%I.%I.%I', c.sch, c.tbl, c.conname),"
	"   'unique-without-shard-key', 'warning', format('UNIQUE (%s) is checked per shard"
	" only: include the shard key (%s), or back it with a unique global secondary index',"
	"   array_to_string(c.cols, ', '), array_to_string(c.keycols, ', ')) FROM cons c"
	"   WHERE c.contype = 'u' AND c.kind = 'sharded' AND c.keycols IS NOT NULL AND NOT"
	"   c.cols @> c.keycols AND NOT EXISTS (SELECT 1 FROM g WHERE g.sch = c.sch AND"
	"   g.owner = c.tbl AND g.cols = c.cols)"
	" UNION ALL SELECT format('%I.%I.%I', sch, tbl, attname), 'sequence-on-shard-key',"
	"   'warning', format('the shard key %I draws from one sequence on one shard, a hot"
	" spot for inserts on every shard: use DEFAULT uuidv7() (or an application key)',"
	"   attname) FROM key WHERE attidentity <> '' OR def ~ '^nextval\\('"
	" UNION ALL SELECT format('%I.%I.%I', r.sch, r.tbl, a.attname), 'uuidv4-default',"
	"   'warning', format('%I defaults to a random UUID (v4), which fragments its index:"
	" use DEFAULT uuidv7()', a.attname) FROM r JOIN pg_catalog.pg_attribute a ON"
	"   a.attrelid = r.relid AND a.attnum > 0 AND NOT a.attisdropped JOIN"
	"   pg_catalog.pg_attrdef d ON d.adrelid = r.relid AND d.adnum = a.attnum WHERE"
	"   r.kind = 'sharded' AND pg_catalog.pg_get_expr(d.adbin, d.adrelid) ~"
	"   '(gen_random_uuid|uuid_generate_v4)\\('"
	" UNION ALL SELECT format('%I.%I.%I', sch, tbl, attname), 'shard-key-type', 'error',"
	"   format('the shard key %I is of type %s: json, jsonb and array values make poor"
	" keys, use a scalar column', attname, atttypid::regtype) FROM key k JOIN"
	"   pg_catalog.pg_type y ON y.oid = k.atttypid WHERE y.typname IN ('json', 'jsonb') OR"
	"   y.typcategory = 'A'"
	" UNION ALL SELECT format('%I.%I.%I', sch, tbl, attname), 'shard-key-type-mismatch',"
	"   'warning', format('shard group %s hashes %s keys here but %s in %s: co-located"
	" tables need the same shard-key type', grp, atttypid::regtype, o.t, o.tbls) FROM key"
	"   k, LATERAL (SELECT string_agg(DISTINCT x.atttypid::regtype::text, ', ') AS t,"
	"   string_agg(DISTINCT format('%I.%I', x.sch, x.tbl), ', ') AS tbls FROM key x WHERE"
	"   x.grp = k.grp AND x.atttypid <> k.atttypid) o WHERE o.t IS NOT NULL"
	" UNION ALL SELECT format('%I.%I.%I', r.sch, r.tbl, a.attname), 'timestamp-without-time-zone',"
	"   'info', format('%I is timestamp without time zone: use timestamptz, which means"
	" the same instant on every shard and session', a.attname) FROM r JOIN"
	"   pg_catalog.pg_attribute a ON a.attrelid = r.relid AND a.attnum > 0 AND NOT"
	"   a.attisdropped WHERE a.atttypid = 'pg_catalog.timestamp'::pg_catalog.regtype"
	" UNION ALL SELECT format('%I.%I.%I', sch, tbl, attname), 'enum-shard-key', 'info',"
	"   format('the shard key %I is of enum type %s: prefer text with a CHECK constraint"
	" (an enum label used as a shard key cannot be renamed)', attname, atttypid::regtype)"
	"   FROM key k JOIN pg_catalog.pg_type y ON y.oid = k.atttypid WHERE y.typtype = 'e'"
	" UNION ALL SELECT format('%I.%I.%I', c.sch, c.tbl, c.conname), 'fk-not-indexed',"
	"   'warning', format('no index starts with the columns of foreign key %I (%s):"
	" create one, or each change of the referenced rows scans this table', c.conname,"
	"   array_to_string(c.cols, ', ')) FROM cons c WHERE c.contype = 'f' AND NOT EXISTS"
	"   (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = c.relid AND"
	"   (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM unnest(i.indkey)"
	"   WITH ORDINALITY u(n, o) JOIN pg_catalog.pg_attribute a ON a.attrelid = c.relid AND"
	"   a.attnum = u.n WHERE u.o <= cardinality(c.cols)) = (SELECT array_agg(x ORDER BY"
	"   x) FROM unnest(c.cols) x))"
	" ORDER BY 1, 2";

/* One run of the rules in progress. */
struct adv_job {
	adv_row_fn row;			/* each finding */
	adv_end_fn end;			/* the end (or the error) */
	void *arg;
	struct pgc *pgc;		/* owned */
	char **dbs;			/* owned: the databases to check */
	size_t n, next;
};

static void adv_next(struct adv_job *j);

static void
adv_end(struct adv_job *j, const struct nk_error *err)
{
	j->end(j->arg, err);
	if (j->pgc != NULL)
		pgc_free_later(j->pgc);
	for (size_t i = 0; i < j->n; i++)
		free(j->dbs[i]);
	free(j->dbs);
	free(j);
}

/* Append <s> to <f> as a SQL string literal. */
static void
put_lit(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		fputc(*s, f);
	}
	fputc('\'', f);
}

/* The plain column names of index <ix> as an ARRAY literal, or NULL (an expression). */
static void
put_keycols(FILE *f, const struct topo_shard_index *ix)
{
	if (ix == NULL || ix->columns.n == 0) {
		fputs("NULL::text[]", f);
		return;
	}
	for (size_t i = 0; i < ix->columns.n; i++)
		if (strspn(ix->columns.v[i], "abcdefghijklmnopqrstuvwxyz0123456789_") !=
		    strlen(ix->columns.v[i])) {
			fputs("NULL::text[]", f);
			return;
		}
	fputs("ARRAY[", f);
	for (size_t i = 0; i < ix->columns.n; i++) {
		if (i > 0)
			fputs(", ", f);
		put_lit(f, ix->columns.v[i]);
	}
	fputs("]::text[]", f);
}

/* The unique GSIs of database <db> as the VALUES of g. */
static void
put_gsis(FILE *f, const struct topo_database *d)
{
	bool any = false;

	fputs(" g(sch, owner, cols) AS (VALUES ", f);
	for (size_t i = 0; d != NULL && i < d->ngsis; i++) {
		const struct topo_gsi *gi = &d->gsis[i];

		if (!gi->unique || gi->owner_table == NULL)
			continue;
		fputs(any ? ", (" : "(", f);
		put_lit(f, gi->schema ? gi->schema : "public");
		fputs(", ", f);
		put_lit(f, gi->owner_table);
		fputs(", ARRAY[", f);
		for (size_t k = 0; k < gi->columns.n; k++) {
			fputs(k ? ", " : "", f);
			put_lit(f, gi->columns.v[k]);
		}
		fputs("]::text[])", f);
		any = true;
	}
	if (!any)
		fputs("(NULL::text, NULL::text, NULL::text[])", f);
	fputs(")", f);
}

/* The rules query for the tables <res> of database <db> (malloc'd). */
static char *
rules_query(const char *db, const struct pgc_res *res)
{
	const struct topo_model *m = rev_get()->model;
	char *out = NULL;
	size_t len = 0;
	FILE *f = nk_memstream(&out, &len);

	if (f == NULL)
		return NULL;
	fputs("WITH t(sch, tbl, grp, kind, keycols) AS (VALUES "
	      "(NULL::text, NULL::text, NULL::text, NULL::text, NULL::text[])", f);
	for (size_t i = 0; i < pgc_res_rows(res); i++) {
		struct topo_resolution rs;
		const char *sch = pgc_res_get(res, i, 0), *tbl = pgc_res_get(res, i, 1);

		topo_resolve_table(m, db, sch, tbl, &rs);
		if (rs.kind == TOPO_REL_UNROUTABLE)
			continue;
		fputs(", (", f);
		put_lit(f, sch);
		fputs(", ", f);
		put_lit(f, tbl);
		fputs(", ", f);
		if (rs.group != NULL)
			put_lit(f, rs.group->uid);
		else
			fputs("NULL", f);
		fputs(rs.kind == TOPO_REL_REFERENCE ? ", 'reference', " :
		      rs.index != NULL ? ", 'sharded', " : ", 'unsharded', ", f);
		put_keycols(f, rs.kind == TOPO_REL_TABLE ? rs.index : NULL);
		fputs(")", f);
	}
	fputs("),", f);
	put_gsis(f, topo_find_database(m, db));
	fputs(rules_sql, f);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static void
rules_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct adv_job *j = arg;

	if (err != NULL) {
		adv_end(j, err);
		return;
	}
	for (size_t i = 0; i < pgc_res_rows(res); i++) {
		const char *vals[4];

		for (size_t k = 0; k < 4; k++)
			vals[k] = pgc_res_get(res, i, k);
		j->row(j->arg, vals);
	}
	j->next++;
	adv_next(j);
}

static void
tables_cb(void *arg, const struct pgc_res *res, const struct nk_error *err)
{
	struct adv_job *j = arg;
	char *sql;
	struct nk_error e;

	if (err != NULL) {
		adv_end(j, err);
		return;
	}
	sql = rules_query(j->dbs[j->next], res);
	if (sql == NULL) {
		nk_error_oom(&e);
		adv_end(j, &e);
		return;
	}
	pgc_query(j->pgc, sql, 0, NULL, rules_cb, j);
	free(sql);
}

/* Check the next database, or finish. */
static void
adv_next(struct adv_job *j)
{
	char *ci;
	struct nk_error e;

	if (j->next == j->n) {
		adv_end(j, NULL);
		return;
	}
	ci = catload_conninfo(rev_get()->auth_uid, j->dbs[j->next], "neki-advisor");
	if (ci == NULL) {
		nk_error_set(&e, ERRCODE_UNDEFINED_OBJECT,
			     "the authoritative shard \"%s\" is not declared in "
			     "[shards]", rev_get()->auth_uid);
		adv_end(j, &e);
		return;
	}
	pgc_set_conninfo(j->pgc, ci);
	free(ci);
	pgc_query(j->pgc, tables_sql, 0, NULL, tables_cb, j);
}

/* advisor_run: see admin_int.h. */
void
advisor_run(const char *db, adv_row_fn row, adv_end_fn end, void *arg)
{
	const struct topo_model *m = rev_get()->model;
	struct adv_job *j = calloc(1, sizeof(*j));
	struct nk_error e;

	if (j == NULL || (j->dbs = calloc(m ? m->ndbs + 1 : 1, sizeof(char *))) == NULL ||
	    (j->pgc = pgc_new(child_base(), "advisor")) == NULL) {
		nk_error_oom(&e);
		if (j != NULL)
			free(j->dbs);
		free(j);
		end(arg, &e);
		return;
	}
	j->row = row;
	j->end = end;
	j->arg = arg;
	if (m == NULL) {
		nk_error_set(&e, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
			     "no data topology is in force");
		adv_end(j, &e);
		return;
	}
	if (db != NULL && topo_find_database(m, db) == NULL) {
		nk_error_set(&e, ERRCODE_INVALID_CATALOG_NAME,
			     "database \"%s\" is not in the data topology", db);
		adv_end(j, &e);
		return;
	}
	for (size_t i = 0; i < m->ndbs; i++) {
		if (db != NULL && strcmp(db, m->dbs[i].name) != 0)
			continue;
		if ((j->dbs[j->n] = strdup(m->dbs[i].name)) == NULL) {
			nk_error_oom(&e);
			adv_end(j, &e);
			return;
		}
		j->n++;
	}
	adv_next(j);
}

static void
req_row(void *arg, const char *const *vals)
{
	struct adm_req *req = arg;

	adm_result_row(&req->res, vals);
}

static void
req_end(void *arg, const struct nk_error *err)
{
	struct adm_req *req = arg;

	if (err != NULL)
		adm_result_error(&req->res, err);
	else
		adm_result_complete(&req->res, "SELECT", true);
	adm_req_finish(req);
}

/* advisor_check_schema: see admin_int.h. */
void
advisor_check_schema(struct adm_req *req, const char *db)
{
	static const struct adm_col cols[] = {
		{ "object", ADM_T_TEXT }, { "rule", ADM_T_TEXT }, { "severity", ADM_T_TEXT },
		{ "advice", ADM_T_TEXT },
	};

	adm_result_columns(&req->res, cols, NK_ARRAY_LEN(cols));
	advisor_run(db, req_row, req_end, req);
}

/* ---- after DDL: every finding into shm, for the NOTICEs of the DDL's session ---- */

struct adv_ddl {
	char text[SHM_ADVICE_MAX];	/* lines "object\trule\tadvice\n" */
	size_t len;
	uint64_t version;
	void (*done)(void *arg);
	void *arg;
};

static void
ddl_row(void *arg, const char *const *vals)
{
	struct adv_ddl *d = arg;
	int n = snprintf(d->text + d->len, sizeof(d->text) - d->len, "%s\t%s\t%s\n", vals[0],
			 vals[1], vals[3]);

	if (n > 0 && d->len + (size_t)n < sizeof(d->text))
		d->len += (size_t)n;	/* (a line that does not fit is left out) */
	else
		d->text[d->len] = '\0';
}

static void
ddl_end(void *arg, const struct nk_error *err)
{
	struct adv_ddl *d = arg;

	if (err != NULL)
		log_warn("the schema advisor did not run after DDL: %s", err->message);
	else
		shm_advice_set(d->version, d->text);
	d->done(d->arg);
	free(d);
}

/* advisor_after_ddl: see admin_int.h. */
void
advisor_after_ddl(uint64_t schema_version, void (*done)(void *arg), void *arg)
{
	struct adv_ddl *d = calloc(1, sizeof(*d));

	if (d == NULL) {
		done(arg);
		return;
	}
	d->version = schema_version;
	d->done = done;
	d->arg = arg;
	advisor_run(NULL, ddl_row, ddl_end, d);
}
