/* quant.c -- the quantizing compressors: identity, sign, scaled-sign, qsgd,
 * terngrad, fp16, bf16.  One source (quant_source.c) is instantiated for
 * float32 and float64.
 *
 * Wire format.  Every message starts with a 2-byte header: the type tag
 * (identity 0xD0, sign 0xD1, scaled-sign 0xD2, qsgd 0xD3, terngrad 0xD4,
 * fp16 0xD5, bf16 0xD6) and the precision byte (32 or 64).  Values are
 * little-endian (the host order: gradcomp targets little-endian machines);
 * W = 4 for float32 messages, 8 for float64.  Bit streams are LSB-first and
 * zero padded to a byte (gc_bitio.h).  With H = 2 and n entries:
 *   identity     H | n values (W each)                       H + W n
 *   sign         H | n bits, 1 = negative (sign(0) = +1)     H + ceil(n/8)
 *   scaled-sign  H | scale = ||x||_1/n (W) | n sign bits     H + W + ceil(n/8)
 *   terngrad     H | scale s (W) | n 2-bit codes:            H + W + ceil(2n/8)
 *                  0 -> 0, 1 -> +s, 3 -> -s (2 is invalid)
 *   fp16, bf16   H | n 16-bit patterns                       H + 2n
 *   qsgd         H | nb bucket norms (W each) | one bit stream holding,
 *                  per entry, gamma(xi_i + 1) then a sign bit (1 = negative)
 *                  only when xi_i > 0:
 *                  H + W nb + ceil((sum_i |gamma(xi_i+1)| + nnz)/8),
 *                  |gamma(v)| = 2 floor(log2 v) + 1, nb = ceil(n/bucket);
 *                  at most H + W nb + ceil(n (|gamma(s+1)| + 1)/8).
 * Randomness (gc_rng.h): entry i of qsgd and terngrad draws the 16-bit
 * uniform gc_rng_u16(seed, stream, step, i), eight entries per Philox
 * call, and takes the larger value when u < p 2^16 (p = r - floor r, resp.
 * min(|x_i|, c) / s): E[C(x)] = x up to a bias below 2^-16 in p.
 * qsgd's float32 bucket norm is sqrt of the sum of x_i^2 in double in
 * sumsq's order (below); float64 scales by the largest |x_i| first.
 * Decoded values: qsgd sgn * (REAL)(norm * xi / s) computed in double;
 * terngrad +-s; scaled-sign +-scale; fp16/bf16 the exact 16-bit value.
 * Decoders validate the whole message (header, exact length, levels <= s,
 * valid codes, finite non-negative scales, zero padding) before touching
 * y. */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gc_vec.h"
#include "gc_bitio.h"
#include "gc_compressor.h"
#include "gc_dispatch.h"
#include "gc_errno.h"
#include "gc_compressor_internal.h"
#include "gc_isa.h"
#include "gc_pairwise.h"
#include "gc_rng_bulk.h"
#include "gc_template.h"
#include "gc_threads.h"
#include "gc_rng.h"

#if defined(__GNUC__) && !defined(__clang__)
/* As in sparse_*.c: the finiteness and counting scans are plain loops that
 * GCC vectorises at -O3 only (the project builds at -O2). */
#pragma GCC optimize("O3")
#endif

enum { HDR = 2 };
enum {
  TAG_IDENTITY = 0xD0, TAG_SIGN = 0xD1, TAG_SCALED_SIGN = 0xD2,
  TAG_QSGD = 0xD3, TAG_TERNGRAD = 0xD4, TAG_FP16 = 0xD5, TAG_BF16 = 0xD6
};

/* Loops over at least PAR_MIN entries run on the OpenMP threads (the
 * caller's omp_set_num_threads; one inside a parallel region), in
 * PAR_CHUNK pieces where the pieces are not CHUNKs. */
enum { PAR_MIN = 1 << 18, PAR_CHUNK = 1 << 16 };

/* One state layout serves every quantizer; each reads what it needs. */
typedef struct qstate {
  size_t n;
  unsigned s;          /* qsgd levels */
  size_t bucket;       /* qsgd bucket length (n when params.bucket == 0) */
  size_t nb;           /* number of qsgd buckets */
  double clip;         /* terngrad clip factor, 0 = none */
  uint64_t seed;
  uint32_t stream;
  /* qsgd with s <= PAIR_MAX_S: the codes of two entries at once, indexed
   * by sym0 + 32 sym1 with sym = 2 xi + (xi > 0 && x < 0): gamma(xi0 + 1),
   * sign, gamma(xi1 + 1), sign in the low 24 bits, the length above; and
   * of one entry (pair[sym] with no second code is not that). */
  uint32_t pair[1024], one[32];
  /* the same code of one symbol as code | length << 12 (at most 10 bits
   * each for s <= PAIR_MAX_S): the AVX-512 writer's table */
  uint16_t code16[32];
  /* qsgd with s <= PAIR_MAX_S and n >= PAR_MIN: room for the bit
   * streams of the shares after the first, which OpenMP threads code at
   * once: shares of one bucket of PAR_MIN entries or more (qsgd_bucket_par)
   * or runs of smaller buckets (qsgd_shares); so an instance encodes one
   * vector at a time.  NULL otherwise */
  uint8_t *scratch;
} qstate;

/* qsgd_bucket_par, qsgd_shares: at most SHARES_MAX shares, each stream
 * given its worst case and SHARE_SLACK bytes in qstate.scratch. */
enum { PAIR_MAX_S = 15, SHARES_MAX = 64, SHARE_SLACK = 16 };

/* Why a qsgd bucket cannot be coded (quant_source.c, qsgd_code_bucket). */
enum { BUCKET_NONFINITE = 1, BUCKET_OVERFLOW = 2 };

/* The code of one symbol (see qstate.pair) as code | length << 24. */
static uint32_t sym_code(unsigned sym)
{
  unsigned xi = sym >> 1, v = xi + 1, N = (unsigned) (31 - __builtin_clz(v));
  uint32_t code = (1u << N) | ((v & ((1u << N) - 1)) << (N + 1)), len = 2 * N + 1;
  if (xi)
    code |= (uint32_t) (sym & 1) << len++;
  return code | len << 24;
}

static int isfin_f32(float v)
{
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return (u & 0x7f800000u) != 0x7f800000u;
}

static int isfin_f64(double v)
{
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return (u & 0x7ff0000000000000u) != 0x7ff0000000000000u;
}

/* bfloat16 of a float: round to nearest even on the bit pattern (a carry
 * into the exponent gives inf correctly); of a double: the exact integer
 * rounding of gc_bitio.h, so nothing is rounded twice. */
static uint16_t to_bf16_f32(float v)
{
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t) ((u >> 16) | 0x40u);
  return (uint16_t) ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static uint16_t to_bf16_f64(double v)
{
  return gc__bf16_from_double(v);
}

/* Whether the CPU converts float32 to IEEE half (F16C): the bit from
 * CPUID leaf 1 itself, since clang's __builtin_cpu_supports does not know
 * "f16c"; "avx" also checks that the OS saves the YMM registers. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
static int have_f16c(void)
{
  static atomic_int have = -1;
  int h = atomic_load_explicit(&have, memory_order_relaxed);
  if (h < 0) {
    unsigned a, b, c, d;
    h = __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    atomic_store_explicit(&have, h, memory_order_relaxed);
  }
  return h;
}
#endif

static int base_init(void *state, size_t n, const gc_compressor_params *p)
{
  qstate *q = state;
  q->n = n;
  q->s = p->levels;
  q->bucket = n;
  q->nb = 1;
  q->clip = p->clip;
  q->seed = p->seed;
  q->stream = p->stream;
  return GC_SUCCESS;
}

/* Bits of one entry's code at most: every level is at most s and |gamma|
 * grows with its argument. */
static size_t qsgd_entry_bits(const qstate *q)
{
  return gc__gamma_len((uint64_t) q->s + 1) + 1;
}

/* The entries the threads' shares split: one bucket (qsgd_bucket_par) or
 * the whole vector (qsgd_shares). */
static size_t qsgd_share_span(const qstate *q)
{
  return q->bucket >= PAR_MIN ? q->bucket : q->n;
}

/* Room for the streams of all shares but the first. */
static size_t qsgd_scratch_bytes(const qstate *q)
{
  return (qsgd_entry_bits(q) * qsgd_share_span(q) + 7) / 8 +
         SHARES_MAX * (SHARE_SLACK + 1);
}

static int qsgd_init(void *state, size_t n, const gc_compressor_params *p)
{
  qstate *q = state;
  if (p->levels < 1)
    GC_ERRORF(GC_EINVAL, "qsgd: levels s = %u, must be >= 1", p->levels);
  base_init(state, n, p);
  q->bucket = p->bucket && p->bucket < n ? p->bucket : n;
  q->nb = (n + q->bucket - 1) / q->bucket;
  q->scratch = NULL;
#ifdef _OPENMP   /* only threads write shares */
  if (q->s <= PAIR_MAX_S && gc__threads_may(n, PAR_MIN) &&
      !(q->scratch = malloc(qsgd_scratch_bytes(q))))
    GC_ERRORF(GC_ENOMEM, "qsgd: no memory for the codes of %zu entries",
              qsgd_share_span(q));
#endif
  if (q->s <= PAIR_MAX_S)
    for (unsigned a = 0; a < 32; a++) {
      uint32_t ca = sym_code(a);
      q->one[a] = ca;
      q->code16[a] = (uint16_t) ((ca & 0xffffffu) | (ca >> 24) << 12);
      for (unsigned b = 0; b < 32; b++) {
        uint32_t cb = sym_code(b), la = ca >> 24;
        q->pair[a + 32 * b] = ((ca & 0xffffffu) | (cb & 0xffffffu) << la) |
                              (la + (cb >> 24)) << 24;
      }
    }
  return GC_SUCCESS;
}

