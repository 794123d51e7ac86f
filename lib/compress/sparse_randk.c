/* sparse_randk.c -- random-K (theory.md 2.3): K uniform indices sent
 * with their values (randk), or scaled by n/K with the indices left to
 * the decoder (randk-unbiased).
 *
 * Random-K draws K distinct indices with Floyd's algorithm from the
 * counter RNG keyed by (seed, stream, step, draw number), so the decoder
 * of randk-unbiased rebuilds them from the step and they are not sent.
 * The words come in bulk (gc__rng_words), so the sequential part is the
 * membership test; at K >= n/16 random-K writes its whole message from
 * the membership bitmap in one pass over it and x (indices ascending,
 * the coding worked out from the bitmap first), and random-K-unbiased
 * gathers its values (in draw order) in the loop that draws them.
 *
 * The file is its own precision template, as sparse_topk.c is. */
#ifndef SPARSE_TEMPLATE
#include "gc_sparse_kernels.h"

/* ---- Floyd's draws ------------------------------------------------------- */

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

/* Random-K's dense draws, written into the message straight from the
 * bitmap (FN(randk_dense)): where the walk has got to. */
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

/* (on the baseline the popcount is a library call; AVX2's and AVX-512's
 * targets include the instruction) */
DISPATCH(size_t, bitmap_count, bitmap_count_body, (const uint64_t *bits, size_t w0, size_t w1),
         bits, w0, w1)

static size_t min_words(size_t a, size_t b) { return a < b ? a : b; }

/* FN(walk_codes) for float32 over words [w, nw) one entry at a time
 * (FN(walk_codes); the vector path below ends with it). */
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

#define SPARSE_TEMPLATE "sparse_randk.c"
#include "gc_sparse_twice.h"
#else   /* ---- once per precision ------------------------------------------- */

/* Words [w, nw) of random-K's bitmap, cleared, into the message as the
 * walk state says, one entry at a time. */
static void FN(walk_codes)(uint64_t *bits, size_t w, size_t nw, const REAL *x,
                           walk_state *ws)
{
  for (; w < nw; w++) {
    for (uint64_t b = bits[w]; b; b &= b - 1) {
      uint32_t i = (uint32_t) (64 * w) + (uint32_t) __builtin_ctzll(b);
      REAL v = x[i];
      if (ws->codes)
        ws->pos = leb_put(ws->codes, ws->pos, i - ws->last - 1);
      ws->last = i;
      memcpy(ws->vals + ws->c++ * sizeof(REAL), &v, sizeof v);
      ws->nz += v != 0;
      if (!(FABS(v) <= REAL_MAX) && ws->bad == SIZE_MAX)
        ws->bad = i;
    }
    bits[w] = 0;
  }
}

/* Words [w0, w1) of the bitmap into the message, the values ending at
 * cend (FN(walk_codes) on the chosen instruction set). */
static void FN(walk_piece)(uint64_t *bits, size_t w0, size_t w1, size_t n, const REAL *x,
                           size_t cend, walk_state *ws)
{
#if REAL_IS_F32
  walk_codes_isa_f32(bits, w0, w1, n, x, cend, ws);
#else
  (void) n; (void) cend;
  FN(walk_codes)(bits, w0, w1, x, ws);
#endif
}

/* Random-K's message for dense draws (K >= n/16) from the bitmap of
 * floyd(s, step, NULL), in one pass over it and x in index order: the
 * coding is worked out from the bitmap first (bitmap_delta_bytes), so the
 * walk writes the delta codes and the values where they belong (the
 * bitmap coding is the bitmap's bytes).  On T threads the words go in T
 * pieces, each starting where bitmap_delta_bytes and a count of the marked
 * entries before it say, and stopping its full-width stores short of the
 * next piece's start.  Returns 0, doing nothing, where the message would
 * not fit in cap; else 1, the bitmap cleared, *len and *nnz set and *bad
 * the lowest index with a non-finite value (SIZE_MAX: none), as the
 * encoder would have named it. */
