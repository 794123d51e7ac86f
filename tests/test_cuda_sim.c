/* test_cuda_sim.c -- gc_cuda_sim against gc_sim, bit for bit.
 *
 * The CPU simulator is the oracle (style.md §2.5): the same configuration,
 * start and seeded gradients go through gc_sim (float32) and gc_cuda_sim
 * side by side, and after every step the points must be equal as bytes
 * (memcmp: -0 vs +0 counts), the ledgers and support counts equal, and at
 * the end the checkpoint bytes equal; a checkpoint of either side then
 * resumes on the other.  No tolerance anywhere: the device repeats the
 * CPU's float operations in the CPU's order.  The GPU tests skip without
 * a device; the configuration checks need none and run everywhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_algo.h"
#include "gc_dense_wire.h"
#include "gc_compressor.h"
#include "gc_cuda.h"
#include "gc_cuda_sim.h"
#include "gc_errno.h"
#include "gc_dtype.h"
#include "gc_test.h"
#include "gc_test_cuda.h"

enum { STEPS = 6, MORE = 2 };
static const double LR = 0.05;

/* One configuration: the method, its compressors (NULL where the method
 * has none) with their densities, and DGC settings for uni. */
struct sim_case {
  gc_algo_kind kind;
  const char *up, *down;
  double up_density, down_density;
  double momentum, clip_norm;
  int nesterov;
};

static void make_config(gc_algo_config *cfg, const struct sim_case *c, size_t P, size_t n)
{
  gc_algo_config_default(cfg);
  cfg->kind = c->kind;
  cfg->workers = P;
  cfg->n = n;
  cfg->dtype = GC_F32;
  gc_compressor_params *prm[2] = {&cfg->up_params, &cfg->down_params};
  const char *names[2] = {c->up, c->down};
  const double dens[2] = {c->up_density, c->down_density};
  for (int d = 0; d < 2; d++) {
    if (names[d]) {
      const gc_compressor_type *T = gc_compressor_type_by_name(names[d]);
      cr_assert(T != NULL, "compressor %s", names[d]);
      if (d == 0)
        cfg->up = T;
      else
        cfg->down = T;
    }
    prm[d]->density = dens[d] > 0 ? dens[d] : 0.01;
    prm[d]->levels = 4;
    prm[d]->bucket = d ? 0 : 256;   /* QSGD: bucketed up, one bucket down */
    prm[d]->seed = d ? 99 : 1234;
  }
  cfg->momentum = c->momentum;
  cfg->nesterov = c->nesterov;
  cfg->clip_norm = c->clip_norm;
}

static char *case_name(const struct sim_case *c, size_t P, size_t n)
{
  static char buf[160];
  snprintf(buf, sizeof buf, "%s up=%s(%g) down=%s(%g) m=%g P=%zu n=%zu",
           gc_algo_name(c->kind), c->up ? c->up : "-", c->up_density,
           c->down ? c->down : "-", c->down_density, c->momentum, P, n);
  return buf;
}

/* Worker p's gradient at step t.  Step 2: the workers share one support
 * (every fifth entry, different values); step 4: all workers send the
 * same vector; otherwise independent normals. */
static void fill_grads(float *g, size_t P, size_t n, uint32_t t)
{
  for (size_t p = 0; p < P; p++) {
    float *gp = g + p * n;
    uint64_t seed = 1000u * (t + 1) + (t == 4 ? 0 : p);
    gc_test_fill_normal_f32(gp, n, seed);
    if (t == 2)
      for (size_t i = 0; i < n; i++)
        if (i % 5)
          gp[i] = 0.0f;
  }
}

static void upload(float *d, const float *h, size_t count)
{
  GC_TEST_CUDA(cudaMemcpy(d, h, count * sizeof *h, cudaMemcpyHostToDevice));
}

