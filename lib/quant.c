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
 * Decoded values: qsgd sgn * (REAL)(norm * xi / s) computed in double;
 * terngrad +-s; scaled-sign +-scale; fp16/bf16 the exact 16-bit value.
 * Decoders validate the whole message (header, exact length, levels <= s,
 * valid codes, finite non-negative scales, zero padding) before touching
 * y. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gc_algo_vec.h"
#include "gc_bitio.h"
#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_internal.h"
#include "gc_rng.h"

#if defined(__GNUC__) && !defined(__clang__)
/* As in sparse.c: the finiteness and counting scans are plain loops that
 * GCC vectorises at -O3 only (the project builds at -O2). */
#pragma GCC optimize("O3")
#endif

enum { HDR = 2 };
enum {
  TAG_IDENTITY = 0xD0, TAG_SIGN = 0xD1, TAG_SCALED_SIGN = 0xD2,
  TAG_QSGD = 0xD3, TAG_TERNGRAD = 0xD4, TAG_FP16 = 0xD5, TAG_BF16 = 0xD6
};

/* One state layout serves every quantizer; each reads what it needs. */
typedef struct qstate {
  size_t n;
  unsigned s;          /* qsgd levels */
  size_t bucket;       /* qsgd bucket length (n when params.bucket == 0) */
  size_t nb;           /* number of qsgd buckets */
  double clip;         /* terngrad clip factor, 0 = none */
  uint64_t seed;
  uint32_t stream;
} qstate;

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

/* float32 -> IEEE half with F16C, 8 at a time, when the CPU has it:
 * round to nearest even, one rounding, so bit-identical to
 * gc__half_from_double((double) x) (float -> double is exact).  Writes
 * little-endian halves and returns how many it converted (n rounded down
 * to a multiple of 8; 0 without F16C).  The scalar conversion runs at a
 * thirtieth of the streaming bandwidth. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
__attribute__((target("avx,f16c")))
static size_t halves_f16c(const float *x, size_t n, uint8_t *out)
{
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128((__m128i *) (out + 2 * i), h);
  }
  return i;
}

static size_t halves_fast(const float *x, size_t n, uint8_t *out)
{
  static int have = -1;
  if (have < 0) {
    /* The F16C bit from CPUID leaf 1 itself: clang's
     * __builtin_cpu_supports does not know "f16c".  "avx" also checks
     * that the OS saves the YMM registers. */
    unsigned a, b, c, d;
    have = __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d)
           && (c & bit_F16C);
  }
  return have ? halves_f16c(x, n, out) : 0;
}
#else
static size_t halves_fast(const float *x, size_t n, uint8_t *out)
{
  (void) x; (void) n; (void) out;
  return 0;
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

static int qsgd_init(void *state, size_t n, const gc_compressor_params *p)
{
  qstate *q = state;
  if (p->levels < 1)
    GC_ERRORF(GC_EINVAL, "qsgd: levels s = %u, must be >= 1", p->levels);
  base_init(state, n, p);
  q->bucket = p->bucket && p->bucket < n ? p->bucket : n;
  q->nb = (n + q->bucket - 1) / q->bucket;
  return GC_SUCCESS;
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

/* Every level is at most s and |gamma| grows with its argument, so an
 * entry takes at most |gamma(s+1)| + 1 bits. */
static size_t qsgd_max_bytes(const void *st)
{
  const qstate *q = st;
  uint64_t per = gc__gamma_len((uint64_t) q->s + 1) + 1;
  return HDR + 8 * q->nb + (size_t) ((per * q->n + 7) / 8);
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

#define REAL float
#define SFX f32
#define PREC 32
#include "quant_source.c"

#define REAL double
#define SFX f64
#define PREC 64
#include "quant_source.c"

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
QUANT_TYPE(qsgd, "qsgd",
           "QSGD: s levels (--levels), L2 norm per bucket, Elias-gamma coded",
           GC_COMP_RANDOM, qsgd_init, qsgd_max_bytes, qsgd)
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
