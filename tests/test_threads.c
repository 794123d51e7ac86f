/* test_threads.c -- parallel workers in the simulator (gc_sim_set_threads):
 * any thread count gives the bytes of one thread, and an error on a worker
 * thread reaches the caller with its message; the compressors' and the
 * vector passes' own loops likewise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_algo.h"
#include "gc_vec.h"
#include "gc_dense_wire.h"
#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_threads.h"
#include "gc_dtype.h"
#include "gc_probe.h"
#include "gc_rng.h"
#include "gc_test.h"
#include "gc_wire.h"

enum { P = 5, N = 3001, STEPS = 6 };

/* A float32 simulator's configuration: kind, P workers, n entries, the
 * uplink `up` and a top-K downlink, default parameters. */
static gc_algo_config sim_config(gc_algo_kind kind, size_t workers, size_t n, const char *up)
{
  gc_algo_config c;
  gc_algo_config_default(&c);
  c.kind = kind;
  c.workers = workers;
  c.n = n;
  c.dtype = GC_F32;
  c.up = gc_compressor_type_by_name(up);
  c.down = gc_compressor_type_by_name("topk");
  gc_compressor_params_default(&c.up_params);
  gc_compressor_params_default(&c.down_params);
  return c;
}

static gc_sim *make_sim(const char *up, gc_algo_kind kind, const float *x0)
{
  gc_algo_config c = sim_config(kind, P, N, up);
  c.up_params.levels = 4;
  c.up_params.seed = c.down_params.seed = 17;
  gc_sim *s = gc_sim_alloc(&c, x0);
  cr_assert(not(eq(ptr, s, NULL)), "%s", gc_last_error());
  return s;
}

/* Gradients that differ per worker and step, so a mix-up of workers'
 * messages or states between threads changes the bytes. */
static void grads(float g[P][N], const float *x, uint32_t t)
{
  for (size_t p = 0; p < P; p++)
    for (size_t i = 0; i < N; i++)
      g[p][i] = x[i] + (float) sin(0.37 * (double) (i + 1) * (double) (p + 1) + t);
}

/* The whole state (model, memories, compressor warm starts) after STEPS
 * steps on `threads` threads. */
static void run(const char *up, gc_algo_kind kind, size_t threads, uint8_t **state, size_t *len)
{
  static float x0[N], g[P][N];
  const void *gp[P];
  for (size_t i = 0; i < N; i++)
    x0[i] = (float) cos(0.1 * (double) i);
  gc_sim *s = make_sim(up, kind, x0);
  gc_sim_set_threads(s, threads);
  for (size_t p = 0; p < P; p++)
    gp[p] = g[p];
  for (uint32_t t = 0; t < STEPS; t++) {
    grads(g, gc_sim_point(s), t);
    cr_assert(eq(int, gc_sim_step(s, gp, 0.05), GC_SUCCESS), "%s", gc_last_error());
  }
  *len = gc_sim_state_bytes(s);
  *state = malloc(*len);
  gc_sim_state_save(s, *state);
  gc_sim_free(s);
}

Test(threads, sim_workers_bit_identical)
{
  static const char *const up[] = {"qsgd", "terngrad", "topk", "randk", "scaled-sign"};
  for (size_t j = 0; j < sizeof up / sizeof up[0]; j++) {
    uint8_t *a, *b;
    size_t la, lb;
    run(up[j], GC_ALGO_BI, 1, &a, &la);
    for (size_t T = 2; T <= 3; T++) {
      run(up[j], GC_ALGO_BI, T, &b, &lb);
      cr_assert(eq(sz, la, lb));
      cr_assert(eq(int, memcmp(a, b, la), 0), "%s: state after %d steps differs between 1 and "
                "%zu threads", up[j], STEPS, T);
      free(b);
    }
    free(a);
  }
}

/* A model just above the vector passes' thread threshold (gc_threads.h)
 * and not a multiple of their 16-entry piece alignment: the server's
 * passes (the average, its memory, the residual) and the model's check
 * run in 2-16 pieces of unequal length.  The state, the average and its
 * support after some steps of bi on 2, 3, 8 and 16 threads are those of
 * one thread. */
enum { SN = GC__VEC_PAR_MIN + 1001 };

typedef struct {
  uint8_t *state;
  size_t len, support;
  float *agg;
} server_run;

static void run_server_sized(gc_algo_kind kind, size_t threads, server_run *o)
{
  gc_algo_config c = sim_config(kind, P, SN, "topk");
  c.up_params.density = c.down_params.density = 0.003;
  float *x0 = malloc(SN * sizeof *x0), *g = malloc(P * (size_t) SN * sizeof *g);
  const void *gp[P];
  for (size_t i = 0; i < SN; i++)
    x0[i] = (float) cos(0.1 * (double) i);
  gc_sim *s = gc_sim_alloc(&c, x0);
  cr_assert(not(eq(ptr, s, NULL)), "%s", gc_last_error());
  gc_sim_set_threads(s, threads);
  for (uint32_t t = 0; t < STEPS; t++) {
    const float *x = gc_sim_point(s);
    for (size_t p = 0; p < P; p++) {
      gp[p] = g + p * SN;
      for (size_t i = 0; i < SN; i++)
        g[p * SN + i] = x[i] + (float) sin(0.37 * (double) (i + 1) * (double) (p + 1) + t);
    }
    cr_assert(eq(int, gc_sim_step(s, gp, 0.05), GC_SUCCESS), "%s", gc_last_error());
  }
  o->len = gc_sim_state_bytes(s);
  o->state = malloc(o->len);
  gc_sim_state_save(s, o->state);
  o->support = gc_server_support_union(gc_sim_server(s));
  o->agg = malloc(SN * sizeof *o->agg);
  memcpy(o->agg, gc_server_aggregate(gc_sim_server(s)), SN * sizeof *o->agg);
  gc_sim_free(s);
  free(x0);
  free(g);
}

