/* rng_words.c -- the 32-bit word stream of the counter RNG in bulk:
 * out[c] = gc_rng_u32(seed, stream, step, first + c), Philox blocks in
 * vector lanes.  Random-K draws one word per index, and at density 0.1 the
 * scalar Philox took a third of its time.  Every path writes the same
 * words (gc_rng.h is the definition); test_sparse checks them against it
 * on each instruction set. */
#include <string.h>

#include "gc_internal.h"
#include "gc_rng.h"

/* Blocks b .. b + nblk - 1, four words each, into out. */
static void blocks_scalar(uint64_t seed, uint32_t stream, uint32_t step, uint64_t b,
                          size_t nblk, uint32_t *out)
{
  for (size_t j = 0; j < nblk; j++) {
    gc_rng4 r = gc_rng_block(seed, stream, step, b + j);
    memcpy(out + 4 * j, r.v, sizeof r.v);
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_RNG_PATHS 1
/* AVX-512: one block per 64-bit lane with each counter word in the low
 * half of its lane, so that vpmuludq gives a round's whole 64-bit product
 * (hi word above, lo word below) and the junk in the high halves is never
 * read; two groups of eight blocks in flight.  The counter's high word is
 * shared by the lanes: a group that straddles 2^32 blocks goes to the
 * scalar loop. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
static size_t blocks_avx512(uint64_t seed, uint32_t stream, uint32_t step, uint64_t b,
                            size_t nblk, uint32_t *out)
{
  const __m512i lanes = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i eight = _mm512_set1_epi64(8);
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53u), m1 = _mm512_set1_epi64(0xCD9E8D57u);
  const __m512i lo32 = _mm512_set1_epi64(0xffffffffu);
  /* words 0,1 of block L (in A) and 2,3 (in B), blocks in order */
  const __m512i first = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
  const __m512i second = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
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
  for (; j + 16 <= nblk && (b + j) >> 32 == (b + j + 15) >> 32; j += 16) {
    __m512i a0 = _mm512_add_epi64(_mm512_set1_epi64((uint32_t) (b + j)), lanes);
    __m512i d0 = _mm512_add_epi64(a0, eight);
    __m512i a1 = _mm512_set1_epi64((uint32_t) ((b + j) >> 32)), d1 = a1;
    __m512i a2 = vstep, d2 = vstep, a3 = vstream, d3 = vstream;
    for (int r = 0; r < 10; r++) {
      __m512i pa0 = _mm512_mul_epu32(a0, m0), pa1 = _mm512_mul_epu32(a2, m1);
      __m512i pd0 = _mm512_mul_epu32(d0, m0), pd1 = _mm512_mul_epu32(d2, m1);
      a0 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(pa1, 32), a1, ks0[r], 0x96);
      a2 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(pa0, 32), a3, ks1[r], 0x96);
      d0 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(pd1, 32), d1, ks0[r], 0x96);
      d2 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(pd0, 32), d3, ks1[r], 0x96);
      a1 = pa1;
      a3 = pa0;
      d1 = pd1;
      d3 = pd0;
    }
    __m512i A = _mm512_ternarylogic_epi64(a0, lo32, _mm512_slli_epi64(a1, 32), 0xEA);
    __m512i B = _mm512_ternarylogic_epi64(a2, lo32, _mm512_slli_epi64(a3, 32), 0xEA);
    __m512i C = _mm512_ternarylogic_epi64(d0, lo32, _mm512_slli_epi64(d1, 32), 0xEA);
    __m512i D = _mm512_ternarylogic_epi64(d2, lo32, _mm512_slli_epi64(d3, 32), 0xEA);
    uint32_t *o = out + 4 * j;
    _mm512_storeu_si512((void *) o, _mm512_permutex2var_epi64(A, first, B));
    _mm512_storeu_si512((void *) (o + 16), _mm512_permutex2var_epi64(A, second, B));
    _mm512_storeu_si512((void *) (o + 32), _mm512_permutex2var_epi64(C, first, D));
    _mm512_storeu_si512((void *) (o + 48), _mm512_permutex2var_epi64(C, second, D));
  }
  return j;
}

/* AVX2: one block per 32-bit lane; lane 4L + j (L = 128-bit lane)
 * computes block 2j + L, so that the in-lane unpack transpose at the end
 * leaves whole blocks in stream order. */
__attribute__((target("avx2")))
static size_t blocks_avx2(uint64_t seed, uint32_t stream, uint32_t step, uint64_t b,
                          size_t nblk, uint32_t *out)
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
    uint32_t *o = out + 4 * j;
    _mm256_storeu_si256((__m256i *) o, _mm256_unpacklo_epi64(A, C));
    _mm256_storeu_si256((__m256i *) (o + 8), _mm256_unpackhi_epi64(A, C));
    _mm256_storeu_si256((__m256i *) (o + 16), _mm256_unpacklo_epi64(B, D));
    _mm256_storeu_si256((__m256i *) (o + 24), _mm256_unpackhi_epi64(B, D));
  }
  return j;
}
#endif

void gc__rng_words(uint64_t seed, uint32_t stream, uint32_t step, uint64_t first,
                   size_t m, uint32_t *out)
{
  /* a partial first block, whole blocks, a partial last block */
  size_t c = 0;
  for (; c < m && (first + c) % 4; c++)
    out[c] = gc_rng_u32(seed, stream, step, first + c);
  uint64_t b = (first + c) / 4;
  size_t nblk = (m - c) / 4, done = 0;
#ifdef HAVE_RNG_PATHS
  int isa = gc__isa();
  if (isa >= GC__ISA_AVX512)
    done = blocks_avx512(seed, stream, step, b, nblk, out + c);
  else if (isa >= GC__ISA_AVX2)
    done = blocks_avx2(seed, stream, step, b, nblk, out + c);
#endif
  blocks_scalar(seed, stream, step, b + done, nblk - done, out + c + 4 * done);
  for (c += 4 * nblk; c < m; c++)
    out[c] = gc_rng_u32(seed, stream, step, first + c);
}
