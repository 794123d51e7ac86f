/* sparse_gaussk.c -- Gaussian-k (Shi et al.; theory.md 2.5): the
 * threshold mu + |z| sigma of the sums of x and its squares, z from the
 * density asked for, adjusted up to gauss_loops times towards K.  The
 * sums pass lists the candidates above a pre-threshold with their
 * values, so that the threshold evaluations rarely read x again; float32
 * filters them in place, each thread's piece where it lies, and at
 * densities of 1/32 and up writes the delta codes as it keeps.
 *
 * The file is its own precision template, as sparse_topk.c is. */
#ifndef SPARSE_TEMPLATE
#include "gc_sparse_kernels.h"

enum { GAUSS_BLOCK = 1024 };   /* entries of a block of the sums pass */

/* Gaussian-k's pre-threshold, as a fraction of the sampled estimate of its
 * threshold: a sampled sigma is off by well under 1%, so 5% below still
 * admits every entry above the exact threshold while keeping the
 * candidates to about 1.8K for Gaussian data. */
#define GAUSS_MARGIN 0.95

#if defined(__SSE2__)
#include <emmintrin.h>
/* The full 16-entry groups of FN(gauss_block_sums) (below) for
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
 * (AVX-512) or in mask order.  Twins rather than one DISPATCH body: the
 * register width sets how the sixteen lanes are held (four, two, one),
 * and written once in SSE2 the AVX2 path would stay at 128 bits. */
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

/* Gaussian-k's groups on the chosen instruction set (FN(gauss_block_sums)'s
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
    L->cnt[0] = gc__sparse_keep_codes_isa_f32(cand, cval, L->cnt[0], tk, 0, 0, sel->codes,
                                              sel->limit, &sel->bytes, &last);
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
    gc__sparse_keep_codes_pieces_f32(L->T, sel, tk, 0);
  for (int j = 0; j < L->T; j++) {
    L->cnt[j] = sel->cnt[j];
    c += L->cnt[j];
  }
  return c;
}

#define SPARSE_TEMPLATE "sparse_gaussk.c"
#include "gc_sparse_twice.h"
#else   /* ---- once per precision ------------------------------------------- */

/* Gaussian-k sums of one block x[lo,hi) (hi - lo <= GAUSS_BLOCK) of the
 * run of blocks that starts at entry `from` (*c counts the run's
 * candidates): 16 REAL lanes of shifted sums, lane j taking the entries
 * lo + 16q + j and lane 0
 * the tail, folded into double in lane order.  The same pass appends the
 * indices with !(|x_i| <= t0) to cand and their values to cval (up to
 * cap; *c counts them all), so that the threshold evaluations rarely have
 * to read x again.  This order is the definition the GPU twin reproduces;
 * float32 has gauss_groups_f32 take the full groups of 16. */
static void FN(gauss_block_sums)(const REAL *x, size_t from, size_t lo, size_t hi,
                                 REAL c0, REAL t0, double *p1, double *p2,
                                 uint32_t *cand, REAL *cval, size_t cap, size_t *c)
{
  REAL a1[16] = {0}, a2[16] = {0};
  size_t i = lo;
#if REAL_IS_F32
  i = gauss_groups_f32(x, from, lo, hi, c0, t0, a1, a2, cand, cval, cap, c);
#else
  (void) from;
#endif
  for (; i + 16 <= hi; i += 16) {
    int any = 0;
    for (int j = 0; j < 16; j++) {
      REAL d = x[i + j] - c0;
      a1[j] += d;
      a2[j] += d * d;
      any |= !(FABS(x[i + j]) <= t0);
    }
    if (any)
      for (int j = 0; j < 16; j++)
        if (!(FABS(x[i + j]) <= t0) && (*c)++ < cap) {
          cand[*c - 1] = (uint32_t) (i + j);
          cval[*c - 1] = x[i + j];
        }
  }
  for (; i < hi; i++) {
    REAL d = x[i] - c0;
    a1[0] += d;
    a2[0] += d * d;
    if (!(FABS(x[i]) <= t0) && (*c)++ < cap) {
      cand[*c - 1] = (uint32_t) i;
      cval[*c - 1] = x[i];
    }
  }
  double s1 = 0, s2 = 0;
  for (int j = 0; j < 16; j++) {
    s1 += (double) a1[j];
    s2 += (double) a2[j];
  }
  *p1 = s1;
  *p2 = s2;
}

