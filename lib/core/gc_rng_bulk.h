/* gc_rng_bulk.h -- gc_rng.h's counter-based words in bulk, on the vector
 * paths of gc_isa.h (rng_words.c; gc__ names, not installed). */
#ifndef GC_RNG_BULK_H
#define GC_RNG_BULK_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* Philox blocks b .. b + nblk - 1 of (seed, stream, step) into out, 16
 * bytes a block: its four words little-endian, the stream gc_rng_u32
 * reads as words and gc_rng_u16 as 16-bit units (rng_words.c), with the
 * vector lanes of instruction set isa (at most gc__isa()); the same bytes
 * on every path. */
void gc__philox_blocks(int isa, uint64_t seed, uint32_t stream, uint32_t step, uint64_t b,
                       size_t nblk, void *out);
/* out[c] = gc_rng_u32(seed, stream, step, first + c) for c < m, in bulk
 * on the vector paths (rng_words.c); the same words on every path. */
void gc__rng_words(uint64_t seed, uint32_t stream, uint32_t step, uint64_t first,
                   size_t m, uint32_t *out);

#ifdef __cplusplus
}
#endif
#endif /* GC_RNG_BULK_H */
