/*
 * neki/list.h - an intrusive, counted, doubly linked list (header only).
 *
 * A struct list_node is embedded in the object; a struct list is a head that knows its
 * length, so "a state is a list" gives gauges for free (pgbouncer's StatList). Get the
 * object back with container_of(). No allocation anywhere.
 */
#ifndef NEKI_LIST_H
#define NEKI_LIST_H

#include "neki/base.h"

struct list_node {
	struct list_node *prev;		/* weak */
	struct list_node *next;		/* weak */
};

struct list {
	struct list_node head;		/* sentinel: head.next is the first node */
	size_t count;			/* nodes on the list */
};

static inline void
list_init(struct list *l)
{
	l->head.prev = &l->head;
	l->head.next = &l->head;
	l->count = 0;
}

/* A node on no list points at itself (list_node_init / after list_remove). */
static inline void
list_node_init(struct list_node *n)
{
	n->prev = n;
	n->next = n;
}

static inline bool
list_node_linked(const struct list_node *n)
{
	return n->next != n;
}

static inline bool
list_empty(const struct list *l)
{
	return l->count == 0;
}

static inline size_t
list_count(const struct list *l)
{
	return l->count;
}

static inline void
list_insert_between(struct list *l, struct list_node *n, struct list_node *prev,
		    struct list_node *next)
{
	n->prev = prev;
	n->next = next;
	prev->next = n;
	next->prev = n;
	l->count++;
}

/* Add <n> at the front of <l>. */
static inline void
list_push_front(struct list *l, struct list_node *n)
{
	list_insert_between(l, n, &l->head, l->head.next);
}

/* Add <n> at the back of <l>. */
static inline void
list_push_back(struct list *l, struct list_node *n)
{
	list_insert_between(l, n, l->head.prev, &l->head);
}

/* Remove <n> from <l> (it must be on <l>). */
static inline void
list_remove(struct list *l, struct list_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	list_node_init(n);
	l->count--;
}

/* First / last node, NULL when empty. */
static inline struct list_node *
list_first(const struct list *l)
{
	return l->count ? l->head.next : NULL;
}

static inline struct list_node *
list_last(const struct list *l)
{
	return l->count ? l->head.prev : NULL;
}

/* The node after <n> on <l>, NULL at the end. */
static inline struct list_node *
list_next(const struct list *l, const struct list_node *n)
{
	return n->next == &l->head ? NULL : n->next;
}

#endif /* NEKI_LIST_H */