static void qsgd_release(void *state)
{
  qstate *q = state;
  free(q->scratch);
  q->scratch = NULL;
}

static int terngrad_init(void *state, size_t n, const gc_compressor_params *p)
{
  if (!(p->clip >= 0) || !isfinite(p->clip))
    GC_ERRORF(GC_EINVAL, "terngrad: clip factor %g, must be finite and >= 0 "
              "(0 = no clipping)", p->clip);
  return base_init(state, n, p);
}

/* ---- closed-form bounds (float64 messages are the larger) --------------- */

static size_t identity_max_bytes(const void *st)
{
  return HDR + ((const qstate *) st)->n * 8;
}

static size_t sign_max_bytes(const void *st)
{
  return HDR + (((const qstate *) st)->n + 7) / 8;
}

static size_t scaled_sign_max_bytes(const void *st)
{
  return HDR + 8 + (((const qstate *) st)->n + 7) / 8;
}

static size_t terngrad_max_bytes(const void *st)
{
  return HDR + 8 + (2 * ((const qstate *) st)->n + 7) / 8;
}

static size_t half_max_bytes(const void *st)
{
  return HDR + 2 * ((const qstate *) st)->n;
}

static size_t qsgd_max_bytes(const void *st)
{
  const qstate *q = st;
  return HDR + 8 * q->nb + (qsgd_entry_bits(q) * q->n + 7) / 8;
}

/* 64 sign bits (1 = negative; -0 counts as +) of float32 entries, and
 * whether any of them is NaN or Inf.  With SSE2 a compare + movemask takes
 * four entries at once: the bit loop alone does not vectorise and would
 * keep the sign compressors far below streaming bandwidth. */
#if defined(__SSE2__)
#include <emmintrin.h>
static uint64_t sign_word_f32(const float *x, unsigned *bad)
{
  const __m128 zero = _mm_setzero_ps(), big = _mm_set1_ps(FLT_MAX);
  const __m128 absmask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  __m128 nonfinite = zero;
  uint64_t bits = 0;
  for (unsigned j = 0; j < 64; j += 4) {
    __m128 v = _mm_loadu_ps(x + j);
    bits |= (uint64_t) _mm_movemask_ps(_mm_cmplt_ps(v, zero)) << j;
    /* !(|v| <= FLT_MAX): true for +-Inf and for NaN (unordered) */
    nonfinite = _mm_or_ps(nonfinite, _mm_cmpnle_ps(_mm_and_ps(v, absmask), big));
  }
  *bad |= _mm_movemask_ps(nonfinite) != 0;
  return bits;
}
#define HAVE_SIGN_WORD_F32 1
#endif

/* TernGrad's clip bound sums blocks of SUM_BLOCK entries sequentially
 * from 0.0 (so a vector of one block sums exactly as a plain loop) and
 * combines them with gc__pairwise: an order the GPU twin reproduces. */
enum { SUM_BLOCK = 1024 };

/* ---- dispatched kernels ------------------------------------------------
 * The hot loops of qsgd and terngrad are written once (always-inline
 * bodies in quant_source.c) and compiled for SSE2, AVX2 and AVX-512; the
 * entry points pick one by gc__isa().  The paths perform the same IEEE
 * operations on the same values in the same order (no contraction into
 * FMA: -std=c11 turns it off in GCC, the pragma below in clang), so their
 * messages are bit-identical, which test_quant checks by forcing each. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif
#define INLINE static inline __attribute__((always_inline))
#if defined(__GNUC__) && defined(__x86_64__)
#define HAVE_ISA_PATHS 1
#define TARGET_AVX2 __attribute__((target("avx2")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#endif

/* Elements per chunk of the encoders: the uniforms of a chunk (2 KiB)
 * and its codes stay in L1 between the two loops that use them. */
enum { CHUNK = 1024 };


typedef struct rngkey { uint64_t seed; uint32_t stream, step; } rngkey;
typedef void u16_fill(const rngkey *k, uint64_t b, size_t nblk, uint16_t *u);

/* Philox blocks b .. b + nblk - 1 as 8 nblk 16-bit uniforms, the stream of
 * gc_rng_u16 (element 8 b first): gc__philox_blocks (rng_words.c) on each
 * instruction set's lanes.  One function per set, so that a kernel can
 * tell which set its uniforms come from (quant_source.c). */
static void u16_blocks_sse2(const rngkey *k, uint64_t b, size_t nblk, uint16_t *u)
{
  gc__philox_blocks(GC__ISA_SSE2, k->seed, k->stream, k->step, b, nblk, u);
}

#ifdef HAVE_ISA_PATHS
static void u16_blocks_avx512(const rngkey *k, uint64_t b, size_t nblk, uint16_t *u)
{
  gc__philox_blocks(GC__ISA_AVX512, k->seed, k->stream, k->step, b, nblk, u);
}

static void u16_blocks_avx2(const rngkey *k, uint64_t b, size_t nblk, uint16_t *u)
{
  gc__philox_blocks(GC__ISA_AVX2, k->seed, k->stream, k->step, b, nblk, u);
}
#endif

/* The whole 64-entry words of sign_pack (quant_source.c) for float32:
 * sign bits into out (8 bytes a word), and with ws each word's L1 sum in
 * the template's order (lane t of a word adds |x_j| for j = t mod 4 from
 * 0.0 in order, the word's sum is (a0 + a1) + (a2 + a3)), which the
 * caller adds up in word order; with run instead (never both) the sums are added
 * to *run here, in word order, the same sum.  Returns nonzero
 * when some entry is NaN or Inf.  The AVX paths keep the four lanes in one
 * register of doubles; words do not depend on each other, so their chains
 * overlap, and so does the one add a word of run's chain with the next
 * words' loads. */
static unsigned sign_words_sse2(const float *x, size_t nw, uint8_t *out, double *ws,
                                double *run)
{
  unsigned bad = 0;
  double acc = run ? *run : 0;
  for (size_t w = 0; w < nw; w++) {
    const float *xw = x + 64 * w;
    uint64_t bits = 0;
#if defined(HAVE_SIGN_WORD_F32)
    bits = sign_word_f32(xw, &bad);
#else
    for (unsigned j = 0; j < 64; j++) {
      bits |= (uint64_t) (xw[j] < 0) << j;
      bad |= !isfin_f32(xw[j]);
    }
#endif
    if (ws || run) {
      double a[4] = {0, 0, 0, 0};
      for (unsigned j = 0; j < 64; j += 4)
        for (unsigned t = 0; t < 4; t++)
          a[t] += fabs((double) xw[j + t]);
      double sum = (a[0] + a[1]) + (a[2] + a[3]);
      if (ws)
        ws[w] = sum;
      else
        acc += sum;
    }
    gc__store64le(out + 8 * w, bits);
  }
  if (run)
    *run = acc;
  return bad;
}

#ifdef HAVE_ISA_PATHS
/* One word's L1 in the template's order (see above). */
#define SIGN_WORD_L1(xw, sum)                                                \
  do {                                                                       \
    __m256d a = _mm256_setzero_pd();                                         \
    for (unsigned j = 0; j < 64; j += 4)                                     \
      a = _mm256_add_pd(a, _mm256_and_pd(_mm256_cvtps_pd(_mm_loadu_ps((xw) + j)), \
                                         absd));                             \
    __m128d lo = _mm256_castpd256_pd128(a), hi = _mm256_extractf128_pd(a, 1); \
    (sum) = (_mm_cvtsd_f64(lo) + _mm_cvtsd_f64(_mm_unpackhi_pd(lo, lo)))      \
             + (_mm_cvtsd_f64(hi) + _mm_cvtsd_f64(_mm_unpackhi_pd(hi, hi))); \
  } while (0)

TARGET_AVX512 static unsigned sign_words_avx512(const float *x, size_t nw, uint8_t *out,
                                                double *ws, double *run)
{
  double acc = run ? *run : 0;
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
  const __m256d absd = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
  const __m512 zero = _mm512_setzero_ps();
  __m512i mx = _mm512_setzero_si512();
  for (size_t w = 0; w < nw; w++) {
    const float *xw = x + 64 * w;
    uint64_t bits = 0;
    for (unsigned v = 0; v < 4; v++) {
      /* 4 KiB ahead, as sumsq: without it sign took 3.4 ms of 25e6
       * entries on one core, where a plain read takes 2.7 */
      _mm_prefetch((const char *) (xw + 16 * v + 1024), _MM_HINT_T0);
      __m512 xv = _mm512_loadu_ps(xw + 16 * v);
      bits |= (uint64_t) _mm512_cmp_ps_mask(xv, zero, _CMP_LT_OQ) << (16 * v);
      mx = _mm512_max_epu32(mx, _mm512_and_si512(_mm512_castps_si512(xv), absmask));
    }
    if (ws || run) {
      double sum;
      SIGN_WORD_L1(xw, sum);
      if (ws)
        ws[w] = sum;
      else
        acc += sum;
    }
    gc__store64le(out + 8 * w, bits);
  }
  if (run)
    *run = acc;
  return _mm512_reduce_max_epu32(mx) >= 0x7f800000u;
}