/* Gaussian-k's sums pass on the OpenMP threads, as gc__sparse_scan_pieces_f32 runs a
 * scan: T runs of whole blocks, each block's two sums into s->block_sums
 * and its candidates into the run's share cand_cap / T, then the sums
 * pushed in block order (the pairwise tree of one thread).  The shares
 * stay where they are, described by *L (float32's filter and the
 * encoder read them there; for float64 FN(gc__sparse_join_pieces) moves them
 * together).  Returns -1 where it does not run
 * (one thread, a short vector: the caller's loop does the pass), 1 with
 * the list complete as the one-thread pass leaves it, 0 when a run
 * outgrew its share (the candidates crowd into part of x): the sums and
 * *nc hold, the list does not, and the threshold evaluations scan x
 * instead, with the same result. */
static int FN(gauss_sums_par)(sparse_state *s, const REAL *x, REAL c0, REAL t0,
                              REAL *cval, gc__pairwise *sum1, gc__pairwise *sum2,
                              size_t *nc, scan_layout *L)
{
#ifdef _OPENMP
  size_t n = s->n, nb = (n + GAUSS_BLOCK - 1) / GAUSS_BLOCK;
  int T = s->block_sums ? gc__threads_for(n, SCAN_PAR_MIN, SCAN_PAR_MAX) : 1;
  if (T <= 1)
    return -1;
  size_t share = s->cand_cap / (size_t) T, run = (nb + (size_t) T - 1) / (size_t) T;
  size_t cnt[SCAN_PAR_MAX];
  double *bs = s->block_sums;
  #pragma omp parallel for schedule(static) num_threads(T)
  for (int j = 0; j < T; j++) {
    size_t b1 = ((size_t) j + 1) * run < nb ? ((size_t) j + 1) * run : nb, c = 0;
    for (size_t b = (size_t) j * run; b < b1; b++) {
      size_t lo = b * GAUSS_BLOCK, hi = n - lo < GAUSS_BLOCK ? n : lo + GAUSS_BLOCK;
      FN(gauss_block_sums)(x, (size_t) j * run * GAUSS_BLOCK, lo, hi, c0, t0, &bs[2 * b],
                           &bs[2 * b + 1], s->cand + (size_t) j * share,
                           cval + (size_t) j * share, share, &c);
    }
    cnt[j] = c;
  }
  for (size_t b = 0; b < nb; b++) {
    gc__pairwise_push(sum1, bs[2 * b]);
    gc__pairwise_push(sum2, bs[2 * b + 1]);
  }
  size_t total = 0;
  int fits = 1;
  for (int j = 0; j < T; j++) {
    total += cnt[j];
    fits &= cnt[j] <= share;
  }
  *nc = total;
  if (!fits)
    return 0;
  L->T = T;
  L->share = share;
  memcpy(L->cnt, cnt, (size_t) T * sizeof *cnt);
  return 1;
#else
  (void) s; (void) x; (void) c0; (void) t0; (void) cval;
  (void) sum1; (void) sum2; (void) nc; (void) L;
  return -1;
#endif
}

/* Gaussian-k's threshold mu + |z| sigma (theory.md 2.5) from the shifted
 * sums S1 = sum (x_i - c0), S2 = sum (x_i - c0)^2 into *thr.  Returns 0
 * where the sums may have left the range in which every operation on them
 * scales exactly with x: S2 or S1^2 overflowed, the threshold did, or S2
 * is so small (below n REAL_MIN 2^MANT: the squares' mean within MANT
 * binades of the subnormals) that squares rounded to subnormals or to 0
 * may have changed it.  Inside that range x 2^j gives thr 2^j exactly. */
static int FN(gauss_thr)(REAL c0, double S1, double S2, size_t n, double z, double *thr)
{
  double mu = (double) c0 + S1 / (double) n, sq = S1 * S1;
  double var = n > 1 ? (S2 - sq / (double) n) / (double) (n - 1) : 0.0;
  double sigma = sqrt(var > 0 ? var : 0);
  *thr = mu + z * sigma;
  return isfinite(S2) && isfinite(sq) && isfinite(*thr) &&
         !(S2 < (double) n * ldexp(REAL_MIN, REAL_MANT_DIG));
}

