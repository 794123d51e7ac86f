/* gc_bitio.h -- bit-level wire coding for the quantizers: an LSB-first bit
 * writer/reader, Elias-gamma codes and the 16-bit float conversions
 * (IEEE half and bfloat16).  Internal (gc__ names), header-only so the
 * hot loops inline.
 *
 * Bit order: bit k of a stream is bit (k mod 8) of byte k/8.  An Elias-gamma
 * code of v >= 1 with N = floor(log2 v) is N zero bits, one 1 bit, then the
 * N low bits of v, least significant first: 2N+1 bits, prefix-free.  Values
 * up to 2^32 (N <= 32) are supported; a longer run of zeros is invalid. */
#ifndef GC_BITIO_H
#define GC_BITIO_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gc_rng.h"   /* GC_HD: __host__ __device__ under nvcc */

/* ---- bit writer ------------------------------------------------------- */

typedef struct gc__bw {
  uint64_t acc;        /* pending bits, the oldest in bit 0 */
  unsigned nb;         /* number of pending bits, < 32 between calls */
  uint8_t *p, *end;    /* next byte to write, end of the buffer */
  int over;            /* set when a byte did not fit */
} gc__bw;

static inline void gc__bw_init(gc__bw *w, uint8_t *p, size_t cap)
{
  w->acc = 0;
  w->nb = 0;
  w->p = p;
  w->end = p + cap;
  w->over = 0;
}

/* Slow path of a flush: the buffer end is near, write byte by byte. */
static inline void gc__bw_bytes(gc__bw *w, unsigned nbytes)
{
  for (unsigned i = 0; i < nbytes; i++) {
    if (w->p < w->end)
      *w->p++ = (uint8_t) (w->acc >> (8 * i));
    else
      w->over = 1;
  }
}

/* Append the n low bits of v (n <= 32, v < 2^n). */
static inline void gc__bw_put(gc__bw *w, uint64_t v, unsigned n)
{
  w->acc |= v << w->nb;
  w->nb += n;
  if (w->nb >= 32) {
    if (w->end - w->p >= 4) {
      w->p[0] = (uint8_t) w->acc;
      w->p[1] = (uint8_t) (w->acc >> 8);
      w->p[2] = (uint8_t) (w->acc >> 16);
      w->p[3] = (uint8_t) (w->acc >> 24);
      w->p += 4;
    } else {
      gc__bw_bytes(w, 4);
    }
    w->acc >>= 32;
    w->nb -= 32;
  }
}

/* Length in bits of the Elias-gamma code of v >= 1. */
static inline unsigned gc__gamma_len(uint64_t v)
{
  return 2u * (unsigned) (63 - __builtin_clzll(v)) + 1u;
}

/* Append the Elias-gamma code of 1 <= v <= 2^32. */
static inline void gc__bw_gamma(gc__bw *w, uint64_t v)
{
  unsigned N = (unsigned) (63 - __builtin_clzll(v));
  if (N < 32) {
    gc__bw_put(w, (uint64_t) 1 << N, N + 1);   /* N zeros, then the 1 */
    if (N)
      gc__bw_put(w, v & (((uint64_t) 1 << N) - 1), N);
  } else {                                      /* v = 2^32 exactly */
    gc__bw_put(w, 0, 32);
    gc__bw_put(w, 1, 1);
    gc__bw_put(w, 0, 32);
  }
}

/* Flush the pending bits (zero padded to a byte); returns 0, or -1 when
 * the message did not fit. */
static inline int gc__bw_finish(gc__bw *w)
{
  gc__bw_bytes(w, (w->nb + 7) / 8);
  w->acc = 0;
  w->nb = 0;
  return w->over ? -1 : 0;
}

/* ---- bit reader ------------------------------------------------------- */

typedef struct gc__br {
  uint64_t acc;            /* unread bits, the next in bit 0 */
  unsigned nb;             /* number of valid bits in acc */
  const uint8_t *p, *end;
} gc__br;

static inline void gc__br_init(gc__br *r, const uint8_t *p, size_t len)
{
  r->acc = 0;
  r->nb = 0;
  r->p = p;
  r->end = p + len;
}

static inline void gc__br_refill(gc__br *r)
{
  while (r->nb <= 56 && r->p < r->end) {
    r->acc |= (uint64_t) *r->p++ << r->nb;
    r->nb += 8;
  }
}

/* Read n <= 32 bits into *v; returns -1 when the stream ends first. */
static inline int gc__br_get(gc__br *r, unsigned n, uint64_t *v)
{
  if (r->nb < n) {
    gc__br_refill(r);
    if (r->nb < n)
      return -1;
  }
  *v = r->acc & (((uint64_t) 1 << n) - 1);
  r->acc >>= n;
  r->nb -= n;
  return 0;
}

/* Read an Elias-gamma code into *v (1 <= v <= 2^32); returns -1 on a
 * truncated stream or a zero run longer than 32 bits. */
static inline int gc__br_gamma(gc__br *r, uint64_t *v)
{
  if (r->nb < 33)
    gc__br_refill(r);
  if (r->acc == 0)            /* no 1 within the window: too long or cut */
    return -1;
  unsigned N = (unsigned) __builtin_ctzll(r->acc);
  if (N > 32 || N >= r->nb)
    return -1;
  r->acc >>= N + 1;
  r->nb -= N + 1;
  uint64_t low = 0;
  if (N && gc__br_get(r, N, &low) != 0)
    return -1;
  *v = ((uint64_t) 1 << N) | low;
  return 0;
}