TARGET_AVX2 static unsigned sign_words_avx2(const float *x, size_t nw, uint8_t *out,
                                            double *ws, double *run)
{
  double acc = run ? *run : 0;
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
  const __m256d absd = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
  const __m256 zero = _mm256_setzero_ps();
  __m256i mx = _mm256_setzero_si256();
  for (size_t w = 0; w < nw; w++) {
    const float *xw = x + 64 * w;
    uint64_t bits = 0;
    for (unsigned v = 0; v < 8; v++) {
      if (!(v & 1))
        _mm_prefetch((const char *) (xw + 8 * v + 1024), _MM_HINT_T0);
      __m256 xv = _mm256_loadu_ps(xw + 8 * v);
      bits |= (uint64_t) _mm256_movemask_ps(_mm256_cmp_ps(xv, zero, _CMP_LT_OQ)) << (8 * v);
      mx = _mm256_max_epu32(mx, _mm256_and_si256(_mm256_castps_si256(xv), absmask));
    }
    if (ws || run) {
      double sum;
      SIGN_WORD_L1(xw, sum);
      if (ws)
        ws[w] = sum;
      else
        acc += sum;
    }
    gc__store64le(out + 8 * w, bits);
  }
  if (run)
    *run = acc;
  uint32_t t[8], m = 0;
  _mm256_storeu_si256((__m256i *) t, mx);
  for (int j = 0; j < 8; j++)
    m = t[j] > m ? t[j] : m;
  return m >= 0x7f800000u;
}
#undef SIGN_WORD_L1
#endif

static unsigned sign_words_isa(const float *x, size_t nw, uint8_t *out, double *ws,
                               double *run)
{
  return ISA_KERNEL(sign_words, sign_words_sse2)(x, nw, out, ws, run);
}

/* The words on the OpenMP threads.  Without l1, SIGN_PIECE words a
 * piece.  With l1 on one thread the sums go straight into *l1's chain;
 * on more, the word sums of a group of SIGN_GROUP_WORDS words (one of two
 * stack buffers) are kept and added to *l1 in word order, the template's
 * sum for any thread count, by one thread while the others start on the
 * next group (its 2T pieces dynamic, so they take the adding thread's
 * share).  The chain, one dependent add a word (0.3 ms of 25e6 entries),
 * ran alone after each group before: 2.35 -> 1.95 ms on two threads. */
enum { SIGN_PIECE = 1024, SIGN_GROUP_WORDS = 4096, SIGN_PIECE_MIN = 128 };

static size_t sign_group_len(size_t g, size_t nw)
{
  size_t g0 = g * SIGN_GROUP_WORDS;
  return nw - g0 < SIGN_GROUP_WORDS ? nw - g0 : SIGN_GROUP_WORDS;
}

static unsigned sign_words_f32(const float *x, size_t nw, uint8_t *out, double *l1)
{
  unsigned bad = 0;
  int T = gc__threads_for(64 * nw, PAR_MIN, 0);
  if (l1 && T == 1)
    return sign_words_isa(x, nw, out, NULL, l1);
  if (!l1) {
    size_t np = (nw + SIGN_PIECE - 1) / SIGN_PIECE;
    #pragma omp parallel for schedule(static) reduction(| : bad) num_threads(T) if (T > 1)
    for (size_t p = 0; p < np; p++) {
      size_t lo = p * SIGN_PIECE, m = nw - lo < SIGN_PIECE ? nw - lo : SIGN_PIECE;
      bad |= sign_words_isa(x + 64 * lo, m, out + 8 * lo, NULL, NULL);
    }
    return bad;
  }
  double ws[2][SIGN_GROUP_WORDS];
  const size_t ng = (nw + SIGN_GROUP_WORDS - 1) / SIGN_GROUP_WORDS;
  size_t piece = (SIGN_GROUP_WORDS + 2 * (size_t) T - 1) / (2 * (size_t) T);
  piece = piece > SIGN_PIECE_MIN ? piece : SIGN_PIECE_MIN;
  #pragma omp parallel num_threads(T) reduction(| : bad)
  for (size_t g = 0; g <= ng; g++) {
    if (g > 0) {
      /* group g - 1 is whole: the barrier ending its loop */
      #pragma omp single nowait
      {
        const double *wp = ws[(g - 1) & 1];
        size_t gn = sign_group_len(g - 1, nw);
        double acc = *l1;
        for (size_t j = 0; j < gn; j++)
          acc += wp[j];
        *l1 = acc;
      }
    }
    if (g < ng) {
      /* ws[g & 1] was last read by the single of g - 2, which the barrier
       * ending loop g - 1 waited for; the single of g - 1 reads the other
       * buffer meanwhile */
      size_t g0 = g * SIGN_GROUP_WORDS, gn = sign_group_len(g, nw);
      size_t np = (gn + piece - 1) / piece;
      #pragma omp for schedule(dynamic, 1)
      for (size_t p = 0; p < np; p++) {
        size_t lo = p * piece, m = gn - lo < piece ? gn - lo : piece;
        bad |= sign_words_isa(x + 64 * (g0 + lo), m, out + 8 * (g0 + lo), ws[g & 1] + lo,
                              NULL);
      }
    }
  }
  return bad;
}

/* Copy float32 x[0, n) to out as little-endian words, in the same pass
 * counting nonzeros (-0 is zero) and the largest absolute bit pattern (at
 * least 0x7f800000 when some entry is NaN or Inf): one read of x. */
INLINE size_t copy_count_body(const float *x, size_t n, uint8_t *out, uint32_t *amax)
{
  size_t nnz = 0;
  uint32_t m = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, x + i, sizeof b);
    memcpy(out + 4 * i, &b, sizeof b);
    uint32_t a = b & 0x7fffffffu;
    nnz += a != 0;
    m = a > m ? a : m;
  }
  *amax = m;
  return nnz;
}

/* bfloat16 of float32 x[0, n) (round to nearest even on the bit pattern,
 * as to_bf16_f32 for every finite x) as little-endian halves, nonzero
 * halves counted and the largest absolute bit pattern of x in *amax, in
 * one pass; the caller rejects non-finite x by *amax. */
INLINE size_t bf16_count_body(const float *x, size_t n, uint8_t *out, uint32_t *amax)
{
  size_t nnz = 0;
  uint32_t m = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, x + i, sizeof b);
    uint32_t a = b & 0x7fffffffu;
    m = a > m ? a : m;
    uint16_t h = (uint16_t) ((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
    memcpy(out + 2 * i, &h, sizeof h);
    nnz += (h & 0x7fffu) != 0;
  }
  *amax = m;
  return nnz;
}

/* The end of a block's sums: the tail x[i, m) into lanes 0.. (and its
 * magnitudes into *amax), then the sixteen lanes folded pairwise. */
INLINE double sumsq_block_finish(double acc[16], const float *x, size_t i, size_t m,
                                 uint32_t *amax)
{
  for (unsigned j = 0; i + j < m; j++) {
    acc[j] += (double) x[i + j] * (double) x[i + j];
    uint32_t b;
    memcpy(&b, x + i + j, sizeof b);
    b &= 0x7fffffffu;
    *amax = b > *amax ? b : *amax;
  }
  for (unsigned h = 8; h; h >>= 1)
    for (unsigned j = 0; j < h; j++)
      acc[j] += acc[j + h];
  return acc[0];
}

/* sum x_i^2 over x[0, m), m <= SUM_BLOCK, in double (each square is
 * exact): sixteen lane sums, lane j adding x_j, x_{j+16}, ... in order,
 * then folded by halves (lane j += lane j + h, h = 8, 4, 2, 1); *amax gets
 * the largest absolute bit pattern as above.  The order is what the
 * vector paths compute and what cuda/compress/wire.cu reproduces. */
INLINE double sumsq_block_body(const float *x, size_t m, uint32_t *amax)
{
  double acc[16] = {0};
  size_t i = 0;
  for (; i + 16 <= m; i += 16)
    for (unsigned j = 0; j < 16; j++)
      acc[j] += (double) x[i + j] * (double) x[i + j];
  uint32_t b = gc__absmax_run(x, i);
  *amax = b > *amax ? b : *amax;
  return sumsq_block_finish(acc, x, i, m, amax);
}

/* The block sums of x[0, n), blk <= SUM_BLOCK entries each (SUM_BLOCK for
 * a bucket's norm, the bucket length for a run of small buckets), into
 * part[]; returns their number. */
INLINE size_t sumsq_blocks_body(const float *x, size_t n, size_t blk, double *part,
                                uint32_t *amax)
{
  size_t nb = 0;
  for (size_t lo = 0; lo < n; lo += blk)
    part[nb++] = sumsq_block_body(x + lo, n - lo < blk ? n - lo : blk, amax);
  return nb;
}

/* One entry point per kernel (DISPATCH, gc_dispatch.h); DISPATCH_RNG
 * passes the body the 16-bit uniform generator of the same instruction
 * set as its last argument. */
