/* sparse.c -- the sparsifiers: topk, randk, randk-unbiased, threshold,
 * gaussk and dgc (theory.md 2.2-2.6), with float32 and float64 paths
 * generated from sparse_source.c.  Messages use the layout of wire.c.
 *
 * Design notes (why, not what):
 * - Exact top-K avoids sorting n keys: a fixed strided sample of |x| gives a
 *   threshold that admits about 1.05K + 4 sigma candidates; one branch-light pass checks
 *   finiteness and collects those (in index order, so the output comes out
 *   ascending); histograms of the candidates' magnitude keys find the
 *   K-th magnitude, and ties are shared out by index.  When the sample
 *   misleads (too few or too many candidates) a radix select over the whole
 *   vector gives the same answer with no extra memory.
 * - Non-finite input is detected inside the selection pass: every selection
 *   threshold is clamped to the largest finite value, so NaN and Inf always
 *   land among the candidates and are seen there.
 * - Threshold, Gaussian-k and DGC keep the values of what they select as
 *   they scan, so that encoding does not gather x[idx] afterwards, which at
 *   density 0.1 read most of x's cache lines a second time: threshold and
 *   DGC in the message buffer past the largest index section
 *   (gc__wire_stage), to be moved down; float32 Gaussian-k and top-K with
 *   their candidates, whose pieces (one per thread) the encoder takes
 *   where they lie (gc__wire_encode_pieces), as it takes the threads'
 *   staged pieces of threshold and DGC.
 * - At densities of 1/32 and up, the float32 selections write the
 *   message's delta codes themselves (AVX-512): threshold's and DGC's
 *   scans code each block's word of selected entries and write no
 *   indices (scan_codes_f32; on threads each piece codes itself and a
 *   join fixes the pieces' first gaps), on one thread top-K's and
 *   Gaussian-k's filters code what they keep and leave the indices where
 *   they were (keep_codes_isa_f32);
 *   the encoder then writes only the header and the values
 *   (gc__wire_encode_coded), and where another coding wins it takes the
 *   indices back from the scan's bits or from the codes.
 * - Random-K draws K distinct indices with Floyd's algorithm from the
 *   counter RNG keyed by (seed, stream, step, draw number), so the decoder
 *   of randk-unbiased rebuilds them from the step and they are not sent.
 *   The words come in bulk (gc__rng_words), so the sequential part is the
 *   membership test; at K >= n/16 random-K writes its whole message from
 *   the membership bitmap in one pass over it and x (indices ascending,
 *   the coding worked out from the bitmap first), and random-K-unbiased
 *   gathers its values (in draw order) in the loop that draws them.
 * - Workspaces are sized in init; encode and decode never allocate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <float.h>

#include <gsl/gsl_cdf.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_compressor_internal.h"
#include "gc_isa.h"
#include "gc_pairwise.h"
#include "gc_rng_bulk.h"
#include "gc_template.h"
#include "gc_threads.h"
#include "gc_rng.h"
#include "gc_wire.h"

#if defined(__GNUC__) && !defined(__clang__)
/* The selection scans are plain loops that GCC vectorises at -O3 only. */
#pragma GCC optimize("O3")
#endif

enum { KIND_TOPK, KIND_RANDK, KIND_RANDKU, KIND_THRESHOLD, KIND_GAUSSK, KIND_DGC };

enum { TOPK_SAMPLES = 32768, TOPK_MIN_SAMPLES = 1024, TOPK_SLACK = 16384,
       GAUSS_BLOCK = 1024 };

/* How many samples ahead the strided samplers prefetch: 128 took DGC's
 * 250 000 samples of 2.5e7 entries from 0.8 ms (at 32) to 0.5 ms, 256
 * from 0.33-0.36 to 0.27-0.34 ms on a later machine (512 was slower). */
enum { SAMPLE_AHEAD = 256 };
/* Samples worth the threads (top-K takes 32768, DGC up to 1% of n). */
enum { SAMPLE_PAR_MIN = 8192 };
/* Magnitudes worth the threads in the sampled selections (DGC's). */
enum { BUCKETED_PAR_MIN = 1 << 16 };

/* Gaussian-k's pre-threshold, as a fraction of the sampled estimate of its
 * threshold: a sampled sigma is off by well under 1%, so 5% below still
 * admits every entry above the exact threshold while keeping the
 * candidates to about 1.8K for Gaussian data. */
#define GAUSS_MARGIN 0.95

typedef struct sparse_state {
  int kind;
  uint8_t wire;            /* message type byte                          */
  size_t n, k;             /* k resolved (0 for threshold)               */
  double rho;              /* k / n                                      */
  gc_compressor_params p;
  uint32_t *idx;           /* selected indices, idx_cap entries          */
  size_t idx_cap;
  uint32_t *cand;          /* top-K candidates, cand_cap entries         */
  double *mag;             /* cand_cap magnitudes (REAL in the template) */
  size_t cand_cap;
  double *sample;          /* sampled magnitudes, sample_cap entries     */
  size_t sample_cap;
  uint64_t *bits;          /* random-K membership, n bits, kept zero     */
  uint32_t *tmp;           /* random-K radix-sort scratch, k entries     */
  double gauss_z;          /* |Phi^{-1}(rho/2)|                          */
  double *block_sums;      /* Gaussian-k on threads: two per block       */
  size_t dgc_stride;       /* DGC sampling stride (1: every entry)       */
  uint64_t *scan_bits;     /* threshold, DGC: the scan's word per 64 entries */
  size_t last_count;       /* threshold: the last message's entries (speed only) */
} sparse_state;

/* Where the selections write their delta codes themselves (one in
 * CODES_MIN_DENSITY of the entries sent, or more): below it the codes
 * are mostly two bytes and the blocks often empty, and the scans' and
 * filters' extra work cost more than the encoder's pass over the indices
 * saves (DGC 3.9 -> 4.9 ms at density 0.01, n = 2.5e7). */
enum { CODES_MIN_DENSITY = 32 };
static int codes_pay(size_t c, size_t n) { return c * CODES_MIN_DENSITY >= n; }

/* ---- type-independent helpers ------------------------------------------ */

/* Floyd's algorithm: K distinct indices of [0,n), uniform among K-subsets,
 * marked in s->bits (all zero before) and, unless order is NULL, listed
 * there in draw order.  Draw c uses gc_rng_u32(..., c), word c % 4 of
 * Philox block c / 4: target t_c = gc_rng_below(word, J_c + 1) with
 * J_c = n - K + c, kept unless already drawn, and then J_c.  The words and
 * targets come first, in bulk (floyd_targets), or a stretch at a time
 * (random-K's dense draws; random-K-unbiased's floyd_values); the
 * sequential part is then the membership test, whose bitmap (n bits: 3 MB
 * at n = 2.5e7) is beyond L2, so each test prefetches the word a later
 * one needs. */
enum { FLOYD_AHEAD = 24 };

/* Dense draws, K >= n/16: the bitmap is swept rather than touched at K
 * places, and random-K's message comes straight from it. */
static int floyd_dense(const sparse_state *s) { return s->k * 16 >= s->n; }

/* Before dense draws: rewriting the zero bitmap whole brings it into
 * cache, owned, without reading memory (a pass over x has evicted it), so
 * the random tests do not miss to DRAM on first touch (0.8 ms at
 * n = 2.5e7, rho = 0.1). */
static void floyd_warm_bits(sparse_state *s)
{
  if (floyd_dense(s))
    memset(s->bits, 0, (s->n + 63) / 64 * sizeof *s->bits);
}

/* Floyd's rule for one draw: target t unless already drawn, then J,
 * marked in bits; returns the index drawn. */
static inline uint32_t floyd_one(uint64_t *bits, uint32_t t, uint32_t J)
{
  uint32_t v = t;
  if (bits[v >> 6] >> (v & 63) & 1)
    v = J;
  bits[v >> 6] |= (uint64_t) 1 << (v & 63);
  return v;
}

static size_t floyd_below_isa(uint32_t *t, size_t m, uint32_t base);

/* t[i] = gc_rng_below(t[i], base + i) for i < m. */
static void floyd_below(uint32_t *t, size_t m, uint32_t base)
{
  for (size_t i = floyd_below_isa(t, m, base); i < m; i++)
    t[i] = gc_rng_below(t[i], base + (uint32_t) i);
}

/* Floyd's targets of draws c0 .. c0 + m - 1 into t[0, m):
 * t[i] = gc_rng_below(word c0 + i, J + 1), J = n - K + c0 + i. */
static void floyd_targets_at(const sparse_state *s, uint32_t step, size_t c0, size_t m,
                             uint32_t *t)
{
  gc__rng_words(s->p.seed, s->p.stream, step, c0, m, t);
  floyd_below(t, m, (uint32_t) (s->n - s->k + c0 + 1));
}

/* All K targets, with the bitmap made ready for the loop that tests them. */
static void floyd_targets(sparse_state *s, uint32_t step, uint32_t *t)
{
  floyd_targets_at(s, step, 0, s->k, t);
  floyd_warm_bits(s);
}

/* Floyd's rule on m draws whose targets are t[0, m) and whose J's are
 * jlow + i, the draws before them done: into order unless it is NULL (t
 * itself may be order).  floyd_blocks_isa does whole blocks of dense
 * draws on the chosen instruction set, in place in t, and returns where
 * it stopped (so only where order is NULL or t; sparse draws go one at a
 * time: their bitmap is mostly out of cache either way, and blocks were
 * no faster). */
static size_t floyd_blocks_isa(uint64_t *bits, uint32_t *t, size_t lo, size_t hi,
                               uint32_t jlow);

static void floyd_draws(uint64_t *bits, uint32_t *t, size_t m, uint32_t jlow, int dense,
                        uint32_t *order)
{
  size_t c = dense && (!order || order == t) ? floyd_blocks_isa(bits, t, 0, m, jlow) : 0;
  for (; c < m; c++) {
    if (c + FLOYD_AHEAD < m)
      __builtin_prefetch(bits + (t[c + FLOYD_AHEAD] >> 6), 1);
    uint32_t v = floyd_one(bits, t[c], jlow + (uint32_t) c);
    if (order)
      order[c] = v;
  }
}

/* Random-K's dense draws, which need no order, make their targets a
 * stretch at a time, so that they stay in cache: all K of them went out to
 * memory and back (10 MB at K = 2.5e6). */
enum { FLOYD_STRETCH = 4096 };

/* On two threads the second makes the targets of the next stage while
 * the first draws this one's, in two halves of s->tmp in turn: Floyd's
 * rule is one draw after another, but its random words need not be
 * (their Philox blocks were 0.6 of random-K's 5.9 ms at K = 2.5e6,
 * n = 2.5e7).  The same targets, so the same draws. */
enum { FLOYD_STAGE = 1 << 15 };

#ifdef _OPENMP
/* The stage of FLOYD_STAGE draws from c0: its length. */
static size_t floyd_stage_len(const sparse_state *s, size_t c0)
{
  return s->k - c0 < FLOYD_STAGE ? s->k - c0 : FLOYD_STAGE;
}

static void floyd_dense_staged(sparse_state *s, uint32_t step)
{
  size_t jlow = s->n - s->k, stages = (s->k + FLOYD_STAGE - 1) / FLOYD_STAGE;
  #pragma omp parallel num_threads(2)
  {
    int me = omp_get_thread_num(), maker = omp_get_num_threads() - 1;
    for (size_t i = 0; i <= stages; i++) {
      if (me == maker && i < stages)
        floyd_targets_at(s, step, i * FLOYD_STAGE, floyd_stage_len(s, i * FLOYD_STAGE),
                         s->tmp + i % 2 * FLOYD_STAGE);
      if (me == 0 && i > 0) {
        size_t c0 = (i - 1) * FLOYD_STAGE;
        floyd_draws(s->bits, s->tmp + (i - 1) % 2 * FLOYD_STAGE, floyd_stage_len(s, c0),
                    (uint32_t) (jlow + c0), 1, NULL);
      }
      #pragma omp barrier
    }
  }
}
#else   /* floyd() calls it only where there are threads */
static void floyd_dense_staged(sparse_state *s, uint32_t step)
{
  (void) s; (void) step;
}
#endif

static void floyd(sparse_state *s, uint32_t step, uint32_t *order)
{
  size_t n = s->n, k = s->k;
  int dense = floyd_dense(s);
  if (dense && !order) {
    floyd_warm_bits(s);
    if (gc__threads_for(k, 2 * FLOYD_STAGE, 2) == 2) {
      floyd_dense_staged(s, step);
      return;
    }
    for (size_t c0 = 0; c0 < k; c0 += FLOYD_STRETCH) {
      size_t m = k - c0 < FLOYD_STRETCH ? k - c0 : FLOYD_STRETCH;
      floyd_targets_at(s, step, c0, m, s->tmp);
      floyd_draws(s->bits, s->tmp, m, (uint32_t) (n - k + c0), 1, NULL);
    }
    return;
  }
  /* sparse draws: the targets in s->tmp, where the radix sort after them
   * (floyd_sort) finds its scratch in cache (in place in order, random-K
   * at density 0.01 took 7% longer) */
  uint32_t *t = order && dense ? order : s->tmp;
  floyd_targets(s, step, t);
  floyd_draws(s->bits, t, k, (uint32_t) (n - k), dense, order);
}

static void floyd_clear(sparse_state *s)
{
  if (floyd_dense(s)) {   /* a sweep beats K scattered writes */
    memset(s->bits, 0, (s->n + 63) / 64 * sizeof *s->bits);
    return;
  }
  for (size_t j = 0; j < s->k; j++)
    s->bits[s->idx[j] >> 6] = 0;
}

/* Leave s->idx ascending and s->bits zero. */
static void floyd_sort(sparse_state *s)
{
  size_t n = s->n, k = s->k;
  if (floyd_dense(s)) {   /* walking the bitmap beats sorting */
    size_t c = 0;
    for (size_t w = 0; w < (n + 63) / 64; w++) {
      for (uint64_t b = s->bits[w]; b; b &= b - 1)
        s->idx[c++] = (uint32_t) (64 * w + (size_t) __builtin_ctzll(b));
      s->bits[w] = 0;
    }
    return;
  }
  floyd_clear(s);
  /* LSD radix sort, 11-bit digits */
  uint32_t *a = s->idx, *b = s->tmp;
  for (int sh = 0; sh < 33; sh += 11) {
    size_t cnt[2048] = {0};
    for (size_t j = 0; j < k; j++)
      cnt[(a[j] >> sh) & 2047]++;
    size_t sum = 0;
    for (size_t d = 0; d < 2048; d++) {
      size_t c = cnt[d];
      cnt[d] = sum;
      sum += c;
    }
    for (size_t j = 0; j < k; j++)
      b[cnt[(a[j] >> sh) & 2047]++] = a[j];
    uint32_t *t = a;
    a = b;
    b = t;
  }
  /* three passes: the sorted data ended in tmp */
  memcpy(s->idx, a, k * sizeof *a);
}

#if defined(__SSE2__)
#include <emmintrin.h>
/* The full 16-entry groups of gauss_block_sums (sparse_source.c) for
 * float32 with SSE2: the same 16 lanes (lane j of a1 is element j % 4 of
 * vector j / 4), so the result is bit-identical; written out because GCC
 * leaves the generic loop scalar, at a third of the streaming bandwidth.
 * Returns where the groups end. */
