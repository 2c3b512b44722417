/*
 * neki/image_area.h - the string and list areas shared by the pointer-free images (topology
 * and catalog, built in two passes: measuring with no buffer, then writing).
 *
 * Strings are NUL-terminated and addressed by their offset in the image (0 means NULL). A
 * list is a count word followed by its items in the list area and is addressed by its word
 * index there (0 is the shared empty list). While measuring (buf NULL) only the sizes grow.
 */
#ifndef NEKI_IMAGE_AREA_H
#define NEKI_IMAGE_AREA_H

#include "neki/base.h"

struct image_area {
	uint8_t *buf;		/* the image; NULL while measuring */
	uint32_t lists_off;	/* image offset of the list area (writing pass) */
	uint32_t strings_off;	/* image offset of the string area (writing pass) */
	uint32_t list_used;	/* words used in the list area */
	uint32_t str_used;	/* bytes used in the string area */
};

/* Start a pass: reserve word 0 (the empty list) and byte 0 (NULL). */
void image_area_begin(struct image_area *a, uint8_t *buf, uint32_t lists_off,
		      uint32_t strings_off);

/* Append <s> to the string area; returns its offset, 0 for NULL. */
uint32_t image_str(struct image_area *a, const char *s);

/* New list of <n> items; returns its handle (0 for n == 0). */
uint32_t image_list(struct image_area *a, uint32_t n);

/* Item <i> of <list> := <v>. */
void image_list_set(struct image_area *a, uint32_t list, uint32_t i, uint32_t v);

#endif /* NEKI_IMAGE_AREA_H */