#define DISPATCH_RNG(ret, name, body, params, ...)                          \
  DISPATCH_WITH(ret, name, body, u16_blocks, params, __VA_ARGS__)

DISPATCH(size_t, copy_count_piece, copy_count_body,
         (const float *x, size_t n, uint8_t *out, uint32_t *amax), x, n, out, amax)

typedef size_t (*count_piece_fn)(const float *x, size_t n, uint8_t *out,
                                 uint32_t *amax);

/* A counting pack (a piece writing `width` bytes per entry) over the
 * OpenMP threads (a sum and a maximum of integers: any split gives the
 * same).  Messages of GC__STREAM_MIN_BYTES or more are written by the
 * `streamed` piece where the instruction set has one (NULL: none; see
 * STREAMED): streaming stores, which skip the read a plain store makes of
 * each line it fills; the same bytes. */
static size_t count_pieces(count_piece_fn piece, count_piece_fn streamed, size_t width,
                           const float *x, size_t n, uint8_t *out, uint32_t *amax)
{
  size_t nnz = 0, np = (n + PAR_CHUNK - 1) / PAR_CHUNK;
  uint32_t m = 0;
  if (streamed && width * n >= GC__STREAM_MIN_BYTES)
    piece = streamed;
  #pragma omp parallel for schedule(static) reduction(+ : nnz) reduction(max : m) \
      if (n >= PAR_MIN)
  for (size_t j = 0; j < np; j++) {
    size_t lo = j * PAR_CHUNK;
    uint32_t mj;
    nnz += piece(x + lo, n - lo < PAR_CHUNK ? n - lo : PAR_CHUNK, out + width * lo, &mj);
    m = mj > m ? mj : m;
  }
  *amax = m;
  return nnz;
}

#ifdef HAVE_ISA_PATHS
/* copy_count_body with AVX-512 and streaming stores, which skip the read
 * a plain store makes of each line it fills (a third of identity's
 * memory traffic): out's whole 64-byte lines are rebuilt from the two
 * aligned registers of x under them (a two-register dword permute, and
 * for an out not aligned like x a shift across dwords), so x is read
 * once, by the same loads that count.  (Loading the lines' bytes from x
 * again, unaligned, ran slower than plain stores on Zen 5.)  One core
 * copied 25e6 entries in 4.2 ms so, 4.7 with plain stores. */
TARGET_AVX512 static size_t copy_count_stream_avx512(const float *x, size_t n, uint8_t *out,
                                                     uint32_t *amax)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
  size_t head = (size_t) (-(uintptr_t) out & 63), nnz = 0, j = 0;
  if (n < 64)
    return copy_count_piece(x, n, out, amax);
  /* line j of out is bytes head + 64 j .. + 63 of x: dwords k .. k + 15
   * of x's groups j and j + 1 shifted down r bytes */
  const unsigned k = (unsigned) head / 4, r = (unsigned) head % 4;
  const __m512i lo_idx = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                            11, 12, 13, 14, 15),
                                          _mm512_set1_epi32((int) k));
  const __m512i hi_idx = _mm512_add_epi32(lo_idx, _mm512_set1_epi32(1));
  const __m128i down = _mm_cvtsi32_si128((int) (8 * r)), up = _mm_cvtsi32_si128((int) (32 - 8 * r));
  __m512i mx = _mm512_setzero_si512(), a0 = _mm512_loadu_si512((const void *) x);
  memcpy(out, x, head);
  for (; j + 1 < n / 16; j++) {
    __m512i a1 = _mm512_loadu_si512((const void *) (x + 16 * (j + 1)));
    __m512i a = _mm512_and_si512(a0, absmask);
    mx = _mm512_max_epu32(mx, a);
    nnz += (size_t) __builtin_popcount(_mm512_test_epi32_mask(a, a));
    __m512i line = _mm512_permutex2var_epi32(a0, lo_idx, a1);
    if (r)
      line = _mm512_or_si512(_mm512_srl_epi32(line, down),
                             _mm512_sll_epi32(_mm512_permutex2var_epi32(a0, hi_idx, a1), up));
    _mm512_stream_si512((void *) (out + head + 64 * j), line);
    a0 = a1;
  }
  _mm_sfence();   /* streaming stores are weakly ordered */
  /* entries 16 j on (rewriting the first head bytes of their line with
   * the values it has) */
  uint32_t m;
  nnz += copy_count_piece(x + 16 * j, n - 16 * j, out + 64 * j, &m);
  uint32_t v = _mm512_reduce_max_epu32(mx);
  *amax = m > v ? m : v;
  return nnz;
}
/* count_pieces' streamed piece: the AVX-512 one where that path runs */
#define STREAMED(avx512_piece) (gc__isa() >= GC__ISA_AVX512 ? avx512_piece : NULL)
#else
#define STREAMED(avx512_piece) NULL
#endif

static size_t copy_count(const float *x, size_t n, uint8_t *out, uint32_t *amax)
{
  return count_pieces(copy_count_piece, STREAMED(copy_count_stream_avx512), 4, x, n, out,
                      amax);
}

DISPATCH(size_t, bf16_count_piece, bf16_count_body,
         (const float *x, size_t n, uint8_t *out, uint32_t *amax), x, n, out, amax)

#ifdef HAVE_ISA_PATHS
/* bf16_count_body with AVX-512, sixteen at a time (GCC left the generic
 * loop at half the streaming bandwidth): the same integer rounding, the
 * halves packed by vpmovdw. */
TARGET_AVX512 static size_t bf16_count_avx512(const float *x, size_t n, uint8_t *out,
                                              uint32_t *amax)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1);
  const __m512i half = _mm512_set1_epi32(0x7fff);
  const __m256i mag = _mm256_set1_epi16(0x7fff);
  __m512i m = _mm512_setzero_si512();
  size_t nnz = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i b = _mm512_loadu_si512((const void *) (x + i));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(b, half),
                                 _mm512_and_si512(_mm512_srli_epi32(b, 16), one));
    __m256i h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
    _mm256_storeu_si256((__m256i *) (out + 2 * i), h);
    m = _mm512_max_epu32(m, _mm512_and_si512(b, absmask));
    nnz += (size_t) __builtin_popcount(_mm256_test_epi16_mask(h, mag));
  }
  uint32_t t;
  nnz += bf16_count_body(x + i, n - i, out + 2 * i, &t);
  uint32_t v = _mm512_reduce_max_epu32(m);
  *amax = t > v ? t : v;
  return nnz;
}
#endif

static size_t bf16_piece(const float *x, size_t n, uint8_t *out, uint32_t *amax)
{
#ifdef HAVE_ISA_PATHS
  if (gc__isa() >= GC__ISA_AVX512)
    return bf16_count_avx512(x, n, out, amax);
#endif
  return bf16_count_piece(x, n, out, amax);
}

/* IEEE halves of float32 x[0, n) (round to nearest even:
 * gc__half_from_float_bits, which equals gc__half_from_double of the
 * float), nonzero halves counted and the largest absolute bit pattern of x
 * in *amax, in one pass; the caller rejects non-finite x by *amax.  With
 * F16C the conversion is the instruction's (the same rounding, one step);
 * the scalar conversion alone ran at a fifth of the streaming bandwidth. */
static size_t fp16_count_scalar(const float *x, size_t n, uint8_t *out, uint32_t *amax)
{
  size_t nnz = 0;
  uint32_t m = *amax;
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, x + i, sizeof b);
    uint32_t a = b & 0x7fffffffu;
    m = a > m ? a : m;
    uint16_t h = gc__half_from_float_bits(b);
    memcpy(out + 2 * i, &h, sizeof h);
    nnz += (h & 0x7fffu) != 0;
  }
  *amax = m;
  return nnz;
}

#ifdef HAVE_ISA_PATHS
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c")))
static size_t fp16_count_avx512(const float *x, size_t n, uint8_t *out, uint32_t *amax)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
  const __m256i mag = _mm256_set1_epi16(0x7fff);
  __m512i m = _mm512_setzero_si512();
  size_t nnz = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256((__m256i *) (out + 2 * i), h);
    m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_castps_si512(v), absmask));
    nnz += (size_t) __builtin_popcount(_mm256_test_epi16_mask(h, mag));
  }
  *amax = _mm512_reduce_max_epu32(m);
  _mm256_zeroupper();   /* GCC leaves the upper halves dirty before the SSE2 tail */
  return nnz + fp16_count_scalar(x + i, n - i, out + 2 * i, amax);
}

__attribute__((target("avx2,f16c")))
static size_t fp16_count_avx2(const float *x, size_t n, uint8_t *out, uint32_t *amax)
{
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
  const __m128i mag = _mm_set1_epi16(0x7fff), zero = _mm_setzero_si128();
  __m256i m = _mm256_setzero_si256();
  size_t zeros = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128((__m128i *) (out + 2 * i), h);
    m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_castps_si256(v), absmask));
    zeros += (size_t) __builtin_popcount(
        (unsigned) _mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, mag), zero)));
  }
  uint32_t t[8];
  _mm256_storeu_si256((__m256i *) t, m);
  *amax = 0;
  for (int j = 0; j < 8; j++)
    *amax = t[j] > *amax ? t[j] : *amax;
  _mm256_zeroupper();   /* as in fp16_count_avx512 */
  return i - zeros / 2 + fp16_count_scalar(x + i, n - i, out + 2 * i, amax);
}
#endif

