/* rng_words.c -- the counter RNG's stream in bulk, Philox blocks in
 * vector lanes: whole blocks (the quantizers' 16-bit uniforms) and 32-bit
 * words out[c] = gc_rng_u32(seed, stream, step, first + c) (random-K's
 * draws; at density 0.1 the scalar Philox took a third of its time).
 * Every path writes the same bytes (gc_rng.h is the definition);
 * test_sparse and test_quant check them against it on each instruction
 * set. */
#include <string.h>

#include "gc_isa.h"
#include "gc_rng_bulk.h"
#include "gc_rng.h"

/* Blocks b .. b + nblk - 1, 16 bytes each, into out. */
static void blocks_scalar(uint64_t seed, uint32_t stream, uint32_t step, uint64_t b,
                          size_t nblk, uint8_t *out)
{
  for (size_t j = 0; j < nblk; j++) {
    gc_rng4 r = gc_rng_block(seed, stream, step, b + j);
    memcpy(out + 16 * j, r.v, sizeof r.v);   /* little-endian words */
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_RNG_PATHS 1
/* Philox4x32-10 in vector lanes.  AVX-512: one block per 64-bit lane,
 * each counter word in the low half of its lane: vpmuludq reads only the
 * low halves and gives the whole 64-bit product, whose high half is the
 * round's hi word and whose low half is its lo word, so a round is two
 * multiplies, two shifts and two three-way XORs for eight blocks (the
 * high halves of the other words hold junk that no multiply reads, and
 * the final packing drops it).  A round is a multiply -> shift -> XOR
 * chain several cycles long, so PHILOX_GROUPS groups of eight blocks are
 * in flight: on Zen 5 two groups took 1.0 ns a block, four 0.78 (eight
 * run out of registers).  The counter's high word is shared by the
 * lanes: a span that straddles 2^32 blocks goes to the scalar loop.
 * Returns the blocks written (whole spans). */
enum { PHILOX_GROUPS = 4 };
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
static size_t blocks_avx512(uint64_t seed, uint32_t stream, uint32_t step, uint64_t b,
                            size_t nblk, uint8_t *out)
{
  const __m512i lanes = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53u), m1 = _mm512_set1_epi64(0xCD9E8D57u);
  const __m512i lo32 = _mm512_set1_epi64(0xffffffffu);
  const __m512i first = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
  const __m512i second = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  enum { G = PHILOX_GROUPS, SPAN = 8 * PHILOX_GROUPS };
  __m512i ks0[10], ks1[10];
  uint32_t k0 = (uint32_t) seed, k1 = (uint32_t) (seed >> 32);
  for (int r = 0; r < 10; r++) {
    ks0[r] = _mm512_set1_epi64(k0);
    ks1[r] = _mm512_set1_epi64(k1);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  const __m512i vstep = _mm512_set1_epi64(step), vstream = _mm512_set1_epi64(stream);
  size_t j = 0;
  for (; j + SPAN <= nblk && (b + j) >> 32 == (b + j + SPAN - 1) >> 32; j += SPAN) {
    /* group g holds blocks b + j + 8 g .. + 7; c0..c3 its counter words */
    __m512i c0[G], c1[G], c2[G], c3[G];
    const __m512i base = _mm512_add_epi64(_mm512_set1_epi64((uint32_t) (b + j)), lanes);
    const __m512i hi = _mm512_set1_epi64((uint32_t) ((b + j) >> 32));
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
      c0[g] = _mm512_add_epi64(base, _mm512_set1_epi64(8 * g));
      c1[g] = hi;
      c2[g] = vstep;
      c3[g] = vstream;
    }
#pragma GCC unroll 10
    for (int r = 0; r < 10; r++) {
#pragma GCC unroll 4
      for (int g = 0; g < G; g++) {
        __m512i p0 = _mm512_mul_epu32(c0[g], m0), p1 = _mm512_mul_epu32(c2[g], m1);
        c0[g] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), c1[g], ks0[r], 0x96);
        c2[g] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), c3[g], ks1[r], 0x96);
        c1[g] = p1;
        c3[g] = p0;
      }
    }
    /* words 0,1 and 2,3 of each block as one 64-bit lane, then blocks in
     * order: the first four lanes of a group, then the last four */
    uint8_t *o = out + 16 * j;
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
      __m512i A = _mm512_ternarylogic_epi64(c0[g], lo32, _mm512_slli_epi64(c1[g], 32), 0xEA);
      __m512i B = _mm512_ternarylogic_epi64(c2[g], lo32, _mm512_slli_epi64(c3[g], 32), 0xEA);
      _mm512_storeu_si512((void *) (o + 128 * g), _mm512_permutex2var_epi64(A, first, B));
      _mm512_storeu_si512((void *) (o + 128 * g + 64),
                          _mm512_permutex2var_epi64(A, second, B));
    }
  }
  return j;
}

