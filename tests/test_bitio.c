/* test_bitio.c -- the quantizers' bit-level wire coding (lib/compress/gc_bitio.h):
 * bit writer/reader, Elias-gamma codes and the half/bfloat16 conversions.
 * All checks are exact. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_bitio.h"

static uint64_t lcg(uint64_t *s)
{
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 11;
}

Test(bitio, put_get_round_trip)
{
  enum { M = 5000 };
  static uint8_t buf[M * 4 + 8];
  static uint64_t val[M];
  static unsigned wid[M];
  uint64_t s = 1;
  gc__bw w;
  gc__bw_init(&w, buf, sizeof buf);
  size_t bits = 0;
  for (int i = 0; i < M; i++) {
    wid[i] = 1 + (unsigned) (lcg(&s) % 32);
    val[i] = lcg(&s) & (((uint64_t) 1 << wid[i]) - 1);
    gc__bw_put(&w, val[i], wid[i]);
    bits += wid[i];
  }
  cr_assert(eq(int, gc__bw_finish(&w), 0));
  cr_assert(eq(sz, (size_t) (w.p - buf), (bits + 7) / 8));
  gc__br r;
  gc__br_init(&r, buf, (bits + 7) / 8);
  for (int i = 0; i < M; i++) {
    uint64_t v;
    cr_assert(eq(int, gc__br_get(&r, wid[i], &v), 0));
    cr_assert(eq(u64, v, val[i]), "item %d", i);
  }
  cr_assert(gc__br_at_end(&r));
  uint64_t v;
  cr_assert(eq(int, gc__br_get(&r, 8, &v), -1), "reading past the end fails");
}

/* Byte order is part of the wire format: LSB-first. */
Test(bitio, bit_order_is_lsb_first)
{
  uint8_t buf[4] = {0};
  gc__bw w;
  gc__bw_init(&w, buf, sizeof buf);
  gc__bw_put(&w, 1, 1);
  gc__bw_put(&w, 0, 2);
  gc__bw_put(&w, 0x1f, 5);
  gc__bw_put(&w, 0x3, 2);
  cr_assert(eq(int, gc__bw_finish(&w), 0));
  cr_assert(eq(u8, buf[0], 0xF9));
  cr_assert(eq(u8, buf[1], 0x03));
  cr_assert(eq(sz, (size_t) (w.p - buf), 2));
}

static const uint64_t gamma_vals[] = {
  1, 2, 3, 4, 5, 7, 8, 9, 255, 256, 257, 65535, 65536, 1000003,
  0x7fffffffull, 0x80000000ull, 0xffffffffull, 0x100000000ull
};

Test(bitio, gamma_round_trip_and_lengths)
{
  static uint8_t buf[16384];
  gc__bw w;
  gc__bw_init(&w, buf, sizeof buf);
  size_t bits = 0, m = sizeof gamma_vals / sizeof gamma_vals[0];
  for (size_t i = 0; i < m; i++) {
    unsigned N = 0;
    while ((gamma_vals[i] >> (N + 1)) != 0)
      N++;
    cr_assert(eq(u32, gc__gamma_len(gamma_vals[i]), 2 * N + 1));
    gc__bw_gamma(&w, gamma_vals[i]);
    bits += gc__gamma_len(gamma_vals[i]);
  }
  for (uint64_t v = 1; v <= 3000; v++) {
    gc__bw_gamma(&w, v);
    bits += gc__gamma_len(v);
  }
  cr_assert(eq(int, gc__bw_finish(&w), 0));
  cr_assert(eq(sz, (size_t) (w.p - buf), (bits + 7) / 8));
  gc__br r;
  gc__br_init(&r, buf, (size_t) (w.p - buf));
  uint64_t v;
  for (size_t i = 0; i < m; i++) {
    cr_assert(eq(int, gc__br_gamma(&r, &v), 0));
    cr_assert(eq(u64, v, gamma_vals[i]));
  }
  for (uint64_t u = 1; u <= 3000; u++) {
    cr_assert(eq(int, gc__br_gamma(&r, &v), 0));
    cr_assert(eq(u64, v, u));
  }
  cr_assert(gc__br_at_end(&r));
}