Test(threads, sim_server_passes_bit_identical)
{
  static const gc_algo_kind kinds[] = { GC_ALGO_BI, GC_ALGO_UNI };
  static const size_t Ts[] = {2, 3, 8, 16};
  /* SN < GC__VEC_PAR_OVER_MIN: with more threads than processors the
   * passes would run on one (gc__vec_threads) and T = 3 on two cores
   * would compare one thread with itself */
  gc__threads_any_length = 1;
  for (size_t j = 0; j < 2; j++) {
    server_run one, many;
    run_server_sized(kinds[j], 1, &one);
    cr_assert(gt(sz, one.support, 0));
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
      size_t T = Ts[ti];
      run_server_sized(kinds[j], T, &many);
      cr_assert(eq(sz, many.len, one.len));
      cr_assert(eq(int, memcmp(many.state, one.state, one.len), 0),
                "%s: state after %d steps differs between 1 and %zu threads",
                gc_algo_name(kinds[j]), STEPS, T);
      cr_assert(eq(int, memcmp(many.agg, one.agg, SN * sizeof *one.agg), 0), "%s, %zu threads",
                gc_algo_name(kinds[j]), T);
      cr_assert(eq(sz, many.support, one.support), "%s, %zu threads", gc_algo_name(kinds[j]), T);
      free(many.state);
      free(many.agg);
    }
    free(one.state);
    free(one.agg);
  }
  gc__threads_any_length = 0;
}

/* The exact downlink's message from the nonzeros gathered on 1-16 threads
 * (gc__exact_encode_ws; threads at any length and past the cores) is
 * gc__exact_encode's, byte for byte: every index coding (raw, delta,
 * bitmap) and the dense form, no nonzero at all, -0.0 entries (zeros),
 * lengths below one gathering block, not a multiple of it, and above the
 * threads' threshold. */
static void exact_case(int dt, size_t n, size_t every, size_t first, int negzero)
{
  size_t e = (size_t) dt, cap = gc__exact_max_bytes(n, dt);
  uint8_t *x = calloc(n, e), *ref = malloc(cap), *got = malloc(cap), *val = malloc(n * e);
  uint32_t *idx = malloc(n * sizeof *idx);
  for (size_t i = first; every && i < n; i += every) {
    double v = (i % 3 ? 2.385 : -0.75) * (double) (i + 1);
    if (dt == GC_F32)
      ((float *) x)[i] = (float) v;
    else
      ((double *) x)[i] = v;
  }
  for (size_t i = 1; negzero && i < n; i += 7)
    if (dt == GC_F32 ? ((float *) x)[i] == 0 : ((double *) x)[i] == 0) {
      if (dt == GC_F32)
        ((float *) x)[i] = -0.0f;
      else
        ((double *) x)[i] = -0.0;
    }
  size_t lr, nr, lg, ng;
#ifdef _OPENMP
  omp_set_num_threads(1);
#endif
  int rr = gc__exact_encode(dt, x, n, ref, cap, &lr, &nr);
  cr_assert(eq(int, rr, GC_SUCCESS), "%s", gc_last_error());
  static const int Ts[] = {1, 2, 3, 5, 8, 16};
  for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
    int T = Ts[ti];
#ifdef _OPENMP
    omp_set_num_threads(T);
#endif
    memset(got, 0xa5, cap);
    cr_assert(eq(int, gc__exact_encode_ws(dt, x, n, idx, val, got, cap, &lg, &ng), GC_SUCCESS));
    cr_assert(eq(sz, lg, lr), "dtype %d n %zu every %zu: %d threads", dt, n, every, T);
    cr_assert(eq(sz, ng, nr), "dtype %d n %zu every %zu: %d threads", dt, n, every, T);
    cr_assert(eq(int, memcmp(got, ref, lr), 0), "dtype %d n %zu every %zu: %d threads", dt, n,
              every, T);
  }
  free(x);
  free(ref);
  free(got);
  free(val);
  free(idx);
}

Test(threads, exact_encode_gathered_bit_identical)
{
#ifdef _OPENMP
  int saved = omp_get_max_threads();
#endif
  gc__threads_any_length = 1;   /* BIG < GC__VEC_PAR_OVER_MIN: threads past the cores */
  enum { BIG = GC__VEC_PAR_MIN + 1001, BIGGER = (1 << 16) * 3 + 777, RAW = (1 << 22) + 40 };
  for (int dt = GC_F32; dt <= GC_F64; dt += GC_F64 - GC_F32) {
    static const size_t ns[] = { 5, 16, 17, 1000, BIG, BIGGER };
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
      size_t n = ns[a];
      exact_case(dt, n, 0, 0, 0);          /* no nonzero */
      exact_case(dt, n, 0, 0, 1);          /* -0.0 only */
      exact_case(dt, n, n, 0, 0);          /* entry 0 */
      exact_case(dt, n, n, n - 1, 1);      /* the last entry */
      exact_case(dt, n, 97, 3, 1);         /* delta */
      exact_case(dt, n, 3, 1, 1);          /* bitmap */
      exact_case(dt, n, 1, 0, 0);          /* dense */
    }
    /* raw: two gaps of four LEB128 bytes tie with it, and ties go raw */
    exact_case(dt, RAW, (1 << 21) + 2, (1 << 21) + 1, 0);
  }
  gc__threads_any_length = 0;
#ifdef _OPENMP
  omp_set_num_threads(saved);
#endif
}

/* Worker 3 (the second thread's share) gets a NaN: the step fails with
 * GC_EDOM and the calling thread's gc_last_error names the entry. */