/* x 2^sh in REAL: exact unless it lands among the subnormals. */
static REAL FN(ldexp_real)(REAL v, int sh)
{
  return (REAL) ldexp((double) v, sh);
}

/* The sh that brings max |x_i| (finite x) to [2^E, 2^(E+1)) with
 * E = (REAL_MAX_EXP - 80) / 2 (24 for float32, 472 for float64), or 0
 * for x = 0.  There |x_i - c0| < 2^(E+2), so a lane's 64 squares stay
 * below 2^(2E+10) (float32: 2^58), the sums over n < 2^32 entries below
 * 2^(2E+36) and S1^2 below 2^(2E+68) (float64: 2^1012); a square that
 * underflows is one of a difference 2^87 (float64: 2^983) times below the
 * largest entry, whose own square is in S2 (c0 far from it) or is
 * replaced by others of its size: far below the last bit of S2. */
static int FN(gauss_shift)(const REAL *x, size_t n)
{
  REAL m = 0;
  for (size_t i = 0; i < n; i++)
    m = FABS(x[i]) > m ? FABS(x[i]) : m;
  if (m == 0)
    return 0;
  return (REAL_MAX_EXP - 80) / 2 - ilogb((double) m);
}

/* The shifted sums of x 2^sh exactly as FN(gauss_block_sums) and the
 * pairwise tree form them for that vector (the scalar loop is their
 * definition), without candidates: Gaussian-k's statistics where x's own
 * sums left their range (FN(gauss_thr)).  The caller scales the result
 * back, so that x and x 2^j select the same entries. */
static void FN(gauss_sums_shifted)(const REAL *x, size_t n, int sh, double *S1, double *S2)
{
  REAL c0 = FN(ldexp_real)(x[0], sh);
  gc__pairwise sum1 = {{0}, 0, 0}, sum2 = {{0}, 0, 0};
  for (size_t lo = 0; lo < n; lo += GAUSS_BLOCK) {
    size_t hi = n - lo < GAUSS_BLOCK ? n : lo + GAUSS_BLOCK, i = lo;
    REAL a1[16] = {0}, a2[16] = {0};
    for (; i + 16 <= hi; i += 16)
      for (int j = 0; j < 16; j++) {
        REAL d = FN(ldexp_real)(x[i + j], sh) - c0;
        a1[j] += d;
        a2[j] += d * d;
      }
    for (; i < hi; i++) {
      REAL d = FN(ldexp_real)(x[i], sh) - c0;
      a1[0] += d;
      a2[0] += d * d;
    }
    double s1 = 0, s2 = 0;
    for (int j = 0; j < 16; j++) {
      s1 += (double) a1[j];
      s2 += (double) a2[j];
    }
    gc__pairwise_push(&sum1, s1);
    gc__pairwise_push(&sum2, s2);
  }
  *S1 = gc__pairwise_total(&sum1);
  *S2 = gc__pairwise_total(&sum2);
}

/* Gaussian-k (theory.md 2.5): selected indices into s->idx, and their
 * values into *val (room entries) unless it is or becomes NULL
 * (FN(gc__sparse_scan_staged)); or, where sel->P > 0 (float32), both as the pieces
 * *sel in s->cand and s->mag, their indices already coded where
 * sel->coded says so. */