/* AVX2: one block per 32-bit lane; lane 4L + j (L = 128-bit lane)
 * computes block 2j + L, so that the in-lane unpack transpose at the end
 * leaves whole blocks in stream order. */
__attribute__((target("avx2")))
static size_t blocks_avx2(uint64_t seed, uint32_t stream, uint32_t step, uint64_t b,
                          size_t nblk, uint8_t *out)
{
  const __m256i lanes = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i m0 = _mm256_set1_epi32((int) 0xD2511F53u);
  const __m256i m1 = _mm256_set1_epi32((int) 0xCD9E8D57u);
  size_t j = 0;
  for (; j + 8 <= nblk && (b + j) >> 32 == (b + j + 7) >> 32; j += 8) {
    __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32((int) (uint32_t) (b + j)), lanes);
    __m256i c1 = _mm256_set1_epi32((int) (uint32_t) ((b + j) >> 32));
    __m256i c2 = _mm256_set1_epi32((int) step), c3 = _mm256_set1_epi32((int) stream);
    uint32_t k0 = (uint32_t) seed, k1 = (uint32_t) (seed >> 32);
    for (int r = 0; r < 10; r++) {
      __m256i e0 = _mm256_mul_epu32(c0, m0), o0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
      __m256i e1 = _mm256_mul_epu32(c2, m1), o1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
      __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
      __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
      __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
      __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
      c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int) k0));
      c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int) k1));
      c1 = lo1;
      c3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    __m256i A = _mm256_unpacklo_epi32(c0, c1), B = _mm256_unpackhi_epi32(c0, c1);
    __m256i C = _mm256_unpacklo_epi32(c2, c3), D = _mm256_unpackhi_epi32(c2, c3);
    uint8_t *o = out + 16 * j;
    _mm256_storeu_si256((__m256i *) o, _mm256_unpacklo_epi64(A, C));
    _mm256_storeu_si256((__m256i *) (o + 32), _mm256_unpackhi_epi64(A, C));
    _mm256_storeu_si256((__m256i *) (o + 64), _mm256_unpacklo_epi64(B, D));
    _mm256_storeu_si256((__m256i *) (o + 96), _mm256_unpackhi_epi64(B, D));
  }
  return j;
}
#endif

void gc__philox_blocks(int isa, uint64_t seed, uint32_t stream, uint32_t step, uint64_t b,
                       size_t nblk, void *out)
{
  uint8_t *o = out;
  size_t done = 0;
#ifdef HAVE_RNG_PATHS
  if (isa >= GC__ISA_AVX512)
    done = blocks_avx512(seed, stream, step, b, nblk, o);
  else if (isa >= GC__ISA_AVX2)
    done = blocks_avx2(seed, stream, step, b, nblk, o);
#else
  (void) isa;
#endif
  blocks_scalar(seed, stream, step, b + done, nblk - done, o + 16 * done);
}

void gc__rng_words(uint64_t seed, uint32_t stream, uint32_t step, uint64_t first,
                   size_t m, uint32_t *out)
{
  /* a partial first block, whole blocks, a partial last block */
  size_t c = 0;
  for (; c < m && (first + c) % 4; c++)
    out[c] = gc_rng_u32(seed, stream, step, first + c);
  size_t nblk = (m - c) / 4;
  gc__philox_blocks(gc__isa(), seed, stream, step, (first + c) / 4, nblk, out + c);
  for (c += 4 * nblk; c < m; c++)
    out[c] = gc_rng_u32(seed, stream, step, first + c);
}
