/* sparse.c -- the sparsifiers: topk, randk, randk-unbiased, threshold,
 * gaussk and dgc (theory.md 2.2-2.6), with float32 and float64 paths
 * generated from sparse_source.c.  Messages use the layout of wire.c.
 *
 * Design notes (why, not what):
 * - Exact top-K avoids sorting n keys: a fixed strided sample of |x| gives a
 *   threshold that admits about 1.2K candidates; one branch-light pass checks
 *   finiteness and collects those (in index order, so the output comes out
 *   ascending); an exact 3-way quickselect among the candidates finds the
 *   K-th magnitude, and ties are shared out by index.  When the sample
 *   misleads (too few or too many candidates) a radix select over the whole
 *   vector gives the same answer with no extra memory.
 * - Non-finite input is detected inside the selection pass: every selection
 *   threshold is clamped to the largest finite value, so NaN and Inf always
 *   land among the candidates and are seen there.
 * - Random-K draws K distinct indices with Floyd's algorithm from the
 *   counter RNG keyed by (seed, stream, step, draw number), so the decoder
 *   of randk-unbiased rebuilds them from the step and they are not sent.
 * - Workspaces are sized in init; encode and decode never allocate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <float.h>

#include <gsl/gsl_cdf.h>

#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_internal.h"
#include "gc_rng.h"
#include "gc_wire.h"

#if defined(__GNUC__) && !defined(__clang__)
/* The selection scans are plain loops that GCC vectorises at -O3 only. */
#pragma GCC optimize("O3")
#endif

enum { KIND_TOPK, KIND_RANDK, KIND_RANDKU, KIND_THRESHOLD, KIND_GAUSSK, KIND_DGC };

enum { TOPK_SAMPLES = 32768, TOPK_MIN_SAMPLES = 1024, TOPK_SLACK = 16384,
       GAUSS_BLOCK = 1024 };

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
  size_t dgc_stride;       /* DGC sampling stride (1: every entry)       */
} sparse_state;

/* ---- type-independent helpers ------------------------------------------ */

/* Floyd's algorithm: K distinct indices of [0,n), uniform among K-subsets,
 * in draw order; s->bits is all zero before and after.  Draw c uses
 * gc_rng_u32(..., c), word c % 4 of Philox block c / 4: one block serves
 * four draws. */
static void floyd(sparse_state *s, uint32_t step)
{
  size_t n = s->n, k = s->k;
  gc_rng4 r = {{0}};
  for (size_t j = n - k, c = 0; j < n; j++, c++) {
    if ((c & 3) == 0)
      r = gc_rng_block(s->p.seed, s->p.stream, step, c >> 2);
    uint32_t t = gc_rng_below(r.v[c & 3], (uint32_t) (j + 1));
    if (s->bits[t >> 6] >> (t & 63) & 1)
      t = (uint32_t) j;
    s->bits[t >> 6] |= (uint64_t) 1 << (t & 63);
    s->idx[c] = t;
  }
}

static void floyd_clear(sparse_state *s)
{
  for (size_t j = 0; j < s->k; j++)
    s->bits[s->idx[j] >> 6] = 0;
}

/* Leave s->idx ascending and s->bits zero. */
static void floyd_sort(sparse_state *s)
{
  size_t n = s->n, k = s->k;
  if (k * 16 >= n) {   /* dense draw: walking the bitmap beats sorting */
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
                                float l2[16], uint32_t *cand, size_t cap,
                                size_t *c)
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
      if ((*c)++ < cap)
        cand[*c - 1] = (uint32_t) (i + (size_t) __builtin_ctz(over));
  }
  for (int v = 0; v < 4; v++) {
    _mm_storeu_ps(l1 + 4 * v, a1[v]);
    _mm_storeu_ps(l2 + 4 * v, a2[v]);
  }
  return i;
}
#define GAUSS_GROUPS gauss_groups_sse2