Test(threads, worker_error_reaches_the_caller, .init = gc_test_quiet)
{
  static float x0[N], g[P][N];
  const void *gp[P];
  gc_sim *s = make_sim("qsgd", GC_ALGO_UNI, x0);
  gc_sim_set_threads(s, 2);
  grads(g, x0, 0);
  g[3][123] = NAN;
  for (size_t p = 0; p < P; p++)
    gp[p] = g[p];
  cr_assert(eq(int, gc_sim_step(s, gp, 0.05), GC_EDOM));
  cr_assert(eq(int, gc_last_error_code(), GC_EDOM));
  cr_assert(not(eq(ptr, strstr(gc_last_error(), "123"), NULL)), "message: %s", gc_last_error());
  gc_sim_free(s);
}

/* The compressors' own loops over OpenMP threads (vectors of at least
 * 2^18 entries; ragged last piece): 1, 2 and 3 threads, the same bytes. */
#ifdef _OPENMP
/* c's message of x at `step` on 2 and 3 threads equals the one-thread
 * message byte for byte (the caller's thread setting is not restored). */
static void same_message_on_threads(gc_compressor *c, const float *x, uint32_t step,
                                    const char *what)
{
  size_t cap = gc_compressor_max_bytes(c), l1, lt;
  uint8_t *one = malloc(cap), *many = malloc(cap);
  omp_set_num_threads(1);
  cr_assert(eq(int, gc_compress_f32(c, x, step, one, cap, &l1, NULL), GC_SUCCESS));
  for (int T = 2; T <= 3; T++) {
    omp_set_num_threads(T);
    cr_assert(eq(int, gc_compress_f32(c, x, step, many, cap, &lt, NULL), GC_SUCCESS));
    cr_assert(eq(sz, lt, l1));
    cr_assert(eq(int, memcmp(one, many, l1), 0), "%s: %d threads", what, T);
  }
  free(one);
  free(many);
}
#endif

Test(threads, compressor_loops_bit_identical)
{
#ifndef _OPENMP
  cr_skip_test("built without OpenMP");
#else
  enum { M = (1 << 18) * 3 + 4097 };
  static const char *const names[] = {"terngrad", "qsgd", "identity", "bf16", "fp16", "sign",
                                      "scaled-sign"};
  float *x = malloc(M * sizeof *x);
  for (size_t i = 0; i < M; i++)
    x[i] = (float) sin(0.001 * (double) i * (double) (i % 7 + 1));
  int saved = omp_get_max_threads();
  for (size_t j = 0; j < sizeof names / sizeof names[0]; j++) {
    gc_compressor_params p;
    gc_compressor_params_default(&p);
    p.levels = 4;
    p.seed = 3;
    gc_compressor *c = gc_compressor_alloc(gc_compressor_type_by_name(names[j]), M, &p);
    same_message_on_threads(c, x, 9, names[j]);
    gc_compressor_free(c);
  }
  omp_set_num_threads(saved);
  free(x);
#endif
}

/* qsgd on T threads codes each thread's share of a bucket, or of the
 * buckets when they are small, into its own stream and appends the
 * streams at bit offsets: the message of one thread for T = 2..5 (shares
 * ending at every bit alignment), s = 1, 4 and 15 (one, three and up to
 * nine bits an entry), one bucket, buckets of 2^18 + 5 (the last one
 * short) and small buckets (7, 512, 4099), N(0,1) entries with zeros. */
Test(threads, qsgd_shares_bit_identical)
{
#ifndef _OPENMP
  cr_skip_test("built without OpenMP");
#else
  enum { M = (1 << 20) + 3333 };
  float *x = malloc(M * sizeof *x);
  gc_test_fill_normal_f32(x, M, 77);
  for (size_t i = 0; i < M; i += 5)
    x[i] = 0.0f;
  static const struct { unsigned s; size_t bucket; } cfg[] = {
    {1, 0}, {4, 0}, {15, 0}, {4, (1 << 18) + 5}, {15, (1 << 18) + 5}, {15, 7}, {4, 512},
    {1, 4099}};
  int saved = omp_get_max_threads();
  for (size_t j = 0; j < sizeof cfg / sizeof cfg[0]; j++) {
    gc_compressor_params p;
    gc_compressor_params_default(&p);
    p.levels = cfg[j].s;
    p.bucket = cfg[j].bucket;
    p.seed = 21;
    gc_compressor *c = gc_compressor_alloc(gc_compressor_type_by_name("qsgd"), M, &p);
    size_t cap = gc_compressor_max_bytes(c), l1, lt;
    uint8_t *one = malloc(cap), *many = malloc(cap);
    omp_set_num_threads(1);
    cr_assert(eq(int, gc_compress_f32(c, x, 6, one, cap, &l1, NULL), GC_SUCCESS));
    for (int T = 2; T <= 5; T++) {
      omp_set_num_threads(T);
      cr_assert(eq(int, gc_compress_f32(c, x, 6, many, cap, &lt, NULL), GC_SUCCESS));
      cr_assert(eq(sz, lt, l1), "s=%u bucket=%zu T=%d: length", cfg[j].s, cfg[j].bucket, T);
      cr_assert(eq(int, memcmp(one, many, l1), 0), "s=%u bucket=%zu T=%d: bytes", cfg[j].s,
                cfg[j].bucket, T);
    }
    free(one);
    free(many);
    gc_compressor_free(c);
  }
  omp_set_num_threads(saved);
  free(x);
#endif
}

/* With small buckets on T threads, the error names the first bad bucket
 * of all, as on one thread: a bucket whose float32 norm overflows, before
 * or after a NaN that lies in a later share. */
