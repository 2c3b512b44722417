/*
 * load.c - build a struct catalog from the rows of cat_load_sql() (layout in load_sql.c).
 *
 * Rows may come in any order, so the builder makes passes: (1) the database, relations,
 * types and user-defined aggregates, counting each table's columns, keys and children and each enum's labels; (2) the
 * arrays are allocated and filled; (3) keys and owned sequences, which refer to columns by
 * attnum, once the columns are sorted. Entry point: cat_build().
 */
#include "neki/base.h"

#include "neki/catalog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cat_int.h"

/* oid -> table number, sorted by oid for binary search. */
struct oid_ix {
	uint32_t oid;
	uint32_t n;
};

struct loader {
	struct catalog *c;		/* owned until returned */
	const struct cat_rows *rows;	/* borrowed */
	struct nk_error *err;		/* borrowed */
	struct oid_ix *byoid;		/* arena: tables by oid */
	double *label_order;		/* arena: enumsortorder per label slot, parallel */
	size_t *label_base;		/* arena: first label_order slot of each type */
	bool failed;
};

static const char *
val(struct loader *l, size_t row, size_t col)
{
	return l->rows->get(l->rows->src, row, col);
}

static char
kind_of(struct loader *l, size_t row)
{
	const char *k = val(l, row, 0);

	return k && k[0] && !k[1] ? k[0] : '?';
}

/* Record that row <row> is unreadable (the first problem wins). */
static void
bad_row(struct loader *l, size_t row, const char *what)
{
	if (l->failed)
		return;
	l->failed = true;
	nk_error_set(l->err, ERRCODE_INTERNAL_ERROR,
		     "could not load the catalog of database \"%s\": row %zu "
		     "(kind '%c'): %s", l->c->dbname ? l->c->dbname : "?", row + 1,
		     kind_of(l, row), what);
}

static int64_t
num(struct loader *l, size_t row, size_t col)
{
	const char *s = val(l, row, col);
	char *end;
	long long v;

	if (!s) {
		bad_row(l, row, "a number is NULL");
		return 0;
	}
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end) {
		bad_row(l, row, "a number is not readable");
		return 0;
	}
	return v;
}

static bool
flag(struct loader *l, size_t row, size_t col)
{
	const char *s = val(l, row, col);

	return s && (strcmp(s, "t") == 0 || strcmp(s, "true") == 0);
}

static char
letter(struct loader *l, size_t row, size_t col)
{
	const char *s = val(l, row, col);

	return s ? s[0] : '\0';
}

static const char *
text(struct loader *l, size_t row, size_t col)
{
	const char *s = val(l, row, col);
	const char *p;

	if (!s) {
		bad_row(l, row, "a name is NULL");
		return "";
	}
	p = cat_strdup(l->c, s);
	if (!p)
		bad_row(l, row, "out of memory");
	return p ? p : "";
}

static int
oid_ix_cmp(const void *a, const void *b)
{
	const struct oid_ix *x = a, *y = b;

	return x->oid < y->oid ? -1 : x->oid > y->oid;
}

/* The table whose oid is in column <col> of <row>, or NULL (not a relation we read). */
static struct cat_table *
table_at(struct loader *l, size_t row, size_t col)
{
	struct oid_ix key = { (uint32_t)num(l, row, col), 0 };
	const struct oid_ix *hit;

	if (l->c->ntables == 0)
		return NULL;
	hit = bsearch(&key, l->byoid, l->c->ntables, sizeof(key), oid_ix_cmp);
	return hit ? &l->c->tables[hit->n] : NULL;
}

static struct cat_type *
type_at(struct loader *l, size_t row, size_t col)
{
	return (struct cat_type *)cat_find_type(l->c, (uint32_t)num(l, row, col));
}

static enum cat_relkind
relkind_of(char k)
{
	switch (k) {
	case 'p': return CAT_REL_PARTITIONED;
	case 'v': return CAT_REL_VIEW;
	case 'm': return CAT_REL_MATVIEW;
	case 'S': return CAT_REL_SEQUENCE;
	case 'i': case 'I': return CAT_REL_INDEX;
	case 'f': return CAT_REL_FOREIGN;
	default: return CAT_REL_TABLE;
	}
}