static int FN(randk_dense)(sparse_state *s, const REAL *x, uint8_t *buf, size_t cap,
                           size_t *len, size_t *nnz, size_t *bad)
{
  size_t n = s->n, k = s->k, nw = (n + 63) / 64, isec;
  int T = gc__threads_for(n, SCAN_PAR_MIN, SCAN_PAR_MAX);
  size_t per = (nw + (size_t) T - 1) / (size_t) T;
  walk_state at[SCAN_PAR_MAX];
  int coding = gc__wire_pick(n, k, bitmap_delta_bytes(s->bits, n, k, T, per, at), &isec);
  size_t total = GC__WIRE_HDR + isec + k * sizeof(REAL);
  if (total > cap || coding == GC__IDX_RAW)   /* raw: never for K >= n/16 */
    return 0;
  gc__wire_put_header(buf, s->wire, sizeof(REAL), coding, k);
  if (coding == GC__IDX_BITMAP)   /* little-endian words: the same bytes */
    memcpy(buf + GC__WIRE_HDR, s->bits, isec);
  uint8_t *codes = coding == GC__IDX_DELTA ? buf + GC__WIRE_HDR : NULL;
  at[0] = (walk_state) { codes, 0, isec, UINT32_MAX, buf + GC__WIRE_HDR + isec, 0, 0, SIZE_MAX };
  if (T > 1) {
    size_t cnt[SCAN_PAR_MAX];
    #pragma omp parallel for schedule(static) num_threads(T)
    for (int j = 0; j < T - 1; j++)
      cnt[j] = bitmap_count(s->bits, (size_t) j * per, min_words((size_t) (j + 1) * per, nw));
    for (int j = 1; j < T; j++) {
      size_t c = at[j - 1].c + cnt[j - 1];
      at[j] = (walk_state) { codes, c + at[j].pos, isec, at[j].last, at[0].vals, c, 0, SIZE_MAX };
      at[j - 1].limit = at[j].pos;
    }
  }
  if (T == 1) {   /* no parallel region at all: small messages are many */
    FN(walk_piece)(s->bits, 0, nw, n, x, k, &at[0]);
  } else {
    size_t cend[SCAN_PAR_MAX];   /* apart: the pieces' states move as they walk */
    for (int j = 0; j < T; j++)
      cend[j] = j + 1 < T ? at[j + 1].c : k;
    #pragma omp parallel for schedule(static) num_threads(T)
    for (int j = 0; j < T; j++)
      FN(walk_piece)(s->bits, min_words((size_t) j * per, nw),
                     min_words((size_t) (j + 1) * per, nw), n, x, cend[j], &at[j]);
  }
  *len = total;
  *nnz = 0;
  *bad = SIZE_MAX;
  for (int j = 0; j < T; j++) {
    *nnz += at[j].nz;
    if (*bad == SIZE_MAX)
      *bad = at[j].bad;
  }
  return 1;
}

/* How many draws behind Floyd's loop FN(floyd_values) reads x: the line
 * asked for at the draw has come from memory by then (64: 12.4 ms, 128:
 * 11.5, 256: 11.7 at K = 2.5e6, n = 2.5e7). */
enum { FN(GATHER_LAG) = 128 };

/* out (unaligned) = x[i] * factor; returns whether x[i] is nonzero
 * (put_vals' arithmetic and count). */
static inline size_t FN(put_value)(const REAL *x, uint32_t i, REAL factor, uint8_t *out)
{
  REAL xi = x[i], y = xi * factor;
  memcpy(out, &y, sizeof y);
  return xi != 0;
}

/* floyd(s, step, s->idx) with random-K-unbiased's values: out[c] (bytes,
 * unaligned) = x[v_c] * factor; returns the nonzero x[v_c] (put_vals'
 * count and arithmetic, so the bytes are the gather's).  Run one after the
 * other, Floyd's bitmap tests and the gather of x each waited on their own
 * misses (4 and 7 ms at K = 2.5e6, n = 2.5e7); in one loop, a line of x
 * asked for at each draw, they overlap.  The draws go one at a time:
 * in floyd_avx512's blocks, with the lines of x asked for a block at a
 * time, it took 15 ms. */
static size_t FN(floyd_values)(sparse_state *s, uint32_t step, const REAL *x, REAL factor,
                               uint8_t *out)
{
  enum { LAG = FN(GATHER_LAG) };
  size_t n = s->n, k = s->k, nz = 0, c = 0;
  uint32_t *order = s->idx, *t = s->tmp;
  uint64_t *bits = s->bits;
  floyd_warm_bits(s);
  /* the targets a stretch at a time, as floyd() makes random-K's; the
   * values LAG draws behind, and after the last draw the last LAG */
  for (size_t c0 = 0; c0 < k; c0 += FLOYD_STRETCH) {
    size_t m = k - c0 < FLOYD_STRETCH ? k - c0 : FLOYD_STRETCH;
    floyd_targets_at(s, step, c0, m, t);
    for (size_t i = 0; i < m; i++, c++) {
      if (i + FLOYD_AHEAD < m)
        __builtin_prefetch(bits + (t[i + FLOYD_AHEAD] >> 6), 1);
      uint32_t v = floyd_one(bits, t[i], (uint32_t) (n - k + c));
      order[c] = v;
      __builtin_prefetch(x + v);
      if (c >= LAG)
        nz += FN(put_value)(x, order[c - LAG], factor, out + (c - LAG) * sizeof(REAL));
    }
  }
  for (size_t j = k > LAG ? k - LAG : 0; j < k; j++)
    nz += FN(put_value)(x, order[j], factor, out + j * sizeof(REAL));
  return nz;
}