static size_t fp16_count_piece(const float *x, size_t n, uint8_t *out, uint32_t *amax)
{
#ifdef HAVE_ISA_PATHS
  int isa = gc__isa();
  if (isa >= GC__ISA_AVX512)
    return fp16_count_avx512(x, n, out, amax);
  if (isa >= GC__ISA_AVX2 && have_f16c())
    return fp16_count_avx2(x, n, out, amax);
#endif
  *amax = 0;
  return fp16_count_scalar(x, n, out, amax);
}

#ifdef HAVE_ISA_PATHS
/* fp16_count_avx512 (bf: bf16_count_avx512) with streaming stores, for
 * count_pieces' large messages: sixteen halves, one 32-byte store, an
 * iteration (joining two into a 64-byte store ran far slower on Zen 5,
 * with plain stores too); the entries before out's first 32-byte block,
 * those after its last, and an odd out, which no run of whole halves
 * aligns, go by the plain kernel.  25e6 entries on one core: bf16 3.8 ->
 * 3.1 ms. */
#define TARGET_AVX512_F16C __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c")))
INLINE TARGET_AVX512_F16C size_t half_stream_body(const float *x, size_t n, uint8_t *out,
                                                  uint32_t *amax, int bf)
{
  count_piece_fn plain = bf ? bf16_count_avx512 : fp16_count_avx512;
  if ((uintptr_t) out & 1)
    return plain(x, n, out, amax);
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1);
  const __m512i half = _mm512_set1_epi32(0x7fff);
  const __m256i mag = _mm256_set1_epi16(0x7fff);
  size_t i = (size_t) (-(uintptr_t) out & 31) / 2;
  i = i < n ? i : n;
  uint32_t m0, m1;
  size_t nnz = plain(x, i, out, &m0);
  __m512i mx = _mm512_setzero_si512();
  for (; i + 16 <= n; i += 16) {
    __m512i b = _mm512_loadu_si512((const void *) (x + i));
    __m256i h;
    if (bf) {   /* as bf16_count_avx512 */
      __m512i r = _mm512_add_epi32(_mm512_add_epi32(b, half),
                                   _mm512_and_si512(_mm512_srli_epi32(b, 16), one));
      h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
    } else {
      h = _mm512_cvtps_ph(_mm512_castsi512_ps(b), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    _mm256_stream_si256((__m256i *) (out + 2 * i), h);
    mx = _mm512_max_epu32(mx, _mm512_and_si512(b, absmask));
    nnz += (size_t) __builtin_popcount(_mm256_test_epi16_mask(h, mag));
  }
  _mm_sfence();   /* streaming stores are weakly ordered */
  nnz += plain(x + i, n - i, out + 2 * i, &m1);
  uint32_t m = _mm512_reduce_max_epu32(mx);
  m = m0 > m ? m0 : m;
  *amax = m1 > m ? m1 : m;
  return nnz;
}

TARGET_AVX512_F16C static size_t fp16_stream_avx512(const float *x, size_t n, uint8_t *out,
                                                    uint32_t *amax)
{
  return half_stream_body(x, n, out, amax, 0);
}

TARGET_AVX512_F16C static size_t bf16_stream_avx512(const float *x, size_t n, uint8_t *out,
                                                    uint32_t *amax)
{
  return half_stream_body(x, n, out, amax, 1);
}
#undef TARGET_AVX512_F16C
#endif

static size_t fp16_count(const float *x, size_t n, uint8_t *out, uint32_t *amax)
{
  return count_pieces(fp16_count_piece, STREAMED(fp16_stream_avx512), 2, x, n, out, amax);
}

static size_t bf16_count(const float *x, size_t n, uint8_t *out, uint32_t *amax)
{
  return count_pieces(bf16_piece, STREAMED(bf16_stream_avx512), 2, x, n, out, amax);
}

/* gc__absmax_bits_f32 over the OpenMP threads (a maximum: any split gives the
 * same). */
static uint32_t absmax_bits(const float *x, size_t n)
{
  uint32_t m = 0;
  size_t np = (n + PAR_CHUNK - 1) / PAR_CHUNK;
  #pragma omp parallel for schedule(static) reduction(max : m) if (n >= PAR_MIN)
  for (size_t j = 0; j < np; j++) {
    size_t lo = j * PAR_CHUNK;
    uint32_t v = gc__absmax_bits_f32(x + lo, n - lo < PAR_CHUNK ? n - lo : PAR_CHUNK);
    m = v > m ? v : m;
  }
  return m;
}

#ifdef HAVE_ISA_PATHS
/* sumsq_blocks_body with AVX-512: the sixteen lanes as two registers of
 * doubles, the largest magnitude in the same pass, and the next 4 KiB
 * asked for ahead (GCC's loop, then a second one for the maximum, ran at
 * about 0.7 of the streaming bandwidth on one core); the lane sums, the
 * tail and the fold are the body's. */
TARGET_AVX512 static size_t sumsq_blocks_avx512(const float *x, size_t n, size_t blk,
                                                double *part, uint32_t *amax)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
  __m512i mx = _mm512_setzero_si512();
  size_t nb = 0;
  for (size_t lo = 0; lo < n; lo += blk) {
    const float *xb = x + lo;
    size_t m = n - lo < blk ? n - lo : blk, i = 0;
    __m512d a0 = _mm512_setzero_pd(), a1 = a0;
    for (; i + 16 <= m; i += 16) {
      _mm_prefetch((const char *) (xb + i + 1024), _MM_HINT_T0);
      __m512 v = _mm512_loadu_ps(xb + i);
      __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
      __m512d d1 = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
      a0 = _mm512_add_pd(a0, _mm512_mul_pd(d0, d0));
      a1 = _mm512_add_pd(a1, _mm512_mul_pd(d1, d1));
      mx = _mm512_max_epu32(mx, _mm512_and_si512(_mm512_castps_si512(v), absmask));
    }
    double acc[16];
    _mm512_storeu_pd(acc, a0);
    _mm512_storeu_pd(acc + 8, a1);
    part[nb++] = sumsq_block_finish(acc, xb, i, m, amax);
  }
  uint32_t v = _mm512_reduce_max_epu32(mx);
  *amax = v > *amax ? v : *amax;
  return nb;
}
#endif

#ifdef HAVE_ISA_PATHS
/* The same with AVX2: the sixteen lanes as four registers of doubles. */
TARGET_AVX2 static size_t sumsq_blocks_avx2(const float *x, size_t n, size_t blk,
                                            double *part, uint32_t *amax)
{
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
  __m256i mx = _mm256_setzero_si256();
  size_t nb = 0;
  for (size_t lo = 0; lo < n; lo += blk) {
    const float *xb = x + lo;
    size_t m = n - lo < blk ? n - lo : blk, i = 0;
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 16 <= m; i += 16) {
      _mm_prefetch((const char *) (xb + i + 1024), _MM_HINT_T0);
      __m256 v = _mm256_loadu_ps(xb + i), w = _mm256_loadu_ps(xb + i + 8);
      __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
      __m256d d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
      __m256d d2 = _mm256_cvtps_pd(_mm256_castps256_ps128(w));
      __m256d d3 = _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1));
      a0 = _mm256_add_pd(a0, _mm256_mul_pd(d0, d0));
      a1 = _mm256_add_pd(a1, _mm256_mul_pd(d1, d1));
      a2 = _mm256_add_pd(a2, _mm256_mul_pd(d2, d2));
      a3 = _mm256_add_pd(a3, _mm256_mul_pd(d3, d3));
      mx = _mm256_max_epu32(mx, _mm256_and_si256(_mm256_castps_si256(v), absmask));
      mx = _mm256_max_epu32(mx, _mm256_and_si256(_mm256_castps_si256(w), absmask));
    }
    double acc[16];
    _mm256_storeu_pd(acc, a0);
    _mm256_storeu_pd(acc + 4, a1);
    _mm256_storeu_pd(acc + 8, a2);
    _mm256_storeu_pd(acc + 12, a3);
    part[nb++] = sumsq_block_finish(acc, xb, i, m, amax);
  }
  uint32_t t[8];
  _mm256_storeu_si256((__m256i *) t, mx);
  for (int j = 0; j < 8; j++)
    *amax = t[j] > *amax ? t[j] : *amax;
  return nb;
}
#endif

static size_t sumsq_blocks(const float *x, size_t n, size_t blk, double *part, uint32_t *amax)
{
  return ISA_KERNEL(sumsq_blocks, sumsq_blocks_body)(x, n, blk, part, amax);
}

/* The squared L2 norm of a float32 bucket: the block sums of SUM_BLOCK
 * entries combined by gc__pairwise in block order.  The block sums of a
 * group of SUM_GROUP blocks are computed on the OpenMP threads (16 blocks
 * a piece), then pushed in order: the same result for any thread count. */
