/* test_lowrank.c -- PowerSGD (lowrank.c): exact reproduction of low-rank
 * matrices, the projection identity ||M - C||^2 = ||M||^2 - ||C||^2, the
 * warm start (convergence to the best rank-r approximation, changed second
 * message), the closed-form message size, raw segments passed bit-exactly,
 * determinism, every error path, the algorithm layer (error feedback,
 * shared first Q, ledger) and a short MNIST run through gc_train_run.
 * The MNIST test is skipped when the data are absent. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_algo.h"
#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_nn.h"
#include "gc_npy.h"
#include "gc_test.h"
#include "gc_train_run.h"   /* gc_train_run: the training driver */

/* ---- helpers ----------------------------------------------------------- */

static int last_code;

static void record(const char *reason, const char *file, int line, int code)
{
  (void) reason;
  (void) file;
  (void) line;
  last_code = code;
}

static void quiet(void) { gc_set_error_handler(record); }

static gc_compressor *mk(size_t n, const gc_segment *seg, size_t ns,
                         unsigned rank, uint64_t seed)
{
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  p.segments = seg;
  p.nsegments = ns;
  p.rank = rank;
  p.seed = seed;
  return gc_compressor_alloc(gc_compressor_powersgd, n, &p);
}

/* M = A B^T (rows x cols, rank k) with standard normal A, B. */
static void low_rank(double *M, size_t rows, size_t cols, size_t k,
                     uint64_t seed)
{
  double *A = malloc(rows * k * sizeof *A), *B = malloc(cols * k * sizeof *B);
  gc_test_fill_normal(A, rows * k, seed);
  gc_test_fill_normal(B, cols * k, seed + 1);
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++) {
      double s = 0;
      for (size_t t = 0; t < k; t++)
        s += A[i * k + t] * B[j * k + t];
      M[i * cols + j] = s;
    }
  free(A);
  free(B);
}

/* Column t of the orthonormal DCT-II basis of R^m. */
static double dct(size_t m, size_t t, size_t i)
{
  double s = t ? sqrt(2.0 / (double) m) : sqrt(1.0 / (double) m);
  return s * cos(3.14159265358979323846 * ((double) i + 0.5) * (double) t / (double) m);
}



/* Closed-form message length (lowrank.c): H = 6, then per compressed
 * matrix r (rows + cols) values, and every other entry raw. */
static size_t closed_form(size_t n, const gc_segment *seg, size_t ns,
                          size_t r, size_t w)
{
  size_t vals = n;
  for (size_t i = 0; i < ns; i++) {
    size_t a = seg[i].rows, b = seg[i].cols;
    if (a > 1 && b > 1 && r * (a + b) < a * b)
      vals = vals - a * b + r * (a + b);
  }
  return 6 + w * vals;
}

/* A small "model": W1 20x30, b1, W2 5x20, b2, a 3x3 matrix (raw at r = 2:
 * 2 (3+3) >= 9), a BatchNorm-like 1x4 pair, and 6 entries in no segment;
 * listed out of order. */
enum { TOY_N = 748 };
static const gc_segment toy[] = {
  { 620, 5, 20 }, { 0, 20, 30 }, { 600, 1, 20 }, { 720, 1, 5 },
  { 725, 3, 3 }, { 734, 1, 4 }, { 738, 1, 4 } };
enum { TOY_NS = sizeof toy / sizeof toy[0] };

static int in_compressed(size_t i)
{
  return i < 600 || (i >= 620 && i < 720);
}

/* ---- the type ---------------------------------------------------------- */

Test(powersgd, registered_with_flags)
{
  const gc_compressor_type *T = gc_compressor_type_by_name("powersgd");
  cr_assert(eq(ptr, (void *) T, (void *) gc_compressor_powersgd));
  cr_assert(ne(u32, T->flags & GC_COMP_NEEDS_SHAPE, 0));
  cr_assert(ne(u32, T->flags & GC_COMP_BIASED, 0));
  cr_assert(ne(u32, T->flags & GC_COMP_RANDOM, 0));   /* the first Q */
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  cr_assert(eq(u32, p.rank, 2));
  cr_assert_null(p.segments);
}

/* (a) rank M <= r: P = M Q spans range(M), so C(M) = P^ P^^T M = M up to
 * rounding, on the first call and on the warm-started second call.  Error
 * model: a few products of length <= 60 and Gram-Schmidt in double, so
 * relative Frobenius error ~ 60 u: bounds 1e-12 (float64) and 1e-5
 * (float32, u = 6e-8). */