static size_t gauss_groups_sse2(const float *x, size_t lo, size_t hi,
                                float c0, float t0, float l1[16],
                                float l2[16], uint32_t *cand, float *cval,
                                size_t cap, size_t *c)
{
  const __m128 shift = _mm_set1_ps(c0), limit = _mm_set1_ps(t0);
  const __m128 absmask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  __m128 a1[4], a2[4];
  for (int v = 0; v < 4; v++)
    a1[v] = a2[v] = _mm_setzero_ps();
  size_t i = lo;
  for (; i + 16 <= hi; i += 16) {
    unsigned over = 0;
    for (int v = 0; v < 4; v++) {
      __m128 xv = _mm_loadu_ps(x + i + 4 * v), d = _mm_sub_ps(xv, shift);
      a1[v] = _mm_add_ps(a1[v], d);
      a2[v] = _mm_add_ps(a2[v], _mm_mul_ps(d, d));
      /* !(|x| <= t0): above t0, or NaN */
      over |= (unsigned) _mm_movemask_ps(
                  _mm_cmpnle_ps(_mm_and_ps(xv, absmask), limit)) << (4 * v);
    }
    for (; over; over &= over - 1)
      if ((*c)++ < cap) {
        cand[*c - 1] = (uint32_t) (i + (size_t) __builtin_ctz(over));
        cval[*c - 1] = x[i + (size_t) __builtin_ctz(over)];
      }
  }
  for (int v = 0; v < 4; v++) {
    _mm_storeu_ps(l1 + 4 * v, a1[v]);
    _mm_storeu_ps(l2 + 4 * v, a2[v]);
  }
  return i;
}
#endif

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
/* The same groups with the sixteen lanes in one AVX-512 register (lane j
 * takes entry 16q + j, as above), and in two AVX2 registers: the same
 * IEEE operations per lane in the same order (mul and add apart, never
 * fused), so the sums are bit-identical; candidates appended by compress
 * (AVX-512) or in mask order. */
enum { GAUSS_AHEAD = 1024 };
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,popcnt")))
static size_t gauss_groups_avx512(const float *x, size_t from, size_t lo, size_t hi,
                                  float c0, float t0, float l1[16], float l2[16],
                                  uint32_t *cand, float *cval, size_t cap, size_t *c)
{
  const __m512 shift = _mm512_set1_ps(c0), limit = _mm512_set1_ps(t0);
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps();
  /* The sums first, with each group's mask kept and a bit per group that
   * has a candidate; the candidates after, group by group from the set
   * bits (the block is in L1).  A branch per group on its mask was
   * mispredicted at every sixth group at density 0.01. */
  _Static_assert(GAUSS_BLOCK / 16 <= 64, "one bit per group of the block");
  __mmask16 masks[GAUSS_BLOCK / 16];
  uint64_t nonempty = 0;
  size_t i = lo;
  if (*c * 16 > lo - from && *c + (hi - lo) <= cap) {
    /* where the candidates so far in this run (from entry `from`) are
     * dense (more than one in sixteen entries: most groups have one) the
     * appends go with the sums, with no branch and no second pass (a
     * quarter fewer instructions, and this pass is bound by them at
     * density 0.1) */
    for (; i + 16 <= hi; i += 16) {
      _mm_prefetch((const char *) ((uintptr_t) (x + i) + 4 * GAUSS_AHEAD), _MM_HINT_T0);
      __m512 xv = _mm512_loadu_ps(x + i), d = _mm512_sub_ps(xv, shift);
      a1 = _mm512_add_ps(a1, d);
      a2 = _mm512_add_ps(a2, _mm512_mul_ps(d, d));
      __mmask16 over = _mm512_cmp_ps_mask(
          _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(xv), absmask)), limit,
          _CMP_NLE_UQ);
      __m512i iv = _mm512_add_epi32(_mm512_set1_epi32((int) i), lane);
      _mm512_storeu_si512((void *) (cand + *c), _mm512_maskz_compress_epi32(over, iv));
      _mm512_storeu_ps(cval + *c, _mm512_maskz_compress_ps(over, xv));
      *c += (size_t) __builtin_popcount(over);
    }
    _mm512_storeu_ps(l1, a1);
    _mm512_storeu_ps(l2, a2);
    return i;
  }
  for (unsigned g = 0; i + 16 <= hi; i += 16, g++) {
    /* a hint (never faults), computed as an integer: past x's end near it */
    _mm_prefetch((const char *) ((uintptr_t) (x + i) + 4 * GAUSS_AHEAD), _MM_HINT_T0);
    __m512 xv = _mm512_loadu_ps(x + i), d = _mm512_sub_ps(xv, shift);
    a1 = _mm512_add_ps(a1, d);
    a2 = _mm512_add_ps(a2, _mm512_mul_ps(d, d));
    masks[g] = _mm512_cmp_ps_mask(
        _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(xv), absmask)), limit,
        _CMP_NLE_UQ);
    nonempty |= (uint64_t) (masks[g] != 0) << g;
  }
  for (; nonempty; nonempty &= nonempty - 1) {
    unsigned g = (unsigned) __builtin_ctzll(nonempty);
    size_t at = lo + 16 * (size_t) g;
    __mmask16 over = masks[g];
    if (*c + 16 <= cap) {
      __m512i iv = _mm512_add_epi32(_mm512_set1_epi32((int) at), lane);
      _mm512_storeu_si512((void *) (cand + *c), _mm512_maskz_compress_epi32(over, iv));
      _mm512_storeu_ps(cval + *c, _mm512_maskz_compress_ps(over, _mm512_loadu_ps(x + at)));
      *c += (size_t) __builtin_popcount(over);
    } else {
      for (unsigned m = over; m; m &= m - 1)
        if ((*c)++ < cap) {
          cand[*c - 1] = (uint32_t) (at + (size_t) __builtin_ctz(m));
          cval[*c - 1] = x[at + (size_t) __builtin_ctz(m)];
        }
    }
  }
  _mm512_storeu_ps(l1, a1);
  _mm512_storeu_ps(l2, a2);
  return i;
}

__attribute__((target("avx2,popcnt")))
static size_t gauss_groups_avx2(const float *x, size_t lo, size_t hi, float c0,
                                float t0, float l1[16], float l2[16], uint32_t *cand,
                                float *cval, size_t cap, size_t *c)
{
  const __m256 shift = _mm256_set1_ps(c0), limit = _mm256_set1_ps(t0);
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 a1[2], a2[2];
  for (int v = 0; v < 2; v++)
    a1[v] = a2[v] = _mm256_setzero_ps();
  size_t i = lo;
  for (; i + 16 <= hi; i += 16) {
    unsigned over = 0;
    for (int v = 0; v < 2; v++) {
      __m256 xv = _mm256_loadu_ps(x + i + 8 * v), d = _mm256_sub_ps(xv, shift);
      a1[v] = _mm256_add_ps(a1[v], d);
      a2[v] = _mm256_add_ps(a2[v], _mm256_mul_ps(d, d));
      over |= (unsigned) _mm256_movemask_ps(
                  _mm256_cmp_ps(_mm256_and_ps(xv, absmask), limit, _CMP_NLE_UQ)) << (8 * v);
    }
    for (; over; over &= over - 1)
      if ((*c)++ < cap) {
        cand[*c - 1] = (uint32_t) (i + (size_t) __builtin_ctz(over));
        cval[*c - 1] = x[i + (size_t) __builtin_ctz(over)];
      }
  }
  for (int v = 0; v < 2; v++) {
    _mm256_storeu_ps(l1 + 8 * v, a1[v]);
    _mm256_storeu_ps(l2 + 8 * v, a2[v]);
  }
  return i;
}
#define HAVE_GAUSS_PATHS 1
#endif

/* Gaussian-k's groups on the chosen instruction set (sparse_source.c's
 * loop takes them where there is none); *c counts the candidates of the
 * run of blocks that started at from. */
static size_t gauss_groups_f32(const float *x, size_t from, size_t lo, size_t hi, float c0,
                               float t0, float l1[16], float l2[16], uint32_t *cand,
                               float *cval, size_t cap, size_t *c)
{
#ifdef HAVE_GAUSS_PATHS
  int isa = gc__isa();
  if (isa >= GC__ISA_AVX512)
    return gauss_groups_avx512(x, from, lo, hi, c0, t0, l1, l2, cand, cval, cap, c);
  if (isa >= GC__ISA_AVX2)
    return gauss_groups_avx2(x, lo, hi, c0, t0, l1, l2, cand, cval, cap, c);
#endif
#if defined(__SSE2__)
  return gauss_groups_sse2(x, lo, hi, c0, t0, l1, l2, cand, cval, cap, c);
#else
  (void) x; (void) from; (void) hi; (void) c0; (void) t0; (void) l1; (void) l2;
  (void) cand; (void) cval; (void) cap; (void) c;
  return lo;
#endif
}
#define GAUSS_GROUPS gauss_groups_f32

/* ---- float32 scans and top-K, dispatched (isa.c) -------------------------
 * The selection scans append, in index order, every i with !(|x_i| <= t)
 * (and, where asked, x_i itself) and stop at the first non-finite entry;
 * the top-K filter keeps the candidates above the K-th magnitude and the
 * tied ones by rank.  These are exact selections: the AVX-512 (compress),
 * AVX2 (permute by a table) and SSE2 (bit loop) paths write the same
 * arrays, which test_sparse checks by forcing each (gc__isa_force). */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_SCAN_PATHS 1
#define TARGET_AVX2 __attribute__((target("avx2,popcnt")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,popcnt")))
#endif

#ifdef HAVE_SCAN_PATHS
/* Floyd's draws sixteen at a time (dense draws).  One at a time, each
 * test read a word that the store before it might have written, to an
 * address the test before chose; here the sixteen words are gathered
 * before any of the sixteen bits is set, which is Floyd's rule when no
 * draw of the block equals another or one of the block's own J's (checked
 * with vpconflictd and a compare; such a block, about one in 10^5 at
 * density 0.1, goes one draw at a time).  A set bit then gives J_c, whose
 * bits for the block are set together.  At n = 2.5e7, K = 2.5e6: 3.2 ms ->
 * 2.6 ms; at K = n/2, 41 -> 12 ms (the repeat branch no longer
 * mispredicts). */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd")))
static size_t floyd_avx512(uint64_t *bits, uint32_t *t, size_t c, size_t hi, uint32_t jlow)
{
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m256i m63 = _mm256_set1_epi32(63);
  const __m512i one = _mm512_set1_epi64(1);
  for (; c + 16 <= hi; c += 16) {
    if (c + FLOYD_AHEAD + 16 <= hi)
      for (int j = 0; j < 16; j++)
        __builtin_prefetch(bits + (t[c + FLOYD_AHEAD + j] >> 6), 1);
    uint32_t j0 = jlow + (uint32_t) c;
    __m512i v = _mm512_loadu_si512((const void *) (t + c)), conf = _mm512_conflict_epi32(v);
    __mmask16 own_j = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(v, _mm512_set1_epi32((int) j0)),
                                              _mm512_set1_epi32(16));
    if (_mm512_test_epi32_mask(conf, conf) | own_j) {
      for (size_t d = c; d < c + 16; d++)
        t[d] = floyd_one(bits, t[d], jlow + (uint32_t) d);
      continue;
    }
    __m256i v0 = _mm512_castsi512_si256(v), v1 = _mm512_extracti64x4_epi64(v, 1);
    __m512i g0 = _mm512_i32gather_epi64(_mm256_srli_epi32(v0, 6), (const void *) bits, 8);
    __m512i g1 = _mm512_i32gather_epi64(_mm256_srli_epi32(v1, 6), (const void *) bits, 8);
    __m512i s0 = _mm512_cvtepu32_epi64(_mm256_and_si256(v0, m63));
    __m512i s1 = _mm512_cvtepu32_epi64(_mm256_and_si256(v1, m63));
    uint32_t hits = (uint32_t) _mm512_test_epi64_mask(_mm512_srlv_epi64(g0, s0), one)
                    | (uint32_t) _mm512_test_epi64_mask(_mm512_srlv_epi64(g1, s1), one) << 8;
    for (int j = 0; j < 16; j++)   /* a hit's bit is set already: no harm */
      bits[t[c + j] >> 6] |= (uint64_t) 1 << (t[c + j] & 63);
    if (hits) {
      unsigned sh = j0 & 63;
      bits[j0 >> 6] |= (uint64_t) hits << sh;
      if (sh > 48)
        bits[(j0 >> 6) + 1] |= (uint64_t) hits >> (64 - sh);
      _mm512_storeu_si512((void *) (t + c),
                          _mm512_mask_blend_epi32((__mmask16) hits, v,
                                                  _mm512_add_epi32(_mm512_set1_epi32((int) j0),
                                                                   lane)));
    }
  }
  return c;
}
#endif

#ifdef HAVE_SCAN_PATHS
/* floyd_targets' gc_rng_below(t[c], base + c) sixteen at a time (GCC
 * left the loop in SSE2, 0.5 ms at K = 2.5e6): the even lanes' products,
 * shifted down, and the odd lanes' high halves. */
TARGET_AVX512 static size_t floyd_below_avx512(uint32_t *t, size_t m, uint32_t base)
{
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  size_t c = 0;
  for (; c + 16 <= m; c += 16) {
    __m512i u = _mm512_loadu_si512((const void *) (t + c));
    __m512i bound = _mm512_add_epi32(_mm512_set1_epi32((int) (base + (uint32_t) c)), lane);
    __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(u, bound), 32);
    __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(u, 32), _mm512_srli_epi64(bound, 32));
    _mm512_storeu_si512((void *) (t + c), _mm512_mask_blend_epi32(0xAAAA, even, odd));
  }
  return c;
}
#endif

static size_t floyd_below_isa(uint32_t *t, size_t m, uint32_t base)
{
#ifdef HAVE_SCAN_PATHS
  if (gc__isa() >= GC__ISA_AVX512)
    return floyd_below_avx512(t, m, base);
#endif
  (void) t; (void) m; (void) base;
  return 0;
}

static size_t floyd_blocks_isa(uint64_t *bits, uint32_t *t, size_t lo, size_t hi,
                               uint32_t jlow)
{
#ifdef HAVE_SCAN_PATHS
  if (gc__isa() >= GC__ISA_AVX512 && __builtin_cpu_supports("avx512cd"))
    return floyd_avx512(bits, t, lo, hi, jlow);
#endif
  (void) bits; (void) t; (void) hi; (void) jlow;
  return lo;
}

/* Entries [i, hi) one at a time: append as above, up to cap stored, *c
 * counting all; returns 1 (with *bad) at a non-finite entry. */
static inline int scan_run_f32(const float *x, size_t i, size_t hi, float t,
                               uint32_t *idx, float *val, size_t cap, size_t *c,
                               size_t *bad, size_t base)
{
  for (; i < hi; i++) {
    float a = fabsf(x[i]);
    if (!(a <= t)) {
      if (!(a <= FLT_MAX)) {
        *bad = i;
        return 1;
      }
      if (*c < cap) {
        idx[*c] = (uint32_t) (base + i);
        if (val)
          val[*c] = x[i];
      }
      (*c)++;
    }
  }
  return 0;
}

/* SSE2 (any x86-64; elsewhere plain C): a mask per 16 entries, its set
 * bits appended in order. */
/* The vector scans compare magnitude keys (the bit pattern without the
 * sign) as signed integers: key > scan_key(t) <=> !(|x| <= t), NaN and Inf
 * included (their keys are above every finite one); every key passes a
 * negative t. */
static int32_t scan_key_f32(float t)
{
  if (t < 0)
    return -1;
  int32_t k;
  memcpy(&k, &t, sizeof k);
  return k;
}

/* Whether x[0, m) is finite (a block with a selected entry is checked
 * before the vector append). */
static int scan_finite_f32(const float *x, size_t m)
{
  unsigned bad = 0;
  for (size_t j = 0; j < m; j++) {
    uint32_t b;
    memcpy(&b, x + j, sizeof b);
    bad |= (b & 0x7f800000u) == 0x7f800000u;
  }
  return !bad;
}