/* The leading part of scan (sparse_source.c) for float32 with SSE2: a
 * 16-bit mask per block of 16 entries, whose set bits are appended in
 * order, so that a dense selection (density 0.01 and up) does not fall
 * into the scalar loop in every other block.  Stops before the last
 * partial block or before a block holding a non-finite entry, and returns
 * where scan's general loop must go on (*c counts what it found). */
static size_t scan_prefix_sse2(const float *x, size_t n, float t,
                               uint32_t *out, size_t cap, size_t *c)
{
  const __m128 limit = _mm_set1_ps(t), big = _mm_set1_ps(FLT_MAX);
  const __m128 absmask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    unsigned over = 0;
    __m128 nonfinite = _mm_setzero_ps();
    for (int v = 0; v < 4; v++) {
      __m128 a = _mm_and_ps(_mm_loadu_ps(x + i + 4 * v), absmask);
      over |= (unsigned) _mm_movemask_ps(_mm_cmpnle_ps(a, limit)) << (4 * v);
      nonfinite = _mm_or_ps(nonfinite, _mm_cmpnle_ps(a, big));
    }
    if (!over)
      continue;
    if (_mm_movemask_ps(nonfinite))
      break;
    for (; over; over &= over - 1) {
      if (*c < cap)
        out[*c] = (uint32_t) (i + (size_t) __builtin_ctz(over));
      (*c)++;
    }
  }
  return i;
}
#define SCAN_PREFIX scan_prefix_sse2
#endif

/* ---- the two precisions -------------------------------------------------- */

#define REAL float
#define SFX f32
#define UKEY uint32_t
#define FABS fabsf
#define NEXTDOWN(t) nextafterf((t), -INFINITY)
#define REAL_MAX FLT_MAX
#include "sparse_source.c"

#define REAL double
#define SFX f64
#define UKEY uint64_t
#define FABS fabs
#define NEXTDOWN(t) nextafter((t), -INFINITY)
#define REAL_MAX DBL_MAX
#include "sparse_source.c"

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
  case KIND_GAUSSK:
    s->idx_cap = n;
    s->cand_cap = min_size(n, 4 * k + TOPK_SLACK);
    s->cand = malloc(s->cand_cap * sizeof *s->cand);
    break;
  }
  if (kind == KIND_GAUSSK)   /* z from the density asked for (theory.md 2.5) */
    s->gauss_z = fabs(gsl_cdf_ugaussian_Pinv((p->k ? s->rho : p->density) / 2));
  s->idx = malloc((s->idx_cap ? s->idx_cap : 1) * sizeof *s->idx);
  int fail = !s->idx;
  if (kind == KIND_TOPK || kind == KIND_DGC)
    fail |= !s->cand || !s->mag || !s->sample;
  if (kind == KIND_RANDK || kind == KIND_RANDKU)
    fail |= !s->bits || !s->tmp;
  if (kind == KIND_GAUSSK)
    fail |= !s->cand;
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
static size_t sparse_max_bytes(const void *state)
{
  const sparse_state *s = state;
  switch (s->kind) {
  case KIND_RANDKU:
    return GC__WIRE_HDR + 8 * s->k;
  case KIND_THRESHOLD:
  case KIND_GAUSSK:
    return gc__wire_bound(s->n, s->n, 8);
  default:
    return gc__wire_bound(s->n, s->k, 8);
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
            GC_COMP_BIASED | GC_COMP_KEEPS_K, init_gaussk)
SPARSE_TYPE(dgc, "dgc",
            "DGC sampled-threshold top-k (Lin et al.), truncated to k in index order",
            GC_COMP_BIASED | GC_COMP_RANDOM | GC_COMP_KEEPS_K, init_dgc)

const gc_compressor_type *const gc__sparse_types[] = {
  &topk_type, &randk_type, &randk_unbiased_type, &threshold_type,
  &gaussk_type, &dgc_type, NULL };