Test(powersgd, exact_low_rank_is_reproduced)
{
  enum { R = 50, C = 40, N = R * C };
  gc_segment seg = { 0, R, C };
  double *M = malloc(N * sizeof *M), *Y = malloc(N * sizeof *Y);
  float *Mf = malloc(N * sizeof *Mf), *Yf = malloc(N * sizeof *Yf);
  for (size_t k = 1; k <= 3; k++) {
    low_rank(M, R, C, k, 100 + k);
    for (size_t i = 0; i < N; i++)
      Mf[i] = (float) M[i];
    gc_compressor *c = mk(N, &seg, 1, 3, 5), *cf = mk(N, &seg, 1, 3, 5);
    cr_assert(c && cf, "%s", gc_last_error());
    for (int call = 0; call < 2; call++) {
      gc_test_roundtrip_f64(c, M, 0, NULL, Y, NULL);
      double rel = sqrt(gc_test_sq_dist(M, Y, N) / gc_test_sq_norm(M, N));
      cr_assert(rel <= 1e-12, "float64 rank %zu call %d: rel err %g", k, call, rel);
      gc_test_roundtrip_f32(cf, Mf, 0, NULL, Yf, NULL);
      double e = 0, m = 0;
      for (size_t i = 0; i < N; i++) {
        e += ((double) Mf[i] - Yf[i]) * ((double) Mf[i] - Yf[i]);
        m += (double) Mf[i] * Mf[i];
      }
      cr_assert(sqrt(e / m) <= 1e-5, "float32 rank %zu call %d: rel err %g", k,
                call, sqrt(e / m));
    }
    gc_compressor_free(c);
    gc_compressor_free(cf);
  }
  free(M); free(Y); free(Mf); free(Yf);
}

/* Warm start: repeated calls on a fixed M are subspace iteration.  With
 * singular values 2^-t the top-2 subspace converges like (s3/s2)^k = 2^-k,
 * so after 60 calls the error is the Eckart-Young optimum
 * sum_{t>=2} s_t^2 to rounding; the first call, from a random Q, is
 * measurably worse. */
Test(powersgd, warm_start_converges_to_best_rank_r)
{
  enum { R = 32, C = 24, N = R * C, K = 8 };
  gc_segment seg = { 0, R, C };
  double *M = calloc(N, sizeof *M), *Y = malloc(N * sizeof *Y), opt = 0;
  for (size_t t = 0; t < K; t++) {
    double s = ldexp(1.0, -(int) t);
    if (t >= 2)
      opt += s * s;
    for (size_t i = 0; i < R; i++)
      for (size_t j = 0; j < C; j++)
        M[i * C + j] += s * dct(R, t, i) * dct(C, (t * 5) % C, j);
  }
  gc_compressor *c = mk(N, &seg, 1, 2, 11);
  cr_assert_not_null(c, "%s", gc_last_error());
  gc_test_roundtrip_f64(c, M, 0, NULL, Y, NULL);
  double first = gc_test_sq_dist(M, Y, N);
  /* not a rounding tolerance: a random start leaves a component of size
   * ~ s_2 = 1/4 outside the top-2 subspace, far above 1e-3 opt */
  cr_assert(first > opt * (1 + 1e-3), "first call %g vs optimum %g", first, opt);
  double e = first;
  for (int k = 1; k < 60; k++) {
    gc_test_roundtrip_f64(c, M, 0, NULL, Y, NULL);
    double e2 = gc_test_sq_dist(M, Y, N);
    /* subspace iteration never moves away; the squared distance is a
     * double sum of N = 768 terms: rounding ~ N u e = 1e-13 e, plus an
     * absolute 1e-15 for e at the rounding floor */
    cr_assert(e2 <= e * (1 + 1e-12) + 1e-15, "call %d: error rose %g -> %g", k, e, e2);
    e = e2;
  }
  /* 2^-60 ~ 1e-18 of convergence left; what remains is the rounding of
   * the Gram-Schmidt and the products (~ 60 u, u = 1.1e-16) relative to
   * ||M||^2 = 4/3, against opt = 1/12: ~1e-13 opt, kept under 1e-10 */
  cr_assert(fabs(e - opt) <= 1e-10 * opt, "after 60 calls %.17g, optimum %.17g", e, opt);
  gc_compressor_free(c);
  free(M); free(Y);
}

/* (b) C(M) = P^ P^^T M is an orthogonal projection: ||M - C||^2 <= ||M||^2
 * and ||M - C||^2 = ||M||^2 - ||C||^2.  Checked over 5 warm-started calls
 * on changing random matrices, the identity to 1e-12 ||M||^2 in float64
 * and 1e-5 ||M||^2 in float32 (P^ orthonormal to the message precision). */
