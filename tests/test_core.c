/* test_core.c -- errors, the counter RNG, and .npy input/output. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_dtype.h"
#include "gc_errno.h"
#include "gc_io.h"
#include "gc_isa.h"
#include "gc_npy.h"
#include "gc_rng.h"
#include "gc_test.h"
#include "gc_vec.h"

/* Known-answer vectors of Random123's kat_vectors for philox4x32_10. */
Test(rng, philox_known_answers)
{
  gc_rng4 r = gc_philox4x32_10(0, 0, 0, 0, 0, 0);
  cr_assert(eq(u32, r.v[0], 0x6627e8d5u));
  cr_assert(eq(u32, r.v[3], 0x9b00dbd8u));
  r = gc_philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  cr_assert(eq(u32, r.v[0], 0x408f276du));
  cr_assert(eq(u32, r.v[2], 0xa20bc7c6u));
  r = gc_philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u,
                       0xa4093822u, 0x299f31d0u);
  cr_assert(eq(u32, r.v[0], 0xd16cfe09u));
  cr_assert(eq(u32, r.v[3], 0x24126ea1u));
}

Test(rng, keyed_by_every_field)
{
  uint32_t base = gc_rng_u32(1, 2, 3, 4);
  cr_assert(eq(u32, base, gc_rng_u32(1, 2, 3, 4)), "pure function of its key");
  cr_assert(base != gc_rng_u32(2, 2, 3, 4), "seed");
  cr_assert(base != gc_rng_u32(1, 3, 3, 4), "stream");
  cr_assert(base != gc_rng_u32(1, 2, 4, 4), "step");
  cr_assert(base != gc_rng_u32(1, 2, 3, 5), "element");
}

/* Uniforms: mean 1/2 and variance 1/12 within 5 sigma over 10^5 draws;
 * normals: mean 0, variance 1. */
Test(rng, moments)
{
  enum { N = 100000 };
  double su = 0, su2 = 0, sn = 0, sn2 = 0;
  for (size_t i = 0; i < N; i++) {
    double u = gc_rng_uniform(42, 0, 0, i), z = gc_rng_normal(42, 0, 0, i);
    cr_assert(u >= 0.0 && u < 1.0);
    su += u; su2 += u * u; sn += z; sn2 += z * z;
  }
  double mu = su / N, vu = su2 / N - mu * mu, mz = sn / N, vz = sn2 / N - mz * mz;
  cr_assert(fabs(mu - 0.5) < 5 * sqrt(1.0 / 12 / N), "uniform mean %g", mu);
  cr_assert(fabs(vu - 1.0 / 12) < 5 * sqrt(1.0 / 180 / N), "uniform var %g", vu);
  cr_assert(fabs(mz) < 5 * sqrt(1.0 / N), "normal mean %g", mz);
  cr_assert(fabs(vz - 1) < 5 * sqrt(2.0 / N), "normal var %g", vz);
}

Test(npy, round_trip_f32_and_f64_2d)
{
  float v[5] = {2.385f, -1.5f, 0.0f, -0.0f, 3e-38f};
  size_t shape1[1] = {5};
  const char *p = gc_test_tmp("v.npy");
  cr_assert(eq(int, gc_npy_write(p, GC_F32, 1, shape1, v), GC_SUCCESS));
  gc_array a;
  cr_assert(eq(int, gc_npy_read(p, &a), GC_SUCCESS));
  cr_assert(eq(int, a.dtype, GC_F32));
  cr_assert(eq(sz, a.ndim, 1));
  cr_assert(eq(sz, a.count, 5));
  cr_assert(memcmp(a.data, v, sizeof v) == 0, "bit-identical round trip");
  gc_array_free(&a);

  double m[6] = {1, 2, 3, 4, 5, 6.25};
  size_t shape2[2] = {2, 3};
  cr_assert(eq(int, gc_npy_write(p, GC_F64, 2, shape2, m), GC_SUCCESS));
  cr_assert(eq(int, gc_npy_read(p, &a), GC_SUCCESS));
  cr_assert(eq(sz, a.shape[0], 2));
  cr_assert(eq(sz, a.shape[1], 3));
  cr_assert(memcmp(a.data, m, sizeof m) == 0);
  cr_assert(eq(int, gc_array_convert(&a, GC_F32), GC_SUCCESS));
  cr_assert(eq(flt, ((float *) a.data)[5], 6.25f));
  gc_array_free(&a);
  remove(p);
}