Test(threads, qsgd_small_buckets_first_bad_bucket, .init = gc_test_quiet)
{
#ifndef _OPENMP
  cr_skip_test("built without OpenMP");
#else
  enum { M = (1 << 19) + 77 };
  float *x = malloc(M * sizeof *x);
  gc_test_fill_normal_f32(x, M, 78);
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  p.levels = 4;
  p.bucket = 1000;
  gc_compressor *c = gc_compressor_alloc(gc_compressor_type_by_name("qsgd"), M, &p);
  size_t cap = gc_compressor_max_bytes(c), len;
  uint8_t *buf = malloc(cap);
  int saved = omp_get_max_threads();
  static const size_t big_at[] = {M - 5, 1234};   /* after, before the NaN */
  for (size_t j = 0; j < 2; j++) {
    x[M / 2 + 17] = NAN;
    for (size_t i = 0; i < 4; i++)
      x[big_at[j] + i] = 3e38f;                   /* the bucket's norm overflows */
    omp_set_num_threads(1);
    int rc1 = gc_compress_f32(c, x, 2, buf, cap, &len, NULL);
    char why1[256];
    snprintf(why1, sizeof why1, "%s", gc_last_error());
    cr_assert(eq(int, rc1, GC_EDOM));
    for (int T = 2; T <= 3; T++) {
      omp_set_num_threads(T);
      cr_assert(eq(int, gc_compress_f32(c, x, 2, buf, cap, &len, NULL), rc1));
      cr_assert(eq(str, (char *) gc_last_error(), why1), "T=%d", T);
    }
    for (size_t i = 0; i < 4; i++)
      x[big_at[j] + i] = 0.5f;
  }
  omp_set_num_threads(saved);
  free(buf);
  gc_compressor_free(c);
  free(x);
#endif
}

/* One run of every threaded vector pass (gc_vec.h) on T = 2-16
 * threads, both dtypes, over a vector with two non-finite entries in later
 * pieces: the outputs, the first bad index and the nonzero count of one
 * thread.  Three lengths: several 2^16-entry spans, one just above the
 * threads' threshold whose pieces are short and ragged (their bounds are
 * multiples of 16 entries, the length is not), and 250 entries, fewer
 * than 16 a thread at T = 16. */
enum { VOPS = 8 };

typedef struct {
  uint8_t *y[VOPS];
  size_t r[VOPS];
} vec_run;

static void vec_passes(int dt, size_t T, size_t n, const uint8_t *x, const uint8_t *z,
                       vec_run *o)
{
#ifdef _OPENMP
  omp_set_num_threads((int) T);
#else
  (void) T;
#endif
  size_t b = n * (size_t) dt;
  for (int j = 0; j < VOPS; j++) {
    o->y[j] = malloc(b);
    memcpy(o->y[j], z, b);
    o->r[j] = 0;
  }
  gc__vzero(dt, o->y[0], n);
  gc__vcopy(dt, o->y[1], x, n);
  gc__vaxpby(dt, o->y[2], 0.3, x, 1.0, n);
  gc__vaxpby(dt, o->y[3], -0.7, x, 1.9, n);
  gc__vscale(dt, o->y[4], 2.385, x, n);
  o->r[5] = gc__vadd_scaled(dt, o->y[5], z, 0.11, x, n);
  o->r[6] = gc__vfirst_nonfinite(dt, x, n);
  o->r[7] = gc__vmean_finish(dt, o->y[7], 3.0, n, &o->r[0]);
}

static void vec_free(vec_run *o)
{
  for (int j = 0; j < VOPS; j++)
    free(o->y[j]);
}

static void vector_passes_at(size_t n, size_t nan_at, size_t inf_at)
{
  for (int dt = GC_F32; dt <= GC_F64; dt += GC_F64 - GC_F32) {
    size_t b = n * (size_t) dt;
    uint8_t *x = malloc(b), *z = malloc(b);
    for (size_t i = 0; i < n; i++) {
      double xv = sin(0.001 * (double) i * (double) (i % 7 + 1));
      double zv = (i % 5 == 0) ? 0.0 : cos(0.37 * (double) i);
      if (i == nan_at)
        xv = NAN;
      if (i == inf_at)
        xv = INFINITY;
      if (dt == GC_F32) {
        ((float *) x)[i] = (float) xv;
        ((float *) z)[i] = (float) zv;
      } else {
        ((double *) x)[i] = xv;
        ((double *) z)[i] = zv;
      }
    }
    vec_run one, many;
    vec_passes(dt, 1, n, x, z, &one);
    cr_assert(eq(sz, one.r[6], nan_at));
    cr_assert(eq(sz, one.r[5], nan_at));
    static const size_t Ts[] = {2, 3, 5, 8, 16};
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
      size_t T = Ts[ti];
      vec_passes(dt, T, n, x, z, &many);
      for (int j = 0; j < VOPS; j++) {
        cr_assert(eq(sz, many.r[j], one.r[j]), "n %zu, dtype %d, pass %d, %zu threads", n, dt,
                  j, T);
        cr_assert(eq(int, memcmp(many.y[j], one.y[j], b), 0),
                  "n %zu, dtype %d, pass %d, %zu threads", n, dt, j, T);
      }
      vec_free(&many);
    }
    vec_free(&one);
    free(x);
    free(z);
  }
}

Test(threads, vector_passes_bit_identical)
{
#ifndef _OPENMP
  cr_skip_test("built without OpenMP");
#else
  int saved = omp_get_max_threads();
  /* a NaN inside (the first bad index), an Inf in the last piece */
  vector_passes_at((1 << 16) * 3 + 777, 2 * (1 << 16) + 5, 3 * (1 << 16) + 9);
  /* below GC__VEC_PAR_OVER_MIN the passes would take one thread where
   * the threads outnumber the cores, and below GC__VEC_PAR_MIN always:
   * taken at any length (T = 16: pieces of 1088 entries, and of 16) */
  gc__threads_any_length = 1;
  vector_passes_at(GC__VEC_PAR_MIN + 1001, GC__VEC_PAR_MIN / 2 + 3, GC__VEC_PAR_MIN + 999);
  vector_passes_at(250, 100, 249);
  gc__threads_any_length = 0;
  omp_set_num_threads(saved);
#endif
}