/* The GPU's point equals the CPU's, byte for byte. */
static void same_point(const void *cpu_x, const gc_cuda_sim *gpu, size_t n, const char *what,
                       unsigned t)
{
  float *x = malloc(n * sizeof *x);
  cr_assert(x != NULL);
  cr_assert(eq(int, gc_cuda_sim_get_point(gpu, x), GC_SUCCESS));
  const float *want = cpu_x;
  size_t first = n;
  for (size_t i = 0; i < n && first == n; i++)
    if (memcmp(&x[i], &want[i], sizeof(float)) != 0)
      first = i;
  cr_assert(first == n, "%s step %u: point differs first at %zu (gpu %a, cpu %a)", what, t,
            first, first < n ? (double) x[first] : 0.0, first < n ? (double) want[first] : 0.0);
  free(x);
}

static void same_ledger(const gc_ledger *a, const gc_ledger *b, const char *what, unsigned t)
{
  const int dirs[3] = {GC_UP, GC_DOWN, GC_LEDGER_BCAST};
  for (int d = 0; d < 3; d++)
    cr_assert(eq(u64, gc_ledger_total(a, dirs[d]), gc_ledger_total(b, dirs[d])),
              "%s step %u: ledger direction %d", what, t, dirs[d]);
  cr_assert(eq(sz, gc_ledger_rows(a), gc_ledger_rows(b)), "%s step %u: ledger rows", what, t);
}

/* sgd and uni send the average itself: its bytes are checkable on the
 * host from the CPU server's aggregate (gc__dense_encode/gc__exact_encode). */
static void same_down_message(gc_sim *cpu, const gc_cuda_sim *gpu, const gc_algo_config *cfg,
                              const char *what, unsigned t)
{
  if (cfg->kind != GC_ALGO_SGD && cfg->kind != GC_ALGO_UNI)
    return;
  const void *agg = gc_server_aggregate(gc_sim_server(cpu));
  size_t cap = gc__exact_max_bytes(cfg->n, GC_F32), len = 0, nnz = 0, glen = 0;
  uint8_t *want = malloc(cap), *got = malloc(cap);
  cr_assert(want && got);
  int rc = cfg->kind == GC_ALGO_SGD
               ? gc__dense_encode(GC_F32, agg, cfg->n, want, cap, &len)
               : gc__exact_encode(GC_F32, agg, cfg->n, want, cap, &len, &nnz);
  cr_assert(eq(int, rc, GC_SUCCESS));
  const uint8_t *d_msg = gc_cuda_sim_down_message(gpu, &glen);
  cr_assert(d_msg != NULL);
  cr_assert(eq(sz, glen, len), "%s step %u: downlink length", what, t);
  GC_TEST_CUDA(cudaMemcpy(got, d_msg, len, cudaMemcpyDeviceToHost));
  cr_assert(memcmp(got, want, len) == 0, "%s step %u: downlink bytes", what, t);
  free(want);
  free(got);
}

/* After step t of both: point, ledger, support, step count. */
static void same_after_step(gc_sim *cpu, const gc_cuda_sim *gpu, const gc_ledger *cpu_ledger,
                            const gc_algo_config *cfg, const char *what, unsigned t)
{
  same_point(gc_sim_point(cpu), gpu, cfg->n, what, t);
  same_ledger(gc_cuda_sim_ledger(gpu), cpu_ledger, what, t);
  cr_assert(eq(sz, gc_cuda_sim_support_union(gpu),
               gc_server_support_union(gc_sim_server(cpu))), "%s step %u: support", what, t);
  cr_assert(eq(u32, gc_cuda_sim_steps_done(gpu), gc_sim_steps_done(cpu)), "%s step %u", what,
            t);
  same_down_message(cpu, gpu, cfg, what, t);
}