static int FN(randk_encode)(void *state, const REAL *x, uint32_t step, uint8_t *buf,
                            size_t cap, size_t *len, gc_compress_info *info)
{
  sparse_state *s = state;
  int written = 0;
  GC_TRY(FN(gc__sparse_check_finite)(x, s->n));
  if (floyd_dense(s)) {   /* the message comes with the walk */
    size_t bad;
    floyd(s, step, NULL);
    written = FN(randk_dense)(s, x, buf, cap, len, &info->nnz, &bad);
    if (written && bad != SIZE_MAX)
      return FN(gc__sparse_report_bad)(x, bad);
  } else {
    floyd(s, step, s->idx);
  }
  if (!written) {
    floyd_sort(s);
    GC_TRY(FN(gc__sparse_encode_list)(s, x, s->k, NULL, buf, cap, len, &info->nnz));
  }
  info->selected = s->k;
  info->loops = 0;
  return GC_SUCCESS;
}

/* (random-K-unbiased sends a finite x_i whose x_i n/K passes REAL_MAX as
 * the Inf the scaling makes) */
static int FN(randku_encode)(void *state, const REAL *x, uint32_t step, uint8_t *buf,
                             size_t cap, size_t *len, gc_compress_info *info)
{
  sparse_state *s = state;
  size_t c = s->k;
  REAL factor = (REAL) ((double) s->n / (double) s->k);
  GC_TRY(FN(gc__sparse_check_finite)(x, s->n));
  if (cap >= GC__WIRE_HDR + c * sizeof(REAL) && gc__wire_threads(c) == 1) {
    /* the values come with the draws (FN(floyd_values)); where the
     * encoder gathers them on several threads (put_all_vals, in pieces
     * after the draws) it does that instead: on two threads the draws'
     * gather took 11 ms against 9 at K = 2.5e6, n = 2.5e7 */
    info->nnz = FN(floyd_values)(s, step, x, factor, buf + GC__WIRE_HDR);
    GC_TRY(gc__wire_implicit_head(s->wire, c, sizeof(REAL), buf, cap, len));
    floyd_clear(s);
  } else {
    floyd(s, step, s->idx);
    floyd_clear(s);
    GC_TRY(FN(gc__wire_encode)(s->wire, s->n, s->idx, c, 1, x, factor, buf, cap, len,
                               &info->nnz));
  }
  info->selected = c;
  info->loops = 0;
  return GC_SUCCESS;
}

static int FN(randku_decode)(const void *state, const uint8_t *buf, size_t len,
                             uint32_t step, REAL scale, REAL *y)
{
  const sparse_state *s = state;
  GC_TRY(gc__wire_check_implicit(s->wire, sizeof(REAL), buf, len, s->k));
  /* the indices are rebuilt in the instance's scratch: one decode at a
   * time per instance (the scratch is not part of the observable state) */
  sparse_state *w = (sparse_state *) state;
  floyd(w, step, w->idx);
  floyd_clear(w);
  const uint8_t *v = buf + GC__WIRE_HDR;
  for (size_t j = 0; j < s->k; j++) {
    REAL val;
    memcpy(&val, v + j * sizeof(REAL), sizeof(REAL));
    y[s->idx[j]] += scale * val;
  }
  return GC_SUCCESS;
}

#endif   /* once per precision */
#ifndef SPARSE_TEMPLATE

/* Both types: the bitmap and the draws' scratch. */
static int randk_init_wire(sparse_state *s, uint8_t wire, size_t n,
                           const gc_compressor_params *p)
{
  GC_TRY(gc__sparse_init_common(s, wire, n, p, 1));
  s->idx_cap = s->k;
  s->bits = calloc((n + 63) / 64, sizeof *s->bits);
  s->tmp = malloc(s->k * sizeof *s->tmp);
  return gc__sparse_init_done(s, s->bits && s->tmp);
}

static int randk_init(void *state, size_t n, const gc_compressor_params *p)
{
  return randk_init_wire(state, GC__WIRE_RANDK, n, p);
}

static int randku_init(void *state, size_t n, const gc_compressor_params *p)
{
  return randk_init_wire(state, GC__WIRE_RANDKU, n, p);
}

static size_t randku_max_bytes(const void *state)   /* K values, no indices */
{
  const sparse_state *s = state;
  return GC__WIRE_HDR + 8 * s->k;
}

GC__SPARSE_TYPE(randk, "randk",
                "random-K, unscaled: K uniform indices sent with their values (--k/--density)",
                GC_COMP_BIASED | GC_COMP_RANDOM | GC_COMP_KEEPS_K, randk_init,
                gc__sparse_max_bytes_k, randk_encode, gc__sparse_decode)
GC__SPARSE_TYPE(randk_unbiased, "randk-unbiased",
                "random-K scaled by d/K; indices from the shared seed, only K values sent",
                GC_COMP_RANDOM | GC_COMP_KEEPS_K, randku_init, randku_max_bytes, randku_encode,
                randku_decode)
#endif