/* The longest code (2^32: 65 bits) back to back, unaligned. */
Test(bitio, gamma_worst_case_back_to_back)
{
  uint8_t buf[64];
  gc__bw w;
  gc__bw_init(&w, buf, sizeof buf);
  gc__bw_put(&w, 1, 3);
  for (int i = 0; i < 5; i++)
    gc__bw_gamma(&w, 0x100000000ull);
  cr_assert(eq(int, gc__bw_finish(&w), 0));
  cr_assert(eq(sz, (size_t) (w.p - buf), (3 + 5 * 65 + 7) / 8));
  gc__br r;
  gc__br_init(&r, buf, (size_t) (w.p - buf));
  uint64_t v;
  cr_assert(eq(int, gc__br_get(&r, 3, &v), 0));
  for (int i = 0; i < 5; i++) {
    cr_assert(eq(int, gc__br_gamma(&r, &v), 0));
    cr_assert(eq(u64, v, 0x100000000ull));
  }
  cr_assert(gc__br_at_end(&r));
}

Test(bitio, gamma_invalid_and_truncated)
{
  uint8_t zeros[16] = {0};
  gc__br r;
  uint64_t v;
  gc__br_init(&r, zeros, sizeof zeros);
  cr_assert(eq(int, gc__br_gamma(&r, &v), -1), "a run of 33+ zeros is invalid");
  /* 33 zeros then a 1: N = 33 > 32 */
  uint8_t b33[8] = {0, 0, 0, 0, 0x02, 0xff, 0xff, 0xff};
  gc__br_init(&r, b33, sizeof b33);
  cr_assert(eq(int, gc__br_gamma(&r, &v), -1));
  /* the 65-bit code of 2^32 cut at every byte length */
  uint8_t buf[16];
  gc__bw w;
  gc__bw_init(&w, buf, sizeof buf);
  gc__bw_gamma(&w, 0x100000000ull);
  cr_assert(eq(int, gc__bw_finish(&w), 0));
  for (size_t len = 0; len < 9; len++) {   /* 65 bits need 9 bytes */
    gc__br_init(&r, buf, len);
    cr_assert(eq(int, gc__br_gamma(&r, &v), -1), "cut at %zu bytes", len);
  }
  uint8_t one[1] = {0x01 | 0x10};          /* gamma(1) then a stray 1 bit */
  gc__br_init(&r, one, 1);
  cr_assert(eq(int, gc__br_gamma(&r, &v), 0));
  cr_assert(not(gc__br_at_end(&r)), "nonzero padding is detected");
}

Test(bitio, writer_reports_overflow)
{
  uint8_t buf[8];
  gc__bw w;
  gc__bw_init(&w, buf, 3);
  for (int i = 0; i < 4; i++)
    gc__bw_put(&w, 0xff, 8);
  cr_assert(eq(int, gc__bw_finish(&w), -1));
  gc__bw_init(&w, buf, 4);
  for (int i = 0; i < 4; i++)
    gc__bw_put(&w, 0xff, 8);
  cr_assert(eq(int, gc__bw_finish(&w), 0));
}