static size_t scan_sse2_f32(const float *x, size_t n, float t, uint32_t *idx,
                            float *val, size_t cap, size_t *bad, size_t base)
{
  size_t c = 0, i = 0;
#if defined(__SSE2__)
  const __m128i limit = _mm_set1_epi32(scan_key_f32(t)), absmask = _mm_set1_epi32(0x7fffffff);
  for (; i + 16 <= n; i += 16) {
    unsigned over = 0;
    for (int v = 0; v < 4; v++) {
      __m128i a = _mm_and_si128(_mm_loadu_si128((const __m128i *) (x + i + 4 * v)), absmask);
      over |= (unsigned) _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(a, limit))) << (4 * v);
    }
    if (!over)
      continue;
    if (c + 16 > cap || !scan_finite_f32(x + i, 16)) {
      if (scan_run_f32(x, i, i + 16, t, idx, val, cap, &c, bad, base))
        return c;
      continue;
    }
    for (; over; over &= over - 1) {
      size_t j = i + (size_t) __builtin_ctz(over);
      idx[c] = (uint32_t) (base + j);
      if (val)
        val[c] = x[j];
      c++;
    }
  }
#endif
  if (scan_run_f32(x, i, n, t, idx, val, cap, &c, bad, base))
    return c;
  *bad = SIZE_MAX;
  return c;
}

#ifdef HAVE_SCAN_PATHS
/* Lane numbers of the set bits of an 8-bit mask, in order, a nibble each:
 * the permutation that packs the selected lanes to the front (AVX2 has no
 * compress instruction). */
static const uint32_t pack_lanes[256] = {
  0x00000000, 0x00000000, 0x00000001, 0x00000010, 0x00000002, 0x00000020,
  0x00000021, 0x00000210, 0x00000003, 0x00000030, 0x00000031, 0x00000310,
  0x00000032, 0x00000320, 0x00000321, 0x00003210, 0x00000004, 0x00000040,
  0x00000041, 0x00000410, 0x00000042, 0x00000420, 0x00000421, 0x00004210,
  0x00000043, 0x00000430, 0x00000431, 0x00004310, 0x00000432, 0x00004320,
  0x00004321, 0x00043210, 0x00000005, 0x00000050, 0x00000051, 0x00000510,
  0x00000052, 0x00000520, 0x00000521, 0x00005210, 0x00000053, 0x00000530,
  0x00000531, 0x00005310, 0x00000532, 0x00005320, 0x00005321, 0x00053210,
  0x00000054, 0x00000540, 0x00000541, 0x00005410, 0x00000542, 0x00005420,
  0x00005421, 0x00054210, 0x00000543, 0x00005430, 0x00005431, 0x00054310,
  0x00005432, 0x00054320, 0x00054321, 0x00543210, 0x00000006, 0x00000060,
  0x00000061, 0x00000610, 0x00000062, 0x00000620, 0x00000621, 0x00006210,
  0x00000063, 0x00000630, 0x00000631, 0x00006310, 0x00000632, 0x00006320,
  0x00006321, 0x00063210, 0x00000064, 0x00000640, 0x00000641, 0x00006410,
  0x00000642, 0x00006420, 0x00006421, 0x00064210, 0x00000643, 0x00006430,
  0x00006431, 0x00064310, 0x00006432, 0x00064320, 0x00064321, 0x00643210,
  0x00000065, 0x00000650, 0x00000651, 0x00006510, 0x00000652, 0x00006520,
  0x00006521, 0x00065210, 0x00000653, 0x00006530, 0x00006531, 0x00065310,
  0x00006532, 0x00065320, 0x00065321, 0x00653210, 0x00000654, 0x00006540,
  0x00006541, 0x00065410, 0x00006542, 0x00065420, 0x00065421, 0x00654210,
  0x00006543, 0x00065430, 0x00065431, 0x00654310, 0x00065432, 0x00654320,
  0x00654321, 0x06543210, 0x00000007, 0x00000070, 0x00000071, 0x00000710,
  0x00000072, 0x00000720, 0x00000721, 0x00007210, 0x00000073, 0x00000730,
  0x00000731, 0x00007310, 0x00000732, 0x00007320, 0x00007321, 0x00073210,
  0x00000074, 0x00000740, 0x00000741, 0x00007410, 0x00000742, 0x00007420,
  0x00007421, 0x00074210, 0x00000743, 0x00007430, 0x00007431, 0x00074310,
  0x00007432, 0x00074320, 0x00074321, 0x00743210, 0x00000075, 0x00000750,
  0x00000751, 0x00007510, 0x00000752, 0x00007520, 0x00007521, 0x00075210,
  0x00000753, 0x00007530, 0x00007531, 0x00075310, 0x00007532, 0x00075320,
  0x00075321, 0x00753210, 0x00000754, 0x00007540, 0x00007541, 0x00075410,
  0x00007542, 0x00075420, 0x00075421, 0x00754210, 0x00007543, 0x00075430,
  0x00075431, 0x00754310, 0x00075432, 0x00754320, 0x00754321, 0x07543210,
  0x00000076, 0x00000760, 0x00000761, 0x00007610, 0x00000762, 0x00007620,
  0x00007621, 0x00076210, 0x00000763, 0x00007630, 0x00007631, 0x00076310,
  0x00007632, 0x00076320, 0x00076321, 0x00763210, 0x00000764, 0x00007640,
  0x00007641, 0x00076410, 0x00007642, 0x00076420, 0x00076421, 0x00764210,
  0x00007643, 0x00076430, 0x00076431, 0x00764310, 0x00076432, 0x00764320,
  0x00764321, 0x07643210, 0x00000765, 0x00007650, 0x00007651, 0x00076510,
  0x00007652, 0x00076520, 0x00076521, 0x00765210, 0x00007653, 0x00076530,
  0x00076531, 0x00765310, 0x00076532, 0x00765320, 0x00765321, 0x07653210,
  0x00007654, 0x00076540, 0x00076541, 0x00765410, 0x00076542, 0x00765420,
  0x00765421, 0x07654210, 0x00076543, 0x00765430, 0x00765431, 0x07654310,
  0x00765432, 0x07654320, 0x07654321, 0x76543210,
};

TARGET_AVX2 static size_t scan_avx2_f32(const float *x, size_t n, float t,
                                        uint32_t *idx, float *val, size_t cap,
                                        size_t *bad, size_t base)
{
  const __m256i limit = _mm256_set1_epi32(scan_key_f32(t));
  const __m256i big = _mm256_set1_epi32(0x7f7fffff), absmask = _mm256_set1_epi32(0x7fffffff);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i nib = _mm256_set1_epi32(15);
  size_t c = 0, i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i xv[4], a[4];
    unsigned m[4], any = 0;
    for (int v = 0; v < 4; v++) {
      xv[v] = _mm256_loadu_si256((const __m256i *) (x + i + 8 * v));
      a[v] = _mm256_and_si256(xv[v], absmask);
      m[v] = (unsigned) _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(a[v], limit)));
      any |= m[v];
    }
    if (!any)
      continue;
    __m256i nonfinite = _mm256_or_si256(
        _mm256_or_si256(_mm256_cmpgt_epi32(a[0], big), _mm256_cmpgt_epi32(a[1], big)),
        _mm256_or_si256(_mm256_cmpgt_epi32(a[2], big), _mm256_cmpgt_epi32(a[3], big)));
    if (!_mm256_testz_si256(nonfinite, nonfinite) || c + 32 > cap) {
      if (scan_run_f32(x, i, i + 32, t, idx, val, cap, &c, bad, base))
        return c;
      continue;
    }
    for (int v = 0; v < 4; v++) {
      if (!m[v])
        continue;
      __m256i perm = _mm256_and_si256(
          _mm256_srlv_epi32(_mm256_set1_epi32((int) pack_lanes[m[v]]), shifts), nib);
      __m256i iv = _mm256_add_epi32(_mm256_set1_epi32((int) (base + i + 8 * (size_t) v)), perm);
      _mm256_storeu_si256((__m256i *) (idx + c), iv);
      if (val)
        _mm256_storeu_si256((__m256i *) (val + c), _mm256_permutevar8x32_epi32(xv[v], perm));
      c += (size_t) __builtin_popcount(m[v]);
    }
  }
  if (scan_run_f32(x, i, n, t, idx, val, cap, &c, bad, base))
    return c;
  *bad = SIZE_MAX;
  return c;
}

/* x is prefetched 8 KiB ahead: with the stores of indices and values in
 * flight the hardware prefetcher fell behind, and the scan took twice a
 * streaming read of x at density 0.1 (one and a half at 0.01).  4 KiB
 * ahead left top-K at 6.0 ms and threshold at 4.5 at density 0.1, n =
 * 2.5e7 on one thread; 8 KiB took them to 5.1 and 3.9 (16 KiB: no
 * better). */
enum { SCAN_AHEAD = 2048 };
/* The compress instructions write to a register and a full store follows
 * (to memory they are microcoded on some CPUs): 16 entries of room. */
TARGET_AVX512 static size_t scan_avx512_f32(const float *x, size_t n, float t,
                                            uint32_t *idx, float *val, size_t cap,
                                            size_t *bad, size_t base)
{
  const __m512i limit = _mm512_set1_epi32(scan_key_f32(t));
  const __m512i big = _mm512_set1_epi32(0x7f7fffff), absmask = _mm512_set1_epi32(0x7fffffff);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  size_t c = 0, i = 0;
  /* An empty block of 64 is skipped while they are the rule; where more
   * than a quarter of the blocks of the last 2048 entries held some entry
   * the test is dropped: at a density of 1% it is mispredicted half of
   * the time, which cost more than the appends. */
  unsigned full = 0, dense = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i xv[4], a[4];
    __mmask16 m[4];
    if (i + SCAN_AHEAD + 64 <= n)
      for (int v = 0; v < 4; v++)
        _mm_prefetch((const char *) (x + i + SCAN_AHEAD + 16 * v), _MM_HINT_T0);
    for (int v = 0; v < 4; v++) {
      xv[v] = _mm512_loadu_si512((const void *) (x + i + 16 * v));
      a[v] = _mm512_and_si512(xv[v], absmask);
      m[v] = _mm512_cmpgt_epi32_mask(a[v], limit);
    }
    if ((i & 2047) == 0) {
      dense = full > 8;
      full = 0;
    }
    unsigned any = (m[0] | m[1] | m[2] | m[3]) != 0;
    full += any;
    if (!dense && !any)
      continue;
    __mmask16 nonfinite = _mm512_cmpgt_epi32_mask(_mm512_max_epi32(
        _mm512_max_epi32(a[0], a[1]), _mm512_max_epi32(a[2], a[3])), big);
    if (nonfinite || c + 64 > cap) {
      if (scan_run_f32(x, i, i + 64, t, idx, val, cap, &c, bad, base))
        return c;
      continue;
    }
    for (int v = 0; v < 4; v++) {
      __m512i iv = _mm512_add_epi32(_mm512_set1_epi32((int) (base + i + 16 * (size_t) v)), lane);
      _mm512_storeu_si512((void *) (idx + c), _mm512_maskz_compress_epi32(m[v], iv));
      if (val)
        _mm512_storeu_si512((void *) (val + c), _mm512_maskz_compress_epi32(m[v], xv[v]));
      c += (size_t) __builtin_popcount(m[v]);
    }
  }
  if (scan_run_f32(x, i, n, t, idx, val, cap, &c, bad, base))
    return c;
  *bad = SIZE_MAX;
  return c;
}
#endif
/* The scan of the chosen instruction set over x[0, n), which is entry
 * base of the whole vector (indices and *bad are the whole vector's). */
static size_t scan_isa_f32(const float *x, size_t n, float t, uint32_t *idx,
                           float *val, size_t cap, size_t *bad, size_t base)
{
  size_t c;
#ifdef HAVE_SCAN_PATHS
  int isa = gc__isa();
  if (isa >= GC__ISA_AVX512)
    c = scan_avx512_f32(x, n, t, idx, val, cap, bad, base);
  else if (isa >= GC__ISA_AVX2)
    c = scan_avx2_f32(x, n, t, idx, val, cap, bad, base);
  else
#endif
    c = scan_sse2_f32(x, n, t, idx, val, cap, bad, base);
  if (*bad != SIZE_MAX)
    *bad += base;
  return c;
}

/* The scan over the OpenMP threads (the caller's omp_set_num_threads; one
 * inside a parallel region): T contiguous pieces, each appending to its
 * share cap / T of the arrays, left there or moved together
 * (scan_pieces_f32).  The result is the
 * single scan's whatever T is: the first non-finite entry is the one of
 * the first piece that met one, and when a piece outgrows its share (the
 * selected entries crowd into part of x) the scan runs again on one
 * thread. */
enum { SCAN_PAR_MIN = 1 << 18, SCAN_PAR_MAX = 16 };

/* The entries of each threaded scan's piece but the last: a T-th of n
 * rounded up to whole blocks of 64 (the scans' words of selected
 * entries, scan_avx512_f32's), so the pieces never end inside a block.
 * The last piece ends at n, and where the pieces would pass n the later
 * ones are empty.  (n / T rounded down would leave the tail past
 * T * piece, up to 64 T - 1 entries, in no piece, and its entries out of
 * the selection.) */
static size_t scan_piece(size_t n, int T)
{
  return ((n + (size_t) T - 1) / (size_t) T + 63) & ~(size_t) 63;
}
/* the threads' pieces go to the wire's pieces encoders whole */
_Static_assert((int) SCAN_PAR_MAX <= (int) GC__WIRE_PIECES_MAX, "scan pieces fit the encoders");

/* Where scan_pieces_f32 left the candidates: T == 1, together from 0;
 * else piece j's cnt[j] at j * share.  T == 0: no indices at all, the
 * scan wrote the message's delta codes itself (scan_codes_f32): the
 * caller sets codes, limit and bits, the scan the rest. */
typedef struct {
  int T;
  size_t share, cnt[SCAN_PAR_MAX];
  uint8_t *codes;   /* where the index section starts (buf + header), or NULL */
  size_t limit;     /* bytes the codes may take: up to the staged values */
  uint64_t *bits;   /* a word per 64 entries: the selected ones, where whole */
  int whole;        /* every word of bits written (else the scan skipped some) */
  size_t bytes;     /* code bytes of the entries coded; SIZE_MAX: they overflowed */
  double t;         /* the scan's threshold, for a scan again */
  uint32_t last;    /* the last entry coded (one thread's scan, for the threads' join) */
  size_t coded;     /* the entries coded (fewer than ccap where they overflowed) */
  int vp;           /* T == 0: the values in vp pieces of cnt[j] at j * share (else 1) */
} scan_layout;

/* A selection with its values in P pieces, in index order, where the
 * threads left them (P == 0: none, the indices are in s->idx).  Where the
 * caller gives codes (the message's index section, limit bytes of room)
 * and one piece's filter wrote the delta codes there
 * (keep_codes_isa_f32), coded says so and bytes how many. */
typedef struct {
  int P;
  const uint32_t *idx[SCAN_PAR_MAX];
  const float *val[SCAN_PAR_MAX];
  size_t cnt[SCAN_PAR_MAX];
  uint8_t *codes;   /* in, or NULL */
  size_t limit;
  int coded;        /* out */
  size_t bytes;
  size_t n;         /* in, for several pieces: the vector's length */
} sparse_pieces;

static size_t scan_pieces_f32(const float *x, size_t n, float t, uint32_t *idx,
                              float *val, size_t cap, size_t *bad, scan_layout *L);

static size_t scan_par_f32(const float *x, size_t n, float t, uint32_t *idx,
                       float *val, size_t cap, size_t *bad)
{
  return scan_pieces_f32(x, n, t, idx, val, cap, bad, NULL);
}

#ifdef _OPENMP
/* bytes from src down to dst (dst < src), by every thread of the team
 * that calls it: in rounds of as many bytes as the distance down, each
 * split among the threads (a round's destination is the source of the
 * rounds before it, which a barrier has closed), or by one thread where
 * the distance is short.  Ends with a barrier. */
enum { MOVE_ROUND_MIN = 1 << 16, MOVE_ROUNDS_MAX = 64 };