static int FN(gaussk)(sparse_state *s, const REAL *x, REAL **val, size_t room,
                      size_t *count, unsigned *evals, sparse_pieces *sel)
{
  sel->P = 0;
  size_t n = s->n, k = s->k, bad;
  /* A pre-threshold t0 a little below the expected threshold, from a
   * strided sample; t0 = REAL_MAX collects only non-finite entries. */
  REAL t0 = REAL_MAX;
  if (n >= 4 * TOPK_SAMPLES) {
    size_t m = TOPK_SAMPLES, stride = n / m;
    double m1 = 0, m2 = 0, s0 = (double) x[0];
    for (size_t j = 0; j < m; j++) {
      if (j + SAMPLE_AHEAD < m)   /* as in FN(sample_run): lines well ahead */
        __builtin_prefetch(x + (j + SAMPLE_AHEAD) * stride);
      double v = (double) x[j * stride] - s0;
      m1 += v;
      m2 += v * v;
    }
    double est_var = (m2 - m1 * m1 / (double) m) / (double) (m - 1);
    double est = s0 + m1 / (double) m + s->gauss_z * sqrt(fmax(est_var, 0));
    if (est > 0 && isfinite(est))
      t0 = FN(gc__sparse_strict_t)(GAUSS_MARGIN * est);
  }
  REAL c0 = x[0], *cval = (REAL *) s->mag;
  gc__pairwise sum1 = {{0}, 0, 0}, sum2 = {{0}, 0, 0};
  size_t nc = 0;
  /* the candidate list is complete when nc <= cand_cap and this holds */
  scan_layout L = { .T = 1 };
  int listed = FN(gauss_sums_par)(s, x, c0, t0, cval, &sum1, &sum2, &nc, &L), summed = 0;
  if (listed < 0 && s->block_sums) {
    /* one thread, the threads' way: every block's sums first, pushed
     * after, so that a block's fold into double (two chains of sixteen
     * dependent adds) overlaps the next block's pass instead of holding
     * it up (0.3 ms at n = 2.5e7, in the push right after each) */
    double *bs = s->block_sums;
    size_t nb = (n + GAUSS_BLOCK - 1) / GAUSS_BLOCK;
    for (size_t b = 0; b < nb; b++) {
      size_t lo = b * GAUSS_BLOCK, hi = n - lo < GAUSS_BLOCK ? n : lo + GAUSS_BLOCK;
      FN(gauss_block_sums)(x, 0, lo, hi, c0, t0, &bs[2 * b], &bs[2 * b + 1], s->cand, cval,
                           s->cand_cap, &nc);
    }
    for (size_t b = 0; b < nb; b++) {
      gc__pairwise_push(&sum1, bs[2 * b]);
      gc__pairwise_push(&sum2, bs[2 * b + 1]);
    }
    summed = 1;
  }
  for (size_t lo = 0; listed < 0 && !summed && lo < n; lo += GAUSS_BLOCK) {
    size_t hi = n - lo < GAUSS_BLOCK ? n : lo + GAUSS_BLOCK;
    double p1, p2;
    FN(gauss_block_sums)(x, 0, lo, hi, c0, t0, &p1, &p2, s->cand, cval, s->cand_cap, &nc);
    gc__pairwise_push(&sum1, p1);
    gc__pairwise_push(&sum2, p2);
  }
  if (listed < 0)
    L.cnt[0] = nc;
  double S1 = gc__pairwise_total(&sum1), S2 = gc__pairwise_total(&sum2);
  if (!isfinite(S1) || !isfinite(S2)) {
    GC_TRY(FN(gc__sparse_check_finite)(x, n));
  }
  /* x is finite from here on: a NaN or Inf in x makes S2, a sum of
   * squares, Inf or NaN, and then the scan above has returned GC_EDOM.  So
   * the scans below need no check.  The threshold is thr * 2^-sh: sh is 0
   * unless the sums left their range, and then they are those of x 2^sh. */
  double thr;
  int sh = 0;
  if (!FN(gauss_thr)(c0, S1, S2, n, s->gauss_z, &thr) &&
      (sh = FN(gauss_shift)(x, n)) != 0) {
    FN(gauss_sums_shifted)(x, n, sh, &S1, &S2);
    FN(gauss_thr)(FN(ldexp_real)(c0, sh), S1, S2, n, s->gauss_z, &thr);
  }
  size_t c = 0;
  unsigned ev = 0;
  REAL *stage = *val, *v = stage;
  while (ev < s->p.gauss_loops) {
    REAL t = FN(gc__sparse_strict_t)(ldexp(thr, -sh));
    v = stage;
    sel->P = 0;
    sel->coded = 0;
    /* every |x_i| > t >= t0 is among the candidates: a branch-free filter
     * of their values (about one in six fails at density 0.1) */
    int listed_ok = listed != 0 && nc <= s->cand_cap && t >= t0, in_place = 0;
#if REAL_IS_F32
    in_place = t >= 0;
#endif
    if (listed_ok && in_place) {
      /* in place, each thread's piece where it lies, and the encoder takes
       * the pieces (out of place the filter paid a read for ownership of
       * all it wrote, and on threads a count pass too).  What is left
       * holds every |x_i| > t: from now on it serves the thresholds t and
       * up, and the scan the others. */
#if REAL_IS_F32
      c = nc = gauss_filter_pieces_f32(s->cand, cval, &L, t, sel);
#endif
      t0 = t;
      v = NULL;
    } else if (listed_ok) {
      c = 0;
      if (L.T > 1)
        FN(gc__sparse_join_pieces)(s->cand, cval, &L);
      if (v && room >= nc) {
        for (size_t j = 0; j < nc; j++) {
          s->idx[c] = s->cand[j];
          v[c] = cval[j];
          c += !(FABS(cval[j]) <= t);
        }
      } else {
        v = NULL;
        for (size_t j = 0; j < nc; j++) {
          s->idx[c] = s->cand[j];
          c += !(FABS(cval[j]) <= t);
        }
      }
    } else {
      c = FN(gc__sparse_scan_staged)(x, n, t, s->idx, &v, room, n, &bad, NULL);
    }
    ev++;
    if ((double) c >= 2.0 * (double) k / 3.0 && (double) c <= 4.0 * (double) k / 3.0)
      break;
    thr *= (double) c < 2.0 * (double) k / 3.0 ? 0.5 : 1.5;
    if (sel->coded && ev < s->p.gauss_loops) {
      /* the filter left the indices in place: those it kept to the front,
       * as the list the next evaluation filters */
      gc__sparse_coded_pieces_to_idx(sel);
      sel->coded = 0;
    }
  }
  *val = v;
  *count = c;
  *evals = ev;
  return GC_SUCCESS;
}

