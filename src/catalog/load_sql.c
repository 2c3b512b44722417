/*
 * load_sql.c - the query that reads a database's catalog from pg_catalog in one round trip.
 *
 * Every row has CAT_LOAD_COLS text columns: a kind letter, then the kind's values (NULL
 * when unused). load.c reads them; the kinds and their values:
 *   d  datname, datcollate, datctype
 *   r  oid, schema, name, relkind, relispartition, rewrites_insert (a rule, or a BEFORE
 *      INSERT row trigger of its own (not a foreign key's) on it or a partition: the row it
 *      stores may differ from the one inserted)
 *   a  attrelid, attnum, attname, atttypid, atttypmod, attnotnull, attidentity, atthasdef,
 *      attgenerated
 *   t  oid, schema, typname, typlen, typbyval, typcategory, typtype, typbasetype, typelem
 *   e  enumtypid, enumsortorder, enumlabel
 *   k  indrelid, index name, 'p' or 'u', indkey (space-separated attnums), indnkeyatts
 *   q  seqrelid, seqtypid, seqstart, seqincrement, seqmin, seqmax, seqcache, seqcycle
 *   s  table oid, attnum, sequence oid (the sequence a serial or identity column owns)
 *   i  inhrelid, inhparent
 *   v  a relation the query of a view or materialized view reads, the view (its rewrite
 *      rule's dependencies; stored with the inheritance children, see catalog.h)
 *   g  schema, name of a user-defined aggregate (CREATE AGGREGATE; extensions' too)
 * Types are those the columns use, followed through domain bases and array elements.
 * Unique indexes that are partial, not valid or over expressions cannot be arbiters by
 * column: partial and invalid ones are left out here, expression ones by load.c.
 */
#include "neki/base.h"

#include "neki/catalog.h"

static const char load_sql[] =
	"WITH RECURSIVE rels AS ("
	" SELECT c.oid, n.nspname, c.relname, c.relkind, c.relispartition,"
	" c.relkind IN ('r', 'p') AND (c.relhasrules OR EXISTS (SELECT 1"
	" FROM pg_catalog.pg_trigger tg WHERE (tg.tgrelid = c.oid OR (c.relkind = 'p'"
	" AND tg.tgrelid IN (SELECT relid FROM pg_catalog.pg_partition_tree(c.oid))))"
	" AND NOT tg.tgisinternal AND (tg.tgtype & 7) = 7)) AS rewrites_insert"
	" FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
	" WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'i', 'I', 'f')"
	" AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast', '__neki')"
	" AND n.nspname !~ '^pg_(toast_)?temp_'),"
	" atts AS ("
	" SELECT a.* FROM pg_catalog.pg_attribute a JOIN rels r ON r.oid = a.attrelid"
	" WHERE a.attnum > 0 AND NOT a.attisdropped AND r.relkind NOT IN ('i', 'I', 'S')),"
	" typs(oid) AS ("
	" SELECT DISTINCT atttypid FROM atts"
	" UNION SELECT v.x FROM typs JOIN pg_catalog.pg_type t ON t.oid = typs.oid"
	" CROSS JOIN LATERAL (VALUES (t.typbasetype), (t.typelem)) v(x) WHERE v.x <> 0)"
	" SELECT 'd'::text, datname::text, datcollate::text, datctype::text, NULL::text,"
	" NULL::text, NULL::text, NULL::text, NULL::text, NULL::text"
	" FROM pg_catalog.pg_database WHERE datname = current_database()"
	" UNION ALL SELECT 'r', oid::text, nspname::text, relname::text, relkind::text,"
	" relispartition::text, rewrites_insert::text, NULL, NULL, NULL FROM rels"
	" UNION ALL SELECT 'a', attrelid::text, attnum::text, attname::text, atttypid::text,"
	" atttypmod::text, attnotnull::text, attidentity::text, atthasdef::text,"
	" attgenerated::text FROM atts"
	" UNION ALL SELECT 't', t.oid::text, n.nspname::text, t.typname::text, t.typlen::text,"
	" t.typbyval::text, t.typcategory::text, t.typtype::text, t.typbasetype::text,"
	" t.typelem::text"
	" FROM typs JOIN pg_catalog.pg_type t ON t.oid = typs.oid"
	" JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace"
	" UNION ALL SELECT 'e', e.enumtypid::text, e.enumsortorder::text, e.enumlabel::text,"
	" NULL, NULL, NULL, NULL, NULL, NULL"
	" FROM pg_catalog.pg_enum e JOIN typs ON typs.oid = e.enumtypid"
	" UNION ALL SELECT 'k', x.indrelid::text, ic.relname::text,"
	" CASE WHEN x.indisprimary THEN 'p' ELSE 'u' END, x.indkey::text, x.indnkeyatts::text,"
	" NULL, NULL, NULL, NULL"
	" FROM pg_catalog.pg_index x JOIN rels r ON r.oid = x.indrelid"
	" JOIN pg_catalog.pg_class ic ON ic.oid = x.indexrelid"
	" WHERE x.indisunique AND x.indisvalid AND x.indpred IS NULL"
	" UNION ALL SELECT 'q', s.seqrelid::text, s.seqtypid::text, s.seqstart::text,"
	" s.seqincrement::text, s.seqmin::text, s.seqmax::text, s.seqcache::text,"
	" s.seqcycle::text, NULL"
	" FROM pg_catalog.pg_sequence s JOIN rels r ON r.oid = s.seqrelid"
	" UNION ALL SELECT 's', d.refobjid::text, d.refobjsubid::text, d.objid::text,"
	" NULL, NULL, NULL, NULL, NULL, NULL"
	" FROM pg_catalog.pg_depend d JOIN rels r ON r.oid = d.objid AND r.relkind = 'S'"
	" WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass"
	" AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass"
	" AND d.deptype IN ('a', 'i') AND d.refobjsubid > 0"
	" UNION ALL SELECT 'i', i.inhrelid::text, i.inhparent::text,"
	" NULL, NULL, NULL, NULL, NULL, NULL, NULL"
	" FROM pg_catalog.pg_inherits i JOIN rels r ON r.oid = i.inhrelid"
	" AND r.relkind IN ('r', 'p', 'f')"
	" UNION ALL SELECT DISTINCT 'v', d.refobjid::text, w.ev_class::text,"
	" NULL, NULL, NULL, NULL, NULL, NULL, NULL"
	" FROM pg_catalog.pg_rewrite w JOIN rels r ON r.oid = w.ev_class AND r.relkind IN ('v', 'm')"
	" JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass"
	" AND d.objid = w.oid AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass"
	" AND d.refobjid <> w.ev_class AND d.deptype = 'n'"
	" UNION ALL SELECT DISTINCT 'g', n.nspname::text, p.proname::text,"
	" NULL, NULL, NULL, NULL, NULL, NULL, NULL"
	" FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace"
	" WHERE p.prokind = 'a'"
	" AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast', '__neki')"
	" AND n.nspname !~ '^pg_(toast_)?temp_'";

/* cat_load_sql: see catalog.h. A constant string. */
const char *
cat_load_sql(void)
{
	return load_sql;
}