static enum cat_typtype
typtype_of(char k)
{
	switch (k) {
	case 'c': return CAT_TYPTYPE_COMPOSITE;
	case 'd': return CAT_TYPTYPE_DOMAIN;
	case 'e': return CAT_TYPTYPE_ENUM;
	case 'p': return CAT_TYPTYPE_PSEUDO;
	case 'r': case 'm': return CAT_TYPTYPE_RANGE;
	default: return CAT_TYPTYPE_BASE;
	}
}

static void
read_relation(struct loader *l, size_t row, struct cat_table *t)
{
	t->oid = (uint32_t)num(l, row, 1);
	t->schema = text(l, row, 2);
	t->name = text(l, row, 3);
	t->kind = relkind_of(letter(l, row, 4));
	t->is_partition = flag(l, row, 5);
	t->rewrites_insert = flag(l, row, 6);
}

static void
read_type(struct loader *l, size_t row, struct cat_type *t)
{
	t->oid = (uint32_t)num(l, row, 1);
	t->schema = text(l, row, 2);
	t->name = text(l, row, 3);
	t->len = (int16_t)num(l, row, 4);
	t->byval = flag(l, row, 5);
	t->category = letter(l, row, 6);
	t->typtype = typtype_of(letter(l, row, 7));
	t->base_oid = (uint32_t)num(l, row, 8);
	t->elem_oid = (uint32_t)num(l, row, 9);
}

/* Pass 1: the database row, every relation and every type. */
static bool
pass_objects(struct loader *l, size_t nrows)
{
	size_t nrel = 0, ntyp = 0, nagg = 0;

	for (size_t r = 0; r < nrows; r++) {
		char k = kind_of(l, r);

		nrel += k == 'r';
		ntyp += k == 't';
		nagg += k == 'g';
	}
	l->c->tables = cat_alloc(l->c, (nrel ? nrel : 1) * sizeof(struct cat_table));
	l->c->types = cat_alloc(l->c, (ntyp ? ntyp : 1) * sizeof(struct cat_type));
	l->c->aggs = cat_alloc(l->c, (nagg ? nagg : 1) * sizeof(struct cat_relref));
	l->byoid = cat_alloc(l->c, (nrel ? nrel : 1) * sizeof(struct oid_ix));
	if (!l->c->tables || !l->c->types || !l->c->aggs || !l->byoid)
		return false;
	for (size_t r = 0; r < nrows && !l->failed; r++) {
		switch (kind_of(l, r)) {
		case 'd':
			l->c->collate = text(l, r, 2);
			l->c->ctype = text(l, r, 3);
			break;
		case 'r':
			read_relation(l, r, &l->c->tables[l->c->ntables++]);
			break;
		case 't':
			read_type(l, r, &l->c->types[l->c->ntypes++]);
			break;
		case 'g':
			l->c->aggs[l->c->naggs++] = (struct cat_relref){ text(l, r, 1),
									 text(l, r, 2) };
			break;
		}
	}
	cat_sort(l->c);
	for (size_t i = 0; i < l->c->ntables; i++)
		l->byoid[i] = (struct oid_ix){ l->c->tables[i].oid, (uint32_t)i };
	if (l->c->ntables)
		qsort(l->byoid, l->c->ntables, sizeof(*l->byoid), oid_ix_cmp);
	return !l->failed;
}

/* Pass 2a: count what each table and enum type will hold (counts go in the n fields). */
static void
pass_count(struct loader *l, size_t nrows)
{
	for (size_t r = 0; r < nrows && !l->failed; r++) {
		struct cat_table *t;
		struct cat_type *ty;

		switch (kind_of(l, r)) {
		case 'a':
			if ((t = table_at(l, r, 1)))
				t->ncols++;
			break;
		case 'k':
			if ((t = table_at(l, r, 1)))
				t->nkeys++;
			break;
		case 'i':
		case 'v':
			if ((t = table_at(l, r, 2)))
				t->nchildren++;
			break;
		case 'e':
			if ((ty = type_at(l, r, 1)))
				ty->nlabels++;
			break;
		}
	}
}

