/*
 * plan_gsi_int.h - what the planner's GSI files share (plan_gsi.c plans the steps of every
 * statement on an owner; plan_gsi_insert.c writes an INSERT's lookup rows from its VALUES).
 */
#ifndef NEKI_ROUTER_PLAN_GSI_INT_H
#define NEKI_ROUTER_PLAN_GSI_INT_H

#include "neki/base.h"

#include <stdio.h>
#include <string.h>

#include "neki/plan_gsi.h"
#include "neki/topology_image.h"
#include "plan_int.h"

#define GSI_COLS_MAX 32
#define GSI_LOOKUPS_MAX PLAN_GSI_LOOKUPS_MAX

/* An enabled GSI of the owner, with the columns of its lookup rows. */
struct gsi_ref {
	struct topo_img_gsi g;
	const char *cols[GSI_COLS_MAX];	/* indexed, owner key, owner primary key (distinct) */
	char role[GSI_COLS_MAX];	/* 'i' indexed, 'k' owner key, 'p' owner primary key */
	uint32_t ncols;
};

static inline bool
gsi_same(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

/* The text written to <f> (closed) as an arena string, or NULL with <err>. */
const char *plan_gsi_text(struct pctx *c, FILE *f, char **buf, size_t *len);
/* `"schema"."table"` of GSI <g>'s lookup table (<owner>'s schema when it names none). */
void plan_gsi_put_lookup(FILE *f, const struct prel *owner, const struct gsi_ref *g);
/* <sql> appended to the arena list <*list>[0..*n); false with <err>. */
bool plan_gsi_add_text(struct pctx *c, const char ***list, uint32_t *n, const char *sql);

/* The text of constant or parameter <v> with its folded unary minus (arena), or NULL for
 * another value (*<is_null> for NULL); false with <err>. */
bool plan_gsi_value_text(struct pctx *c, const struct stmt_value *v, const char **text,
			 bool *is_null);
/* PLAN_GSI_INSERT (an INSERT with its own RETURNING): GSI <g>'s lookup INSERT built from
 * the VALUES, as <pg>'s next `first` text (none when every row is skipped); false with the
 * refusal (a value not a constant or a parameter, a missing column, NULL). */
bool plan_gsi_insert_first(struct pctx *c, const struct prel *t, const struct gsi_ref *g,
			   struct plan_gsi *pg);
/* PLAN_GSI_INSERT_AFTER: can the lookup rows of this INSERT into <t> be written beside it
 * (plan_gsi.alongside)? One VALUES row, no ON CONFLICT, WITH or subquery, and nothing on
 * <t> that may store another row than the one given (a rule, a BEFORE INSERT trigger). */
bool plan_gsi_alongside_shape(const struct pctx *c, const struct prel *t);
/* ... then GSI <g>'s lookup INSERT as <pg>'s next `alongside` template; false when a value
 * is not a plain constant or parameter of the lookup column's own type (or on no memory:
 * <err>). */
bool plan_gsi_alongside(struct pctx *c, const struct prel *t, const struct gsi_ref *g,
			struct plan_gsi *pg);

#endif /* NEKI_ROUTER_PLAN_GSI_INT_H */
