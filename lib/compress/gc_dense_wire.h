/* gc_dense_wire.h -- the dense and exact vector messages (dense_wire.c)
 * that the algorithms send where no compressor codes them (gc__ names;
 * not installed). */
#ifndef GC_DENSE_WIRE_H
#define GC_DENSE_WIRE_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* dt is GC_F32 or GC_F64 (gc_dtype.h).  Raw dense message: n values of the
 * dtype, little-endian as in memory. */
int gc__dense_encode(int dt, const void *x, size_t n, uint8_t *buf,
                     size_t cap, size_t *len);
int gc__dense_decode(int dt, const uint8_t *buf, size_t len, size_t n,
                     double scale, void *y);
/* Exact vector message: the sparse form when strictly shorter than the
 * dense one, else dense; the receiver tells them apart by the length
 * (dense is exactly n*dt bytes). */
size_t gc__exact_max_bytes(size_t n, int dt);
int gc__exact_encode(int dt, const void *x, size_t n, uint8_t *buf,
                     size_t cap, size_t *len, size_t *nnz);
/* gc__exact_encode's bytes and *nnz, the nonzeros gathered on the
 * caller's OpenMP threads (as gc_vec.h's passes) into idx and val, a
 * workspace of n entries each (val of the dtype). */
int gc__exact_encode_ws(int dt, const void *x, size_t n, uint32_t *idx, void *val,
                        uint8_t *buf, size_t cap, size_t *len, size_t *nnz);
int gc__exact_decode(int dt, const uint8_t *buf, size_t len, size_t n,
                     double scale, void *y);

#ifdef __cplusplus
}
#endif
#endif /* GC_DENSE_WIRE_H */