static int FN(gaussk_encode)(void *state, const REAL *x, uint32_t step, uint8_t *buf,
                             size_t cap, size_t *len, gc_compress_info *info)
{
  sparse_state *s = state;
  size_t room, c = s->k;
  unsigned evals = 0;
  int written = 0;
  (void) step;
  REAL *staged = gc__wire_stage(s->n, s->n, sizeof(REAL), buf, cap, &room);
  sparse_pieces sel = FN(gc__sparse_pieces_coded_into)(s, buf, cap);
  GC_TRY(FN(gaussk)(s, x, &staged, room, &c, &evals, &sel));
#if REAL_IS_F32   /* the filter's pieces (sel.P > 0), else s->idx */
  GC_TRY(gc__sparse_encode_selection_f32(s, &sel, buf, cap, len, &info->nnz, &written));
#endif
  if (!written)
    GC_TRY(FN(gc__sparse_encode_list)(s, x, c, staged, buf, cap, len, &info->nnz));
  info->selected = c;
  info->loops = evals;
  return GC_SUCCESS;
}

#endif   /* once per precision */
#ifndef SPARSE_TEMPLATE

static int gaussk_init(void *state, size_t n, const gc_compressor_params *p)
{
  sparse_state *s = state;
  GC_TRY(gc__sparse_init_common(s, GC__WIRE_GAUSSK, n, p, 1));
  if (p->gauss_loops < 1)
    GC_ERRORF(GC_EINVAL, "gauss_loops = %u must be >= 1", p->gauss_loops);
  s->idx_cap = n;
  int ok = gc__sparse_alloc_cand(s, min_size(n, 4 * s->k + TOPK_SLACK));
  if (gc__threads_may(n, SCAN_PAR_MIN)) {   /* where the sums pass may run on threads */
    s->block_sums = malloc(2 * ((n + GAUSS_BLOCK - 1) / GAUSS_BLOCK) * sizeof *s->block_sums);
    ok &= s->block_sums != NULL;
  }
  /* z from the density asked for (theory.md 2.5) */
  s->gauss_z = fabs(gsl_cdf_ugaussian_Pinv((p->k ? s->rho : p->density) / 2));
  return gc__sparse_init_done(s, ok);
}

GC__SPARSE_TYPE(gaussk, "gaussk",
                "Gaussian-k (Shi et al.): threshold from mean/std, 3 adjustments (--density)",
                GC_COMP_BIASED | GC_COMP_KEEPS_K | GC_COMP_COUNT_VARIES, gaussk_init,
                gc__sparse_max_bytes_n, gaussk_encode, gc__sparse_decode)
#endif