Test(powersgd, projection_and_contraction)
{
  enum { R = 60, C = 45, N = R * C };
  gc_segment seg = { 0, R, C };
  double *M = malloc(N * sizeof *M), *Y = malloc(N * sizeof *Y);
  float *Mf = malloc(N * sizeof *Mf), *Yf = malloc(N * sizeof *Yf);
  gc_compressor *c = mk(N, &seg, 1, 4, 3), *cf = mk(N, &seg, 1, 4, 3);
  for (int call = 0; call < 5; call++) {
    gc_test_fill_normal(M, N, 200 + (uint64_t) call);
    for (size_t i = 0; i < N; i++)
      Mf[i] = (float) M[i];
    gc_test_roundtrip_f64(c, M, 0, NULL, Y, NULL);
    double m2 = gc_test_sq_norm(M, N), c2 = gc_test_sq_norm(Y, N), e2 = gc_test_sq_dist(M, Y, N);
    cr_assert(e2 <= m2, "call %d: %g > %g", call, e2, m2);
    cr_assert(c2 > 0, "call %d: nothing sent", call);
    cr_assert(fabs(m2 - c2 - e2) <= 1e-12 * m2, "call %d: %g - %g != %g", call,
              m2, c2, e2);
    gc_test_roundtrip_f32(cf, Mf, 0, NULL, Yf, NULL);
    double mf = 0, cfs = 0, ef = 0;
    for (size_t i = 0; i < N; i++) {
      mf += (double) Mf[i] * Mf[i];
      cfs += (double) Yf[i] * Yf[i];
      ef += ((double) Mf[i] - Yf[i]) * ((double) Mf[i] - Yf[i]);
    }
    cr_assert(ef <= mf, "float32 call %d", call);
    cr_assert(fabs(mf - cfs - ef) <= 1e-5 * mf, "float32 call %d: %g - %g != %g",
              call, mf, cfs, ef);
  }
  gc_compressor_free(c);
  gc_compressor_free(cf);
  free(M); free(Y); free(Mf); free(Yf);
}

/* A zero matrix is sent as zero and does not lose the warm start: the
 * next nonzero exact-rank matrix is still reproduced. */
Test(powersgd, zero_matrix_keeps_the_subspace)
{
  enum { R = 20, C = 16, N = R * C };
  gc_segment seg = { 0, R, C };
  double *M = calloc(N, sizeof *M), *Y = malloc(N * sizeof *Y);
  gc_compressor *c = mk(N, &seg, 1, 2, 9);
  gc_test_roundtrip_f64(c, M, 0, NULL, Y, NULL);
  for (size_t i = 0; i < N; i++)
    cr_assert(Y[i] == 0.0, "entry %zu", i);
  low_rank(M, R, C, 2, 77);
  gc_test_roundtrip_f64(c, M, 0, NULL, Y, NULL);
  cr_assert(sqrt(gc_test_sq_dist(M, Y, N) / gc_test_sq_norm(M, N)) <= 1e-12);
  gc_compressor_free(c);
  free(M); free(Y);
}

/* (c) the message length is the closed form, for both precisions, and
 * max_bytes is the float64 one. */
Test(powersgd, wire_size_is_the_closed_form)
{
  double x[TOY_N], y[TOY_N];
  float xf[TOY_N], yf[TOY_N];
  gc_test_fill_normal(x, TOY_N, 31);
  for (size_t i = 0; i < TOY_N; i++)
    xf[i] = (float) x[i];
  for (unsigned r = 1; r <= 3; r++) {   /* the 3 x 3 segment caps r at 3 */
    gc_compressor *c = mk(TOY_N, toy, TOY_NS, r, 1);
    cr_assert_not_null(c, "r=%u: %s", r, gc_last_error());
    size_t want64 = closed_form(TOY_N, toy, TOY_NS, r, 8);
    size_t want32 = closed_form(TOY_N, toy, TOY_NS, r, 4);
    cr_assert(eq(sz, gc_compressor_max_bytes(c), want64), "r=%u", r);
    cr_assert(eq(sz, gc_test_roundtrip_f64(c, x, 0, NULL, y, NULL), want64), "r=%u", r);
    cr_assert(eq(sz, gc_test_roundtrip_f32(c, xf, 0, NULL, yf, NULL), want32), "r=%u", r);
    gc_compressor_free(c);
  }
  /* by hand at r = 2: 2 (20+30) + 2 (5+20) + 48 raw = 198 values */
  cr_assert(eq(sz, closed_form(TOY_N, toy, TOY_NS, 2, 4), 6 + 4 * 198));
  gc_compressor *c = mk(TOY_N, toy, TOY_NS, 2, 1);
  size_t cap = gc_compressor_max_bytes(c), len;
  uint8_t *buf = malloc(cap);
  gc_compress_info info;
  cr_assert(eq(int, gc_compress_f32(c, xf, 0, buf, cap, &len, &info), GC_SUCCESS));
  cr_assert(eq(sz, len, 6 + 4 * 198));
  cr_assert(eq(sz, info.selected, 198));
  cr_assert(eq(sz, info.nnz, TOY_N));   /* dense normal input */
  cr_assert(eq(u8, buf[0], 0xE0));
  cr_assert(eq(u8, buf[1], 32));
  free(buf);
  gc_compressor_free(c);
}