enum { SUM_GROUP = 1024, SUM_PIECE = 16 };
static double sumsq(const float *x, size_t n, uint32_t *amax)
{
  double part[SUM_GROUP];
  *amax = 0;
  if (n <= SUM_BLOCK) {
    /* one block sum is its own pairwise total; the parallel region and the
     * pairwise state below cost more than the sum of a small bucket (they
     * were 20 of 37 ms for d = 2.5e7 in buckets of 512) */
    sumsq_blocks(x, n, SUM_BLOCK, part, amax);
    return part[0];
  }
  gc__pairwise t = {{0}, 0, 0};
  uint32_t m = 0;
  for (size_t g0 = 0; g0 < n; g0 += (size_t) SUM_GROUP * SUM_BLOCK) {
    size_t gn = n - g0 < (size_t) SUM_GROUP * SUM_BLOCK ? n - g0 : (size_t) SUM_GROUP * SUM_BLOCK;
    size_t nb = (gn + SUM_BLOCK - 1) / SUM_BLOCK, np = (nb + SUM_PIECE - 1) / SUM_PIECE;
    if (n < PAR_MIN) {   /* the same block sums, with no parallel region */
      sumsq_blocks(x + g0, gn, SUM_BLOCK, part, &m);
    } else {
      #pragma omp parallel for schedule(static) reduction(max : m)
      for (size_t k = 0; k < np; k++) {
        size_t lo = k * SUM_PIECE * SUM_BLOCK, len = gn - lo < SUM_PIECE * SUM_BLOCK
                                                     ? gn - lo : SUM_PIECE * SUM_BLOCK;
        uint32_t mk = 0;
        sumsq_blocks(x + g0 + lo, len, SUM_BLOCK, part + k * SUM_PIECE, &mk);
        m = mk > m ? mk : m;
      }
    }
    for (size_t k = 0; k < nb; k++)
      gc__pairwise_push(&t, part[k]);
  }
  *amax = m;
  return gc__pairwise_total(&t);
}

/* TernGrad's decisions b_i = [u_i < P_i], P_i = (double) a_i inv (see
 * tern_chunk in quant_source.c), for float32 entries with AVX-512.
 * tern_group_exact: sixteen at a time as the generic loop does them; for
 * an integer u and P >= 0, u < P exactly when u < ceil(P), so one
 * rounding conversion and an integer compare.  sent gets b, neg b & x < 0,
 * 64 entries from x and u. */
#ifdef HAVE_ISA_PATHS
INLINE TARGET_AVX512 void tern_group_exact(const float *x, const uint16_t *u, __m512 cv,
                                           __m512d iv, uint64_t *sent, uint64_t *neg)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
  const __m512 zero = _mm512_setzero_ps();
  uint64_t b = 0, n = 0;
  for (unsigned v = 0; v < 4; v++) {
    __m512 xv = _mm512_loadu_ps(x + 16 * v);
    __m512 a = _mm512_min_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(xv),
                                                                  absmask)), cv);
    __m512d p0 = _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(a)), iv);
    __m512d p1 = _mm512_mul_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1)), iv);
    __m256i c0 = _mm512_cvt_roundpd_epi32(p0, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
    __m256i c1 = _mm512_cvt_roundpd_epi32(p1, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
    __m512i ceilp = _mm512_inserti64x4(_mm512_castsi256_si512(c0), c1, 1);
    __m512i uv = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) (u + 16 * v)));
    __mmask16 bv = _mm512_cmplt_epi32_mask(uv, ceilp);
    b |= (uint64_t) bv << (16 * v);
    n |= (uint64_t) _mm512_mask_cmp_ps_mask(bv, xv, zero, _CMP_LT_OQ) << (16 * v);
  }
  *sent = b;
  *neg = n;
}

/* TernGrad's codes of float32 entries (tern_chunk) with AVX-512, for the
 * whole groups of 64 in x[0, m): 16 bytes of codes per group into out;
 * returns the nonzeros.  The double conversions of tern_group_exact are
 * its cost (they alone took 3 ms of 25e6 entries on Zen 5), so the
 * decision is made in float and checked: with f = (float) inv (finite:
 * the caller passes inv < 2^127) and p = a f in float, |p - P| < 2^-7
 * (a <= s, so a inv <= 2^16 (1 + 2^-53); two float roundings and one
 * double, each a relative 2^-24 at most, or 2^-150 below the normal
 * range).  Where the float u - p (exact when |u - p| <= 2^-4: Sterbenz,
 * or u = 0) exceeds 2^-5 in magnitude, u < p says the same as u < P;
 * a group with any lane within 2^-5 is redone exactly.  u is uniform, so
 * a lane needs that with probability at most 2^-16, whatever x is.  The
 * codes are built as bytes (1, or 3 when negative) and folded four to a
 * byte: dword c0 | c1 << 8 | c2 << 16 | c3 << 24 ORed with itself
 * shifted by 6, 12 and 18 holds c_t at bits 2t of its low byte, which
 * vpmovdb keeps. */
TARGET_AVX512 static size_t tern_codes_avx512(const float *x, size_t m, const uint16_t *u,
                                              float c, double inv, uint8_t *out)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
  const __m512i one8 = _mm512_set1_epi8(1), three8 = _mm512_set1_epi8(3);
  const __m512 tol = _mm512_set1_ps(0x1p-5f);
  const __m512 cv = _mm512_set1_ps(c);
  const __m512 fv = _mm512_set1_ps((float) inv);
  const __m512d iv = _mm512_set1_pd(inv);
  size_t nnz = 0;
  for (size_t t = 0; t + 64 <= m; t += 64) {
    __mmask16 b[4], n[4];
    __m512 dist = _mm512_set1_ps(1.0f);   /* the least |u - p|, or 1 */
    for (unsigned v = 0; v < 4; v++) {
      /* 8 KiB ahead: without it the pass ran 0.7 ms (of 25e6 entries)
       * slower from memory than from cache (a prefetch never faults) */
      _mm_prefetch((const char *) (x + t + 16 * v + 2048), _MM_HINT_T0);
      __m512 xv = _mm512_loadu_ps(x + t + 16 * v);
      __m512 a = _mm512_min_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(xv),
                                                                    absmask)), cv);
      __m512 p = _mm512_mul_ps(a, fv);
      __m512i ui = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) (u + t + 16 * v)));
      __m512 uf = _mm512_cvtepi32_ps(ui);   /* exact: u < 2^16 */
      b[v] = _mm512_cmp_ps_mask(uf, p, _CMP_LT_OQ);
      /* the sign bit: a sent entry is nonzero, so -0 never shows */
      n[v] = b[v] & _mm512_movepi32_mask(_mm512_castps_si512(xv));
      /* vrangeps 0x0A: the smaller magnitude, sign cleared */
      dist = _mm512_range_ps(dist, _mm512_sub_ps(uf, p), 0x0A);
    }
    __mmask64 sent = _mm512_kunpackd(_mm512_kunpackw(b[3], b[2]), _mm512_kunpackw(b[1], b[0]));
    __mmask64 neg = _mm512_kunpackd(_mm512_kunpackw(n[3], n[2]), _mm512_kunpackw(n[1], n[0]));
    if (__builtin_expect(_mm512_cmp_ps_mask(dist, tol, _CMP_LE_OQ) != 0, 0)) {
      uint64_t bs, ns;
      tern_group_exact(x + t, u + t, cv, iv, &bs, &ns);
      sent = _cvtu64_mask64(bs);
      neg = _cvtu64_mask64(ns);
    }
    __m512i codes = _mm512_mask_mov_epi8(_mm512_maskz_mov_epi8(sent, one8), neg, three8);
    __m512i f = _mm512_ternarylogic_epi32(codes, _mm512_srli_epi32(codes, 6),
                                          _mm512_srli_epi32(codes, 12), 0xFE);
    f = _mm512_or_si512(f, _mm512_srli_epi32(codes, 18));
    _mm_storeu_si128((__m128i *) (out + t / 4), _mm512_cvtepi32_epi8(f));
    nnz += (size_t) __builtin_popcountll(_cvtmask64_u64(sent));
  }
  return nnz;
}
#endif

/* qsgd's symbols of float32 entries (quant_source.c, qsgd_syms_chunk)
 * with AVX-512, for the whole groups of sixteen in x[0, m); returns the
 * nonzero levels.  Half the conversions of the generic loop, which were
 * its cost: with r = |x| k (as there) and U = u 2^-16, the level
 * l + [u < (r - l) 2^16], l = floor r, is ceil(r - U) with r - U rounded
 * once.  Exactly: for r >= 1 (r < 16 with s <= 15) r - U is
 * representable; for r < 1 it is exact when U/2 <= r <= 2U (Sterbenz),
 * lies in (0, 1) when r > 2U and in (-1, 0) when r < U/2; and U < r - l
 * puts r - U in (l, l + 1), U >= r - l in (l - 1, l] (a ceiling of -0 is
 * level 0).  qsgd_levels16 gives the sixteen levels so.
 * Groups of 64 are decided in float first, as TernGrad's kernel does,
 * since the conversions to double and back are most of the cost: with
 * K = k 2^16 (its float finite: k 2^16 < 2^127 is checked) and R = r 2^16,
 * the level is ceil((R - u) 2^-16).  The float R' = |x| (float) K is
 * within R 2^-23 <= 2^-3 of R (R <= s 2^16 (1 + 2^-52) < 2^20, since
 * |x| <= norm; two float roundings and the double one, or 2^-150 below the
 * normal range), and v = R' - u is exact wherever it lies within 2^-2 of
 * a multiple of 2^16 (Sterbenz near 0; above, both are multiples of
 * ulp(R') and |v| < 2^24 ulp(R')), and within 2^-4 of R' - u elsewhere.
 * So when w = v 2^-16 is more than 2^-18 from every integer, ceil(w)
 * is the exact level; a group with a lane closer (probability at most
 * 2^-15 a lane: u is uniform) is redone by qsgd_levels16.  The symbols of
 * a group are made as bytes (two packs and a dword permute for the four
 * registers, and the sign and level bits under 64-bit masks).  3.3 ms of
 * 25e6 entries with qsgd_levels16 alone, 2.2 ms so, on Zen 5. */