static void write_bytes(const char *p, const void *b, size_t n)
{
  FILE *f = fopen(p, "wb");
  cr_assert(f != NULL);
  fwrite(b, 1, n, f);
  fclose(f);
}

/* Header data start is 64-byte aligned: a v1 header of 118 chars + 10. */
static size_t make_header(char *buf, const char *dict)
{
  size_t len = strlen(dict), total = 10 + len + 1, pad = (64 - total % 64) % 64;
  size_t hlen = len + pad + 1;
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (char) (hlen & 0xff);
  buf[9] = (char) (hlen >> 8);
  memcpy(buf + 10, dict, len);
  memset(buf + 10 + len, ' ', pad);
  buf[10 + len + pad] = '\n';
  return 10 + hlen;
}

Test(npy, malformed_files_name_the_problem, .init = gc_test_quiet)
{
  const char *p = gc_test_tmp("bad.npy");
  gc_array a;

  cr_assert(eq(int, gc_npy_read("/nonexistent/x.npy", &a), GC_EIO));
  cr_assert(strstr(gc_last_error(), "/nonexistent/x.npy") != NULL);

  write_bytes(p, "PK\x03\x04 not numpy at all", 22);
  cr_assert(eq(int, gc_npy_read(p, &a), GC_EFORMAT));
  cr_assert(strstr(gc_last_error(), "magic") != NULL, "%s", gc_last_error());

  char buf[256];
  size_t h = make_header(buf, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }");
  memset(buf + h, 0, 16);
  write_bytes(p, buf, h + 16);
  cr_assert(eq(int, gc_npy_read(p, &a), GC_EFORMAT));
  cr_assert(strstr(gc_last_error(), "<i8") != NULL, "%s", gc_last_error());

  h = make_header(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (10,), }");
  write_bytes(p, buf, h + 12);   /* 3 of 10 floats */
  cr_assert(eq(int, gc_npy_read(p, &a), GC_EFORMAT));
  cr_assert(strstr(gc_last_error(), "truncated") != NULL, "%s", gc_last_error());

  h = make_header(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': 7, }");
  write_bytes(p, buf, h);
  cr_assert(eq(int, gc_npy_read(p, &a), GC_EFORMAT));

  /* bytes past the data the header promises: refused, with both counts */
  h = make_header(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
  memset(buf + h, 0, 13);
  write_bytes(p, buf, h + 13);   /* 3 floats and one more byte */
  cr_assert(eq(int, gc_npy_read(p, &a), GC_EFORMAT));
  cr_assert(strstr(gc_last_error(), "bad.npy") &&
            strstr(gc_last_error(), "trailing bytes: the header promises 3 values"
                   " (12 bytes of data), the file holds 13 bytes"), "%s", gc_last_error());
  write_bytes(p, buf, h + 12);   /* exactly the data: read */
  cr_assert(eq(int, gc_npy_read(p, &a), GC_SUCCESS), "%s", gc_last_error());
  gc_array_free(&a);
  remove(p);
}

Test(npy, fortran_order_is_transposed)
{
  const char *p = gc_test_tmp("f.npy");
  char buf[256];
  size_t h = make_header(buf, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }");
  double colmajor[6] = {1, 4, 2, 5, 3, 6};   /* [[1,2,3],[4,5,6]] */
  memcpy(buf + h, colmajor, sizeof colmajor);
  write_bytes(p, buf, h + sizeof colmajor);
  gc_array a;
  cr_assert(eq(int, gc_npy_read(p, &a), GC_SUCCESS));
  const double *d = a.data;
  for (int i = 0; i < 6; i++)
    cr_assert(eq(dbl, d[i], (double) (i + 1)));
  gc_array_free(&a);
  remove(p);
}

static int seen_code;
static void record(const char *reason, const char *file, int line, int code)
{
  (void) reason; (void) file; (void) line;
  seen_code = code;
}

Test(errors, handler_is_replaceable_and_never_exits)
{
  gc_set_error_handler(record);
  gc_array a;
  cr_assert(eq(int, gc_npy_read("/nonexistent/y.npy", &a), GC_EIO));
  cr_assert(eq(int, seen_code, GC_EIO));
  gc_set_error_handler(NULL);
  cr_assert(strcmp(gc_strerror(GC_EDOM), "unknown error") != 0);
}

/* gc__json_quote: quotes, backslashes and control bytes escaped, UTF-8
 * kept, a byte that is not UTF-8 (a stray continuation, a truncated or
 * overlong form, a surrogate) replaced by U+FFFD, NULL as "". */
Test(io, json_quote_escapes_what_json_forbids)
{
  static const struct { const char *in, *out; } c[] = {
    { "plain", "\"plain\"" },
    { "q\"b\\t\tn\nr\rf\fb\b", "\"q\\\"b\\\\t\\tn\\nr\\rf\\fb\\b\"" },
    { "\x01\x0b\x1f\x7f", "\"\\u0001\\u000b\\u001f\x7f\"" },
    { "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"" },
    { "a\xff" "b\x80" "c\xc3", "\"a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd\"" },
    { "\xc0\xaf\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"" },
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    char *q = gc__json_quote(c[i].in);
    cr_assert(q != NULL);
    cr_assert(strcmp(q, c[i].out) == 0, "case %zu: got %s", i, q);
    free(q);
  }
  char *e = gc__json_quote(NULL);
  cr_assert(e != NULL && strcmp(e, "\"\"") == 0);
  free(e);
}

/* The first NaN or Inf (gc__vfirst_nonfinite, behind gc_first_nonfinite
 * and every compressor's rule) on every instruction set this CPU has: the
 * hand-written AVX-512 blocks of 64, the compiled bodies and the tails,
 * for lengths that end inside and after whole blocks, each position, both
 * signs of NaN and Inf; the largest finite values are not flagged. */
Test(vec, first_nonfinite_every_isa_position_and_tail)
{
  const size_t lens[] = { 0, 1, 15, 63, 64, 65, 127, 128, 191, 200, 4161 };
  float *x = malloc(4161 * sizeof *x);
  double *y = malloc(4161 * sizeof *y);
  cr_assert(x && y);
  const float bad32[] = { NAN, -NAN, INFINITY, -INFINITY };
  const double bad64[] = { NAN, -NAN, INFINITY, -INFINITY };
  for (int isa = GC__ISA_SSE2; isa <= gc__isa_cpu(); isa++) {
    gc__isa_force(isa);
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
      size_t n = lens[l];
      for (size_t i = 0; i < n; i++) {
        x[i] = (i & 1) ? -FLT_MAX : FLT_MAX;
        y[i] = (i & 1) ? -DBL_MAX : DBL_MAX;
      }
      cr_assert_eq(gc__vfirst_nonfinite(GC_F32, x, n), n, "isa %d n %zu", isa, n);
      cr_assert_eq(gc__vfirst_nonfinite(GC_F64, y, n), n, "isa %d n %zu", isa, n);
      for (size_t at = 0; at < n; at += (n > 300 ? 37 : 1)) {
        float keep = x[at];
        double keepd = y[at];
        x[at] = bad32[at % 4];
        y[at] = bad64[at % 4];
        cr_assert_eq(gc__vfirst_nonfinite(GC_F32, x, n), at, "isa %d n %zu", isa, n);
        cr_assert_eq(gc__vfirst_nonfinite(GC_F64, y, n), at, "isa %d n %zu", isa, n);
        x[at] = keep;
        y[at] = keepd;
      }
    }
  }
  gc__isa_force(gc__isa_cpu());
  free(x);
  free(y);
}
