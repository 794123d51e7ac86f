/* test_compressors.c -- the generic suite over every registered compressor
 * (round trip, determinism, error paths, precision markers) and the sparse
 * wire format (closed-form sizes under each index coding, gc_sparse_*). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_compressor.h"
#include "gc_dtype.h"
#include "gc_errno.h"
#include "gc_rng.h"
#include "gc_test.h"

enum { N = 1000 };

static gc_compressor_params generic_params(void)
{
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  p.density = 0.05;
  p.levels = 4;
  p.threshold = 1.0;
  p.seed = 1234;
  return p;
}

/* Types the generic suite can drive on a plain vector. */
#define FOR_EACH_TYPE(T)                                                   \
  for (const gc_compressor_type *const *T##_it = gc_compressor_types();    \
       *T##_it; T##_it++)                                                  \
    for (const gc_compressor_type *T = *T##_it; T; T = NULL)               \
      if (!(T->flags & GC_COMP_NEEDS_SHAPE))

Test(generic, registry_has_the_sparsifiers)
{
  const char *names[] = {"topk", "randk", "randk-unbiased", "threshold", "gaussk", "dgc"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    cr_assert_not_null(gc_compressor_type_by_name(names[i]), "%s", names[i]);
  cr_assert(eq(ptr, (void *) gc_compressor_type_by_name("topk"), (void *) gc_compressor_topk));
  cr_assert_null(gc_compressor_type_by_name("no-such"));
}

/* Encode/decode round trip, message within max_bytes, same bytes twice,
 * and, for the sparsifiers, the definition: y_i in {0, x_i} (scaled by
 * d/K for randk-unbiased). */
Test(generic, round_trip_and_determinism)
{
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  double *xd = malloc(N * sizeof *xd), *yd = malloc(N * sizeof *yd);
  gc_test_fill_normal_f32(x, N, 42);
  for (size_t i = 0; i < N; i++)
    xd[i] = x[i];
  gc_compressor_params p = generic_params();
  FOR_EACH_TYPE(T) {
    gc_compressor *c = gc_compressor_alloc(T, N, &p);
    cr_assert_not_null(c, "%s", T->name);
    size_t cap = gc_compressor_max_bytes(c), len, len2;
    uint8_t *b1 = malloc(cap), *b2 = malloc(cap);
    gc_compress_info info;
    cr_assert(eq(int, gc_compress_f32(c, x, 3, b1, cap, &len, &info), GC_SUCCESS), "%s", T->name);
    cr_assert(len <= cap, "%s: %zu > max %zu", T->name, len, cap);
    cr_assert(eq(int, gc_compress_f32(c, x, 3, b2, cap, &len2, NULL), GC_SUCCESS));
    cr_assert(eq(sz, len, len2), "%s", T->name);
    cr_assert(memcmp(b1, b2, len) == 0, "%s: not deterministic", T->name);
    memset(y, 0, N * sizeof *y);
    cr_assert(eq(int, gc_decompress_add_f32(c, b1, len, 3, 1.0f, y), GC_SUCCESS), "%s", T->name);
    size_t nnz = 0;
    for (size_t i = 0; i < N; i++) {
      cr_assert(isfinite(y[i]), "%s: y[%zu]", T->name, i);
      nnz += y[i] != 0;
    }
    cr_assert(eq(sz, nnz, info.nnz), "%s: info.nnz", T->name);
    if (T->flags & GC_COMP_SPARSE) {
      float f = T == gc_compressor_randk_unbiased
                  ? (float) ((double) N / (double) gc_compressor_k(c)) : 1.0f;
      for (size_t i = 0; i < N; i++)
        cr_assert(y[i] == 0 || y[i] == x[i] * f, "%s: y[%zu] = %g, x = %g", T->name, i,
                  (double) y[i], (double) x[i]);
    }
    /* decode-accumulate with a scale: y += scale * C(x) */
    cr_assert(eq(int, gc_decompress_add_f32(c, b1, len, 3, -1.0f, y), GC_SUCCESS));
    for (size_t i = 0; i < N; i++)
      cr_assert(eq(flt, y[i], 0.0f), "%s: y - C(x) at %zu", T->name, i);

    /* float64 path: same selection on float-exact data */
    cr_assert(eq(int, gc_compress_f64(c, xd, 3, b2, cap, &len2, NULL), GC_SUCCESS), "%s", T->name);
    cr_assert(len2 <= cap);
    memset(yd, 0, N * sizeof *yd);
    cr_assert(eq(int, gc_decompress_add_f64(c, b2, len2, 3, 1.0, yd), GC_SUCCESS), "%s", T->name);
    memset(y, 0, N * sizeof *y);
    gc_decompress_add_f32(c, b1, len, 3, 1.0f, y);
    if (T->flags & GC_COMP_SPARSE)
      for (size_t i = 0; i < N; i++)
        cr_assert(eq(int, y[i] != 0, yd[i] != 0), "%s: f32/f64 support differs at %zu", T->name, i);
    free(b1);
    free(b2);
    gc_compressor_free(c);
  }
  free(x); free(y); free(xd); free(yd);
}

/* Every error returns a code and leaves y untouched. */
Test(generic, error_paths_leave_y_untouched, .init = gc_test_quiet)
{
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *y0 = malloc(N * sizeof *y0);
  double *xd = malloc(N * sizeof *xd), *yd = malloc(N * sizeof *yd);
  gc_test_fill_normal_f32(x, N, 7);
  for (size_t i = 0; i < N; i++) {
    y0[i] = (float) i * 0.25f;
    xd[i] = x[i];
  }
  gc_compressor_params p = generic_params();
  uint8_t *other = NULL;
  size_t other_len = 0;
  FOR_EACH_TYPE(T) {
    cr_assert_null(gc_compressor_alloc(T, 0, &p), "%s: n = 0", T->name);
    gc_compressor *c = gc_compressor_alloc(T, N, &p);
    size_t cap = gc_compressor_max_bytes(c), len;
    uint8_t *buf = malloc(cap + 16);
    /* NaN and +Inf anywhere; random-K reads only the entries it sends (it
     * runs in O(k)), so there the bad value goes where it samples. */
    size_t mid = N / 2, last = N - 1, second = 1;
    if ((T->flags & GC_COMP_RANDOM) && (T->flags & GC_COMP_SPARSE)) {
      memset(y, 0, N * sizeof *y);
      cr_assert(eq(int, gc_compress_f32(c, x, 0, buf, cap, &len, NULL), GC_SUCCESS));
      cr_assert(eq(int, gc_decompress_add_f32(c, buf, len, 0, 1.0f, y), GC_SUCCESS));
      size_t sent = 0;
      while (sent < N && y[sent] == 0)
        sent++;
      cr_assert(sent < N, "%s: nothing sent", T->name);
      mid = last = second = sent;
    }
    float keep = x[mid];
    x[mid] = NAN;
    cr_assert(eq(int, gc_compress_f32(c, x, 0, buf, cap, &len, NULL), GC_EDOM), "%s: NaN", T->name);
    x[mid] = keep;
    keep = x[last];
    x[last] = INFINITY;
    cr_assert(eq(int, gc_compress_f32(c, x, 0, buf, cap, &len, NULL), GC_EDOM), "%s: Inf", T->name);
    x[last] = keep;
    xd[second] = -INFINITY;
    cr_assert(eq(int, gc_compress_f64(c, xd, 0, buf, cap, &len, NULL), GC_EDOM), "%s: -Inf f64", T->name);
    xd[second] = x[second];

    cr_assert(eq(int, gc_compress_f32(c, x, 0, buf, cap, &len, NULL), GC_SUCCESS), "%s", T->name);
    for (size_t l = 0; l < len; l++) {   /* truncated at every length */
      memcpy(y, y0, N * sizeof *y);
      cr_assert(gc_decompress_add_f32(c, buf, l, 0, 1.0f, y) != GC_SUCCESS, "%s: len %zu", T->name, l);
      cr_assert(memcmp(y, y0, N * sizeof *y) == 0, "%s: y touched at len %zu", T->name, l);
    }
    memcpy(y, y0, N * sizeof *y);
    buf[len] = 0;   /* trailing garbage */
    cr_assert(eq(int, gc_decompress_add_f32(c, buf, len + 1, 0, 1.0f, y), GC_ECORRUPT), "%s: trailing", T->name);
    buf[0] ^= 0xff;   /* flipped tag */
    cr_assert(eq(int, gc_decompress_add_f32(c, buf, len, 0, 1.0f, y), GC_ECORRUPT), "%s: tag", T->name);
    buf[0] ^= 0xff;
    /* float32 message into the float64 decoder */
    cr_assert(eq(int, gc_decompress_add_f64(c, buf, len, 0, 1.0, yd), GC_ECORRUPT), "%s: precision", T->name);
    /* another compressor's message */
    if (other)
      cr_assert(gc_decompress_add_f32(c, other, other_len, 0, 1.0f, y) != GC_SUCCESS,
                "%s accepted another type's message", T->name);
    cr_assert(memcmp(y, y0, N * sizeof *y) == 0, "%s: y touched", T->name);
    free(other);
    other = buf;
    other_len = len;
    gc_compressor_free(c);
  }
  free(other);
  free(x); free(y); free(y0); free(xd); free(yd);
}

/* ---- the sparse wire format --------------------------------------------- */

static size_t leb(uint32_t g)
{
  size_t l = 1;
  for (; g >= 128; g >>= 7)
    l++;
  return l;
}

/* The closed forms of wire.c for the support of y and b-byte values;
 * returns the size the encoder must pick and its coding. */
static size_t closed_form(const double *y, size_t n, size_t b, int *coding)
{
  size_t c = 0, delta = 0, prev = 0;
  for (size_t i = 0; i < n; i++)
    if (y[i] != 0) {
      delta += leb((uint32_t) (c ? i - prev - 1 : i));
      prev = i;
      c++;
    }
  size_t raw = 4 * c, bitmap = (n + 7) / 8, best = raw;
  *coding = 0;
  if (c && delta < best) { best = delta; *coding = 1; }
  if (bitmap < best) { best = bitmap; *coding = 2; }
  return 7 + best + b * c;
}

/* One rule for non-finite input (docs/design.md): every registered
 * compressor, PowerSGD with a layer matrix and a raw rest included,
 * refuses NaN, +Inf and -Inf at the first, a middle and the last index,
 * in both precisions, with GC_EDOM and a message naming that index --
 * random-K too, though it sends only K of the n entries. */
Test(generic, nonfinite_anywhere_refused_naming_the_index, .init = gc_test_quiet)
{
  enum { M = 4099 };   /* not a multiple of 64 or of any block */
  float *x = malloc(M * sizeof *x);
  double *xd = malloc(M * sizeof *xd);
  gc_test_fill_normal_f32(x, M, 9);
  for (size_t i = 0; i < M; i++)
    xd[i] = x[i];
  const gc_segment seg = {0, 40, 100};   /* entries 4000..4098 go raw */
  const size_t at[3] = {0, M / 2, M - 1};
  const double bad[3] = {NAN, INFINITY, -INFINITY};
  for (const gc_compressor_type *const *it = gc_compressor_types(); *it; it++) {
    const gc_compressor_type *T = *it;
    gc_compressor_params p = generic_params();
    p.density = 0.001;   /* random-K draws 4 entries: rarely the bad one */
    if (T->flags & GC_COMP_NEEDS_SHAPE) {
      p.segments = &seg;
      p.nsegments = 1;
    }
    gc_compressor *c = gc_compressor_alloc(T, M, &p);
    cr_assert_not_null(c, "%s", T->name);
    size_t cap = gc_compressor_max_bytes(c), len;
    uint8_t *buf = malloc(cap);
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++)
        for (int f64 = 0; f64 < 2; f64++) {
          char want[64], want2[64];   /* the two families' wordings */
          snprintf(want, sizeof want, "at index %zu ", at[a]);
          snprintf(want2, sizeof want2, "x[%zu] ", at[a]);
          int rc;
          if (f64) {
            xd[at[a]] = bad[b];
            rc = gc_compress_f64(c, xd, 5, buf, cap, &len, NULL);
            xd[at[a]] = x[at[a]];
          } else {
            float keep = x[at[a]];
            x[at[a]] = (float) bad[b];
            rc = gc_compress_f32(c, x, 5, buf, cap, &len, NULL);
            x[at[a]] = keep;
          }
          cr_assert(eq(int, rc, GC_EDOM), "%s %s: %g at %zu accepted", T->name,
                    f64 ? "f64" : "f32", bad[b], at[a]);
          cr_assert(strstr(gc_last_error(), want) || strstr(gc_last_error(), want2),
                    "%s %s: '%s' does not name index %zu", T->name, f64 ? "f64" : "f32",
                    gc_last_error(), at[a]);
        }
    free(buf);
    gc_compressor_free(c);
  }
  free(x);
  free(xd);
}

/* Finite input never gives a message the compressor's own decoder
 * refuses: with entries near the largest finite value (norms and sums
 * beyond it) every registered compressor either refuses at encode time,
 * naming the reason, or writes a message that decodes. */
Test(generic, huge_finite_input_decodes_or_is_refused, .init = gc_test_quiet)
{
  enum { M = 1000 };
  double *xd = malloc(M * sizeof *xd), *yd = malloc(M * sizeof *yd);
  float *xf = malloc(M * sizeof *xf), *yf = malloc(M * sizeof *yf);
  const gc_segment seg = {0, 20, 40};
  for (int shape = 0; shape < 3; shape++) {
    for (size_t i = 0; i < M; i++) {
      double g = gc_rng_normal(12, 0, 0, i);
      double u = shape == 0 ? 0.5 : shape == 1 ? (i % 2 ? 1 : -1) : g / 6;
      xd[i] = u * DBL_MAX;
      xf[i] = (float) u * FLT_MAX;
    }
    for (const gc_compressor_type *const *it = gc_compressor_types(); *it; it++) {
      const gc_compressor_type *T = *it;
      gc_compressor_params p = generic_params();
      if (T->flags & GC_COMP_NEEDS_SHAPE) {
        p.segments = &seg;
        p.nsegments = 1;
      }
      gc_compressor *c = gc_compressor_alloc(T, M, &p);
      size_t cap = gc_compressor_max_bytes(c), len;
      uint8_t *buf = malloc(cap);
      for (int f64 = 0; f64 < 2; f64++) {
        int rc = f64 ? gc_compress_f64(c, xd, 1, buf, cap, &len, NULL)
                     : gc_compress_f32(c, xf, 1, buf, cap, &len, NULL);
        if (rc != GC_SUCCESS) {
          cr_assert(gc_last_error()[0] != '\0', "%s: refused without a reason", T->name);
          continue;
        }
        memset(yd, 0, M * sizeof *yd);
        memset(yf, 0, M * sizeof *yf);
        rc = f64 ? gc_decompress_add_f64(c, buf, len, 1, 1.0, yd)
                 : gc_decompress_add_f32(c, buf, len, 1, 1.0f, yf);
        cr_assert(eq(int, rc, GC_SUCCESS), "%s %s shape %d: own message refused: %s",
                  T->name, f64 ? "f64" : "f32", shape, gc_last_error());
      }
      free(buf);
      gc_compressor_free(c);
    }
  }
  free(xd); free(yd); free(xf); free(yf);
}

Test(wire, sizes_match_closed_form_under_each_coding)
{
  enum { NN = 20000 };
  double *x = malloc(NN * sizeof *x), *y = malloc(NN * sizeof *y);
  gc_test_fill_distinct_f64(x, NN, 3);
  int seen[3] = {0};
  const gc_compressor_type *types[] = {gc_compressor_topk, gc_compressor_randk,
                                       gc_compressor_threshold};
  const size_t ks[] = {1, 3, 50, 700, 2600, 10000, 20000};
  for (size_t t = 0; t < 3; t++)
    for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
      gc_compressor_params p;
      gc_compressor_params_default(&p);
      p.k = ks[j];
      p.threshold = 3.0 * (double) j / 7;
      gc_compressor *c = gc_compressor_alloc(types[t], NN, &p);
      size_t cap = gc_compressor_max_bytes(c), len;
      uint8_t *buf = malloc(cap);
      cr_assert(eq(int, gc_compress_f64(c, x, 0, buf, cap, &len, NULL), GC_SUCCESS));
      memset(y, 0, NN * sizeof *y);
      cr_assert(eq(int, gc_decompress_add_f64(c, buf, len, 0, 1.0, y), GC_SUCCESS));
      int coding;
      size_t want = closed_form(y, NN, 8, &coding);
      cr_assert(eq(sz, len, want), "%s k=%zu", types[t]->name, ks[j]);
      cr_assert(eq(int, buf[2], coding), "%s k=%zu coding", types[t]->name, ks[j]);
      seen[coding] = 1;
      /* float32: 4-byte values */
      float *xf = malloc(NN * sizeof *xf);
      for (size_t i = 0; i < NN; i++)
        xf[i] = (float) x[i];
      cr_assert(eq(int, gc_compress_f32(c, xf, 0, buf, cap, &len, NULL), GC_SUCCESS));
      cr_assert(eq(sz, len, closed_form(y, NN, 4, &coding)), "%s f32", types[t]->name);
      free(xf);
      free(buf);
      gc_compressor_free(c);
    }
  cr_assert(seen[1] && seen[2], "delta and bitmap both exercised");
  free(x);
  free(y);
}

Test(wire, dense_encoder_all_codings_and_scale)
{
  /* raw: entries at 2^21 and 2^21 + 2^22, so both LEB128 gaps take 4 bytes
   * and tie raw (ties go to raw) */
  size_t n = (size_t) 1 << 23;
  double *x = calloc(n, sizeof *x), *y = calloc(n, sizeof *y);
  size_t i0 = (size_t) 1 << 21, i1 = i0 + ((size_t) 1 << 22);
  x[i0] = 1.5;
  x[i1] = -2;
  size_t cap = gc_sparse_max_bytes(n, 2, GC_F64), len, nnz;
  uint8_t buf[64];
  cr_assert(cap <= sizeof buf);
  cr_assert(eq(int, gc_sparse_encode_dense_f64(x, n, buf, cap, &len, &nnz), GC_SUCCESS));
  cr_assert(eq(sz, nnz, 2));
  cr_assert(eq(int, buf[2], 0));
  cr_assert(eq(sz, len, 7 + 4 * 2 + 8 * 2));
  cr_assert(eq(int, gc_sparse_decode_add_f64(buf, len, n, 2.0, y), GC_SUCCESS));
  cr_assert(eq(dbl, y[i0], 3.0));
  cr_assert(eq(dbl, y[i1], -4.0));
  free(x);
  free(y);

  /* delta: a few entries; bitmap: dense */
  float v[64] = {0}, w[64] = {0};
  v[3] = 1;
  v[40] = -1;
  uint8_t b2[1024];
  cr_assert(eq(int, gc_sparse_encode_dense_f32(v, 64, b2, sizeof b2, &len, &nnz), GC_SUCCESS));
  cr_assert(eq(int, b2[2], 1));
  cr_assert(eq(sz, len, 7 + 2 + 4 * 2));
  for (int i = 0; i < 64; i += 2)
    v[i] = (float) i + 1;
  cr_assert(eq(int, gc_sparse_encode_dense_f32(v, 64, b2, sizeof b2, &len, &nnz), GC_SUCCESS));
  cr_assert(eq(int, b2[2], 2));
  cr_assert(eq(sz, len, 7 + 8 + 4 * nnz));
  cr_assert(len <= gc_sparse_max_bytes(64, nnz, GC_F32));
  cr_assert(eq(int, gc_sparse_decode_add_f32(b2, len, 64, 1.0f, w), GC_SUCCESS));
  for (int i = 0; i < 64; i++)
    cr_assert(eq(flt, w[i], v[i]));
  /* all zero: an empty message */
  memset(v, 0, sizeof v);
  cr_assert(eq(int, gc_sparse_encode_dense_f32(v, 64, b2, sizeof b2, &len, &nnz), GC_SUCCESS));
  cr_assert(eq(sz, len, 7));
  cr_assert(eq(sz, nnz, 0));
}

/* Hand-made corrupt messages: out-of-range and repeated indices, counts
 * above n, bad coding, a bitmap bit past n, and too small a buffer. */
Test(wire, corrupt_messages_rejected, .init = gc_test_quiet)
{
  float v[10] = {0, 1, 0, 0, 2, 0, 0, 0, 0, 3}, y[10] = {0};
  uint8_t b[128];
  size_t len, nnz;
  cr_assert(eq(int, gc_sparse_encode_dense_f32(v, 10, b, 5, &len, &nnz), GC_ENOSPACE));
  /* hand-built raw message: header + 2 indices + 2 values */
  uint8_t m[7 + 8 + 8] = {0x50, 4, 0, 2, 0, 0, 0};
  uint32_t idx[2] = {1, 4};
  float val[2] = {1, 2};
  memcpy(m + 7, idx, 8);
  memcpy(m + 15, val, 8);
  cr_assert(eq(int, gc_sparse_decode_add_f32(m, sizeof m, 10, 1.0f, y), GC_SUCCESS));
  cr_assert(eq(flt, y[4], 2.0f));
  memset(y, 0, sizeof y);
  idx[1] = 10;   /* out of range */
  memcpy(m + 7, idx, 8);
  cr_assert(eq(int, gc_sparse_decode_add_f32(m, sizeof m, 10, 1.0f, y), GC_ECORRUPT));
  idx[1] = 1;    /* not increasing */
  memcpy(m + 7, idx, 8);
  cr_assert(eq(int, gc_sparse_decode_add_f32(m, sizeof m, 10, 1.0f, y), GC_ECORRUPT));
  idx[1] = 4;
  memcpy(m + 7, idx, 8);
  m[3] = 11;     /* count > n */
  cr_assert(eq(int, gc_sparse_decode_add_f32(m, sizeof m, 10, 1.0f, y), GC_ECORRUPT));
  m[3] = 2;
  m[2] = 7;      /* unknown coding */
  cr_assert(eq(int, gc_sparse_decode_add_f32(m, sizeof m, 10, 1.0f, y), GC_ECORRUPT));
  m[2] = 0;
  m[1] = 8;      /* precision marker says float64 */
  cr_assert(eq(int, gc_sparse_decode_add_f32(m, sizeof m, 10, 1.0f, y), GC_ECORRUPT));
  /* bitmap with a bit past n = 10 */
  uint8_t bm[7 + 2 + 4] = {0x50, 4, 2, 1, 0, 0, 0, 0x00, 0x04};
  cr_assert(eq(int, gc_sparse_decode_add_f32(bm, sizeof bm, 10, 1.0f, y), GC_ECORRUPT));
  bm[8] = 0x02;  /* index 9: fine */
  cr_assert(eq(int, gc_sparse_decode_add_f32(bm, sizeof bm, 10, 1.0f, y), GC_SUCCESS));
  /* delta: an over-long varint */
  uint8_t dl[7 + 6 + 4] = {0x50, 4, 1, 1, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
  memset(y, 0, sizeof y);
  cr_assert(eq(int, gc_sparse_decode_add_f32(dl, sizeof dl, 10, 1.0f, y), GC_ECORRUPT));
  for (int i = 0; i < 9; i++)
    cr_assert(eq(flt, y[i], 0.0f), "y untouched");
}

/* Property 20: the top-K message costs about K(b_v + b_i) and beats the
 * dense vector while K is small. */
Test(wire, topk_message_versus_dense)
{
  enum { D = 100000 };
  float *x = malloc(D * sizeof *x);
  gc_test_fill_normal_f32(x, D, 1);
  for (size_t k = 1; k <= D; k *= 10) {
    gc_compressor_params p;
    gc_compressor_params_default(&p);
    p.k = k;
    gc_compressor *c = gc_compressor_alloc(gc_compressor_topk, D, &p);
    size_t cap = gc_compressor_max_bytes(c), len;
    uint8_t *buf = malloc(cap);
    cr_assert(eq(int, gc_compress_f32(c, x, 0, buf, cap, &len, NULL), GC_SUCCESS));
    cr_assert(len <= 7 + 8 * k, "k=%zu: %zu bytes", k, len);
    cr_assert(len <= 7 + (D + 7) / 8 + 4 * k);
    if (k * (32 + 17) <= 32 * (size_t) D)   /* ceil(log2 1e5) = 17 */
      cr_assert(len <= 4 * (size_t) D + 7, "k=%zu beats dense", k);
    free(buf);
    gc_compressor_free(c);
  }
  free(x);
}
