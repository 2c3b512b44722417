/*
 * neki/byteorder.h - network byte order (big-endian) integers in byte buffers: the protocol's
 * lengths and fields, binary-format values, COPY BINARY. One reader and one writer per width
 * for every module.
 */
#ifndef NEKI_BYTEORDER_H
#define NEKI_BYTEORDER_H

#include "neki/base.h"

static inline uint16_t
nk_get_be16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t
nk_get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t
nk_get_be64(const uint8_t *p)
{
	return (uint64_t)nk_get_be32(p) << 32 | nk_get_be32(p + 4);
}

static inline void
nk_put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void
nk_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void
nk_put_be64(uint8_t *p, uint64_t v)
{
	nk_put_be32(p, (uint32_t)(v >> 32));
	nk_put_be32(p + 4, (uint32_t)v);
}

#endif /* NEKI_BYTEORDER_H */
