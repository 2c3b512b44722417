/*
 * image_area.c - string and list areas of the pointer-free images (neki/image_area.h).
 */
#include "neki/base.h"

#include "neki/image_area.h"

#include <string.h>

void
image_area_begin(struct image_area *a, uint8_t *buf, uint32_t lists_off, uint32_t strings_off)
{
	*a = (struct image_area){ .buf = buf, .lists_off = lists_off, .strings_off = strings_off,
				  .list_used = 1, .str_used = 1 };
	if (buf) {
		memset(buf + lists_off, 0, sizeof(uint32_t));
		buf[strings_off] = '\0';
	}
}

uint32_t
image_str(struct image_area *a, const char *s)
{
	uint32_t off, n;

	if (!s)
		return 0;
	n = (uint32_t)strlen(s) + 1;
	off = a->strings_off + a->str_used;
	if (a->buf)
		memcpy(a->buf + off, s, n);
	a->str_used += n;
	return off;
}

uint32_t
image_list(struct image_area *a, uint32_t n)
{
	uint32_t h = a->list_used;

	if (n == 0)
		return 0;
	if (a->buf)
		memcpy(a->buf + a->lists_off + (size_t)h * sizeof(uint32_t), &n, sizeof(n));
	a->list_used += n + 1;
	return h;
}

void
image_list_set(struct image_area *a, uint32_t list, uint32_t i, uint32_t v)
{
	if (a->buf)
		memcpy(a->buf + a->lists_off + ((size_t)list + 1 + i) * sizeof(uint32_t), &v,
		       sizeof(v));
}