static void move_down_team(void *dst, const void *src, size_t bytes)
{
  size_t D = (size_t) ((const char *) src - (char *) dst);
  if (D < MOVE_ROUND_MIN || D < bytes / MOVE_ROUNDS_MAX) {
    #pragma omp single
    memmove(dst, src, bytes);
    return;
  }
  size_t T = (size_t) omp_get_num_threads(), j = (size_t) omp_get_thread_num();
  for (size_t lo = 0; lo < bytes; lo += D) {
    size_t hi = bytes - lo < D ? bytes : lo + D, part = ((hi - lo) / T + 63) & ~(size_t) 63;
    size_t a = lo + j * part < hi ? lo + j * part : hi, b = j + 1 == T || hi - a < part ? hi : a + part;
    memcpy((char *) dst + a, (const char *) src + a, b - a);
    #pragma omp barrier
  }
}
#endif

/* With L, pieces are left where they are (the selections and the
 * encoder read them there); without, they are moved together, on the threads (on one the
 * move took 0.7 ms of threshold's 4 at density 0.1 on two threads). */
static size_t scan_pieces_f32(const float *x, size_t n, float t, uint32_t *idx,
                              float *val, size_t cap, size_t *bad, scan_layout *L)
{
  if (L)
    L->T = 1;
#ifdef _OPENMP
  int T = gc__threads_for(n, SCAN_PAR_MIN, SCAN_PAR_MAX);
  if (T > 1 && cap / (size_t) T >= 64) {
    size_t cnt[SCAN_PAR_MAX], bads[SCAN_PAR_MAX], share = cap / (size_t) T;
    size_t piece = scan_piece(n, T);
    #pragma omp parallel for schedule(static) num_threads(T)
    for (int j = 0; j < T; j++) {
      size_t lo = (size_t) j * piece < n ? (size_t) j * piece : n;
      size_t hi = j + 1 == T || n - lo < piece ? n : lo + piece;
      cnt[j] = scan_isa_f32(x + lo, hi - lo, t, idx + (size_t) j * share,
                            val ? val + (size_t) j * share : NULL, share, &bads[j], lo);
    }
    size_t total = 0;
    int fits = 1;
    for (int j = 0; j < T; j++) {
      if (bads[j] != SIZE_MAX) {
        *bad = bads[j];
        return total;
      }
      total += cnt[j];
      fits &= cnt[j] <= share;
    }
    if (fits && L) {
      L->T = T;
      L->share = share;
      memcpy(L->cnt, cnt, (size_t) T * sizeof *cnt);
      *bad = SIZE_MAX;
      return total;
    }
    if (fits) {
      #pragma omp parallel num_threads(T)
      {
        size_t at = cnt[0];
        for (int j = 1; j < T; j++) {
          move_down_team(idx + at, idx + (size_t) j * share, cnt[j] * sizeof *idx);
          if (val)
            move_down_team(val + at, val + (size_t) j * share, cnt[j] * sizeof *val);
          at += cnt[j];
        }
      }
      *bad = SIZE_MAX;
      return total;
    }
  }
#endif
  return scan_isa_f32(x, n, t, idx, val, cap, bad, 0);
}

/* The top-K filter, in place: of c candidates (idx ascending, val = x at
 * idx, all finite), keep those whose magnitude key (the bit pattern without
 * the sign) exceeds tk, and of those equal to tk the ones of rank skip ..
 * skip + q - 1 in index order.  Returns how many it kept.  The output
 * position never passes the input's, so a block is written only where it
 * has been read. */
static size_t keep_run_f32(uint32_t *idx, float *val, size_t j, size_t hi,
                           uint32_t tk, size_t skip, size_t q, size_t *seen,
                           size_t o)
{
  for (; j < hi; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    int keep = key > tk;
    if (key == tk) {
      keep = *seen >= skip && *seen < skip + q;
      (*seen)++;
    }
    if (keep) {
      idx[o] = idx[j];
      val[o++] = val[j];
    }
  }
  return o;
}

static size_t keep_sse2_f32(uint32_t *idx, float *val, size_t c, uint32_t tk,
                            size_t skip, size_t q)
{
  size_t seen = 0;
  return keep_run_f32(idx, val, 0, c, tk, skip, q, &seen, 0);
}

#ifdef HAVE_SCAN_PATHS
TARGET_AVX2 static size_t keep_avx2_f32(uint32_t *idx, float *val, size_t c,
                                        uint32_t tk, size_t skip, size_t q)
{
  /* keys are below 2^31: the signed compare is the unsigned one */
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff), t = _mm256_set1_epi32((int) tk);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i nib = _mm256_set1_epi32(15);
  size_t seen = 0, o = 0, j = 0;
  for (; j + 8 <= c; j += 8) {
    __m256i v = _mm256_loadu_si256((const __m256i *) (val + j));
    __m256i key = _mm256_and_si256(v, absmask);
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(key, t))) {
      o = keep_run_f32(idx, val, j, j + 8, tk, skip, q, &seen, o);
      continue;
    }
    unsigned m = (unsigned) _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(key, t)));
    __m256i perm = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32((int) pack_lanes[m]), shifts), nib);
    __m256i iv = _mm256_loadu_si256((const __m256i *) (idx + j));
    _mm256_storeu_si256((__m256i *) (idx + o), _mm256_permutevar8x32_epi32(iv, perm));
    _mm256_storeu_si256((__m256i *) (val + o), _mm256_permutevar8x32_epi32(v, perm));
    o += (size_t) __builtin_popcount(m);
  }
  return keep_run_f32(idx, val, j, c, tk, skip, q, &seen, o);
}

TARGET_AVX512 static size_t keep_avx512_f32(uint32_t *idx, float *val, size_t c,
                                            uint32_t tk, size_t skip, size_t q)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), t = _mm512_set1_epi32((int) tk);
  size_t seen = 0, o = 0, j = 0;
  for (; j + 16 <= c; j += 16) {
    __m512i v = _mm512_loadu_si512((const void *) (val + j));
    __m512i key = _mm512_and_si512(v, absmask);
    if (_mm512_cmpeq_epu32_mask(key, t)) {
      o = keep_run_f32(idx, val, j, j + 16, tk, skip, q, &seen, o);
      continue;
    }
    __mmask16 m = _mm512_cmpgt_epu32_mask(key, t);
    __m512i iv = _mm512_loadu_si512((const void *) (idx + j));
    _mm512_storeu_si512((void *) (idx + o), _mm512_maskz_compress_epi32(m, iv));
    _mm512_storeu_si512((void *) (val + o), _mm512_maskz_compress_epi32(m, v));
    o += (size_t) __builtin_popcount(m);
  }
  return keep_run_f32(idx, val, j, c, tk, skip, q, &seen, o);
}
#endif

static size_t keep_isa_f32(uint32_t *idx, float *val, size_t c, uint32_t tk,
                           size_t skip, size_t q)
{
#ifdef HAVE_SCAN_PATHS
  int isa = gc__isa();
  if (isa >= GC__ISA_AVX512)
    return keep_avx512_f32(idx, val, c, tk, skip, q);
  if (isa >= GC__ISA_AVX2)
    return keep_avx2_f32(idx, val, c, tk, skip, q);
#endif
  return keep_sse2_f32(idx, val, c, tk, skip, q);
}

/* The filter keep_isa_f32 is, in place, that also writes the delta codes
 * of the kept indices at codes (*bytes of them) and leaves the indices
 * themselves where they were: the encoder writes the header and copies
 * the values behind the codes, or, where another coding wins, takes the
 * indices back from the codes (codes_to_idx).  Written in place and coded
 * after, the kept indices were stored and read back again (0.55 ms of
 * top-K's 6.3 at density 0.1 on one thread).  limit holds the codes
 * (keep_codes_isa_f32's bound). */
/* (inlined: called from the AVX-512 loop, it left the vector registers'
 * upper halves dirty, and the encoder's SSE2 copy after it ran at a
 * quarter of its speed) */
static inline __attribute__((always_inline)) size_t
keep_codes_run_f32(const uint32_t *idx, float *val, size_t j, size_t hi, uint32_t tk,
                   size_t skip, size_t q, size_t *seen, size_t o, uint8_t *codes, size_t *pos,
                   uint32_t *last)
{
  for (; j < hi; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    int keep = key > tk;
    if (key == tk) {
      keep = *seen >= skip && *seen < skip + q;
      (*seen)++;
    }
    if (!keep)
      continue;
    *pos = (size_t) (gc__leb_put(codes + *pos, idx[j] - *last - 1) - codes);
    *last = idx[j];
    val[o++] = val[j];
  }
  return o;
}

#ifdef HAVE_SCAN_PATHS
/* keep_avx512_f32's groups of sixteen with the codes: the kept indices'
 * gaps (each against the lane before, lane 0 against the last kept) one
 * byte each where all are below 128; ties, and groups with a longer gap,
 * one entry at a time. */
TARGET_AVX512 static size_t keep_codes_avx512_f32(const uint32_t *idx, float *val, size_t c,
                                                  uint32_t tk, size_t skip, size_t q,
                                                  uint8_t *codes, size_t *bytes,
                                                  uint32_t *lastp)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), t = _mm512_set1_epi32((int) tk);
  const __m512i one = _mm512_set1_epi32(1), small = _mm512_set1_epi32(127);
  const __m512i before = _mm512_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14);
  size_t seen = 0, o = 0, j = 0, pos = 0;
  uint32_t last = UINT32_MAX;   /* the first gap is the first index */
  for (; j + 16 <= c; j += 16) {
    __m512i v = _mm512_loadu_si512((const void *) (val + j));
    __m512i key = _mm512_and_si512(v, absmask);
    if (_mm512_cmpeq_epu32_mask(key, t)) {
      o = keep_codes_run_f32(idx, val, j, j + 16, tk, skip, q, &seen, o, codes, &pos, &last);
      continue;
    }
    __mmask16 m = _mm512_cmpgt_epu32_mask(key, t);
    unsigned cnt = (unsigned) __builtin_popcount(m);
    uint32_t top = m ? idx[j + 31 - (size_t) __builtin_clz(m)] : last;
    __m512i kept = _mm512_maskz_compress_epi32(m, _mm512_loadu_si512((const void *) (idx + j)));
    _mm512_storeu_si512((void *) (val + o), _mm512_maskz_compress_epi32(m, v));
    __m512i prev = _mm512_mask_permutexvar_epi32(_mm512_set1_epi32((int) last), 0xfffe,
                                                 before, kept);
    __m512i g = _mm512_sub_epi32(_mm512_sub_epi32(kept, prev), one);
    __mmask16 in = (__mmask16) ((1u << cnt) - 1);
    if (!_mm512_mask_cmpgt_epu32_mask(in, g, small)) {
      _mm_storeu_si128((__m128i *) (codes + pos), _mm512_cvtepi32_epi8(g));
      pos += cnt;
    } else {
      uint32_t gs[16];
      _mm512_storeu_si512((void *) gs, g);
      for (unsigned l = 0; l < cnt; l++)
        pos = (size_t) (gc__leb_put(codes + pos, gs[l]) - codes);
    }
    last = top;
    o += cnt;
  }
  o = keep_codes_run_f32(idx, val, j, c, tk, skip, q, &seen, o, codes, &pos, &last);
  *bytes = pos;
  *lastp = last;
  return o;
}
#endif

/* keep_isa_f32, with the codes (and the indices left as they were) where
 * the instruction set has them and limit holds them; else *bytes =
 * SIZE_MAX and the indices kept as keep_isa_f32 keeps them. */
static size_t keep_codes_isa_f32(uint32_t *idx, float *val, size_t c, uint32_t tk, size_t skip,
                                 size_t q, uint8_t *codes, size_t limit, size_t *bytes,
                                 uint32_t *last)
{
#ifdef HAVE_SCAN_PATHS
  /* The indices ascend, so the gaps sum to at most the last, M: a byte
   * a code, one more for each gap of 128 or more (at most M / 128 of
   * them), one more again for each of 2^14 or more..., under c + M / 127
   * bytes in all; and the last vector store's 16. */
  if (codes && (c ? c + idx[c - 1] / 127 : 0) + 16 <= limit && gc__isa() >= GC__ISA_AVX512)
    return keep_codes_avx512_f32(idx, val, c, tk, skip, q, codes, bytes, last);
#endif
  (void) last;
  (void) codes; (void) limit;
  *bytes = SIZE_MAX;
  return keep_isa_f32(idx, val, c, tk, skip, q);
}

/* The filter on T threads, out of place (a piece's output may lie in the
 * input of the piece before it).  First each piece counts its keys above
 * tk and equal to it, so that each knows where its output starts and the
 * rank of its first tie; then each copies its kept entries.  Stores
 * never pass a piece's own end: vector stores while 16 entries of room
 * are left, then one entry at a time (branch-free: the store lands in the
 * room, the count moves on a kept entry).  The entries of keep_isa_f32. */
enum { KEEP_PAR_MIN = 1 << 18, KEEP_PAR_MAX = 16 };
_Static_assert((int) KEEP_PAR_MAX <= (int) GC__WIRE_PIECES_MAX, "keep pieces fit the encoders");

static int keep_threads(size_t c)
{
  return gc__threads_for(c, KEEP_PAR_MIN, KEEP_PAR_MAX);
}

static void keep_count_f32(const float *val, size_t lo, size_t hi, uint32_t tk,
                           size_t *gt, size_t *eq)
{
  size_t g = 0, e = 0;
  for (size_t j = lo; j < hi; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    g += key > tk;
    e += key == tk;
  }
  *gt = g;
  *eq = e;
}

/* Entries [j, hi) into out from o until o reaches end; returns o. */
static size_t keep_tail_f32(const uint32_t *idx, const float *val, size_t j, size_t hi,
                            uint32_t tk, size_t skip, size_t q, size_t seen,
                            uint32_t *oidx, float *oval, size_t o, size_t end)
{
  for (; j < hi && o < end; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    size_t tie = key == tk;
    size_t keep = (key > tk) | (tie & (seen >= skip) & (seen < skip + q));
    seen += tie;
    oidx[o] = idx[j];
    oval[o] = val[j];
    o += keep;
  }
  return o;
}

#ifdef HAVE_SCAN_PATHS
TARGET_AVX512 static void keep_piece_avx512_f32(const uint32_t *idx, const float *val,
                                                size_t lo, size_t hi, uint32_t tk,
                                                size_t skip, size_t q, size_t seen,
                                                uint32_t *oidx, float *oval, size_t o,
                                                size_t end)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), t = _mm512_set1_epi32((int) tk);
  size_t j = lo;
  for (; j + 16 <= hi && end - o >= 16; j += 16) {
    __m512i v = _mm512_loadu_si512((const void *) (val + j));
    __m512i key = _mm512_and_si512(v, absmask);
    __mmask16 e = _mm512_cmpeq_epu32_mask(key, t);
    if (e) {
      o = keep_tail_f32(idx, val, j, j + 16, tk, skip, q, seen, oidx, oval, o, end);
      seen += (size_t) __builtin_popcount(e);
      continue;
    }
    __mmask16 m = _mm512_cmpgt_epu32_mask(key, t);
    __m512i iv = _mm512_loadu_si512((const void *) (idx + j));
    _mm512_storeu_si512((void *) (oidx + o), _mm512_maskz_compress_epi32(m, iv));
    _mm512_storeu_si512((void *) (oval + o), _mm512_maskz_compress_epi32(m, v));
    o += (size_t) __builtin_popcount(m);
  }
  keep_tail_f32(idx, val, j, hi, tk, skip, q, seen, oidx, oval, o, end);
}
#endif

static void keep_piece_f32(const uint32_t *idx, const float *val, size_t lo, size_t hi,
                           uint32_t tk, size_t skip, size_t q, size_t seen,
                           uint32_t *oidx, float *oval, size_t o, size_t end)
{
#ifdef HAVE_SCAN_PATHS
  if (gc__isa() >= GC__ISA_AVX512) {
    keep_piece_avx512_f32(idx, val, lo, hi, tk, skip, q, seen, oidx, oval, o, end);
    return;
  }
#endif
  keep_tail_f32(idx, val, lo, hi, tk, skip, q, seen, oidx, oval, o, end);
}