/* (d) biases, small matrices and uncovered entries pass through exactly,
 * and the error-feedback residual x - C(x) is exactly zero there. */
Test(powersgd, raw_segments_are_exact)
{
  double x[TOY_N], y[TOY_N];
  float xf[TOY_N], yf[TOY_N];
  gc_test_fill_normal(x, TOY_N, 41);
  for (size_t i = 0; i < TOY_N; i++)
    xf[i] = (float) x[i] * 2.385f;
  gc_compressor *c = mk(TOY_N, toy, TOY_NS, 2, 1);
  for (int call = 0; call < 2; call++) {
    gc_test_roundtrip_f64(c, x, 0, NULL, y, NULL);
    gc_test_roundtrip_f32(c, xf, 0, NULL, yf, NULL);
    for (size_t i = 0; i < TOY_N; i++) {
      if (in_compressed(i))
        continue;
      cr_assert(y[i] == x[i], "float64 entry %zu: %.17g vs %.17g", i, y[i], x[i]);
      cr_assert(yf[i] == xf[i], "float32 entry %zu", i);
    }
  }
  /* residual: decode with scale -1 into a copy of x */
  size_t cap = gc_compressor_max_bytes(c), len;
  uint8_t *buf = malloc(cap);
  cr_assert(eq(int, gc_compress_f64(c, x, 0, buf, cap, &len, NULL), GC_SUCCESS));
  memcpy(y, x, sizeof y);
  cr_assert(eq(int, gc_decompress_add_f64(c, buf, len, 0, -1.0, y), GC_SUCCESS));
  for (size_t i = 0; i < TOY_N; i++)
    if (!in_compressed(i))
      cr_assert(y[i] == 0.0, "residual at %zu", i);
  free(buf);
  gc_compressor_free(c);
}

/* (e) same seed, same bytes (two instances, both calls); the warm start
 * changes the second message; another seed changes the first. */
Test(powersgd, deterministic_and_warm_started)
{
  float x[TOY_N];
  gc_test_fill_normal_f32(x, TOY_N, 51);
  gc_compressor *a = mk(TOY_N, toy, TOY_NS, 2, 7), *b = mk(TOY_N, toy, TOY_NS, 2, 7);
  gc_compressor *o = mk(TOY_N, toy, TOY_NS, 2, 8);
  size_t cap = gc_compressor_max_bytes(a), la[2], lb[2], lo;
  uint8_t *ba[2], *bb[2], *bo = malloc(cap);
  for (int k = 0; k < 2; k++) {
    ba[k] = malloc(cap);
    bb[k] = malloc(cap);
    cr_assert(eq(int, gc_compress_f32(a, x, (uint32_t) k, ba[k], cap, &la[k], NULL), GC_SUCCESS));
    cr_assert(eq(int, gc_compress_f32(b, x, (uint32_t) k, bb[k], cap, &lb[k], NULL), GC_SUCCESS));
    cr_assert(eq(sz, la[k], lb[k]));
    cr_assert(memcmp(ba[k], bb[k], la[k]) == 0, "call %d: not bit-identical", k);
  }
  cr_assert(eq(sz, la[0], la[1]));
  cr_assert(memcmp(ba[0], ba[1], la[0]) != 0, "the warm start changed nothing");
  cr_assert(eq(int, gc_compress_f32(o, x, 0, bo, cap, &lo, NULL), GC_SUCCESS));
  cr_assert(memcmp(ba[0], bo, lo) != 0, "the seed changed nothing");
  for (int k = 0; k < 2; k++) {
    free(ba[k]);
    free(bb[k]);
  }
  free(bo);
  gc_compressor_free(a);
  gc_compressor_free(b);
  gc_compressor_free(o);
}