static void same_state(const gc_sim *cpu, const gc_cuda_sim *gpu, const char *what)
{
  size_t bytes = gc_sim_state_bytes(cpu);
  cr_assert(eq(sz, gc_cuda_sim_state_bytes(gpu), bytes), "%s: state size", what);
  uint8_t *a = malloc(bytes), *b = malloc(bytes);
  cr_assert(a && b);
  gc_sim_state_save(cpu, a);
  cr_assert(eq(int, gc_cuda_sim_state_save(gpu, b), GC_SUCCESS));
  size_t first = bytes;
  for (size_t i = 0; i < bytes && first == bytes; i++)
    if (a[i] != b[i])
      first = i;
  cr_assert(first == bytes, "%s: state bytes differ first at byte %zu of %zu", what, first,
            bytes);
  free(a);
  free(b);
}

/* STEPS steps side by side, then the checkpoints: equal bytes, and each
 * side's checkpoint loaded into a fresh simulator of the other kind runs
 * MORE steps identically. */
static void run_case(const struct sim_case *c, size_t P, size_t n)
{
  gc_algo_config cfg;
  make_config(&cfg, c, P, n);
  const char *what = case_name(c, P, n);
  float *x0 = malloc(n * sizeof *x0), *g = malloc(P * n * sizeof *g);
  const void **gp = malloc(P * sizeof *gp);
  cr_assert(x0 && g && gp);
  gc_test_fill_normal_f32(x0, n, 3);
  for (size_t p = 0; p < P; p++)
    gp[p] = g + p * n;
  gc_sim *cpu = gc_sim_alloc(&cfg, x0);
  cr_assert(cpu != NULL, "%s: gc_sim_alloc: %s", what, gc_last_error());
  gc_cuda_sim *gpu = gc_cuda_sim_alloc(&cfg, x0);
  cr_assert(gpu != NULL, "%s: gc_cuda_sim_alloc: %s", what, gc_last_error());
  float *d_g;
  GC_TEST_CUDA(cudaMalloc((void **) &d_g, P * n * sizeof *d_g));
  same_point(gc_sim_point(cpu), gpu, n, what, 0);

  for (uint32_t t = 0; t < STEPS; t++) {
    fill_grads(g, P, n, t);
    upload(d_g, g, P * n);
    cr_assert(eq(int, gc_sim_step(cpu, gp, LR), GC_SUCCESS), "%s step %u: cpu: %s", what, t,
              gc_last_error());
    cr_assert(eq(int, gc_cuda_sim_step(gpu, d_g, LR), GC_SUCCESS), "%s step %u: gpu: %s",
              what, t, gc_last_error());
    same_after_step(cpu, gpu, gc_sim_ledger(cpu), &cfg, what, t);
  }
  same_state(cpu, gpu, what);

  /* the CPU's checkpoint on a fresh GPU simulator and the GPU's on a fresh
   * CPU one; then MORE steps of all three */
  size_t bytes = gc_sim_state_bytes(cpu);
  uint8_t *ck_cpu = malloc(bytes), *ck_gpu = malloc(bytes);
  cr_assert(ck_cpu && ck_gpu);
  gc_sim_state_save(cpu, ck_cpu);
  cr_assert(eq(int, gc_cuda_sim_state_save(gpu, ck_gpu), GC_SUCCESS));
  gc_cuda_sim *gpu2 = gc_cuda_sim_alloc(&cfg, x0);
  gc_sim *cpu2 = gc_sim_alloc(&cfg, x0);
  cr_assert(gpu2 && cpu2);
  cr_assert(eq(int, gc_cuda_sim_state_load(gpu2, ck_cpu, bytes - 1), GC_EBADLEN));
  cr_assert(eq(int, gc_cuda_sim_state_load(gpu2, ck_cpu, bytes), GC_SUCCESS));
  cr_assert(eq(int, gc_sim_state_load(cpu2, ck_gpu, bytes), GC_SUCCESS));
  same_point(gc_sim_point(cpu2), gpu2, n, what, STEPS);
  for (uint32_t t = STEPS; t < STEPS + MORE; t++) {
    fill_grads(g, P, n, t);
    upload(d_g, g, P * n);
    cr_assert(eq(int, gc_sim_step(cpu, gp, LR), GC_SUCCESS), "%s step %u: cpu", what, t);
    cr_assert(eq(int, gc_sim_step(cpu2, gp, LR), GC_SUCCESS), "%s step %u: cpu2", what, t);
    cr_assert(eq(int, gc_cuda_sim_step(gpu2, d_g, LR), GC_SUCCESS), "%s step %u: gpu2: %s",
              what, t, gc_last_error());
    same_after_step(cpu2, gpu2, gc_sim_ledger(cpu2), &cfg, what, t);
    cr_assert(memcmp(gc_sim_point(cpu), gc_sim_point(cpu2), n * sizeof(float)) == 0,
              "%s step %u: resumed CPU run", what, t);
  }
  same_state(cpu, gpu2, what);

  free(ck_cpu);
  free(ck_gpu);
  gc_sim_free(cpu2);
  gc_cuda_sim_free(gpu2);
  cudaFree(d_g);
  gc_cuda_sim_free(gpu);
  gc_sim_free(cpu);
  free(gp);
  free(g);
  free(x0);
}