/* Pieces j < T of pc[j] candidates at pi[j], pv[j], in index order. */
static size_t keep_par_f32(int T, uint32_t *const *pi, float *const *pv, const size_t *pc,
                           uint32_t tk, size_t skip, size_t q, uint32_t *oidx, float *oval)
{
  size_t gt[KEEP_PAR_MAX], eq[KEEP_PAR_MAX], seen[KEEP_PAR_MAX], out[KEEP_PAR_MAX + 1];
  #pragma omp parallel for schedule(static) num_threads(T)
  for (int j = 0; j < T; j++)
    keep_count_f32(pv[j], 0, pc[j], tk, &gt[j], &eq[j]);
  size_t sn = 0;
  out[0] = 0;
  for (int j = 0; j < T; j++) {
    /* the ties of ranks sn .. sn + eq - 1 that fall in skip .. skip + q - 1 */
    size_t a = sn > skip ? sn : skip, b = sn + eq[j] < skip + q ? sn + eq[j] : skip + q;
    seen[j] = sn;
    out[j + 1] = out[j] + gt[j] + (b > a ? b - a : 0);
    sn += eq[j];
  }
  #pragma omp parallel for schedule(static) num_threads(T)
  for (int j = 0; j < T; j++)
    keep_piece_f32(pi[j], pv[j], 0, pc[j], tk, skip, q, seen[j], oidx, oval, out[j],
                   out[j + 1]);
  return out[T];
}

/* The magnitude keys of val[0, c) that are at most ku, into out (in
 * order; out may hold c), and in *over how many exceed ku. */
static size_t band_sse2_f32(const float *val, size_t c, uint32_t ku,
                            uint32_t *out, size_t *over)
{
  size_t nb = 0;
  for (size_t j = 0; j < c; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    out[nb] = key;
    nb += key <= ku;
  }
  *over = c - nb;
  return nb;
}

#ifdef HAVE_SCAN_PATHS
TARGET_AVX2 static size_t band_avx2_f32(const float *val, size_t c, uint32_t ku,
                                        uint32_t *out, size_t *over)
{
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff), u = _mm256_set1_epi32((int) ku);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i nib = _mm256_set1_epi32(15);
  size_t nb = 0, j = 0;
  for (; j + 8 <= c; j += 8) {
    __m256i key = _mm256_and_si256(_mm256_loadu_si256((const __m256i *) (val + j)), absmask);
    unsigned m = 0xffu & ~(unsigned) _mm256_movemask_ps(
                              _mm256_castsi256_ps(_mm256_cmpgt_epi32(key, u)));
    __m256i perm = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32((int) pack_lanes[m]), shifts), nib);
    _mm256_storeu_si256((__m256i *) (out + nb), _mm256_permutevar8x32_epi32(key, perm));
    nb += (size_t) __builtin_popcount(m);
  }
  size_t rest;
  nb += band_sse2_f32(val + j, c - j, ku, out + nb, &rest);
  *over = c - nb;
  return nb;
}

TARGET_AVX512 static size_t band_avx512_f32(const float *val, size_t c, uint32_t ku,
                                            uint32_t *out, size_t *over)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), u = _mm512_set1_epi32((int) ku);
  size_t nb = 0, j = 0;
  for (; j + 16 <= c; j += 16) {
    __m512i key = _mm512_and_si512(_mm512_loadu_si512((const void *) (val + j)), absmask);
    __mmask16 m = _mm512_cmple_epu32_mask(key, u);
    _mm512_storeu_si512((void *) (out + nb), _mm512_maskz_compress_epi32(m, key));
    nb += (size_t) __builtin_popcount(m);
  }
  size_t rest;
  nb += band_sse2_f32(val + j, c - j, ku, out + nb, &rest);
  *over = c - nb;
  return nb;
}
#endif

static size_t band_isa_f32(const float *val, size_t c, uint32_t ku, uint32_t *out,
                           size_t *over)
{
#ifdef HAVE_SCAN_PATHS
  int isa = gc__isa();
  if (isa >= GC__ISA_AVX512)
    return band_avx512_f32(val, c, ku, out, over);
  if (isa >= GC__ISA_AVX2)
    return band_avx2_f32(val, c, ku, out, over);
#endif
  return band_sse2_f32(val, c, ku, out, over);
}

#define KEY uint32_t
#define KTH kth_largest_u32
#include "kth_source.c"

/* The smallest and largest magnitude keys of val[0, m) (m = 0: lo =
 * UINT32_MAX, hi = 0, which kth_pieces_f32's empty pieces rely on). */
static inline __attribute__((always_inline)) void
key_range_body(const float *val, size_t m, uint32_t *lo, uint32_t *hi)
{
  uint32_t l = UINT32_MAX, h = 0;
  for (size_t j = 0; j < m; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    l = key < l ? key : l;
    h = key > h ? key : h;
  }
  *lo = l;
  *hi = h;
}

/* The magnitude keys of val[0, m) in bucket b ((key - base) >> sh == b),
 * in order, into out (which may be val: a store never passes what has
 * been read); returns how many. */
static inline __attribute__((always_inline)) size_t
key_bucket_body(const float *val, size_t j, size_t m, uint32_t base, int sh, uint32_t b,
                uint32_t *out, size_t nb)
{
  for (; j < m; j++) {
    uint32_t key;
    memcpy(&key, val + j, sizeof key);
    key &= 0x7fffffffu;
    out[nb] = key;
    nb += (key - base) >> sh == b;
  }
  return nb;
}

#ifdef HAVE_SCAN_PATHS
/* The selection's passes over the band took most of its time as scalar
 * loops: the range vectorised for the instruction set, the bucket's keys
 * packed sixteen at a time. */
TARGET_AVX512 static void key_range_avx512(const float *val, size_t m, uint32_t *lo,
                                           uint32_t *hi)
{ key_range_body(val, m, lo, hi); }
TARGET_AVX2 static void key_range_avx2(const float *val, size_t m, uint32_t *lo, uint32_t *hi)
{ key_range_body(val, m, lo, hi); }

TARGET_AVX512 static size_t key_bucket_avx512(const float *val, size_t m, uint32_t base,
                                              int sh, uint32_t b, uint32_t *out)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), vb = _mm512_set1_epi32((int) b);
  const __m512i vbase = _mm512_set1_epi32((int) base), vsh = _mm512_set1_epi32(sh);
  size_t nb = 0, j = 0;
  for (; j + 16 <= m; j += 16) {
    __m512i key = _mm512_and_si512(_mm512_loadu_si512((const void *) (val + j)), absmask);
    __mmask16 in = _mm512_cmpeq_epi32_mask(_mm512_srlv_epi32(_mm512_sub_epi32(key, vbase), vsh), vb);
    _mm512_storeu_si512((void *) (out + nb), _mm512_maskz_compress_epi32(in, key));
    nb += (size_t) __builtin_popcount(in);
  }
  return key_bucket_body(val, j, m, base, sh, b, out, nb);
}
#endif

static void key_range_f32(const float *val, size_t m, uint32_t *lo, uint32_t *hi)
{
#ifdef HAVE_SCAN_PATHS
  int isa = gc__isa();
  if (isa >= GC__ISA_AVX512) {
    key_range_avx512(val, m, lo, hi);
    return;
  }
  if (isa >= GC__ISA_AVX2) {
    key_range_avx2(val, m, lo, hi);
    return;
  }
#endif
  key_range_body(val, m, lo, hi);
}

static size_t key_bucket_f32(const float *val, size_t m, uint32_t base, int sh, uint32_t b,
                             uint32_t *out)
{
#ifdef HAVE_SCAN_PATHS
  if (gc__isa() >= GC__ISA_AVX512)
    return key_bucket_avx512(val, m, base, sh, b, out);
#endif
  return key_bucket_body(val, 0, m, base, sh, b, out, 0);
}

/* The k-th largest magnitude key (k in 1..c) of the float32 values val[0,
 * c), with *above = how many keys exceed it and *equal = how many equal
 * it.  Histograms of HB-bit digits of key - min narrow it down to a bucket
 * small enough for a quickselect; the buckets are copied to scr (c keys;
 * scr may be val itself, since a copy never passes what it has read).
 * An exact answer, so any method would give the same. */
enum { KTH_HB = 11, KTH_SMALL = 2048 };
static uint32_t kth_key_f32(const float *val, size_t c, size_t k, uint32_t *scr,
                            size_t *above, size_t *equal)
{
  uint32_t lo, hi;
  key_range_f32(val, c, &lo, &hi);
  size_t m = c, gt = 0;
  const uint32_t *src = NULL;   /* NULL: the keys of val */
  uint32_t base = lo, span = hi - lo;
  while (m > KTH_SMALL && span > 0) {
    int sh = 0;
    while ((span >> sh) >= (1u << KTH_HB))
      sh++;
    /* four histograms: runs of one bucket do not serialise on one count */
    _Static_assert(KTH_HB <= 12, "histograms live on the stack");
    uint32_t h[4][1 << KTH_HB];
    memset(h, 0, sizeof h);
    size_t j = 0;
    if (src) {
      for (; j + 4 <= m; j += 4)
        for (int u = 0; u < 4; u++)
          h[u][(src[j + u] - base) >> sh]++;
      for (; j < m; j++)
        h[0][(src[j] - base) >> sh]++;
    } else {
      for (; j + 4 <= m; j += 4)
        for (int u = 0; u < 4; u++) {
          uint32_t key;
          memcpy(&key, val + j + u, sizeof key);
          h[u][((key & 0x7fffffffu) - base) >> sh]++;
        }
      for (; j < m; j++) {
        uint32_t key;
        memcpy(&key, val + j, sizeof key);
        h[0][((key & 0x7fffffffu) - base) >> sh]++;
      }
    }
    uint32_t b = span >> sh;
    size_t cnt;
    for (;; b--) {   /* stops: the counts sum to m >= k */
      cnt = (size_t) h[0][b] + h[1][b] + h[2][b] + h[3][b];
      if (gt + cnt >= k)
        break;
      gt += cnt;
    }
    /* keep the bucket: keys base + (b << sh) .. + ((b + 1) << sh) - 1 */
    size_t nb = 0;
    if (src) {
      for (j = 0; j < m; j++)
        if ((src[j] - base) >> sh == b)
          scr[nb++] = src[j];
    } else {
      nb = key_bucket_f32(val, m, base, sh, b, scr);
    }
    src = scr;
    m = nb;
    uint32_t top = sh ? (uint32_t) (((uint64_t) 1 << sh) - 1) : 0;
    base += b << sh;
    span = top < span - (b << sh) ? top : span - (b << sh);
  }
  if (!src) {   /* val may be scr itself (a band of keys): no memcpy */
    for (size_t j = 0; j < m; j++) {
      uint32_t key;
      memcpy(&key, val + j, sizeof key);
      scr[j] = key & 0x7fffffffu;
    }
  }
  uint32_t tk = span == 0 ? base : kth_largest_u32(scr, m, k - gt);
  size_t g = 0, e = 0;
  for (size_t j = 0; j < m; j++) {
    g += scr[j] > tk;
    e += scr[j] == tk;
  }
  *above = gt + g;
  *equal = e;
  return tk;
}

#ifdef _OPENMP
/* kth_key_f32 of the keys in T pieces (bn[j] at bp[j], which it reorders)
 * on the threads: the first histogram level with a histogram per piece,
 * each piece then keeping the keys of the chosen bucket at its front,
 * and those moved together to bp[0] for kth_key_f32 (piece j's keys stay
 * below bp[j + 1], so the moves in order are safe).  On one thread this
 * selection took half a millisecond of top-K's four at density 0.1. */
enum { KTH_PAR_MIN = 1 << 16 };   /* band keys worth the threads */

static uint32_t kth_pieces_f32(int T, uint32_t *const *bp, const size_t *bn, size_t k,
                               size_t *above, size_t *equal)
{
  uint32_t lo[SCAN_PAR_MAX], hi[SCAN_PAR_MAX], hist[SCAN_PAR_MAX][1 << KTH_HB];
  uint32_t base = UINT32_MAX, top = 0, b = 0;
  size_t kept[SCAN_PAR_MAX], gt = 0;
  int sh = 0;
  #pragma omp parallel num_threads(T)
  {
    #pragma omp for schedule(static)
    for (int j = 0; j < T; j++)
      key_range_f32((const float *) bp[j], bn[j], &lo[j], &hi[j]);
    #pragma omp single
    {
      for (int j = 0; j < T; j++) {
        base = lo[j] < base ? lo[j] : base;
        top = hi[j] > top ? hi[j] : top;
      }
      while (((top - base) >> sh) >= (1u << KTH_HB))
        sh++;
    }
    #pragma omp for schedule(static)
    for (int j = 0; j < T; j++) {
      uint32_t h[4][1 << KTH_HB], nbk = ((top - base) >> sh) + 1;   /* as in kth_key_f32 */
      memset(h, 0, sizeof h);
      size_t e = 0;
      for (; e + 4 <= bn[j]; e += 4)
        for (int u = 0; u < 4; u++)
          h[u][(bp[j][e + u] - base) >> sh]++;
      for (; e < bn[j]; e++)
        h[0][(bp[j][e] - base) >> sh]++;
      for (uint32_t q = 0; q < nbk; q++)
        hist[j][q] = h[0][q] + h[1][q] + h[2][q] + h[3][q];
    }
    #pragma omp single
    for (b = (top - base) >> sh;; b--) {   /* stops: the counts sum to >= k */
      size_t cnt = 0;
      for (int j = 0; j < T; j++)
        cnt += hist[j][b];
      if (gt + cnt >= k)
        break;
      gt += cnt;
    }
    #pragma omp for schedule(static)
    for (int j = 0; j < T; j++)
      kept[j] = key_bucket_f32((const float *) bp[j], bn[j], base, sh, b, bp[j]);
  }
  size_t m = kept[0];
  for (int j = 1; j < T; j++) {
    memmove(bp[0] + m, bp[j], kept[j] * sizeof *bp[0]);
    m += kept[j];
  }
  uint32_t tk = kth_key_f32((const float *) bp[0], m, k - gt, bp[0], above, equal);
  *above += gt;
  return tk;
}
#endif

static void codes_to_idx(const uint8_t *codes, size_t c, uint32_t *idx);

/* A piece's codes at src, coded as if alone, its first gap counted from
 * index base: that code's length, and in *gap the gap in the whole
 * message after prev (UINT32_MAX: no index before the piece). */
static size_t first_code(const uint8_t *src, size_t base, uint32_t prev, uint32_t *gap)
{
  uint32_t f;
  size_t len = (size_t) (gc__leb_get(src, &f) - src);
  f += (uint32_t) base;
  *gap = prev == UINT32_MAX ? f : f - prev - 1;
  return len;
}

/* The in-place filter of the P > 1 pieces sel->idx, sel->val, sel->cnt
 * (keep_isa_f32 of each, skip 0: every tie of the pieces kept, q of
 * them), each piece coding what it keeps as if alone where the caller
 * gave room (sel->codes): the piece's codes in its P-th of sel->limit
 * bytes.  Where every piece coded and the delta coding wins, the join
 * writes each piece's true first gap (never longer than the one coded
 * from index 0) and moves the rest of its codes down behind the piece
 * before: sel->coded, sel->bytes for the message (the values copied from
 * the pieces by gc__wire_encode_coded_pieces).  Else the coded pieces'
 * kept indices come back from their codes, to the front of the piece as
 * keep_isa_f32 leaves them.  On two threads the kept indices, written in
 * place and read back twice by the pieces encoder (its sizes and its
 * codes), held top-K and Gaussian-k near one thread's time at density
 * 0.1. */