/* True when every byte was consumed and the unread bits (the padding of
 * the last byte) are all zero. */
static inline int gc__br_at_end(gc__br *r)
{
  gc__br_refill(r);
  return r->p == r->end && r->nb < 8 && r->acc == 0;
}

/* ---- little-endian words ---------------------------------------------- */

static inline void gc__store64le(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t) (v >> (8 * i));
}

static inline uint64_t gc__load64le(const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t) p[i] << (8 * i);
  return v;
}

/* ---- small floats ------------------------------------------------------
 * Binary format with `eb` exponent bits and `mb` stored mantissa bits
 * (half: 5, 10; bfloat16: 8, 7).  Conversion from double rounds to nearest,
 * ties to even, in integer arithmetic (independent of the FPU rounding
 * mode); float inputs go through double, which is exact, so nothing is
 * rounded twice.  Subnormals are produced, values from the halfway point
 * above the largest finite number on become +-inf, NaN becomes a quiet
 * NaN. */
static inline uint16_t gc__minifloat_from_double(double d, unsigned eb,
                                                 unsigned mb)
{
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  uint16_t sign = (uint16_t) ((b >> 63) << 15);
  uint16_t inf = (uint16_t) (((1u << eb) - 1) << mb);
  int bias = (1 << (eb - 1)) - 1;
  int ef = (int) ((b >> 52) & 0x7ff);
  uint64_t frac = b & (((uint64_t) 1 << 52) - 1);
  if (ef == 0x7ff)
    return (uint16_t) (sign | inf | (frac ? 1u << (mb - 1) : 0));
  if (ef == 0)                   /* zero or double subnormal: rounds to 0 */
    return sign;
  int e = ef - 1023;
  uint64_t m = frac | ((uint64_t) 1 << 52);
  if (e > bias)
    return (uint16_t) (sign | inf);
  unsigned shift;
  uint64_t base;
  if (e >= 1 - bias) {           /* normal: keep mb fraction bits */
    shift = 52 - mb;
    base = (uint64_t) (e + bias) << mb;
    m = frac;
  } else {                       /* subnormal: units of 2^(1-bias-mb) */
    int sh = 52 - (int) mb + (1 - bias) - e;
    if (sh > 53)                 /* below half the smallest subnormal */
      return sign;
    shift = (unsigned) sh;
    base = 0;
  }
  uint64_t q = m >> shift, rem = m & (((uint64_t) 1 << shift) - 1);
  uint64_t half = (uint64_t) 1 << (shift - 1);
  uint64_t h = base + q;         /* a carry moves into the exponent */
  if (rem > half || (rem == half && (q & 1)))
    h++;
  if (h > inf)
    h = inf;
  return (uint16_t) (sign | h);
}

/* float32 bits -> IEEE half, round to nearest even, in integer operations
 * only: the same 16 bits as gc__half_from_double((double) x) for every
 * float (test_bitio checks all 2^32 patterns).  The GPU encoder uses it
 * because the device's __float2half_rn rounded the tie 1 + 2^-11 up on an
 * H100 (CUDA 13.0), so the CPU's messages were not reproduced. */
static inline GC_HD uint16_t gc__half_from_float_bits(uint32_t u)
{
  uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u)                     /* Inf, or NaN kept quiet */
    return (uint16_t) (sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u)                     /* >= 65520 rounds to Inf */
    return (uint16_t) (sign | 0x7c00u);
  if (a >= 0x38800000u) {                   /* normal half: >= 2^-14 */
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t) (sign | ((r >> 13) - 0x1c000u));
  }
  if (a < 0x33000000u)                      /* <= 2^-25 (a tie to 0) */
    return (uint16_t) sign;
  /* subnormal half, units of 2^-24: m 2^(e-150) = (m >> (126 - e)) units */
  uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - e, q = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  q += rem > half || (rem == half && (q & 1u));
  return (uint16_t) (sign | q);
}

/* Exact value of a small float (NaN patterns give NaN). */
static inline double gc__minifloat_to_double(uint16_t h, unsigned eb,
                                             unsigned mb)
{
  int bias = (1 << (eb - 1)) - 1;
  unsigned ef = (h >> mb) & ((1u << eb) - 1);
  unsigned m = h & ((1u << mb) - 1);
  double v;
  if (ef == (1u << eb) - 1)
    v = m ? (double) NAN : (double) INFINITY;
  else if (ef == 0)
    v = ldexp((double) m, 1 - bias - (int) mb);
  else
    v = ldexp((double) (m | (1u << mb)), (int) ef - bias - (int) mb);
  return (h >> 15) ? -v : v;
}

static inline uint16_t gc__half_from_double(double d)
{
  return gc__minifloat_from_double(d, 5, 10);
}
static inline double gc__half_to_double(uint16_t h)
{
  return gc__minifloat_to_double(h, 5, 10);
}
static inline uint16_t gc__bf16_from_double(double d)
{
  return gc__minifloat_from_double(d, 8, 7);
}
static inline double gc__bf16_to_double(uint16_t h)
{
  return gc__minifloat_to_double(h, 8, 7);
}

/* A 16-bit pattern is NaN when its exponent is all ones and the mantissa
 * is nonzero. */
static inline int gc__minifloat_isnan(uint16_t h, unsigned eb, unsigned mb)
{
  uint16_t e = (uint16_t) (((1u << eb) - 1) << mb);
  return (h & e) == e && (h & ((1u << mb) - 1)) != 0;
}

#endif /* GC_BITIO_H */