/* The compressors every compressed method is run with. */
struct comp {
  const char *name;
  double density;
};
static const struct comp comps[] = {
  {"topk", 0.01}, {"randk", 0.05}, {"gaussk", 0.02},
  {"sign", 0}, {"qsgd", 0}, {"identity", 0},
};
enum { NCOMP = sizeof comps / sizeof comps[0] };

/* P = 1 and P = 3, odd sizes that are multiples of no block size. */
static void run_sizes(const struct sim_case *c)
{
  run_case(c, 1, 1237);
  run_case(c, 3, 3001);
}

static void run_kind(gc_algo_kind kind, int up, int down)
{
  for (int i = 0; i < NCOMP; i++) {
    struct sim_case c = {kind, up ? comps[i].name : NULL, down ? comps[i].name : NULL,
                         up ? comps[i].density : 0, down ? comps[i].density : 0, 0, 0, 0};
    run_sizes(&c);
  }
}

TestSuite(cuda_sim, .init = gc_test_quiet);

Test(cuda_sim, sgd_matches_the_cpu)
{
  gc_test_require_gpu();
  struct sim_case c = {GC_ALGO_SGD, NULL, NULL, 0, 0, 0, 0, 0};
  run_sizes(&c);
}

Test(cuda_sim, uni_matches_the_cpu)
{
  gc_test_require_gpu();
  run_kind(GC_ALGO_UNI, 1, 0);
}

/* DGC momentum correction on uni: plain, and Nesterov with clipping. */
Test(cuda_sim, uni_momentum_matches_the_cpu)
{
  gc_test_require_gpu();
  struct sim_case c = {GC_ALGO_UNI, "topk", NULL, 0.01, 0, 0.9, 0, 0};
  run_sizes(&c);
  struct sim_case d = {GC_ALGO_UNI, "topk", NULL, 0.01, 0, 0.9, 2.0, 1};
  run_sizes(&d);
}

Test(cuda_sim, bi_matches_the_cpu)
{
  gc_test_require_gpu();
  run_kind(GC_ALGO_BI, 1, 1);
  /* K_d != K: a denser downlink than uplink */
  struct sim_case c = {GC_ALGO_BI, "topk", "topk", 0.01, 0.05, 0, 0, 0};
  run_sizes(&c);
}

Test(cuda_sim, downlink_matches_the_cpu)
{
  gc_test_require_gpu();
  run_kind(GC_ALGO_DOWNLINK, 0, 1);
}

Test(cuda_sim, doublesqueeze_matches_the_cpu)
{
  gc_test_require_gpu();
  run_kind(GC_ALGO_DOUBLESQUEEZE, 1, 1);
}

/* A NaN in worker 1's gradient at step 3: the same code on both sides,
 * the point unchanged, worker 0's memory stepped on both (the state bytes
 * agree), and the run goes on identically from a clean retry. */