static void keep_codes_pieces_f32(int P, sparse_pieces *sel, uint32_t tk, size_t q)
{
  size_t bytes[SCAN_PAR_MAX], cshare = sel->codes ? sel->limit / (size_t) P : 0;
  uint32_t last[SCAN_PAR_MAX];
  int all = 1;
  #pragma omp parallel for schedule(static) num_threads(P)
  for (int j = 0; j < P; j++)
    sel->cnt[j] = keep_codes_isa_f32((uint32_t *) sel->idx[j], (float *) sel->val[j],
                                     sel->cnt[j], tk, 0, q,
                                     sel->codes ? sel->codes + (size_t) j * cshare : NULL,
                                     cshare, &bytes[j], &last[j]);
  size_t c = 0, delta = 0, isec;
  uint32_t prev = UINT32_MAX;
  for (int j = 0; j < P; j++) {
    all &= bytes[j] != SIZE_MAX;
    c += sel->cnt[j];
  }
  sel->coded = 0;
  if (all && c) {   /* the message's codes: each piece's first gap shrinks to the true one */
    for (int j = 0; j < P; j++) {
      if (!sel->cnt[j])
        continue;
      uint32_t gap;
      size_t old = first_code(sel->codes + (size_t) j * cshare, 0, prev, &gap);
      delta += bytes[j] - old + gc__leb_len(gap);
      prev = last[j];
    }
    if (gc__wire_pick(sel->n, c, delta, &isec) == GC__IDX_DELTA) {
      size_t pos = 0;
      prev = UINT32_MAX;
      for (int j = 0; j < P; j++) {
        if (!sel->cnt[j])
          continue;
        const uint8_t *src = sel->codes + (size_t) j * cshare;
        uint32_t gap;
        size_t old = first_code(src, 0, prev, &gap);
        uint8_t *dst = gc__leb_put(sel->codes + pos, gap);
        if (dst != src + old)
          memmove(dst, src + old, bytes[j] - old);
        pos = (size_t) (dst - sel->codes) + bytes[j] - old;
        prev = last[j];
      }
      sel->coded = 1;
      sel->bytes = pos;
      return;
    }
  }
  #pragma omp parallel for schedule(static) num_threads(P)
  for (int j = 0; j < P; j++)
    if (bytes[j] != SIZE_MAX)
      codes_to_idx(sel->codes + (size_t) j * cshare, sel->cnt[j], (uint32_t *) sel->idx[j]);
}

/* Gaussian-k's filter, in place: of the pieces of candidates L describes
 * (one, or the threads'), those with |v| > t (t >= 0), on the threads;
 * *sel and L get what is left.  That is top-K's keep with the key of t
 * and no tie kept (|v| > t for finite v is key > the key of |t|). */
static size_t gauss_filter_pieces_f32(uint32_t *cand, float *cval, scan_layout *L,
                                      float t, sparse_pieces *sel)
{
  float at = fabsf(t);
  uint32_t tk;
  memcpy(&tk, &at, sizeof tk);
  sel->coded = 0;
  if (L->T == 1) {   /* with the codes, where the caller gave room (sel->codes) */
    uint32_t last;
    L->cnt[0] = keep_codes_isa_f32(cand, cval, L->cnt[0], tk, 0, 0, sel->codes, sel->limit,
                                   &sel->bytes, &last);
    sel->coded = sel->bytes != SIZE_MAX;
  }
  size_t c = 0;
  sel->P = L->T;
  for (int j = 0; j < L->T; j++) {
    sel->idx[j] = cand + (size_t) j * L->share;
    sel->val[j] = cval + (size_t) j * L->share;
    sel->cnt[j] = L->cnt[j];
  }
  if (L->T > 1)
    keep_codes_pieces_f32(L->T, sel, tk, 0);
  for (int j = 0; j < L->T; j++) {
    L->cnt[j] = sel->cnt[j];
    c += L->cnt[j];
  }
  return c;
}

int gc__sparse_vbmi2 = 1;

/* Random-K's dense draws, written into the message straight from the
 * bitmap (sparse_source.c, FN(randk_dense)): where the walk has got to. */
typedef struct {
  uint8_t *codes;   /* the delta codes' section, NULL for the bitmap coding */
  size_t pos;       /* bytes of codes written                              */
  size_t limit;     /* where this piece's codes stop: the next piece's first */
  uint32_t last;    /* the index sent last (UINT32_MAX before the first)   */
  uint8_t *vals;    /* the values' section                                 */
  size_t c;         /* values written                                      */
  size_t nz;        /* nonzero ones among them                             */
  size_t bad;       /* the first index with a non-finite value, or SIZE_MAX */
} walk_state;

/* The LEB128 code of g at p + pos; returns the new pos. */
static size_t leb_put(uint8_t *p, size_t pos, uint32_t g)
{
  return (size_t) (gc__leb_put(p + pos, g) - p);
}

/* Bytes of the delta coding of the k indices marked in bits (n bits).
 * Gaps inside a word are below 64, and from a word to the next nonzero
 * one below 127: one byte each.  Only a gap across a zero word (rare for
 * dense draws) or the first index can take more, so the loop looks at
 * those alone.  With T > 1 it also notes, for the pieces of `per` words
 * after the first, where the piece's walk starts: at[j].last, and in
 * at[j].pos the bytes beyond one per code before it (the caller adds the
 * codes, the marked entries before the piece). */
static size_t bitmap_delta_bytes(const uint64_t *bits, size_t n, size_t k, int T, size_t per,
                                 walk_state *at)
{
  size_t extra = 0, nw = (n + 63) / 64, next = T > 1 ? per : nw;
  uint32_t last = UINT32_MAX;   /* the first gap is the first index */
  uint64_t prev = 0;            /* the word before */
  int j = 1;
  for (size_t w = 0; w < nw; w++) {
    if (w == next) {
      at[j].pos = extra;
      at[j++].last = prev ? (uint32_t) (64 * (w - 1)) + 63u - (uint32_t) __builtin_clzll(prev)
                          : last;
      next = j < T ? next + per : nw;
    }
    uint64_t b = bits[w];
    if (__builtin_expect(!b || !prev, 0)) {
      if (b)
        extra += gc__leb_len((uint32_t) (64 * w) + (uint32_t) __builtin_ctzll(b) - last - 1) - 1;
      else if (prev)
        last = (uint32_t) (64 * (w - 1)) + 63u - (uint32_t) __builtin_clzll(prev);
    }
    prev = b;
  }
  for (; j < T; j++) {   /* pieces that start at the end: empty */
    at[j].pos = extra;
    at[j].last = prev ? (uint32_t) (64 * (nw - 1)) + 63u - (uint32_t) __builtin_clzll(prev)
                      : last;
  }
  return k + extra;
}

/* The marked entries of words [w0, w1). */
static inline __attribute__((always_inline)) size_t
bitmap_count_body(const uint64_t *bits, size_t w0, size_t w1)
{
  size_t c = 0;
  for (size_t w = w0; w < w1; w++)
    c += (size_t) __builtin_popcountll(bits[w]);
  return c;
}

#ifdef HAVE_SCAN_PATHS
/* without the instruction the popcount is a library call */
TARGET_AVX2 static size_t bitmap_count_popcnt(const uint64_t *bits, size_t w0, size_t w1)
{
  return bitmap_count_body(bits, w0, w1);
}
#endif

static size_t bitmap_count(const uint64_t *bits, size_t w0, size_t w1)
{
#ifdef HAVE_SCAN_PATHS
  if (gc__isa() >= GC__ISA_AVX2)
    return bitmap_count_popcnt(bits, w0, w1);
#endif
  return bitmap_count_body(bits, w0, w1);
}

static size_t min_words(size_t a, size_t b) { return a < b ? a : b; }

/* FN(walk_codes) for float32 over words [w, nw) one entry at a time
 * (sparse_source.c; the vector path below ends with it). */
static void walk_codes_f32(uint64_t *bits, size_t w, size_t nw, const float *x,
                           walk_state *ws);

#ifdef HAVE_SCAN_PATHS
/* Sixteen entries a step, compressed by their quarter of the word: the
 * masked load reads only selected lanes (never past n); the loop keeps a
 * word (64 entries) of room before cend for the values' full stores, and
 * the codes' 16-byte store runs only 16 bytes or more before limit.
 * Their gaps are the compressed indices less the same shifted by a lane;
 * below 128 (all but about 1 in 10^6 at density 0.1) each is its one-byte
 * code, else the quarter's codes are written one by one.  Writing the
 * indices, and later reading them back to code them, and moving the
 * values down past the codes, took 1.5 ms at n = 2.5e7, K = 2.5e6.  The
 * hardware prefetcher did not follow x here (the loop took three times a
 * streaming read of it): the lines 8 KiB ahead are asked for (4 KiB:
 * 0.5 ms slower at density 0.1). */
enum { WALK_AHEAD = 2048 };
TARGET_AVX512 static void walk_codes_avx512_f32(uint64_t *bits, size_t w, size_t w1, size_t n,
                                                const float *x, size_t cend, walk_state *ws)
{
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i one = _mm512_set1_epi32(1), small = _mm512_set1_epi32(128);
  const __m512 fmax = _mm512_set1_ps(FLT_MAX);
  /* the state in locals: the byte stores below may alias it */
  uint8_t *codes = ws->codes, *vals = ws->vals;
  size_t c = ws->c, pos = ws->pos, nz = ws->nz, limit = ws->limit, bad = ws->bad;
  uint32_t last = ws->last;
  for (; w < w1 && c + 64 <= cend; w++) {
    uint64_t b = bits[w];
    if (64 * w + WALK_AHEAD + 64 <= n)
      for (int q = 0; q < 4; q++)
        _mm_prefetch((const char *) (x + 64 * w + WALK_AHEAD + 16 * q), _MM_HINT_T0);
    if (!b)
      continue;
    bits[w] = 0;
    /* an empty quarter (one in five at density 0.1) runs through: a
     * branch on it mispredicted */
    for (int q = 0; q < 4; q++) {
      __mmask16 m = (__mmask16) (b >> (16 * q));
      size_t at = 64 * w + 16 * (size_t) q, cnt = (size_t) __builtin_popcount(m);
      __m512 xv = _mm512_maskz_loadu_ps(m, x + at);
      _mm512_storeu_ps(vals + c * sizeof(float), _mm512_maskz_compress_ps(m, xv));
      nz += (size_t) __builtin_popcount(_mm512_mask_cmp_ps_mask(m, xv, _mm512_setzero_ps(),
                                                                _CMP_NEQ_UQ));
      __mmask16 nf = _mm512_mask_cmp_ps_mask(m, _mm512_abs_ps(xv), fmax, _CMP_NLE_UQ);
      if (nf && bad == SIZE_MAX)
        bad = at + (size_t) __builtin_ctz(nf);
      c += cnt;
      if (codes) {
        __m512i ci = _mm512_maskz_compress_epi32(m, _mm512_add_epi32(_mm512_set1_epi32((int) at),
                                                                     lane));
        __m512i prev = _mm512_alignr_epi32(ci, _mm512_set1_epi32((int) last), 15);
        __m512i gaps = _mm512_sub_epi32(_mm512_sub_epi32(ci, prev), one);
        __mmask16 used = (__mmask16) ((1u << cnt) - 1);
        if (!_mm512_mask_cmpge_epu32_mask(used, gaps, small) && pos + 16 <= limit) {
          _mm_storeu_si128((__m128i *) (codes + pos), _mm512_cvtepi32_epi8(gaps));
          pos += cnt;
        } else {
          uint32_t g[16];
          _mm512_storeu_si512((void *) g, gaps);
          for (size_t j = 0; j < cnt; j++)
            pos = leb_put(codes, pos, g[j]);
        }
        last = m ? (uint32_t) at + 31u - (uint32_t) __builtin_clz(m) : last;
      }
    }
  }
  ws->c = c;
  ws->pos = pos;
  ws->nz = nz;
  ws->bad = bad;
  ws->last = last;
  _mm256_zeroupper();   /* GCC does not clear the upper halves before this tail call */
  walk_codes_f32(bits, w, w1, x, ws);
}
#endif

#ifdef HAVE_SCAN_PATHS
/* walk_codes_avx512_f32 with VBMI2, a word at a time: the positions of its
 * set bits compressed as bytes, less the same shifted up a lane with the
 * position of the index sent last in front, are its gaps; where that
 * index lies in the word before (or is the start, -1: every word but one
 * in 10^3 at density 0.1) each is below 127 and so its one-byte code, in
 * four instructions; the values' checks are one class test a quarter
 * (zero, NaN, Inf), with a branch a word, taken only where a test finds
 * one.  The quarter-at-a-time codes and checks made the walk
 * compute-bound (5 ms against 3.7 for the walk alone at n = 2.5e7,
 * K = 2.5e6); the first gap apart (a LEB128 write) and a branch a quarter
 * still did at n = 2.5e6, x in cache: 0.28 ms, now 0.22. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vbmi2")))
static void walk_codes_vbmi2_f32(uint64_t *bits, size_t w, size_t w1, size_t n,
                                 const float *x, size_t cend, walk_state *ws)
{
  const __m512i iota = _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50,
                                       49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36,
                                       35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22,
                                       21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7,
                                       6, 5, 4, 3, 2, 1, 0);
  const __m512i before = _mm512_sub_epi8(iota, _mm512_set1_epi8(1)), one = _mm512_set1_epi8(1);
  enum { NONFINITE = 0x99, ZERO = 0x06 };   /* vfpclassps: NaNs, Infs; +-0 */
  uint8_t *codes = ws->codes, *vals = ws->vals;   /* locals: the byte stores may alias ws */
  size_t c = ws->c, pos = ws->pos, zeros = 0, limit = ws->limit, bad = ws->bad;
  size_t c0 = c;
  uint32_t last = ws->last;
  for (; w < w1 && c + 64 <= cend; w++) {
    uint64_t b = bits[w];
    if (64 * w + WALK_AHEAD + 64 <= n)
      for (int q = 0; q < 4; q++)
        _mm_prefetch((const char *) (x + 64 * w + WALK_AHEAD + 16 * q), _MM_HINT_T0);
    if (!b)
      continue;
    bits[w] = 0;
    __mmask16 odd[4];
    __m512 xv[4];
    for (int q = 0; q < 4; q++) {
      __mmask16 m = (__mmask16) (b >> (16 * q));
      xv[q] = _mm512_maskz_loadu_ps(m, x + 64 * w + 16 * (size_t) q);
      _mm512_storeu_ps(vals + c * sizeof(float), _mm512_maskz_compress_ps(m, xv[q]));
      c += (size_t) __builtin_popcount(m);
      odd[q] = _mm512_mask_fpclass_ps_mask(m, xv[q], NONFINITE | ZERO);
    }
    if (odd[0] | odd[1] | odd[2] | odd[3]) {
      for (int q = 0; q < 4; q++) {
        __mmask16 nf = _mm512_mask_fpclass_ps_mask(odd[q], xv[q], NONFINITE);
        zeros += (size_t) __builtin_popcount(odd[q] & ~nf);
        if (nf && bad == SIZE_MAX)
          bad = 64 * w + 16 * (size_t) q + (size_t) __builtin_ctz(nf);
      }
    }
    if (!codes)
      continue;
    size_t cnt = (size_t) __builtin_popcountll(b);
    uint32_t back = (uint32_t) (64 * w) - last;   /* 1..64: last in the word before */
    if (back - 1 < 64 && pos + 64 <= limit) {
      __m512i at = _mm512_maskz_compress_epi8(b, iota);
      __m512i prev = _mm512_mask_permutexvar_epi8(_mm512_set1_epi8((char) -(int) back),
                                                  ~(__mmask64) 1, before, at);
      _mm512_storeu_si512((void *) (codes + pos),
                          _mm512_sub_epi8(_mm512_sub_epi8(at, prev), one));
      pos += cnt;
    } else {
      for (uint64_t r = b; r; r &= r - 1) {
        uint32_t i = (uint32_t) (64 * w) + (uint32_t) __builtin_ctzll(r);
        pos = leb_put(codes, pos, i - last - 1);
        last = i;
      }
    }
    last = (uint32_t) (64 * w) + 63u - (uint32_t) __builtin_clzll(b);
  }
  ws->c = c;
  ws->pos = pos;
  ws->nz += c - c0 - zeros;
  ws->bad = bad;
  ws->last = last;
  _mm256_zeroupper();   /* GCC does not clear the upper halves before this tail call */
  walk_codes_f32(bits, w, w1, x, ws);
}
#endif