/* (f) argument errors at allocation, each with its code and a message
 * naming the problem. */
Test(powersgd, bad_parameters, .init = quiet)
{
  gc_segment one = { 0, 8, 6 };
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  last_code = 0;
  cr_assert_null(gc_compressor_alloc(gc_compressor_powersgd, 48, &p));
  cr_assert(eq(int, last_code, GC_EINVAL));
  cr_assert(strstr(gc_last_error(), "layer shapes") != NULL, "%s", gc_last_error());
  cr_assert_null(gc_compressor_alloc(gc_compressor_powersgd, 48, NULL));
  p.segments = &one;   /* nsegments still 0 */
  cr_assert_null(gc_compressor_alloc(gc_compressor_powersgd, 48, &p));
  cr_assert(strstr(gc_last_error(), "layer shapes") != NULL, "%s", gc_last_error());

  static const struct {
    size_t n;
    gc_segment seg[2];
    size_t ns;
    unsigned rank;
    const char *word;
  } bad[] = {
    { 48, { { 0, 8, 6 } }, 1, 0, "rank" },
    { 48, { { 0, 8, 6 } }, 1, 7, "exceeds min(rows, cols) = 6" },
    { 48, { { 0, 8, 6 } }, 1, 100, "rank" },
    { 48, { { 1, 8, 6 } }, 1, 2, "does not fit" },
    { 48, { { 0, 8, 7 } }, 1, 2, "does not fit" },
    { 48, { { 48, 1, 1 } }, 1, 2, "does not fit" },
    { 60, { { 0, 8, 6 }, { 40, 4, 5 } }, 2, 2, "overlaps" },
    { 60, { { 40, 4, 5 }, { 0, 8, 6 } }, 2, 2, "overlaps" },
    { 60, { { 0, 8, 6 }, { 50, 0, 3 } }, 2, 2, "empty" },
    { 60, { { 0, 8, 6 }, { 50, (size_t) 1 << 40, (size_t) 1 << 40 } }, 2, 2,
      "does not fit" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gc_compressor_params_default(&p);
    p.segments = bad[i].seg;
    p.nsegments = bad[i].ns;
    p.rank = bad[i].rank;
    last_code = 0;
    gc_compressor *c = gc_compressor_alloc(gc_compressor_powersgd, bad[i].n, &p);
    cr_assert_null(c, "case %zu accepted", i);
    cr_assert(eq(int, last_code, GC_EINVAL), "case %zu", i);
    cr_assert(strstr(gc_last_error(), bad[i].word) != NULL, "case %zu: '%s' lacks '%s'", i,
              gc_last_error(), bad[i].word);
  }
  /* a 2-D segment sent raw still bounds the rank; 1 x len never does */
  gc_segment vec = { 0, 1, 48 };
  gc_compressor *c = mk(48, &vec, 1, 40, 0);
  cr_assert_not_null(c, "%s", gc_last_error());
  gc_compressor_free(c);
}

/* (f) NaN/Inf input -> GC_EDOM, a short buffer -> GC_ENOSPACE, and a
 * failed call leaves the warm start as it was. */
Test(powersgd, bad_input_and_state, .init = quiet)
{
  double x1[TOY_N], x2[TOY_N], bad[TOY_N];
  gc_test_fill_normal(x1, TOY_N, 61);
  gc_test_fill_normal(x2, TOY_N, 62);
  gc_compressor *a = mk(TOY_N, toy, TOY_NS, 2, 3), *b = mk(TOY_N, toy, TOY_NS, 2, 3);
  size_t cap = gc_compressor_max_bytes(a), la, lb;
  uint8_t *ba = malloc(cap), *bb = malloc(cap);
  cr_assert(eq(int, gc_compress_f64(a, x1, 0, ba, cap, &la, NULL), GC_SUCCESS));
  cr_assert(eq(int, gc_compress_f64(b, x1, 0, bb, cap, &lb, NULL), GC_SUCCESS));
  size_t where[] = { 5, 610, 700, TOY_N - 1 };   /* matrix, bias, matrix, gap */
  for (size_t w = 0; w < 4; w++)
    for (int kind = 0; kind < 3; kind++) {
      memcpy(bad, x2, sizeof bad);
      bad[where[w]] = kind == 0 ? NAN : kind == 1 ? INFINITY : -INFINITY;
      cr_assert(eq(int, gc_compress_f64(a, bad, 1, ba, cap, &la, NULL), GC_EDOM),
                "index %zu kind %d", where[w], kind);
    }
  float xf[TOY_N];
  for (size_t i = 0; i < TOY_N; i++)
    xf[i] = (float) x2[i];
  xf[3] = NAN;
  cr_assert(eq(int, gc_compress_f32(a, xf, 1, ba, cap, &la, NULL), GC_EDOM));
  /* finite entries whose products overflow (the norm of M Q) */
  memcpy(bad, x2, sizeof bad);
  for (size_t i = 0; i < 600; i++)
    bad[i] = 1e300;
  cr_assert(eq(int, gc_compress_f64(a, bad, 1, ba, cap, &la, NULL), GC_EDOM));
  cr_assert(eq(int, gc_compress_f64(a, x2, 1, ba, 10, &la, NULL), GC_ENOSPACE));
  cr_assert(eq(int, gc_compress_f64(a, x2, 1, ba, cap, &la, NULL), GC_SUCCESS));
  cr_assert(eq(int, gc_compress_f64(b, x2, 1, bb, cap, &lb, NULL), GC_SUCCESS));
  cr_assert(la == lb && memcmp(ba, bb, la) == 0, "failed calls moved the warm start");
  free(ba);
  free(bb);
  gc_compressor_free(a);
  gc_compressor_free(b);
}

/* Malformed messages -> GC_ECORRUPT with y untouched. */
Test(powersgd, corrupt_messages, .init = quiet)
{
  double x[TOY_N], y[TOY_N];
  gc_test_fill_normal(x, TOY_N, 71);
  gc_compressor *c = mk(TOY_N, toy, TOY_NS, 2, 3), *c3 = mk(TOY_N, toy, TOY_NS, 3, 3);
  size_t cap = gc_compressor_max_bytes(c) + 8, len;
  uint8_t *buf = malloc(cap), *bad = malloc(cap);
  cr_assert(eq(int, gc_compress_f64(c, x, 0, buf, cap, &len, NULL), GC_SUCCESS));
  for (size_t i = 0; i < TOY_N; i++)
    y[i] = 2.385;
  double nan = NAN;
  for (int k = 0; k < 7; k++) {
    size_t l = len;
    memcpy(bad, buf, len);
    const gc_compressor *dec = c;
    switch (k) {
    case 0: l = 3; break;                          /* shorter than the header */
    case 1: l = len - 8; break;                    /* truncated */
    case 2: memset(bad + len, 0, 8); l = len + 8; break;   /* trailing */
    case 3: bad[0] = 0xD0; break;                  /* another type's tag */
    case 4: bad[1] = 32; break;                    /* precision byte */
    case 5: dec = c3; break;                       /* decoder of rank 3 */
    case 6: memcpy(bad + 6 + 8 * 10, &nan, 8); break;   /* NaN value */
    }
    cr_assert(eq(int, gc_decompress_add_f64(dec, bad, l, 0, 1.0, y), GC_ECORRUPT),
              "case %d", k);
    for (size_t i = 0; i < TOY_N; i++)
      cr_assert(y[i] == 2.385, "case %d touched y[%zu]", k, i);
  }
  /* a float64 message to the float32 decoder */
  float yf[TOY_N] = {0};
  cr_assert(eq(int, gc_decompress_add_f32(c, buf, len, 0, 1.0f, yf), GC_ECORRUPT));
  free(buf);
  free(bad);
  gc_compressor_free(c);
  gc_compressor_free(c3);
}

/* The instance copies the segment list: the caller's array may go away. */
Test(powersgd, segments_are_copied)
{
  gc_segment *seg = malloc(TOY_NS * sizeof *seg);
  memcpy(seg, toy, sizeof toy);
  gc_compressor *c = mk(TOY_N, seg, TOY_NS, 2, 1);
  memset(seg, 0xff, TOY_NS * sizeof *seg);
  free(seg);
  const gc_compressor_params *p = gc_compressor_get_params(c);
  cr_assert(eq(sz, p->nsegments, TOY_NS));
  cr_assert(eq(sz, p->segments[1].rows, 20));
  double x[TOY_N], y[TOY_N];
  gc_test_fill_normal(x, TOY_N, 3);
  cr_assert(eq(sz, gc_test_roundtrip_f64(c, x, 0, NULL, y, NULL), closed_form(TOY_N, toy, TOY_NS, 2, 8)));
  gc_compressor_free(c);
}

/* ---- through the algorithm layer --------------------------------------- */

/* f(x) = 1/2 ||x - b||^2 on each of P = 2 workers (a matrix and a bias):
 * uni with the residual memory converges although each message keeps rank
 * 2 of a 12 x 10 matrix; both ranks start from the same Q, so equal
 * gradients give equal bytes; the memory is acc - C(acc); the ledger
 * counts the closed-form bytes. */
Test(powersgd, error_feedback_through_gc_sim)
{
  enum { RR = 12, CC = 10, D = RR * CC + 10, P = 2 };
  gc_segment seg[] = { { 0, RR, CC }, { RR * CC, 1, 10 } };
  double b[D], x0[D] = {0}, g[P][D];
  gc_test_fill_normal(b, D, 81);
  gc_algo_config cfg;
  gc_algo_config_default(&cfg);
  cfg.kind = GC_ALGO_UNI;
  cfg.workers = P;
  cfg.n = D;
  cfg.dtype = GC_F64;
  cfg.up = cfg.down = gc_compressor_powersgd;
  cfg.up_params.seed = cfg.down_params.seed = 5;
  gc_set_error_handler_off();
  cr_assert_null(gc_sim_alloc(&cfg, x0), "accepted without shapes");
  cr_assert(strstr(gc_last_error(), "layer shapes") != NULL, "%s", gc_last_error());
  gc_set_error_handler(NULL);
  cfg.up_params.segments = cfg.down_params.segments = seg;
  cfg.up_params.nsegments = cfg.down_params.nsegments = 2;
  gc_sim *s = gc_sim_alloc(&cfg, x0);
  cr_assert_not_null(s, "%s", gc_last_error());
  const void *gp[P] = { g[0], g[1] };
  size_t per = closed_form(D, seg, 2, 2, 8);
  for (uint32_t t = 0; t < 300; t++) {
    const double *x = gc_sim_point(s);
    for (size_t p = 0; p < P; p++)
      for (size_t i = 0; i < D; i++)
        g[p][i] = x[i] - b[i];
    cr_assert(eq(int, gc_sim_step(s, gp, 0.2), GC_SUCCESS), "%s", gc_last_error());
    if (t == 0) {
      /* same gradient, same first Q on both ranks: same message */
      const double *m0 = gc_worker_sent(gc_sim_worker(s, 0));
      const double *m1 = gc_worker_sent(gc_sim_worker(s, 1));
      cr_assert(memcmp(m0, m1, D * sizeof *m0) == 0, "ranks started apart");
      cr_assert(eq(u64, gc_ledger_step_total(gc_sim_ledger(s), 0, GC_UP), P * per));
    }
    for (size_t p = 0; p < P; p++) {
      const double *e = gc_worker_memory(gc_sim_worker(s, p));
      const double *acc = gc_worker_accumulator(gc_sim_worker(s, p));
      const double *m = gc_worker_sent(gc_sim_worker(s, p));
      for (size_t i = 0; i < D; i++)
        cr_assert(e[i] == acc[i] - m[i], "step %u worker %zu entry %zu", t, p, i);
    }
  }
  cr_assert(eq(u64, gc_ledger_total(gc_sim_ledger(s), GC_UP), 300 * P * per));
  double e2 = gc_test_sq_dist(gc_sim_point(s), b, D), b2 = gc_test_sq_norm(b, D);
  /* a convergence criterion, not a rounding tolerance: error feedback
   * contracts |x - b| geometrically, and 1e-12 |b|^2 lies far below any
   * run that stalls and far above float64's floor (~u^2 |b|^2 = 1e-32) */
  cr_assert(e2 <= 1e-12 * b2, "not converged: |x-b|^2 = %g (|b|^2 = %g)", e2, b2);
  gc_sim_free(s);

  /* bi: PowerSGD on the downlink too, behind the server memory */
  cfg.kind = GC_ALGO_BI;
  s = gc_sim_alloc(&cfg, x0);
  cr_assert_not_null(s, "%s", gc_last_error());
  for (uint32_t t = 0; t < 300; t++) {
    const double *x = gc_sim_point(s);
    for (size_t p = 0; p < P; p++)
      for (size_t i = 0; i < D; i++)
        g[p][i] = x[i] - b[i];
    cr_assert(eq(int, gc_sim_step(s, gp, 0.2), GC_SUCCESS), "%s", gc_last_error());
  }
  cr_assert(eq(u64, gc_ledger_total(gc_sim_ledger(s), GC_DOWN), 300 * P * per));
  e2 = gc_test_sq_dist(gc_sim_point(s), b, D);
  cr_assert(e2 <= 1e-12 * b2, "bi not converged: |x-b|^2 = %g", e2);
  gc_sim_free(s);
}

/* ---- the front end ------------------------------------------------------- */

Test(powersgd, gradcomp_compress_needs_a_shape)
{
  char out[4096], cmd[4096], xpath[600];
  snprintf(xpath, sizeof xpath, "%s", gc_test_tmp("psgd-x.npy"));
  float x[130];
  gc_test_fill_normal_f32(x, 130, 5);
  size_t n = 130;
  cr_assert(eq(int, gc_npy_write(xpath, GC_F32, 1, &n, x), GC_SUCCESS));
  const char *g = gc_test_builddir("experiments/gradcomp");
  snprintf(cmd, sizeof cmd, "%s compress powersgd --in %s --stats", g, xpath);
  cr_assert(ne(int, gc_test_run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(strstr(out, "needs layer shapes") && strstr(out, "--shape") != NULL, "%s", out);
  snprintf(cmd, sizeof cmd, "%s compress powersgd --shape 12x10 --rank 3 --in %s --stats",
           gc_test_builddir("experiments/gradcomp"), xpath);
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 0), "%s", out);
  /* 6 + 4 (3 (12 + 10) + 10 raw) */
  cr_assert(strstr(out, "bytes=310 ") != NULL, "%s", out);
  snprintf(cmd, sizeof cmd, "%s compress powersgd --shape 12x10 --rank 11 --in %s --stats",
           gc_test_builddir("experiments/gradcomp"), xpath);
  cr_assert(ne(int, gc_test_run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(strstr(out, "rank 11 exceeds") != NULL, "%s", out);
  remove(xpath);
}

/* ---- (g) training -------------------------------------------------------- */

static void train_config(gc_train_config *c, const char *out)
{
  gc_train_config_default(c);
  c->dataset = "mnist";
  c->model = "mnist-mlp";
  c->data_dir = gc_test_data_dir();
  c->quiet = 1;
  c->out = out;
  c->workers = 2;
  c->algorithm = "uni";
  c->compressor = "powersgd";
  c->rank = 2;
  c->lr = 0.1;
  c->train_subset = 6000;   /* 300 steps of 2 x 10 examples */
  c->test_subset = 2000;
  c->epochs = 1;
}

/* MNIST-MLP (784-64-10): rank-2 factors of the two weight matrices, the
 * biases raw, worker error feedback, 300 steps. */
Test(powersgd, mnist_mlp_learns)
{
  gc_test_need_dataset("mnist");
  char out[600], path[700];
  snprintf(out, sizeof out, "%s", gc_test_tmp("psgd-train"));
  gc_train_config c;
  train_config(&c, out);
  gc_train_result r;
  cr_assert(eq(int, gc_train_run(&c, &r), GC_SUCCESS), "%s", gc_last_error());
  cr_assert(eq(sz, r.steps_done, 300));
  fprintf(stderr, "powersgd rank 2, uni, P=2, 300 steps: test accuracy %.4f\n",
          r.test_acc);
  cr_assert(r.test_acc >= 0.85, "test accuracy %g after 300 steps", r.test_acc);
  snprintf(path, sizeof path, "%s/config.json", out);
  size_t got;
  char *text = gc_test_slurp(path, &got);
  cr_assert_not_null(text);
  cr_assert(strstr(text, "\"rank\": 2,") != NULL, "%s", text);
  cr_assert(strstr(text, "\"compressor\": \"powersgd\"") != NULL, "%s", text);
  free(text);
  /* per step and worker: 6 + 4 (2 (64+784) + 2 (10+64) + 64 + 10) bytes */
  snprintf(path, sizeof path, "%s/log.csv", out);
  text = gc_test_slurp(path, &got);
  cr_assert_not_null(text);
  char want[64];
  snprintf(want, sizeof want, ",%d,", 300 * 2 * (6 + 4 * (2 * 848 + 2 * 74 + 74)));
  cr_assert(strstr(text, want) != NULL, "bytes_up %s not in %s", want, text);
  free(text);
}

Test(powersgd, train_rejects_a_rank_too_large, .init = quiet)
{
  gc_test_need_dataset("mnist");
  char out[600];
  snprintf(out, sizeof out, "%s", gc_test_tmp("psgd-rank"));
  gc_train_config c;
  train_config(&c, out);
  c.rank = 11;   /* the output layer is 10 x 64 */
  c.train_subset = 100;
  cr_assert(eq(int, gc_train_run(&c, NULL), GC_EINVAL));
  cr_assert(strstr(gc_last_error(), "rank 11 exceeds") != NULL, "%s", gc_last_error());
}