/* The xi probe's sums over workers and means (lib/algo/xi_probe.c) on 1-3 threads,
 * a simulator of 3 workers on a vector of several pieces: the samples of
 * one thread to the bit. */
static void probe_run(size_t T, gc_xi_sample out[3])
{
  enum { PW = 3, PN = (1 << 16) * 3 + 123 };
  gc_algo_config c = sim_config(GC_ALGO_BI, PW, PN, "topk");
  c.up_params.density = c.down_params.density = 0.01;
  float *x0 = calloc(PN, sizeof *x0), *g = malloc(PW * (size_t) PN * sizeof *g);
  const void *gp[PW];
  gc_sim *s = gc_sim_alloc(&c, x0);
  gc_xi_probe *w = gc_xi_probe_alloc(&c);
  cr_assert(s && w, "%s", gc_last_error());
  gc_sim_set_threads(s, T);
#ifdef _OPENMP
  omp_set_num_threads((int) T);
#endif
  for (uint32_t t = 0; t < 3; t++) {
    for (size_t p = 0; p < PW; p++) {
      gp[p] = g + p * PN;
      for (size_t i = 0; i < PN; i++)
        g[p * PN + i] = (float) sin(0.0137 * (double) (i + 1) * (double) (p + 2) + t);
    }
    gc_xi_probe_before(w, s);
    cr_assert(eq(int, gc_sim_step(s, gp, 0.05), GC_SUCCESS), "%s", gc_last_error());
    cr_assert(eq(int, gc_xi_probe_after(w, s, gp, 0.05, &out[t]), GC_SUCCESS));
  }
  gc_xi_probe_free(w);
  gc_sim_free(s);
  free(x0);
  free(g);
}

Test(threads, probe_sums_bit_identical)
{
#ifndef _OPENMP
  cr_skip_test("built without OpenMP");
#else
  int saved = omp_get_max_threads();
  gc_xi_sample one[3], many[3];
  probe_run(1, one);
  for (size_t T = 2; T <= 3; T++) {
    probe_run(T, many);
    for (int t = 0; t < 3; t++) {
      double a[5] = { one[t].xi, one[t].xi_bi, one[t].num, one[t].num_bi, one[t].gbar_norm2 };
      double b[5] = { many[t].xi, many[t].xi_bi, many[t].num, many[t].num_bi,
                      many[t].gbar_norm2 };
      cr_assert(eq(int, memcmp(a, b, sizeof a), 0), "step %d, %zu threads: xi %.17g vs %.17g",
                t, T, a[0], b[0]);
    }
  }
  omp_set_num_threads(saved);
#endif
}

/* A sparse message of several pieces (lib/compress/wire.c: 2^18 entries or more)
 * with gaps of one to three LEB128 bytes, some straddling the pieces'
 * ends: the delta coding and the values on 1-3 threads, the same bytes. */
Test(threads, wire_encode_bit_identical)
{
#ifndef _OPENMP
  cr_skip_test("built without OpenMP");
#else
  enum { C = (1 << 18) * 3 + 5 };
  uint32_t *idx = malloc(C * sizeof *idx);
  float *val = malloc(C * sizeof *val);
  uint32_t at = 7;
  for (size_t j = 0; j < C; j++) {
    idx[j] = at;
    val[j] = (j % 11 == 0) ? 0.0f : (float) sin(0.01 * (double) j);
    at += 1 + (uint32_t) (j % 5) + (j % 97 == 0 ? 300u : 0u) + (j % 1001 == 0 ? 40000u : 0u);
  }
  size_t n = (size_t) at + 3, cap = gc__wire_bound(n, C, sizeof(float));
  uint8_t *one = malloc(cap), *many = malloc(cap), *gone = malloc(cap), *gmany = malloc(cap);
  float *x = calloc(n, sizeof *x);
  for (size_t j = 0; j < C; j++)
    x[idx[j]] = val[j];
  int saved = omp_get_max_threads();
  size_t l1, lt, z1, zt, g1, gt, gz1, gzt;
  omp_set_num_threads(1);
  cr_assert(eq(int, gc__wire_encode_vals_f32(GC__WIRE_TOPK, n, idx, C, val, one, cap, &l1, &z1),
               GC_SUCCESS));
  cr_assert(eq(int, gc__wire_encode_f32(GC__WIRE_TOPK, n, idx, C, 0, x, 1.0f, gone, cap, &g1,
                                        &gz1), GC_SUCCESS));
  cr_assert(eq(int, one[2], GC__IDX_DELTA), "coding %d", one[2]);
  for (int T = 2; T <= 3; T++) {
    omp_set_num_threads(T);
    cr_assert(eq(int, gc__wire_encode_vals_f32(GC__WIRE_TOPK, n, idx, C, val, many, cap, &lt,
                                               &zt), GC_SUCCESS));
    cr_assert(eq(int, gc__wire_encode_f32(GC__WIRE_TOPK, n, idx, C, 0, x, 1.0f, gmany, cap, &gt,
                                          &gzt), GC_SUCCESS));
    cr_assert(eq(sz, lt, l1));
    cr_assert(eq(sz, zt, z1));
    cr_assert(eq(sz, gt, g1));
    cr_assert(eq(sz, gzt, gz1));
    cr_assert(eq(int, memcmp(one, many, l1), 0), "%d threads", T);
    cr_assert(eq(int, memcmp(gone, gmany, g1), 0), "%d threads", T);
  }
  cr_assert(eq(int, memcmp(one, gone, l1), 0));
  omp_set_num_threads(saved);
  free(idx);
  free(val);
  free(x);
  free(one);
  free(many);
  free(gone);
  free(gmany);
#endif
}

/* Top-K with 2^18 candidates or more (the filter on the threads, lib/
 * sparse_kernels.c) on values of few magnitudes, so that the K-th is tied many
 * times and the ties are split across pieces: either tie rule, 1-3
 * threads, the same bytes. */