/* Pass 2b: allocate each table's and enum's arrays for the counts; reset the counts. */
static bool
pass_alloc(struct loader *l)
{
	size_t nlabels = 0;

	for (size_t i = 0; i < l->c->ntables; i++) {
		struct cat_table *t = &l->c->tables[i];

		t->cols = cat_alloc(l->c, (t->ncols + 1) * sizeof(*t->cols));
		t->keys = cat_alloc(l->c, (t->nkeys + 1) * sizeof(*t->keys));
		t->children = cat_alloc(l->c, (t->nchildren + 1) * sizeof(*t->children));
		if (!t->cols || !t->keys || !t->children)
			return false;
		t->ncols = t->nkeys = t->nchildren = 0;
	}
	l->label_base = cat_alloc(l->c, (l->c->ntypes + 1) * sizeof(size_t));
	if (!l->label_base)
		return false;
	for (size_t i = 0; i < l->c->ntypes; i++) {
		struct cat_type *ty = &l->c->types[i];

		l->label_base[i] = nlabels;
		nlabels += ty->nlabels;
		ty->labels = cat_alloc(l->c, (ty->nlabels + 1) * sizeof(*ty->labels));
		if (!ty->labels)
			return false;
		ty->nlabels = 0;
	}
	l->label_order = cat_alloc(l->c, (nlabels + 1) * sizeof(double));
	return l->label_order != NULL;
}

static void
read_column(struct loader *l, size_t row, struct cat_column *col)
{
	char ident = letter(l, row, 7);

	col->attnum = (int16_t)num(l, row, 2);
	col->name = text(l, row, 3);
	col->type_oid = (uint32_t)num(l, row, 4);
	col->typmod = (int32_t)num(l, row, 5);
	col->not_null = flag(l, row, 6);
	col->identity = ident == 'a' ? CAT_IDENT_ALWAYS :
			ident == 'd' ? CAT_IDENT_BY_DEFAULT : CAT_IDENT_NONE;
	col->has_default = flag(l, row, 8);
	col->generated = letter(l, row, 9) == 's';
}

static void
read_label(struct loader *l, size_t row)
{
	struct cat_type *ty = type_at(l, row, 1);
	const char *s = val(l, row, 2);
	size_t slot;

	if (!ty)
		return;
	slot = l->label_base[ty - l->c->types] + ty->nlabels;
	l->label_order[slot] = s ? strtod(s, NULL) : 0;
	ty->labels[ty->nlabels++] = text(l, row, 3);
}

static void
read_sequence(struct loader *l, size_t row)
{
	struct cat_table *t = table_at(l, row, 1);

	if (!t)
		return;
	t->seq.type_oid = (uint32_t)num(l, row, 2);
	t->seq.start = num(l, row, 3);
	t->seq.increment = num(l, row, 4);
	t->seq.min = num(l, row, 5);
	t->seq.max = num(l, row, 6);
	t->seq.cache = num(l, row, 7);
	t->seq.cycle = flag(l, row, 8);
}

static void
read_child(struct loader *l, size_t row)
{
	struct cat_table *child = table_at(l, row, 1);
	struct cat_table *parent = table_at(l, row, 2);

	if (child && parent)
		parent->children[parent->nchildren++] = (struct cat_relref){ child->schema,
									     child->name };
}

/* Pass 2c: columns, enum labels, sequences, inheritance. */
static void
pass_fill(struct loader *l, size_t nrows)
{
	for (size_t r = 0; r < nrows && !l->failed; r++) {
		struct cat_table *t;

		switch (kind_of(l, r)) {
		case 'a':
			if ((t = table_at(l, r, 1)))
				read_column(l, r, &t->cols[t->ncols++]);
			break;
		case 'e':
			read_label(l, r);
			break;
		case 'q':
			read_sequence(l, r);
			break;
		case 'i':
		case 'v':
			read_child(l, r);
			break;
		}
	}
}

/* Sort each enum's labels by enumsortorder (insertion sort: enums are short). */
static void
sort_labels(struct loader *l)
{
	for (size_t i = 0; i < l->c->ntypes; i++) {
		struct cat_type *ty = &l->c->types[i];
		double *ord = l->label_order + l->label_base[i];

		for (size_t a = 1; a < ty->nlabels; a++) {
			for (size_t b = a; b > 0 && ord[b - 1] > ord[b]; b--) {
				double o = ord[b];
				const char *s = ty->labels[b];

				ord[b] = ord[b - 1];
				ty->labels[b] = ty->labels[b - 1];
				ord[b - 1] = o;
				ty->labels[b - 1] = s;
			}
		}
	}
}