#ifdef HAVE_ISA_PATHS
INLINE TARGET_AVX512 __m512i qsgd_levels16(const float *xc, const uint16_t *uc, __m512d kv,
                                           __m512i smax, __mmask16 *neg)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
  const __m512d ulp = _mm512_set1_pd(1.0 / 65536.0);
  __m512 xv = _mm512_loadu_ps(xc);
  *neg = _mm512_cmp_ps_mask(xv, _mm512_setzero_ps(), _CMP_LT_OQ);
  __m512 ax = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(xv), absmask));
  __m512d r0 = _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(ax)), kv);
  __m512d r1 = _mm512_mul_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(ax, 1)), kv);
  __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) uc));
  __m512d v0 = _mm512_sub_pd(r0, _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(u)), ulp));
  __m512d v1 = _mm512_sub_pd(r1, _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(u, 1)), ulp));
  __m256i l0 = _mm512_cvt_roundpd_epi32(v0, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
  __m256i l1 = _mm512_cvt_roundpd_epi32(v1, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
  return _mm512_min_epi32(_mm512_inserti64x4(_mm512_castsi256_si512(l0), l1, 1), smax);
}

TARGET_AVX512 static size_t qsgd_syms_avx512(const float *xc, const uint16_t *uc, size_t m,
                                             double k, int s, uint8_t *sym)
{
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
  const __m512i one = _mm512_set1_epi32(1), one8 = _mm512_set1_epi8(1);
  const __m512i smax = _mm512_set1_epi32(s);
  /* the packs work per 128-bit lane: dword 4 L + q of their result holds
   * entries 16 q + 4 L .. + 3 (register q, lane L); dword D wants 4 D .. */
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512 Kf = _mm512_set1_ps((float) (k * 65536.0)), inv16 = _mm512_set1_ps(0x1p-16f);
  const __m512 tol = _mm512_set1_ps(0x1p-18f);
  const __m512d kv = _mm512_set1_pd(k);
  const int fast = k * 65536.0 < 0x1p127;
  size_t nz = 0, t = 0;
  for (; t + 64 <= m; t += 64) {
    __m512i xi[4];
    __mmask16 ng[4];
    __m512 dist = _mm512_set1_ps(1.0f);   /* the least |w - round(w)| */
    for (unsigned v = 0; v < 4; v++) {
      /* 8 KiB ahead, as TernGrad's kernel: from memory the loop ran 1.5
       * ms (of 25e6 entries) slower than from cache without it */
      _mm_prefetch((const char *) (xc + t + 16 * v + 2048), _MM_HINT_T0);
      __m512 xv = _mm512_loadu_ps(xc + t + 16 * v);
      /* the sign bit: only nonzero levels take it, and -0 has level 0 */
      ng[v] = _mm512_movepi32_mask(_mm512_castps_si512(xv));
      __m512 ax = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(xv), absmask));
      __m512i ui = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) (uc + t + 16 * v)));
      __m512 uf = _mm512_cvtepi32_ps(ui);   /* exact: u < 2^16 */
      __m512 w = _mm512_mul_ps(_mm512_sub_ps(_mm512_mul_ps(ax, Kf), uf), inv16);
      xi[v] = _mm512_min_epi32(_mm512_cvt_roundps_epi32(w, _MM_FROUND_TO_POS_INF |
                                                          _MM_FROUND_NO_EXC), smax);
      /* vreduceps: w - round(w), exact; vrangeps 0x0A: the smaller
       * magnitude, sign cleared (one instruction each where the shifter
       * add, subtract, mask and minimum took five) */
      __m512 frac = _mm512_reduce_ps(w, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      dist = _mm512_range_ps(dist, frac, 0x0A);
    }
    if (__builtin_expect(!fast || _mm512_cmp_ps_mask(dist, tol, _CMP_LE_OQ) != 0, 0))
      for (unsigned v = 0; v < 4; v++)
        xi[v] = qsgd_levels16(xc + t + 16 * v, uc + t + 16 * v, kv, smax, &ng[v]);
    /* levels <= 15: the saturating packs keep them */
    __m512i lv = _mm512_permutexvar_epi32(order, _mm512_packus_epi16(
        _mm512_packs_epi32(xi[0], xi[1]), _mm512_packs_epi32(xi[2], xi[3])));
    __mmask64 neg = _mm512_kunpackd(_mm512_kunpackw(ng[3], ng[2]), _mm512_kunpackw(ng[1], ng[0]));
    __mmask64 nzm = _mm512_test_epi8_mask(lv, lv);
    __m512i twice = _mm512_add_epi8(lv, lv);
    _mm512_storeu_si512((void *) (sym + t), _mm512_mask_add_epi8(twice, nzm & neg, twice, one8));
    nz += (size_t) __builtin_popcountll(_cvtmask64_u64(nzm));
  }
  for (; t + 16 <= m; t += 16) {
    __mmask16 neg;
    __m512i xi = qsgd_levels16(xc + t, uc + t, kv, smax, &neg);
    __mmask16 nzm = _mm512_test_epi32_mask(xi, xi);
    __m512i v = _mm512_mask_add_epi32(_mm512_add_epi32(xi, xi), nzm & neg,
                                      _mm512_add_epi32(xi, xi), one);
    _mm_storeu_si128((__m128i *) (sym + t), _mm512_cvtepi32_epi8(v));
    nz += (size_t) __builtin_popcount(nzm);
  }
  return nz;
}
/* The same eight at a time with AVX2: the ceiling by vroundpd, then an
 * exact truncation. */
TARGET_AVX2 static size_t qsgd_syms_avx2(const float *xc, const uint16_t *uc, size_t m,
                                         double k, int s, uint8_t *sym)
{
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff), one = _mm256_set1_epi32(1);
  const __m256i smax = _mm256_set1_epi32(s), zeroi = _mm256_setzero_si256();
  const __m256d kv = _mm256_set1_pd(k), ulp = _mm256_set1_pd(1.0 / 65536.0);
  const __m256 zero = _mm256_setzero_ps();
  size_t nz = 0;
  for (size_t t = 0; t + 8 <= m; t += 8) {
    __m256 xv = _mm256_loadu_ps(xc + t);
    __m256i neg = _mm256_castps_si256(_mm256_cmp_ps(xv, zero, _CMP_LT_OQ));
    __m256 ax = _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(xv), absmask));
    __m256d r0 = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(ax)), kv);
    __m256d r1 = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(ax, 1)), kv);
    __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) (uc + t)));
    __m256d v0 = _mm256_sub_pd(r0, _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(u)), ulp));
    __m256d v1 = _mm256_sub_pd(r1, _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(u, 1)), ulp));
    __m128i l0 = _mm256_cvttpd_epi32(_mm256_round_pd(v0, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC));
    __m128i l1 = _mm256_cvttpd_epi32(_mm256_round_pd(v1, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC));
    __m256i xi = _mm256_min_epi32(_mm256_inserti128_si256(_mm256_castsi128_si256(l0), l1, 1), smax);
    __m256i nzv = _mm256_cmpgt_epi32(xi, zeroi);
    __m256i v = _mm256_add_epi32(_mm256_add_epi32(xi, xi), _mm256_and_si256(_mm256_and_si256(nzv, neg), one));
    __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64((__m128i *) (sym + t), _mm_packus_epi16(p, p));
    nz += (size_t) __builtin_popcount((unsigned) _mm256_movemask_ps(_mm256_castsi256_ps(nzv)));
  }
  return nz;
}
#endif

/* The codes of qsgd's symbols (quant_source.c, qsgd_pack_chunk) with
 * AVX-512, 64 symbols a group while w has room for a group's worst case;
 * returns the symbols written.  The scalar writer takes a dependent
 * shift-or-store step per four entries (1.8 ns, 11 ms of 25e6 entries in
 * buckets of 512, whose levels are often nonzero), so the codes are joined
 * in registers first: table lookups give each entry's code and length,
 * then neighbours are joined (a | b << len(a)) into pairs, fours, eights,
 * sixteens and thirty-twos, and the writer takes the coarsest of these
 * whose every piece fits 56 bits (a step appends at most 56 bits to the
 * fewer than 8 pending): two steps for 64 entries of about 1.5 bits. */
#ifdef HAVE_ISA_PATHS
/* Neighbouring 64-bit lanes of (a, b) (values va, vb, lengths la, lb)
 * joined: lane j of the result from lanes 2j and 2j + 1 of a:b. */