Test(threads, topk_filter_bit_identical)
{
#ifndef _OPENMP
  cr_skip_test("built without OpenMP");
#else
  enum { M = (1 << 21) + 333 };
  float *x = malloc(M * sizeof *x);
  for (size_t i = 0; i < M; i++)
    x[i] = (float) floor(64.0 * sin(0.001 * (double) i * (double) (i % 7 + 1))) / 64.0f;
  int saved = omp_get_max_threads();
  for (int ties = 0; ties < 2; ties++) {
    gc_compressor_params p;
    gc_compressor_params_default(&p);
    p.density = 0.2;
    p.ties = ties ? GC_TIES_HIGH : GC_TIES_LOW;
    gc_compressor *c = gc_compressor_alloc(gc_compressor_type_by_name("topk"), M, &p);
    cr_assert(not(eq(ptr, c, NULL)), "%s", gc_last_error());
    same_message_on_threads(c, x, 4, ties ? "topk, ties high" : "topk, ties low");
    gc_compressor_free(c);
  }
  omp_set_num_threads(saved);
  free(x);
#endif
}

/* ---- every compressor on 1-16 threads, at every kind of tail ------------ */

#ifdef _OPENMP
/* omp_set_num_threads(T), and proof that the loops get T threads: a team
 * of T (OMP_THREAD_LIMIT or dynamic teams would shrink it, and the test
 * would compare one thread with itself), and gc__threads_for's answer for
 * a length above every minimum. */
static void set_threads(int T)
{
  omp_set_dynamic(0);
  omp_set_num_threads(T);
  int team = 0;
  #pragma omp parallel num_threads(T)
  {
    #pragma omp single
    team = omp_get_num_threads();
  }
  cr_assert(eq(int, team, T), "a team of %d threads where %d were asked for", team, T);
  cr_assert(eq(int, gc__threads_for((size_t) 1 << 30, (size_t) 1 << 18, 16), T));
}

/* The inputs: 0, gc_test_fill_distinct's +-(1 + i/n) shuffled (every
 * magnitude once); 1, heavy tails (N(0,1) over |N(0,1)| + 0.05, Student-t
 * like, as gradients are) rounded to sixteenths, so that top-K's K-th
 * magnitude and DGC's threshold fall on ties, with no zeros (the
 * references below read the selection off the decoded vector).  The last
 * entry, in the tail that a piece split may leave out, is the largest. */
static void every_fill(int kind, size_t n, uint64_t seed, float *xf, double *xd)
{
  if (kind == 0) {
    gc_test_fill_distinct_f64(xd, n, seed);
  } else {
    for (size_t i = 0; i < n; i++) {
      double v = gc_rng_normal(seed, 3, 0, i) / (fabs(gc_rng_normal(seed, 4, 0, i)) + 0.05);
      v = round(16 * v) / 16;
      xd[i] = v != 0 ? v : i % 2 ? 0.03125 : -0.03125;
    }
  }
  double top = 0;   /* the last entry twice the largest: every selection wants it */
  for (size_t i = 0; i < n; i++)
    top = fmax(top, fabs(xd[i]));
  xd[n - 1] = -2 * top;
  for (size_t i = 0; i < n; i++) {
    xf[i] = (float) xd[i];
    xd[i] = xf[i];   /* the same numbers in both precisions */
  }
}

static const float *by_mag_x;

/* |x| descending, then index ascending */
static int by_mag_then_index(const void *a, const void *b)
{
  uint32_t i = *(const uint32_t *) a, j = *(const uint32_t *) b;
  float u = fabsf(by_mag_x[i]), v = fabsf(by_mag_x[j]);
  return u > v ? -1 : u < v ? 1 : (i > j) - (i < j);
}

static int by_index_only(const void *a, const void *b)
{
  uint32_t i = *(const uint32_t *) a, j = *(const uint32_t *) b;
  return (i > j) - (i < j);
}

/* Top-K by its definition: the K largest magnitudes, of those equal to
 * the K-th the lowest indices (ties high: the highest), ascending. */
static size_t topk_by_definition(const float *x, size_t n, size_t k, int ties, uint32_t *out)
{
  uint32_t *all = malloc(n * sizeof *all);
  for (size_t i = 0; i < n; i++)
    all[i] = (uint32_t) i;
  by_mag_x = x;
  qsort(all, n, sizeof *all, by_mag_then_index);
  if (ties == GC_TIES_HIGH) {   /* the tie class of the K-th, taken from its top */
    float t = fabsf(x[all[k - 1]]);
    size_t lo = k - 1, hi = k;
    while (lo > 0 && fabsf(x[all[lo - 1]]) == t)
      lo--;
    while (hi < n && fabsf(x[all[hi]]) == t)
      hi++;
    memmove(all + lo, all + hi - (k - lo), (k - lo) * sizeof *all);
  }
  memcpy(out, all, k * sizeof *out);
  qsort(out, k, sizeof *out, by_index_only);
  free(all);
  return k;
}

/* The selection the compressor's definition gives for float32 x (the
 * float64 numbers are the same), into sel; SIZE_MAX where the test has no
 * plain definition of it (the quantizers, random-K, PowerSGD). */
static size_t every_reference(const char *name, const float *x, size_t n,
                              const gc_compressor_params *p, size_t k, uint32_t step,
                              uint32_t *sel)
{
  size_t c = 0;
  if (!strcmp(name, "threshold")) {
    for (size_t i = 0; i < n; i++)
      if ((double) fabsf(x[i]) > p->threshold)
        sel[c++] = (uint32_t) i;
    return c;
  }
  if (!strcmp(name, "topk"))
    return topk_by_definition(x, n, k, p->ties, sel);
  /* their definitions take k = floor(rho n), the library at least 1 */
  if (!strcmp(name, "gaussk") && floor(p->density * (double) n) >= 1)
    return gc_test_gaussk_by_definition(x, n, p->density, sel);
  if (!strcmp(name, "dgc") && floor(p->density * (double) n) >= 1)
    return gc_test_dgc_by_definition(x, n, k, p, step, sel);
  return SIZE_MAX;
}