/* Position of the column with <attnum> in <t>, or -1. */
static ssize_t
column_pos(const struct cat_table *t, long attnum)
{
	for (size_t i = 0; i < t->ncols; i++)
		if (t->cols[i].attnum == attnum)
			return (ssize_t)i;
	return -1;
}

/*
 * One 'k' row: the first indnkeyatts attnums of indkey. An expression column (attnum 0)
 * makes the index useless as a by-column arbiter: it is skipped.
 */
static void
read_key(struct loader *l, size_t row)
{
	struct cat_table *t = table_at(l, row, 1);
	const char *p = val(l, row, 4);
	int64_t nkey = num(l, row, 5);
	struct cat_key *k;

	if (!t || !p || nkey <= 0 || l->failed)
		return;
	k = &t->keys[t->nkeys];
	k->cols = cat_alloc(l->c, (size_t)nkey * sizeof(*k->cols));
	if (!k->cols) {
		bad_row(l, row, "out of memory");
		return;
	}
	for (k->ncols = 0; k->ncols < (size_t)nkey; k->ncols++) {
		char *end;
		long a = strtol(p, &end, 10);
		ssize_t pos = end == p ? -1 : column_pos(t, a);

		if (pos < 0)
			return;
		k->cols[k->ncols] = (uint16_t)pos;
		p = end;
	}
	k->name = text(l, row, 2);
	k->primary = letter(l, row, 3) == 'p';
	t->nkeys++;
}

/* One 's' row: column attnum of the table owns the sequence. */
static void
read_owned(struct loader *l, size_t row)
{
	struct cat_table *t = table_at(l, row, 1);
	struct cat_table *seq = table_at(l, row, 3);
	ssize_t pos;

	if (!t || !seq)
		return;
	pos = column_pos(t, (long)num(l, row, 2));
	if (pos >= 0)
		t->cols[pos].seq = (struct cat_relref){ seq->schema, seq->name };
}

static int
key_cmp(const void *a, const void *b)
{
	const struct cat_key *x = a, *y = b;

	if (x->primary != y->primary)
		return x->primary ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Pass 3: keys and owned sequences (they name columns by attnum; columns are sorted). */
static void
pass_keys(struct loader *l, size_t nrows)
{
	for (size_t i = 0; i < l->c->ntables; i++)
		cat_sort_columns(&l->c->tables[i]);
	for (size_t r = 0; r < nrows && !l->failed; r++) {
		switch (kind_of(l, r)) {
		case 'k':
			read_key(l, r);
			break;
		case 's':
			read_owned(l, r);
			break;
		}
	}
	for (size_t i = 0; i < l->c->ntables; i++) {
		struct cat_table *t = &l->c->tables[i];

		if (t->nkeys > 1)
			qsort(t->keys, t->nkeys, sizeof(*t->keys), key_cmp);
		cat_sort_children(t);
	}
}

/* cat_build: see catalog.h. */
struct catalog *
cat_build(const char *dbname, const struct cat_rows *rows, struct nk_error *err)
{
	struct loader l = { .rows = rows, .err = err };
	size_t nrows = rows->nrows(rows->src);

	l.c = cat_new();
	if (!l.c || !(l.c->dbname = cat_strdup(l.c, dbname)))
		goto fail_oom;
	if (!pass_objects(&l, nrows)) {
		if (l.failed)
			goto fail;
		goto fail_oom;
	}
	pass_count(&l, nrows);
	if (!l.failed && !pass_alloc(&l))
		goto fail_oom;
	pass_fill(&l, nrows);
	sort_labels(&l);
	pass_keys(&l, nrows);
	if (l.failed)
		goto fail;
	if (!l.c->collate)
		l.c->collate = l.c->ctype = "";
	return l.c;
fail_oom:
	nk_error_set(err, ERRCODE_OUT_OF_MEMORY,
		     "out of memory while loading the catalog of database \"%s\"",
		     dbname);
fail:
	cat_free(l.c);
	return NULL;
}