Test(cuda_sim, nan_gradient_as_the_cpu)
{
  gc_test_require_gpu();
  const struct sim_case cases[] = {
    {GC_ALGO_SGD, NULL, NULL, 0, 0, 0, 0, 0},
    {GC_ALGO_UNI, "topk", NULL, 0.01, 0, 0, 0, 0},
    {GC_ALGO_UNI, "topk", NULL, 0.01, 0, 0.9, 0, 0},
    {GC_ALGO_BI, "qsgd", "topk", 0, 0.02, 0, 0, 0},
    {GC_ALGO_DOWNLINK, NULL, "randk", 0, 0.05, 0, 0, 0},
    {GC_ALGO_DOUBLESQUEEZE, "sign", "sign", 0, 0, 0, 0, 0},
  };
  const size_t P = 3, n = 2011;
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const struct sim_case *c = &cases[ci];
    gc_algo_config cfg;
    make_config(&cfg, c, P, n);
    const char *what = case_name(c, P, n);
    float *x0 = malloc(n * sizeof *x0), *g = malloc(P * n * sizeof *g);
    float *before = malloc(n * sizeof *before);
    const void *gp[3] = {g, g + n, g + 2 * n};
    cr_assert(x0 && g && before);
    gc_test_fill_normal_f32(x0, n, 5);
    gc_sim *cpu = gc_sim_alloc(&cfg, x0);
    gc_cuda_sim *gpu = gc_cuda_sim_alloc(&cfg, x0);
    cr_assert(cpu && gpu, "%s: %s", what, gc_last_error());
    float *d_g;
    GC_TEST_CUDA(cudaMalloc((void **) &d_g, P * n * sizeof *d_g));
    for (uint32_t t = 0; t < 5; t++) {
      fill_grads(g, P, n, t);
      int bad = t == 3;
      if (bad)
        g[n + 17] = NAN;
      memcpy(before, gc_sim_point(cpu), n * sizeof *before);
      upload(d_g, g, P * n);
      int rc_cpu = gc_sim_step(cpu, gp, LR);
      int rc_gpu = gc_cuda_sim_step(gpu, d_g, LR);
      cr_assert(eq(int, rc_gpu, rc_cpu), "%s step %u", what, t);
      cr_assert(eq(int, rc_cpu, bad ? GC_EDOM : GC_SUCCESS), "%s step %u", what, t);
      if (bad) {
        cr_assert(memcmp(before, gc_sim_point(cpu), n * sizeof *before) == 0);
        same_point(before, gpu, n, what, t);
        same_state(cpu, gpu, what);
        fill_grads(g, P, n, t);   /* the clean retry of step 3 */
        upload(d_g, g, P * n);
        cr_assert(eq(int, gc_sim_step(cpu, gp, LR), GC_SUCCESS));
        cr_assert(eq(int, gc_cuda_sim_step(gpu, d_g, LR), GC_SUCCESS), "%s: %s", what,
                  gc_last_error());
      }
      same_after_step(cpu, gpu, gc_sim_ledger(cpu), &cfg, what, t);
    }
    same_state(cpu, gpu, what);
    /* a bad step size is refused before anything moves */
    cr_assert(eq(int, gc_cuda_sim_step(gpu, d_g, -1.0), GC_EDOM));
    cr_assert(eq(int, gc_sim_step(cpu, gp, -1.0), GC_EDOM));
    same_state(cpu, gpu, what);
    cudaFree(d_g);
    gc_cuda_sim_free(gpu);
    gc_sim_free(cpu);
    free(x0);
    free(g);
    free(before);
  }
}

/* ---- host-only: configurations refused before any CUDA call ----------- */

static int alloc_code(const gc_algo_config *cfg)
{
  float x0[64] = {0};
  cr_assert(cfg->n <= 64);
  gc_cuda_sim *s = gc_cuda_sim_alloc(cfg, x0);
  if (s) {
    gc_cuda_sim_free(s);
    return GC_SUCCESS;
  }
  return gc_last_error_code();
}