/* Parameters of variant v (0-2) of each type: densities 0.001 to 0.5,
 * thresholds that keep a little to half of either input, one to fifteen
 * QSGD levels over the whole vector or buckets of 100 and 4099, both tie
 * rules, DGC's default sample ratio and 0.25, TernGrad with and without
 * clipping, PowerSGD ranks 1 and 2 on one matrix with a raw rest. */
static gc_compressor_params every_params(int v, size_t n, gc_segment *seg)
{
  static const double dens[] = {0.001, 0.1, 0.5}, thr[] = {1.95, 1.5, 0.5};
  static const unsigned levels[] = {1, 4, 15};
  static const size_t bucket[] = {0, 100, 4099};
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  p.density = dens[v];
  p.threshold = thr[v];
  p.levels = levels[v];
  p.bucket = bucket[v];
  p.ties = v == 2 ? GC_TIES_HIGH : GC_TIES_LOW;
  p.clip = v == 1 ? 2.5 : 0;
  if (v == 1)
    p.sample_ratio = 0.25;
  p.seed = 5 + (uint64_t) v;
  size_t rows = (size_t) sqrt((double) n / 2);
  rows = rows ? rows : 1;
  size_t cols = n / 2 / rows ? n / 2 / rows : 1;
  *seg = (gc_segment) { 0, rows, cols };
  p.segments = seg;
  p.nsegments = 1;
  p.rank = (unsigned) (v == 0 || rows < 2 || cols < 2 ? 1 : 2);
  return p;
}

/* Type `ty` (variant v) on x of length n in one precision: the message at
 * 1 thread against the definition where the test has one (the decoded
 * vector is x on the selection, 0 elsewhere), then at 2-16 threads the
 * same length, bytes and gc_compress_info, each run from the same
 * compressor state (PowerSGD's warm start) into a buffer poisoned anew,
 * nothing written past the bound. */
static void every_case(const gc_compressor_type *ty, int v, size_t n, int f64, const float *xf,
                       const double *xd, uint32_t *sel, const char *what)
{
  gc_segment seg;
  gc_compressor_params p = every_params(v, n, &seg);
  gc_compressor *c = gc_compressor_alloc(ty, n, &p);
  cr_assert(not(eq(ptr, c, NULL)), "%s %s: %s", ty->name, what, gc_last_error());
  size_t cap = gc_compressor_max_bytes(c), sb = gc_compressor_state_bytes(c), l1, lt;
  uint8_t *one = malloc(cap), *many = malloc(cap + 16), *state = malloc(sb ? sb : 1);
  gc_compressor_state_save(c, state);
  gc_compress_info i1, it;
  const uint32_t step = 3;
  set_threads(1);
  int rc = f64 ? gc_compress_f64(c, xd, step, one, cap, &l1, &i1)
               : gc_compress_f32(c, xf, step, one, cap, &l1, &i1);
  cr_assert(eq(int, rc, GC_SUCCESS), "%s v%d %s f%d: %s", ty->name, v, what, f64 ? 64 : 32,
            gc_last_error());
  size_t k = gc_compressor_k(c), m = every_reference(ty->name, xf, n, &p, k, step, sel);
  if (m != SIZE_MAX && (!f64 || strcmp(ty->name, "gaussk"))) {   /* gaussk: f32 lanes */
    void *y = calloc(n, f64 ? 8 : 4);
    cr_assert(eq(int, f64 ? gc_decompress_add_f64(c, one, l1, step, 1.0, y)
                          : gc_decompress_add_f32(c, one, l1, step, 1.0f, y), GC_SUCCESS));
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
      double yi = f64 ? ((double *) y)[i] : (double) ((float *) y)[i];
      int want = j < m && sel[j] == i;
      cr_assert(eq(dbl, yi, want ? xd[i] : 0.0), "%s v%d %s f%d: entry %zu %s the definition's "
                "selection (%zu entries; the message has %zu)", ty->name, v, what, f64 ? 64 : 32,
                i, want ? "in" : "not in", m, i1.selected);
      j += want;
    }
    cr_assert(eq(sz, i1.selected, m), "%s v%d %s f%d", ty->name, v, what, f64 ? 64 : 32);
    free(y);
  }
  for (int T = 2; T <= 16; T++) {
    set_threads(T);
    gc_compressor_state_load(c, state);
    uint8_t poison = (uint8_t) (0x5A ^ T);
    memset(many, poison, cap + 16);
    rc = f64 ? gc_compress_f64(c, xd, step, many, cap, &lt, &it)
             : gc_compress_f32(c, xf, step, many, cap, &lt, &it);
    cr_assert(eq(int, rc, GC_SUCCESS), "%s v%d %s f%d T=%d: %s", ty->name, v, what,
              f64 ? 64 : 32, T, gc_last_error());
    cr_assert(eq(sz, lt, l1), "%s v%d %s f%d T=%d: length (entries sent %zu, 1 thread %zu)",
              ty->name, v, what, f64 ? 64 : 32, T, it.selected, i1.selected);
    cr_assert(eq(int, memcmp(many, one, l1), 0), "%s v%d %s f%d T=%d: bytes", ty->name, v, what,
              f64 ? 64 : 32, T);
    cr_assert(it.nnz == i1.nnz && it.selected == i1.selected && it.loops == i1.loops,
              "%s v%d %s f%d T=%d: info", ty->name, v, what, f64 ? 64 : 32, T);
    for (size_t b = cap; b < cap + 16; b++)
      cr_assert(eq(u8, many[b], poison), "%s v%d %s f%d T=%d: a byte past the bound",
                ty->name, v, what, f64 ? 64 : 32, T);
  }
  gc_compressor_state_load(c, state);
  free(one);
  free(many);
  free(state);
  gc_compressor_free(c);
}