/* IEEE half: exact bit patterns for the special values. */
Test(bitio, half_special_values)
{
  struct { double x; uint16_t h; } c[] = {
    {0.0, 0x0000}, {-0.0, 0x8000}, {1.0, 0x3c00}, {-2.0, 0xc000},
    {65504.0, 0x7bff},                 /* max */
    {65519.99, 0x7bff},                /* just below the halfway point */
    {65520.0, 0xfc00 & 0x7fff},        /* halfway: ties to even = inf */
    {-65520.0, 0xfc00}, {1e6, 0x7c00}, {DBL_MAX, 0x7c00},
    {INFINITY, 0x7c00}, {-INFINITY, 0xfc00},
    {0x1p-14, 0x0400},                 /* smallest normal */
    {0x3ffp-24, 0x03ff},               /* largest subnormal */
    {0x1p-24, 0x0001},                 /* smallest subnormal */
    {0x1p-25, 0x0000},                 /* tie between 0 and 2^-24: even */
    {0x1.000001p-25, 0x0001},
    {0x3p-25, 0x0002},                 /* tie between 1 and 2 ulps: even */
    {0x5p-25, 0x0002},                 /* tie between 2 and 3 ulps: even */
    {0x1p-26, 0x0000}, {-0x1p-30, 0x8000}, {0x1p-1074, 0x0000},
    {0x1.ffcp-15, 0x0400},             /* rounds up into the normal range */
    {1.0 + 0x1p-11, 0x3c00},           /* tie: even */
    {1.0 + 0x3p-11, 0x3c02},           /* tie: even (up) */
    {1.0 + 0x1p-11 + 0x1p-40, 0x3c01}, /* above the tie: no double rounding */
    {0.1, 0x2e66}, {-1.0 / 3.0, 0xb555}
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
    cr_assert(eq(u16, gc__half_from_double(c[i].x), c[i].h),
              "half(%a) = 0x%04x, expected 0x%04x", c[i].x,
              gc__half_from_double(c[i].x), c[i].h);
  cr_assert(gc__minifloat_isnan(gc__half_from_double(NAN), 5, 10));
  cr_assert(eq(dbl, gc__half_to_double(0x7bff), 65504.0));
  cr_assert(eq(dbl, gc__half_to_double(0x0001), 0x1p-24));
  cr_assert(eq(dbl, gc__half_to_double(0x03ff), 0x3ffp-24));
  cr_assert(eq(dbl, gc__half_to_double(0xfc00), -INFINITY));
  cr_assert(signbit(gc__half_to_double(0x8000)));
}

/* Every finite half value converts back to itself. */
Test(bitio, half_all_patterns_round_trip)
{
  for (uint32_t h = 0; h < 0x10000; h++) {
    if (gc__minifloat_isnan((uint16_t) h, 5, 10))
      continue;
    double d = gc__half_to_double((uint16_t) h);
    cr_assert(eq(u16, gc__half_from_double(d), (uint16_t) h), "0x%04x", h);
  }
}

/* The integer float -> half conversion (the GPU encoder's) gives
 * gc__half_from_double's bits: every 61st pattern, and every pattern whose
 * low 13 bits sit at a rounding boundary (ties, one below, one above) or
 * at zero, over all exponents and signs.  NaN stays NaN. */
static void check_half_bits(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  uint16_t h = gc__half_from_float_bits(u);
  if (isnan(f))
    cr_assert(gc__minifloat_isnan(h, 5, 10), "0x%08x -> 0x%04x", u, h);
  else
    cr_assert(eq(u16, h, gc__half_from_double((double) f)), "0x%08x (%a)", u,
              (double) f);
}

Test(bitio, half_from_float_bits_matches_double)
{
  for (uint64_t u = 0; u < ((uint64_t) 1 << 32); u += 61)
    check_half_bits((uint32_t) u);
  static const uint32_t low[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff};
  for (uint32_t hi = 0; hi < (1u << 19); hi++)
    for (size_t j = 0; j < sizeof low / sizeof low[0]; j++)
      check_half_bits(hi << 13 | low[j]);
}

#ifdef __FLT16_MANT_DIG__
/* Against the compiler's _Float16 conversion (round to nearest even) for
 * float inputs covering every exponent. */
Test(bitio, half_matches_compiler_float16)
{
  uint64_t s = 7;
  for (int i = 0; i < 200000; i++) {
    uint32_t u = (uint32_t) lcg(&s);
    float f;
    memcpy(&f, &u, sizeof f);
    if (isnan(f))
      continue;
    _Float16 g = (_Float16) f;
    uint16_t ref;
    memcpy(&ref, &g, sizeof ref);
    cr_assert(eq(u16, gc__half_from_double((double) f), ref), "%a", (double) f);
  }
}
#endif

Test(bitio, bf16_special_values)
{
  struct { double x; uint16_t h; } c[] = {
    {0.0, 0x0000}, {-0.0, 0x8000}, {1.0, 0x3f80}, {-1.0, 0xbf80},
    {1.0 + 0x1p-8, 0x3f80},            /* tie: even */
    {1.0 + 0x3p-8, 0x3f82},            /* tie: even (up) */
    {1.0 + 0x1p-8 + 0x1p-40, 0x3f81},  /* double input: no double rounding */
    {0x1.fep127, 0x7f7f},              /* max */
    {FLT_MAX, 0x7f80},                 /* above the halfway point: inf */
    {INFINITY, 0x7f80}, {-INFINITY, 0xff80},
    {0x1p-126, 0x0080},                /* smallest normal */
    {0x1p-133, 0x0001},                /* smallest subnormal */
    {0x1p-134, 0x0000},                /* tie: even */
    {0x3p-134, 0x0002}, {1e300, 0x7f80}, {1e-300, 0x0000}
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
    cr_assert(eq(u16, gc__bf16_from_double(c[i].x), c[i].h),
              "bf16(%a) = 0x%04x, expected 0x%04x", c[i].x,
              gc__bf16_from_double(c[i].x), c[i].h);
  cr_assert(gc__minifloat_isnan(gc__bf16_from_double(NAN), 8, 7));
  for (uint32_t h = 0; h < 0x10000; h++) {
    if (gc__minifloat_isnan((uint16_t) h, 8, 7))
      continue;
    double d = gc__bf16_to_double((uint16_t) h);
    cr_assert(eq(u16, gc__bf16_from_double(d), (uint16_t) h), "0x%04x", h);
    float f = (float) d;          /* bf16 values are floats: upper half */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    cr_assert(eq(u32, u >> 16, h));
  }
}