static void base_config(gc_algo_config *cfg, gc_algo_kind kind)
{
  gc_algo_config_default(cfg);
  cfg->kind = kind;
  cfg->workers = 2;
  cfg->n = 48;
  cfg->dtype = GC_F32;
}

Test(cuda_sim, unsupported_methods_without_a_gpu)
{
  const gc_algo_kind other[] = {GC_ALGO_EF21, GC_ALGO_EF21_BC, GC_ALGO_ALLREDUCE,
                                GC_ALGO_ALLREDUCE_RANDK, GC_ALGO_ALLGATHER};
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
    gc_algo_config cfg;
    base_config(&cfg, other[i]);
    cr_assert(eq(int, alloc_code(&cfg), GC_EUNSUP), "%s", gc_algo_name(other[i]));
    cr_assert(strstr(gc_last_error(), gc_algo_name(other[i])) != NULL, "%s",
              gc_last_error());
  }
  gc_algo_config cfg;
  base_config(&cfg, GC_ALGO_UNI);
  cfg.dtype = GC_F64;
  cr_assert(eq(int, alloc_code(&cfg), GC_EUNSUP));
}

/* A registered compressor without a device twin (the shaped ones), up or
 * down, is refused by name. */
Test(cuda_sim, compressors_without_a_twin)
{
  static const gc_segment seg = {0, 6, 8};
  int seen = 0;
  for (const gc_compressor_type *const *t = gc_compressor_types(); *t; t++) {
    if (gc_cuda_supports(*t))
      continue;
    seen++;
    gc_algo_kind kinds[2] = {GC_ALGO_UNI, GC_ALGO_DOWNLINK};
    for (int d = 0; d < 2; d++) {
      gc_algo_config cfg;
      base_config(&cfg, kinds[d]);
      cfg.up = cfg.down = *t;
      cfg.up_params.segments = cfg.down_params.segments = &seg;
      cfg.up_params.nsegments = cfg.down_params.nsegments = 1;
      cr_assert(eq(int, alloc_code(&cfg), GC_EUNSUP), "%s", (*t)->name);
      cr_assert(strstr(gc_last_error(), (*t)->name) != NULL, "%s", gc_last_error());
    }
  }
  if (!seen)
    cr_skip_test("every registered compressor has a device twin");
}

Test(cuda_sim, argument_errors_without_a_gpu)
{
  gc_algo_config cfg;
  base_config(&cfg, GC_ALGO_BI);
  cfg.workers = 0;
  cr_assert(eq(int, alloc_code(&cfg), GC_EINVAL));
  base_config(&cfg, GC_ALGO_BI);
  cfg.n = 0;
  cr_assert(eq(int, alloc_code(&cfg), GC_EINVAL));
  base_config(&cfg, GC_ALGO_BI);   /* momentum is DGC's, uni only */
  cfg.momentum = 0.9;
  cr_assert(eq(int, alloc_code(&cfg), GC_EINVAL));
  base_config(&cfg, GC_ALGO_UNI);   /* a compressor setting */
  cfg.up_params.density = 2.0;
  cr_assert(eq(int, alloc_code(&cfg), GC_EINVAL));
  base_config(&cfg, GC_ALGO_DOWNLINK);
  cfg.down_params.density = 0.0;
  cr_assert(eq(int, alloc_code(&cfg), GC_EINVAL));
}

/* Without a device a valid configuration fails cleanly with GC_ECUDA. */
Test(cuda_sim, no_device_is_reported)
{
  char why[256];
  if (gc_cuda_available(why, sizeof why) == GC_SUCCESS)
    cr_skip_test("a device is visible");
  gc_algo_config cfg;
  base_config(&cfg, GC_ALGO_BI);
  cr_assert(eq(int, alloc_code(&cfg), GC_ECUDA));
}