/* Every compressor of gc_compressor_types() (what `gradcomp compress
 * --list` shows), both precisions, three parameter variants (the
 * deterministic dense ones have one), at lengths ns, the inputs
 * alternating from one length to the next. */
static void every_compressor_at(const size_t *ns, size_t nn)
{
  int saved = omp_get_max_threads();
  for (size_t a = 0; a < nn; a++) {
    size_t n = ns[a];
    float *xf = malloc(n * sizeof *xf);
    double *xd = malloc(n * sizeof *xd);
    uint32_t *sel = malloc(n * sizeof *sel);
    int kind = (int) (a % 2);
    every_fill(kind, n, 100 + n, xf, xd);
    for (const gc_compressor_type *const *t = gc_compressor_types(); *t; t++) {
      int variants = (*t)->flags & (GC_COMP_SPARSE | GC_COMP_RANDOM) ? 3 : 1;
      for (int v = 0; v < variants; v++)
        for (int f64 = 0; f64 < 2; f64++) {
          char what[64];
          snprintf(what, sizeof what, "n=%zu input %d", n, kind);
          every_case(*t, v, n, f64, xf, xd, sel, what);
        }
    }
    free(xf);
    free(xd);
    free(sel);
  }
  omp_set_num_threads(saved);
}
#endif

/* Short vectors with the threads taken at any length
 * (gc__threads_any_length, set before the compressors are made, so that
 * Gaussian-k's block sums and QSGD's shares have their workspaces: their
 * runs of blocks of 1024 and of buckets outnumbered by the threads, some
 * empty): one entry to 157 blocks of 64, n mod 64 = 1,
 * 63, 33, 5 and 3, so that on 2-16 threads the pieces are shorter than a
 * block, the threads outnumber the blocks (empty pieces) and the last
 * piece is ragged.  For each T of 2-16 one length lies a few entries
 * above a multiple of 64 T (1025: T = 2, 4, 8, 16; 1921: 3, 5, 10, 15;
 * 4229: 6, 11; 8065: 7, 9, 14; 9987: 12, 13), where pieces of n / T
 * rounded down to blocks left the tail out. */
Test(threads, every_compressor_short_vectors_any_thread_count)
{
#ifndef _OPENMP
  cr_skip_test("built without OpenMP");
#else
  static const size_t ns[] = {1, 63, 129, 1025, 1921, 2593, 4229, 8065, 9987};
  gc__threads_any_length = 1;
  every_compressor_at(ns, sizeof ns / sizeof ns[0]);
  gc__threads_any_length = 0;
#endif
}

/* Lengths where the threads run on their own (above every loop's minimum
 * of 2^18 entries): n mod 64 = 5 and 37; 2^18 + 5 on 16 threads leaves
 * pieces of 16448 and a last one of 15429, on 6 threads of 43712 and
 * 43589. */
Test(threads, every_compressor_long_vectors_any_thread_count)
{
#ifndef _OPENMP
  cr_skip_test("built without OpenMP");
#else
  static const size_t ns[] = {(1 << 18) + 5, (1 << 18) + 64 * 16 * 3 + 37};
  every_compressor_at(ns, sizeof ns / sizeof ns[0]);
#endif
}

/* The case that issue 26 found (threshold 1.5 on gc_test_fill_distinct's
 * +-(1 + i/d), d = 3,145,733): at 6 and 8 threads the scan's pieces were
 * n / T rounded down to blocks of 64 and the last piece ended at
 * T * piece = 3,145,728, so the entries past it were never scanned: 4 of
 * 1,572,866 dropped.  Every thread count 1-16 keeps exactly the entries
 * of magnitude above 1.5: 1 + i/d > 1.5 for i > d/2, d - 1,572,867 of
 * them (float32 rounding moves none across 1.5: 1 + 1572866/d lies
 * 1.6e-7 below it, more than half the float spacing of 1.2e-7). */
Test(threads, threshold_keeps_the_tail_past_the_last_block)
{
#ifndef _OPENMP
  cr_skip_test("built without OpenMP");
#else
  enum { D = 3145733 };
  float *x = malloc(D * sizeof *x), *y = malloc(D * sizeof *y);
  gc_test_fill_distinct(x, D, 26);
  size_t want = 0, tail = 0;
  for (size_t i = 0; i < D; i++) {
    want += fabsf(x[i]) > 1.5f;
    tail += i >= D / 64 * 64 && fabsf(x[i]) > 1.5f;
  }
  cr_assert(eq(sz, want, 1572866));
  cr_assert(gt(sz, tail, 0), "the seed leaves no kept entry in the tail");
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  p.threshold = 1.5;
  gc_compressor *c = gc_compressor_alloc(gc_compressor_threshold, D, &p);
  size_t cap = gc_compressor_max_bytes(c), len;
  uint8_t *buf = malloc(cap);
  int saved = omp_get_max_threads();
  for (int T = 1; T <= 16; T++) {
    set_threads(T);
    gc_compress_info info;
    cr_assert(eq(int, gc_compress_f32(c, x, 0, buf, cap, &len, &info), GC_SUCCESS));
    cr_assert(eq(sz, info.selected, want), "%d threads", T);
    memset(y, 0, D * sizeof *y);
    cr_assert(eq(int, gc_decompress_add_f32(c, buf, len, 0, 1.0f, y), GC_SUCCESS));
    for (size_t i = D / 64 * 64; i < D; i++)
      cr_assert(eq(flt, y[i], fabsf(x[i]) > 1.5f ? x[i] : 0.0f), "%d threads: index %zu", T, i);
  }
  omp_set_num_threads(saved);
  free(buf);
  gc_compressor_free(c);
  free(x);
  free(y);
#endif
}