/* FN(walk_codes) for float32 on the chosen instruction set: words
 * [w0, w1), whose values end at cend. */
static void walk_codes_isa_f32(uint64_t *bits, size_t w0, size_t w1, size_t n, const float *x,
                               size_t cend, walk_state *ws)
{
#ifdef HAVE_SCAN_PATHS
  if (gc__isa() >= GC__ISA_AVX512) {
    if (gc__sparse_vbmi2 && __builtin_cpu_supports("avx512vbmi2")
        && __builtin_cpu_supports("avx512vbmi"))
      walk_codes_vbmi2_f32(bits, w0, w1, n, x, cend, ws);
    else
      walk_codes_avx512_f32(bits, w0, w1, n, x, cend, ws);
    return;
  }
#endif
  (void) n; (void) cend;
  walk_codes_f32(bits, w0, w1, x, ws);
}

/* The c indices whose delta codes are at codes, into idx. */
static void codes_to_idx(const uint8_t *codes, size_t c, uint32_t *idx)
{
  uint32_t i = UINT32_MAX;   /* the first gap is the first index */
  for (size_t j = 0; j < c; j++) {
    uint32_t g;
    codes = gc__leb_get(codes, &g);
    i += g + 1;
    idx[j] = i;
  }
}

/* The kept indices of a selection whose pieces' codes lie joined at
 * sel->codes (sel->coded) back into its pieces, each piece's to its
 * front, as the in-place filter leaves them uncoded. */
static void coded_pieces_to_idx(const sparse_pieces *sel)
{
  const uint8_t *p = sel->codes;
  uint32_t i = UINT32_MAX;   /* the first gap is the first index */
  for (int j = 0; j < sel->P; j++) {
    uint32_t *idx = (uint32_t *) sel->idx[j];
    for (size_t e = 0; e < sel->cnt[j]; e++) {
      uint32_t g;
      p = gc__leb_get(p, &g);
      i += g + 1;
      idx[e] = i;
    }
  }
}

/* The indices of the first m entries marked in bits (n bits) into idx, in
 * order. */
static void bits_to_idx(const uint64_t *bits, size_t n, size_t m, uint32_t *idx)
{
  size_t c = 0;
  for (size_t w = 0; w < (n + 63) / 64 && c < m; w++)
    for (uint64_t b = bits[w]; b && c < m; b &= b - 1)
      idx[c++] = (uint32_t) (64 * w + (size_t) __builtin_ctzll(b));
}

#ifdef HAVE_SCAN_PATHS
/* The codes of the marked entries of b (the word of entries w0 ..
 * w0 + 63), one at a time, at codes + *pos while they fit below limit, the
 * first *left entries at most; returns 0 once one did not fit. */
static inline __attribute__((always_inline)) int
put_word_codes(uint8_t *codes, size_t *pos, size_t limit, uint32_t *last, uint64_t b,
               size_t w0, size_t *left)
{
  for (; b && *left; b &= b - 1, --*left) {
    uint32_t i = (uint32_t) w0 + (uint32_t) __builtin_ctzll(b), g = i - *last - 1;
    if (*pos + gc__leb_len(g) > limit)
      return 0;
    *pos = leb_put(codes, *pos, g);
    *last = i;
  }
  return 1;
}

/* Threshold's and DGC's scan on one thread with the message's delta codes
 * (the selection scans' contract, scan_avx512_f32's blocks of 64): each
 * block's word of selected entries gives its codes as random-K's walk
 * makes them (walk_codes_vbmi2_f32), written at L->codes for the first
 * ccap entries while they fit in L->limit bytes, and the values go to
 * val (the first vcap); the word itself goes to L->bits.  No index is
 * written: at density 0.1 the scan's 10 MB of indices, and the encoder's
 * pass reading them back to code them, took a fifth of the time.  Where
 * the codes do not fit, the delta coding is not the smallest (L->limit
 * holds the smaller of raw and bitmap sections for ccap entries), and the
 * encoder takes the indices from the bits.  An empty block is skipped
 * while they are the rule (as scan_avx512_f32 does), its word unwritten
 * (L->whole = 0); elsewhere a block's codes are branch-free whether it is
 * empty or not (a branch on it was mispredicted half of the time at
 * density 0.01). */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vbmi2,popcnt,"
                      "bmi,lzcnt")))
static size_t scan_codes_vbmi2_f32(const float *x, size_t n, float t, float *val,
                                   size_t vcap, size_t ccap, size_t *bad, scan_layout *L)
{
  const __m512i limit = _mm512_set1_epi32(scan_key_f32(t));
  const __m512i big = _mm512_set1_epi32(0x7f7fffff), absmask = _mm512_set1_epi32(0x7fffffff);
  const __m512i iota = _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50,
                                       49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36,
                                       35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22,
                                       21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7,
                                       6, 5, 4, 3, 2, 1, 0);
  const __m512i next = _mm512_add_epi8(iota, _mm512_set1_epi8(1)), one = _mm512_set1_epi8(1);
  uint8_t *codes = L->codes;
  uint64_t *bits = L->bits;
  size_t lim = L->limit, pos = 0, c = 0, i = 0, coded = SIZE_MAX;
  uint32_t last = UINT32_MAX;   /* the first gap is the first index */
  int fits = 1, whole = 1;
  unsigned full = 0, dense = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i xv[4], a[4];
    if (i + SCAN_AHEAD + 64 <= n)
      for (int v = 0; v < 4; v++)
        _mm_prefetch((const char *) (x + i + SCAN_AHEAD + 16 * v), _MM_HINT_T0);
    uint64_t b = 0;
    for (int v = 0; v < 4; v++) {
      xv[v] = _mm512_loadu_si512((const void *) (x + i + 16 * v));
      a[v] = _mm512_and_si512(xv[v], absmask);
      b |= (uint64_t) _mm512_cmpgt_epi32_mask(a[v], limit) << (16 * v);
    }
    if ((i & 2047) == 0) {
      dense = full > 8;
      full = 0;
    }
    full += b != 0;
    if (!dense && !b) {
      whole = 0;
      continue;
    }
    bits[i / 64] = b;
    /* (no test of b first: a non-finite entry is selected, and a branch on
     * b was mispredicted at moderate densities) */
    if (_mm512_cmpgt_epi32_mask(_mm512_max_epi32(_mm512_max_epi32(a[0], a[1]),
                                                 _mm512_max_epi32(a[2], a[3])), big)) {
      for (size_t j = i;; j++)   /* a non-finite entry is selected: the first */
        if (!(fabsf(x[j]) <= FLT_MAX)) {
          *bad = j;
          return c;
        }
    }
    size_t cnt = (size_t) __builtin_popcountll(b);
    size_t o = c;
    if (c + 64 <= vcap) {
      for (int v = 0; v < 4; v++) {
        __mmask16 m = (__mmask16) (b >> (16 * v));
        _mm512_storeu_si512((void *) (val + o), _mm512_maskz_compress_epi32(m, xv[v]));
        o += (size_t) __builtin_popcount(m);
      }
    } else {
      for (uint64_t r = b; r && o < vcap; r &= r - 1)
        val[o++] = x[i + (size_t) __builtin_ctzll(r)];
    }
    if (fits && c + 64 <= ccap && pos + 5 + 64 <= lim) {
      /* the first gap (below 2^14: two bytes, branch-free), then the
       * word's own gaps, each below 64; an empty word moves nothing */
      uint32_t first = (uint32_t) i + (uint32_t) _tzcnt_u64(b), g = first - last - 1;
      size_t len;
      if (__builtin_expect(g >= 1u << 14, 0)) {
        len = b ? (size_t) (gc__leb_put(codes + pos, g) - (codes + pos)) : 0;
      } else {
        uint32_t two = g >= 128;
        uint16_t w2 = (uint16_t) ((g & 0x7f) | two << 7 | (g >> 7) << 8);
        memcpy(codes + pos, &w2, 2);
        len = 1 + two;
      }
      __m512i at = _mm512_maskz_compress_epi8(b, iota);
      __m512i gaps = _mm512_sub_epi8(_mm512_sub_epi8(_mm512_permutexvar_epi8(next, at), at), one);
      _mm512_storeu_si512((void *) (codes + pos + len), gaps);
      pos += b ? len + cnt - 1 : 0;
      last = b ? (uint32_t) i + 63u - (uint32_t) __builtin_clzll(b | 1) : last;
    } else if (fits && c < ccap) {
      size_t left = ccap - c;
      fits = put_word_codes(codes, &pos, lim, &last, b, i, &left);
      coded = fits ? coded : ccap - left;
    }
    c += cnt;
  }
  if (i < n) {   /* the tail, an entry at a time */
    uint64_t b = 0;
    for (size_t j = i; j < n; j++) {
      float a = fabsf(x[j]);
      if (a <= t)
        continue;
      if (!(a <= FLT_MAX)) {
        *bad = j;
        return c;
      }
      b |= (uint64_t) 1 << (j - i);
    }
    bits[i / 64] = b;
    size_t o = c;
    for (uint64_t r = b; r && o < vcap; r &= r - 1)
      val[o++] = x[i + (size_t) __builtin_ctzll(r)];
    if (fits && c < ccap) {
      size_t left = ccap - c;
      fits = put_word_codes(codes, &pos, lim, &last, b, i, &left);
      coded = fits ? coded : ccap - left;
    }
    c += (size_t) __builtin_popcountll(b);
  }
  L->whole = whole;
  L->bytes = fits ? pos : SIZE_MAX;
  L->coded = fits ? (c < ccap ? c : ccap) : coded;
  L->last = last;
  *bad = SIZE_MAX;
  return c;
}

#ifdef _OPENMP
/* The bytes of the first m > 0 of the delta codes at p (bytes of them):
 * codes end at bytes below 0x80, counted a word at a time. */
static size_t codes_skip(const uint8_t *p, size_t bytes, size_t m)
{
  const uint64_t high = 0x8080808080808080ull;
  size_t off = 0;
  for (; off + 8 <= bytes; off += 8) {
    uint64_t w;
    memcpy(&w, p + off, 8);
    size_t e = (size_t) __builtin_popcountll(~w & high);
    if (e >= m)
      break;
    m -= e;
  }
  for (; m; off++)
    m -= !(p[off] & 0x80);
  return off;
}

/* scan_codes_vbmi2_f32 on T threads, the codes of the first need entries
 * (threshold's: all of them; DGC's: its first ns).  Each thread scans its
 * piece of x (a multiple of 64 entries) and codes all of it as if alone,
 * its values at val + j * share (share: a T-th of the room) and its codes
 * in its own T-th of L->limit bytes (from the second on, 4 bytes in: its
 * first gap, coded from the piece's start, grows by up to 4 bytes once
 * the join knows the entry before it).  The join cuts the codes after
 * the first need entries, writes each piece's true first gap and moves
 * the rest of its codes down behind the piece before (a piece never takes
 * more than its T-th, so each lands at or below where it lies).  The
 * values stay in their pieces, for the encoder to move down
 * (gc__wire_encode_coded_pieces).  On two threads the pieces' indices,
 * 10 MB at density 0.1, n = 2.5e7, and the encoder's two passes over them
 * took what one thread's codes had saved.  Returns SIZE_MAX, with nothing
 * else to keep, where a piece's values needed overflow its share, or its
 * codes needed theirs while the delta coding may still win (uneven
 * pieces): the caller scans again the threads' way. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vbmi2,popcnt,"
                      "bmi,lzcnt")))
static size_t scan_codes_par_f32(int T, const float *x, size_t n, float t, float *val,
                                 size_t room, size_t need, size_t *bad, scan_layout *L)
{
  enum { RESERVE = 4 };
  size_t piece = scan_piece(n, T), share = room / (size_t) T;
  size_t cshare = L->limit / (size_t) T;
  size_t cnt[SCAN_PAR_MAX], bads[SCAN_PAR_MAX], lo[SCAN_PAR_MAX + 1], keep[SCAN_PAR_MAX];
  scan_layout part[SCAN_PAR_MAX];
  if (cshare <= RESERVE + 64)
    return SIZE_MAX;
  for (int j = 0; j < T; j++)
    lo[j] = (size_t) j * piece < n ? (size_t) j * piece : n;
  lo[T] = n;
  #pragma omp parallel for schedule(static) num_threads(T)
  for (int j = 0; j < T; j++) {
    size_t off = j ? RESERVE : 0;
    part[j] = (scan_layout) { .codes = L->codes + (size_t) j * cshare + off,
                              .limit = cshare - off, .bits = L->bits + lo[j] / 64 };
    cnt[j] = scan_codes_vbmi2_f32(x + lo[j], lo[j + 1] - lo[j], t, val + (size_t) j * share,
                                  share, lo[j + 1] - lo[j], &bads[j], &part[j]);
  }
  size_t c = 0, low = 0;   /* low: at least the delta coding's bytes */
  int whole = 1, fits = 1, over = 0;
  for (int j = 0; j < T; j++) {
    if (bads[j] != SIZE_MAX) {   /* the first non-finite entry: the first piece's */
      *bad = lo[j] + bads[j];
      return c;
    }
    /* the piece's entries among the first need, and their code bytes */
    size_t m = need > c ? (need - c < cnt[j] ? need - c : cnt[j]) : 0;
    c += cnt[j];
    whole &= part[j].whole;
    fits &= m <= share;
    keep[j] = m;
    if (m && m > part[j].coded) {
      /* they overflowed its room: more than it holds, and a byte each */
      over = 1;
      low += m > part[j].limit ? m : part[j].limit + 1;
    } else if (m) {   /* (the first gap only grows) */
      /* (where later entries overflowed, the first m's codes lie below
       * its limit) */
      size_t has = part[j].bytes != SIZE_MAX ? part[j].bytes : part[j].limit;
      part[j].bytes = m == cnt[j] ? part[j].bytes : codes_skip(part[j].codes, has, m);
      low += part[j].bytes;
    }
  }
  if (!fits || (over && low <= L->limit))
    return SIZE_MAX;
  size_t pos = 0;
  uint32_t last = UINT32_MAX;   /* the entry before the piece's first */
  for (int j = 0; !over && j < T; j++) {
    if (!keep[j])
      continue;
    const uint8_t *src = part[j].codes;
    uint32_t gap;   /* the piece's codes count its first gap from its start */
    size_t old = first_code(src, lo[j], last, &gap);
    uint8_t *q = gc__leb_put(L->codes + pos, gap);
    if (q != src + old)   /* (the first piece's stay) */
      memmove(q, src + old, part[j].bytes - old);
    pos = (size_t) (q - L->codes) + part[j].bytes - old;
    last = (uint32_t) lo[j] + part[j].last;
  }
  L->whole = whole;
  L->bytes = over ? SIZE_MAX : pos;
  L->vp = T;
  L->share = share;
  memcpy(L->cnt, cnt, (size_t) T * sizeof *cnt);
  *bad = SIZE_MAX;
  return c;
}
#endif
#endif

/* The scan with codes where it runs, AVX-512 with VBMI2: on one thread
 * scan_codes_vbmi2_f32 (the values of the first vcap), on several
 * scan_codes_par_f32 (the values in the threads' pieces of the room;
 * L->vp says how many); elsewhere the indices are written and coded
 * after.  SIZE_MAX where it does not run, having done nothing. */
static size_t scan_codes_f32(const float *x, size_t n, float t, float *val, size_t vcap,
                             size_t room, size_t ccap, size_t *bad, scan_layout *L)
{
#ifdef HAVE_SCAN_PATHS
  int T = gc__threads_for(n, SCAN_PAR_MIN, SCAN_PAR_MAX);
  if (L->codes && gc__isa() >= GC__ISA_AVX512 && gc__sparse_vbmi2
      && __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("avx512vbmi")) {
    L->t = (double) t;
    L->vp = 1;
    if (T == 1)
      return scan_codes_vbmi2_f32(x, n, t, val, vcap, ccap, bad, L);
#ifdef _OPENMP
    return scan_codes_par_f32(T, x, n, t, val, room, ccap, bad, L);
#endif
  }
#endif
  (void) x; (void) n; (void) t; (void) val; (void) vcap; (void) room; (void) ccap; (void) bad;
  (void) L;
  return SIZE_MAX;
}