INLINE TARGET_AVX512 void join_lanes(__m512i va, __m512i la, __m512i vb, __m512i lb,
                                     __m512i *v, __m512i *l)
{
  const __m512i ev = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
  const __m512i od = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
  __m512i le = _mm512_permutex2var_epi64(la, ev, lb);
  *v = _mm512_or_si512(_mm512_permutex2var_epi64(va, ev, vb),
                       _mm512_sllv_epi64(_mm512_permutex2var_epi64(va, od, vb), le));
  *l = _mm512_add_epi64(le, _mm512_permutex2var_epi64(la, od, lb));
}

/* The codes of 32 symbols (16-bit lanes, sym < 32) as eight fours:
 * values (at most 40 bits) and lengths in 64-bit lanes, in order. */
INLINE TARGET_AVX512 void four_codes(__m512i sym, __m512i tbl, __m512i *v, __m512i *l)
{
  const __m512i lo10 = _mm512_set1_epi32(0x3ff), len4 = _mm512_set1_epi32(0xf);
  const __m512i lo24 = _mm512_set1_epi64(0xffffff), len5 = _mm512_set1_epi64(0x1f);
  __m512i e = _mm512_permutexvar_epi16(sym, tbl);   /* code | length << 12 */
  __m512i l0 = _mm512_and_si512(_mm512_srli_epi32(e, 12), len4);
  __m512i c1 = _mm512_and_si512(_mm512_srli_epi32(e, 16), lo10);
  __m512i pv = _mm512_or_si512(_mm512_and_si512(e, lo10), _mm512_sllv_epi32(c1, l0));
  __m512i p = _mm512_or_si512(pv, _mm512_slli_epi32(_mm512_add_epi32(l0, _mm512_srli_epi32(e, 28)),
                                                    24));
  /* pairs: code (20 bits) | length << 24; now two to a 64-bit lane */
  __m512i pl0 = _mm512_and_si512(_mm512_srli_epi64(p, 24), len5);
  __m512i pc1 = _mm512_and_si512(_mm512_srli_epi64(p, 32), lo24);
  *v = _mm512_or_si512(_mm512_and_si512(p, lo24), _mm512_sllv_epi64(pc1, pl0));
  *l = _mm512_add_epi64(pl0, _mm512_srli_epi64(p, 56));
}

TARGET_AVX512 static size_t qsgd_pack_avx512(const uint16_t *code16, const uint8_t *sym,
                                             size_t m, gc__bw *w)
{
  const __m512i tbl = _mm512_loadu_si512((const void *) code16);
  const __m512i fit = _mm512_set1_epi64(56);
  uint64_t acc = w->acc;
  unsigned nb = w->nb;
  uint8_t *op = w->p;
  size_t t = 0;
  /* a group takes at most 80 bytes, and each step stores 8 */
  if (m < 64 || w->end - op < 96 + 4)
    return 0;
  while (nb >= 8) {
    *op++ = (uint8_t) acc;
    acc >>= 8;
    nb -= 8;
  }
  for (; t + 64 <= m && w->end - op >= 96; t += 64) {
    __m512i v4a, l4a, v4b, l4b, v8, l8, v16, l16, v32, l32;
    if (!_mm512_test_epi8_mask(_mm512_loadu_si512((const void *) (sym + t)),
                               _mm512_set1_epi8(0x1f))) {
      /* 64 level-0 entries (code "1" each: the common case of one large
       * bucket) skip the joins: 64 one bits after the nb < 8 pending,
       * which leaves nb ones pending, so acc does not carry a chain from
       * group to group */
      uint64_t ones = ~(uint64_t) 0;
      acc |= ones << nb;
      memcpy(op, &acc, 8);
      op += 8;
      acc = ~(ones << nb);
      continue;
    }
    four_codes(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *) (sym + t))), tbl,
               &v4a, &l4a);
    four_codes(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *) (sym + t + 32))), tbl,
               &v4b, &l4b);
    join_lanes(v4a, l4a, v4b, l4b, &v8, &l8);
    join_lanes(v8, l8, v8, l8, &v16, &l16);
    join_lanes(v16, l16, v16, l16, &v32, &l32);
    uint64_t val[16], len[16];
    unsigned steps;
    /* a longer piece does not fit: its value above bit 64 is lost, but
     * then a piece below it is used */
    if (!_mm512_mask_cmpgt_epu64_mask(0x03, l32, fit)) {
      _mm512_storeu_si512((void *) val, v32);
      _mm512_storeu_si512((void *) len, l32);
      steps = 2;
    } else if (!_mm512_mask_cmpgt_epu64_mask(0x0f, l16, fit)) {
      _mm512_storeu_si512((void *) val, v16);
      _mm512_storeu_si512((void *) len, l16);
      steps = 4;
    } else if (!_mm512_cmpgt_epu64_mask(l8, fit)) {
      _mm512_storeu_si512((void *) val, v8);
      _mm512_storeu_si512((void *) len, l8);
      steps = 8;
    } else {
      _mm512_storeu_si512((void *) val, v4a);
      _mm512_storeu_si512((void *) (val + 8), v4b);
      _mm512_storeu_si512((void *) len, l4a);
      _mm512_storeu_si512((void *) (len + 8), l4b);
      steps = 16;
    }
    for (unsigned j = 0; j < steps; j++) {   /* nb < 8 before each step */
      acc |= val[j] << nb;
      nb += (unsigned) len[j];
      memcpy(op, &acc, 8);
      op += nb >> 3;
      acc >>= nb & 56;
      nb &= 7;
    }
  }
  w->acc = acc;
  w->nb = nb;
  w->p = op;
  return t;
}
#endif

/* Append to w a bit stream of nbytes whole bytes at src and then the nb
 * low bits of acc (nb < 32): the streams of qsgd_bucket_par's shares.  A
 * shifted copy eight bytes at a time where the room allows. */
static void bw_append(gc__bw *w, const uint8_t *src, size_t nbytes, uint64_t acc, unsigned nb)
{
  size_t i = 0;
  if (w->end - w->p >= (ptrdiff_t) (nbytes + 16)) {
    uint64_t a = w->acc;
    unsigned k = w->nb;
    uint8_t *p = w->p;
    while (k >= 8) {
      *p++ = (uint8_t) a;
      a >>= 8;
      k -= 8;
    }
    for (; i + 8 <= nbytes; i += 8) {   /* k < 8 pending bits below each word */
      uint64_t v, o;
      memcpy(&v, src + i, sizeof v);
      o = a | v << k;
      memcpy(p, &o, sizeof o);
      p += 8;
      a = k ? v >> (64 - k) : 0;
    }
    w->acc = a;
    w->nb = k;
    w->p = p;
  }
  for (; i < nbytes; i++)
    gc__bw_put(w, src[i], 8);
  if (nb)
    gc__bw_put(w, acc & (((uint64_t) 1 << nb) - 1), nb);
}

#define REAL float
#define SFX f32
#define PREC 32
#include "quant_source.c"

#define REAL double
#define SFX f64
#define PREC 64
#include "quant_source.c"
#undef DISPATCH_RNG

#define QUANT_TYPE(var, nm, sum, fl, initf, maxf, fn)                       \
  static const gc_compressor_type var##_type = {                            \
    nm, sum, fl, sizeof(qstate), initf, NULL, maxf,                         \
    fn##_encode_f32, fn##_encode_f64, fn##_decode_f32, fn##_decode_f64,     \
    NULL, NULL, NULL };                                                     \
  const gc_compressor_type *const gc_compressor_##var = &var##_type;

QUANT_TYPE(identity, "identity", "no compression: 32 (64) bits per entry",
           GC_COMP_CONTRACTIVE, base_init, identity_max_bytes, identity)
QUANT_TYPE(sign, "sign", "signSGD: sign(x), 1 bit per entry, sign(0) = +1",
           GC_COMP_BIASED, base_init, sign_max_bytes, sign)
QUANT_TYPE(scaled_sign, "scaled-sign",
           "EF-signSGD: (||x||_1/d) sign(x), 1 bit per entry + scale",
           GC_COMP_BIASED | GC_COMP_CONTRACTIVE, base_init,
           scaled_sign_max_bytes, scaled_sign)
static const gc_compressor_type qsgd_type = {
  "qsgd", "QSGD: s levels (--levels), L2 norm per bucket, Elias-gamma coded",
  GC_COMP_RANDOM, sizeof(qstate), qsgd_init, qsgd_release, qsgd_max_bytes,
  qsgd_encode_f32, qsgd_encode_f64, qsgd_decode_f32, qsgd_decode_f64,
  NULL, NULL, NULL };
const gc_compressor_type *const gc_compressor_qsgd = &qsgd_type;
QUANT_TYPE(terngrad, "terngrad",
           "TernGrad: {-s,0,s} with s = max|x|, 2 bits per entry",
           GC_COMP_RANDOM, terngrad_init, terngrad_max_bytes, terngrad)
QUANT_TYPE(fp16, "fp16",
           "IEEE half precision, round to nearest even, 16 bits per entry",
           GC_COMP_BIASED, base_init, half_max_bytes, fp16)
QUANT_TYPE(bf16, "bf16", "bfloat16, round to nearest even, 16 bits per entry",
           GC_COMP_BIASED, base_init, half_max_bytes, bf16)

const gc_compressor_type *const gc__quant_types[] = {
  &identity_type, &sign_type, &scaled_sign_type, &qsgd_type, &terngrad_type,
  &fp16_type, &bf16_type, NULL
};