/* The float32 top-K with its values (below the templates). */
static int topk_vals_f32(sparse_state *s, const float *x, size_t k, sparse_pieces *out);

/* ---- the two precisions -------------------------------------------------- */

#define REAL float
#define SFX f32
#define UKEY uint32_t
#define FABS fabsf
#define NEXTDOWN(t) nextafterf((t), -INFINITY)
#define REAL_MAX FLT_MAX
#define REAL_MIN FLT_MIN
#define REAL_MAX_EXP FLT_MAX_EXP
#define REAL_MANT_DIG FLT_MANT_DIG
#define SCAN_ISA scan_par_f32
#define SCAN_PIECES scan_pieces_f32
#define TOPK_VALS topk_vals_f32
#define WALK_CODES_ISA walk_codes_isa_f32
#define GAUSS_FILTER_PIECES gauss_filter_pieces_f32
#define SCAN_CODES scan_codes_f32
#include "sparse_source.c"

#define REAL double
#define SFX f64
#define UKEY uint64_t
#define FABS fabs
#define NEXTDOWN(t) nextafter((t), -INFINITY)
#define REAL_MAX DBL_MAX
#define REAL_MIN DBL_MIN
#define REAL_MAX_EXP DBL_MAX_EXP
#define REAL_MANT_DIG DBL_MANT_DIG
#include "sparse_source.c"

/* Top-K of float32 x with the values: the sampled threshold and one scan
 * that collects the candidates' indices and values (no gather from x
 * afterwards), the K-th magnitude by histograms of the candidates' keys,
 * then the filter, in place in s->cand and the first half of s->mag (the
 * second half is the histogram stage's scratch), as the pieces *out (on
 * threads the pieces of the scan, where they lie).  out->P is 0 when the
 * sample misled and the radix fallback wrote s->idx. */
static int topk_vals_f32(sparse_state *s, const float *x, size_t k, sparse_pieces *out)
{
  size_t n = s->n, bad, above, equal;
  float *v = (float *) s->mag, upper, t = topk_threshold_f32(s, x, k, &upper);
  uint32_t *scr = (uint32_t *) (v + s->cand_cap);
  scan_layout L;
  size_t c = scan_pieces_f32(x, n, t, s->cand, v, s->cand_cap, &bad, &L);
  if (bad != SIZE_MAX)
    return report_bad_f32(x, bad);
  if (c < k || c > s->cand_cap) {
    radix_topk_f32(x, n, k, s->p.ties, s->idx);
    out->P = 0;
    return GC_SUCCESS;
  }
  /* the pieces of the threads' scans where they lie, or one */
  int T = L.T;
  uint32_t *pi[SCAN_PAR_MAX];
  float *pv[SCAN_PAR_MAX];
  size_t pc[SCAN_PAR_MAX];
  if (T == 1) {
    pi[0] = s->cand;
    pv[0] = v;
    pc[0] = c;
  }
  for (int j = 0; T > 1 && j < T; j++) {
    pi[j] = s->cand + (size_t) j * L.share;
    pv[j] = v + (size_t) j * L.share;
    pc[j] = L.cnt[j];
  }
  /* the keys up to the sample's upper bound, when the K-th is among them
   * (else all of them) */
  uint32_t ku;
  memcpy(&ku, &upper, sizeof ku);
  size_t over = 0, nb = 0;   /* T > 1 only with OpenMP */
  uint32_t tk = 0;
  if (T > 1) {   /* each piece's band into its share of scr, the K-th from there */
    size_t bn[SCAN_PAR_MAX], bo[SCAN_PAR_MAX];
    uint32_t *bp[SCAN_PAR_MAX];
    #pragma omp parallel for schedule(static) num_threads(T)
    for (int j = 0; j < T; j++) {
      bp[j] = scr + (size_t) j * L.share;
      bn[j] = band_isa_f32(pv[j], pc[j], ku, bp[j], &bo[j]);
    }
    for (int j = 0; j < T; j++) {
      over += bo[j];
      nb += bn[j];
    }
#ifdef _OPENMP
    if (over < k && nb >= KTH_PAR_MIN) {
      tk = kth_pieces_f32(T, bp, bn, k - over, &above, &equal);
    } else if (over < k) {   /* a short band: together, on one thread */
      size_t at = bn[0];
      for (int j = 1; j < T; j++) {
        memmove(scr + at, bp[j], bn[j] * sizeof *scr);
        at += bn[j];
      }
      tk = kth_key_f32((const float *) scr, nb, k - over, scr, &above, &equal);
    }
#endif
  } else {
    nb = band_isa_f32(v, c, ku, scr, &over);
    if (over < k)
      tk = kth_key_f32((const float *) scr, nb, k - over, scr, &above, &equal);
  }
  if (over < k) {
    above += over;
  } else {
    if (T > 1) {   /* rare (the sample's bound below the K-th): together */
      join_pieces_f32(s->cand, v, &L);
      T = 1;
      pc[0] = c;
    }
    tk = kth_key_f32(v, c, k, scr, &above, &equal);
  }
  size_t q = k - above, skip = s->p.ties == GC_TIES_HIGH ? equal - q : 0;
  if (T == 1 && keep_threads(c) > 1) {   /* one piece split for the threads */
    T = keep_threads(c);
    size_t piece = (c + (size_t) T - 1) / (size_t) T;
    for (int j = 0; j < T; j++) {
      size_t a = (size_t) j * piece < c ? (size_t) j * piece : c;
      size_t b = a + piece < c ? a + piece : c;
      pi[j] = s->cand + a;
      pv[j] = v + a;
      pc[j] = b - a;
    }
  }
  out->P = 1;
  if (T > 1 && equal == q) {
    /* every tie is kept, so no piece needs the ties before it: each is
     * filtered in place and the encoder takes the pieces where they lie
     * (the count pass, the copy out of place and its read for ownership
     * took a millisecond at density 0.1 on two threads) */
    out->P = T;
    for (int j = 0; j < T; j++) {
      out->idx[j] = pi[j];
      out->val[j] = pv[j];
      out->cnt[j] = pc[j];
    }
    keep_codes_pieces_f32(T, out, tk, q);
  } else if (T > 1) {   /* into s->idx (k entries) and the scratch (cand_cap) */
    keep_par_f32(T, pi, pv, pc, tk, skip, q, s->idx, (float *) scr);
    out->idx[0] = s->idx;
    out->val[0] = (const float *) scr;
    out->cnt[0] = k;
  } else {
    uint32_t last;
    out->cnt[0] = keep_codes_isa_f32(s->cand, v, c, tk, skip, q, out->codes, out->limit,
                                     &out->bytes, &last);
    out->coded = out->bytes != SIZE_MAX;
    out->idx[0] = s->cand;
    out->val[0] = v;
  }
  return GC_SUCCESS;
}

/* ---- init / release / size ----------------------------------------------- */

static void sparse_release(void *state)
{
  sparse_state *s = state;
  free(s->idx);
  free(s->cand);
  free(s->mag);
  free(s->sample);
  free(s->bits);
  free(s->tmp);
  free(s->block_sums);
  free(s->scan_bits);
  s->block_sums = NULL;
  s->scan_bits = NULL;
  s->idx = s->cand = s->tmp = NULL;
  s->mag = s->sample = NULL;
  s->bits = NULL;
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Shared by all kinds: check the parameters, resolve k and size the
 * workspaces; frees what it took on failure. */
static int sparse_init(sparse_state *s, int kind, uint8_t wire, size_t n,
                       const gc_compressor_params *p)
{
  s->kind = kind;
  s->wire = wire;
  s->n = n;
  s->p = *p;
  if (p->ties != GC_TIES_LOW && p->ties != GC_TIES_HIGH)
    GC_ERRORF(GC_EINVAL, "ties = %d must be GC_TIES_LOW or GC_TIES_HIGH", p->ties);
  if (kind == KIND_THRESHOLD) {
    if (!(p->threshold >= 0))
      GC_ERRORF(GC_EINVAL, "threshold v = %g must be >= 0", p->threshold);
  } else {
    if (p->k == 0 && !(p->density > 0 && p->density <= 1))
      GC_ERRORF(GC_EINVAL, "density %g is outside (0,1] (and k = 0)", p->density);
    s->k = gc__resolve_k(n, p);
    if (s->k > n)
      GC_ERRORF(GC_EINVAL, "k = %zu exceeds the vector length n = %zu", s->k, n);
    s->rho = (double) s->k / (double) n;
  }
  if (kind == KIND_GAUSSK && p->gauss_loops < 1)
    GC_ERRORF(GC_EINVAL, "gauss_loops = %u must be >= 1", p->gauss_loops);
  if (kind == KIND_DGC && !(p->sample_ratio > 0 && p->sample_ratio <= 1))
    GC_ERRORF(GC_EINVAL, "DGC sample ratio %g is outside (0,1]", p->sample_ratio);

  size_t k = s->k;
  switch (kind) {
  case KIND_TOPK:
  case KIND_DGC:
    s->idx_cap = kind == KIND_DGC ? n : k;
    s->cand_cap = min_size(n, 2 * k + TOPK_SLACK);
    s->sample_cap = min_size(n, TOPK_SAMPLES);
    if (kind == KIND_DGC) {   /* m0 samples asked for (theory.md 2.6) */
      double m0 = fmax(ceil(p->sample_ratio * (double) n), ceil(2.0 / s->rho));
      s->dgc_stride = m0 < (double) n ? n / (size_t) m0 : 1;
      size_t need = m0 >= (double) n ? n : min_size(n, 2 * (size_t) m0 + 2);
      if (need > s->sample_cap)
        s->sample_cap = need;
    }
    s->cand = malloc(s->cand_cap * sizeof *s->cand);
    s->mag = malloc(s->cand_cap * sizeof *s->mag);
    s->sample = malloc(s->sample_cap * sizeof *s->sample);
    break;
  case KIND_RANDK:
  case KIND_RANDKU:
    s->idx_cap = k;
    s->bits = calloc((n + 63) / 64, sizeof *s->bits);
    s->tmp = malloc(k * sizeof *s->tmp);
    break;
  case KIND_THRESHOLD:
    s->idx_cap = n;
    break;
  case KIND_GAUSSK:   /* candidates with their values (mag) */
    s->idx_cap = n;
    s->cand_cap = min_size(n, 4 * k + TOPK_SLACK);
    s->cand = malloc(s->cand_cap * sizeof *s->cand);
    s->mag = malloc(s->cand_cap * sizeof *s->mag);
    if (gc__threads_may(n, SCAN_PAR_MIN))   /* where the sums pass may run on threads */
      s->block_sums = malloc(2 * ((n + GAUSS_BLOCK - 1) / GAUSS_BLOCK) *
                             sizeof *s->block_sums);
    break;
  }
  if (kind == KIND_THRESHOLD || kind == KIND_DGC)
    s->scan_bits = malloc(((n + 63) / 64 + 1) * sizeof *s->scan_bits);   /* never malloc(0) */
  if (kind == KIND_GAUSSK)   /* z from the density asked for (theory.md 2.5) */
    s->gauss_z = fabs(gsl_cdf_ugaussian_Pinv((p->k ? s->rho : p->density) / 2));
  s->idx = malloc((s->idx_cap ? s->idx_cap : 1) * sizeof *s->idx);
  int fail = !s->idx;
  if (kind == KIND_TOPK || kind == KIND_DGC)
    fail |= !s->cand || !s->mag || !s->sample;
  if (kind == KIND_RANDK || kind == KIND_RANDKU)
    fail |= !s->bits || !s->tmp;
  if (kind == KIND_GAUSSK)
    fail |= !s->cand || !s->mag || (gc__threads_may(n, SCAN_PAR_MIN) && !s->block_sums);
  if (kind == KIND_THRESHOLD || kind == KIND_DGC)
    fail |= !s->scan_bits;
  if (fail) {
    sparse_release(s);
    GC_ERRORF(GC_ENOMEM, "out of memory sizing the workspaces for n = %zu", n);
  }
  return GC_SUCCESS;
}

static int init_topk(void *st, size_t n, const gc_compressor_params *p)
{ return sparse_init(st, KIND_TOPK, GC__WIRE_TOPK, n, p); }
static int init_randk(void *st, size_t n, const gc_compressor_params *p)
{ return sparse_init(st, KIND_RANDK, GC__WIRE_RANDK, n, p); }
static int init_randku(void *st, size_t n, const gc_compressor_params *p)
{ return sparse_init(st, KIND_RANDKU, GC__WIRE_RANDKU, n, p); }
static int init_threshold(void *st, size_t n, const gc_compressor_params *p)
{ return sparse_init(st, KIND_THRESHOLD, GC__WIRE_THRESHOLD, n, p); }
static int init_gaussk(void *st, size_t n, const gc_compressor_params *p)
{ return sparse_init(st, KIND_GAUSSK, GC__WIRE_GAUSSK, n, p); }
static int init_dgc(void *st, size_t n, const gc_compressor_params *p)
{ return sparse_init(st, KIND_DGC, GC__WIRE_DGC, n, p); }

/* Bounds use 8-byte values: one bound serves both precisions. */
/* The longest message, plus, for the selections that stage their values
 * in the buffer (gc__wire_stage), the alignment padding of those values:
 * without it a float64 buffer of the bound held one value too few. */
static size_t sparse_max_bytes(const void *state)
{
  const sparse_state *s = state;
  const size_t pad = sizeof(double) - 1;
  switch (s->kind) {
  case KIND_RANDKU:
    return GC__WIRE_HDR + 8 * s->k;
  case KIND_THRESHOLD:
  case KIND_GAUSSK:
    return gc__wire_bound(s->n, s->n, 8) + pad;
  default:
    return gc__wire_bound(s->n, s->k, 8) + pad;
  }
}

#define SPARSE_TYPE(var, nm, sum, fl, initf)                                \
  static const gc_compressor_type var##_type = {                           \
    nm, sum, (fl) | GC_COMP_SPARSE, sizeof(sparse_state), initf,           \
    sparse_release, sparse_max_bytes, sparse_encode_f32, sparse_encode_f64, \
    sparse_decode_f32, sparse_decode_f64, NULL, NULL, NULL };              \
  const gc_compressor_type *const gc_compressor_##var = &var##_type;

SPARSE_TYPE(topk, "topk",
            "top-K by magnitude: exactly K entries, ties to the lower index (--k/--density)",
            GC_COMP_BIASED | GC_COMP_CONTRACTIVE | GC_COMP_KEEPS_K, init_topk)
SPARSE_TYPE(randk, "randk",
            "random-K, unscaled: K uniform indices sent with their values (--k/--density)",
            GC_COMP_BIASED | GC_COMP_RANDOM | GC_COMP_KEEPS_K, init_randk)
SPARSE_TYPE(randk_unbiased, "randk-unbiased",
            "random-K scaled by d/K; indices from the shared seed, only K values sent",
            GC_COMP_RANDOM | GC_COMP_KEEPS_K, init_randku)
SPARSE_TYPE(threshold, "threshold",
            "hard threshold: keep |x_i| > v (--threshold V)",
            GC_COMP_BIASED, init_threshold)
SPARSE_TYPE(gaussk, "gaussk",
            "Gaussian-k (Shi et al.): threshold from mean/std, 3 adjustments (--density)",
            GC_COMP_BIASED | GC_COMP_KEEPS_K | GC_COMP_COUNT_VARIES, init_gaussk)
SPARSE_TYPE(dgc, "dgc",
            "DGC sampled-threshold top-k (Lin et al.), truncated to k in index order",
            GC_COMP_BIASED | GC_COMP_RANDOM | GC_COMP_KEEPS_K | GC_COMP_COUNT_VARIES,
            init_dgc)

const gc_compressor_type *const gc__sparse_types[] = {
  &topk_type, &randk_type, &randk_unbiased_type, &threshold_type,
  &gaussk_type, &dgc_type, NULL };
