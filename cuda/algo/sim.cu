/* sim.cu -- gc_cuda_sim: lib/algo/sim.c's gc_sim_step for the parameter-server
 * methods with every node on one device (gc_cuda_sim.h).
 *
 * The step is composed from the device twins exactly as algo.c composes it
 * from the CPU functions, so each float operation has its CPU counterpart:
 *   worker p     gc_cuda_ef_step_sync = gc_ef_step (uni, bi, DoubleSqueeze;
 *                DGC on (float)lr*g as gc_worker_step scales it), or the
 *                gradient itself as the dense message (sgd, downlink)
 *   server       agg = 0; agg += 1*D_p for p = 0..P-1 (the twins'
 *                decoders, or the dense decode fused into one pass); then
 *                gc__vmean_finish: agg / (float)P, a correctly rounded
 *                division, the nonzero count and the overflow check
 *   downlink     sgd: agg densely; uni: gc__exact_encode's message; bi,
 *                downlink, DoubleSqueeze: gc_ef_step on the server memory
 *   apply        x += scale*D with gc__algo_apply_scale, then the
 *                divergence check of gc_sim_step
 * The kernels written here use the _rn intrinsics, so nvcc cannot fuse a
 * product and a sum into an FMA the CPU does not use (lib/ is built with
 * -std=c11, which keeps GCC from contracting them either).
 *
 * Host round trips per step: two per compressed worker (inside
 * gc_cuda_ef_step_sync: its status and length), one after the server's
 * aggregate (statuses, the support count and, for uni, the exact message's
 * length), two more in the server's memory step (bi, downlink,
 * DoubleSqueeze) and one after the apply (the divergence check): sgd
 * needs two in all, bi 2P + 4.  Fewer would need the twins to report
 * lengths without a sync; the ledger needs every length on the host. */
#include <stdlib.h>
#include <string.h>

#include "gc_algo_rules.h"
#include "gc_cuda_internal.cuh"
#include "gc_cuda_sim.h"
#include "gc_dtype.h"
#include "gc_wire.h"

using namespace gc_cuda;

namespace {

/* Slots of the per-step flag block: first bad indices (UINT64_MAX: none)
 * and the count of nonzeros of the average. */
enum { F_AGG = 0, F_NNZ = 1, F_X = 2, F_WORKER = 3 };
constexpr unsigned long long NO_INDEX = ~0ull;

__global__ void flags_reset(unsigned long long *f, size_t m)
{
  for (size_t i = threadIdx.x; i < m; i += blockDim.x)
    f[i] = i == F_NNZ ? 0ull : NO_INDEX;
}

/* Add the block's nonzero counts into *total: one atomic per warp. */
__device__ __forceinline__ void count_add(unsigned long long c, unsigned long long *total)
{
  for (int o = 16; o > 0; o >>= 1)
    c += __shfl_down_sync(0xffffffffu, c, o);
  if ((threadIdx.x & 31) == 0 && c)
    atomicAdd(total, c);
}

/* gc__vmean_finish for one entry: v = a / P (division, so that P is
 * exactly rounded), counted when nonzero, flagged when not finite. */
__device__ __forceinline__ void mean_entry(float a, float df, size_t i, float *agg,
                                           unsigned long long *f, unsigned long long *cnt)
{
  const float v = __fdiv_rn(a, df);
  agg[i] = v;
  *cnt += v != 0.0f;
  if (nonfinite(v))
    atomicMin(&f[F_AGG], (unsigned long long) i);
}

/* Dense uplinks (sgd, downlink): a dense message is the gradient's own
 * bytes, so the server decodes straight from d_grads: agg_i = (((0 +
 * 1*g0_i) + 1*g1_i) ...) / P in worker order, as gc__dense_decode into a
 * zeroed agg and gc__vmean_finish do.  Worker p's non-finite entries (which
 * gc_worker_step would have refused) are flagged per worker; agg is
 * scratch, so computing it anyway changes no state. */
__global__ void __launch_bounds__(BLOCK)
dense_mean(const float *g, size_t n, size_t P, float df, float *agg, unsigned long long *f)
{
  unsigned long long cnt = 0;
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK) {
    float a = 0.0f;
    for (size_t p = 0; p < P; p++) {
      const float v = g[p * n + i];
      if (nonfinite(v))
        atomicMin(&f[F_WORKER + p], (unsigned long long) i);
      a = __fadd_rn(a, __fmul_rn(1.0f, v));
    }
    mean_entry(a, df, i, agg, f, &cnt);
  }
  count_add(cnt, &f[F_NNZ]);
}

/* Compressed uplinks: agg already holds the decoded sum. */
__global__ void __launch_bounds__(BLOCK)
mean_finish(float *agg, size_t n, float df, unsigned long long *f)
{
  unsigned long long cnt = 0;
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK)
    mean_entry(agg[i], df, i, agg, f, &cnt);
  count_add(cnt, &f[F_NNZ]);
}

/* x += s*D for a dense downlink D (gc__dense_decode: product, then sum),
 * with gc_sim_step's divergence check on the result.  D is the server's
 * average, already checked finite, so the decoder's own check of the
 * message values cannot fire and is not repeated. */
__global__ void __launch_bounds__(BLOCK)
dense_apply(float *x, size_t n, float s, const float *d, unsigned long long *f)
{
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK) {
    const float v = __fadd_rn(x[i], __fmul_rn(s, d[i]));
    x[i] = v;
    if (nonfinite(v))
      atomicMin(&f[F_X], (unsigned long long) i);
  }
}

/* The divergence check after a decoder applied the downlink. */
__global__ void __launch_bounds__(BLOCK)
check_x(const float *x, size_t n, unsigned long long *f)
{
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK)
    if (nonfinite(x[i]))
      atomicMin(&f[F_X], (unsigned long long) i);
}

/* DGC workers feed lr*g to the memory (gc__vscale in float). */
__global__ void __launch_bounds__(BLOCK)
scale_into(float *y, float a, const float *x, size_t n)
{
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK)
    y[i] = __fmul_rn(a, x[i]);
}

} /* namespace */

struct gc_cuda_sim {
  gc_algo_config cfg;
  size_t n, P;
  gc_compressor **up;     /* [P] worker encoders, also the server's decoders
                             (the same type and parameters as its dec[p]) */
  gc_cuda_ef **wef;       /* [P] worker memories (compressed uplinks)     */
  int *wstarted;          /* [P] gc_worker's `started`                    */
  gc_compressor *down;    /* downlink encoder and decoder (bi, b', DS)    */
  gc_cuda_ef *sef;        /* server memory (bi, b', DS)                   */
  gc_compressor *exact;   /* uni: threshold 0, the exact message's coder  */
  int sstarted;           /* gc_server's `started`                        */
  gc_ledger *ledger;
  cudaStream_t stream;
  float *d_x, *d_agg;
  float *d_scaled;        /* DGC: lr * g                                  */
  uint8_t *d_up, *d_down; /* P uplink slots of upstride bytes; downlink  */
  size_t upcap, upstride, downcap;
  size_t *uplen;          /* [P]                                          */
  size_t downlen;
  void *d_tmp;            /* scratch shared by every twin (one stream)    */
  size_t tmp_bytes;
  unsigned long long *d_flags, *h_flags;   /* F_WORKER + P slots          */
  gc_cuda_info *d_info, *h_info;           /* P decoders, exact, apply    */
  size_t support;
  uint32_t steps;
  int have_down;          /* a downlink message exists (a step was taken) */
};

/* A failed CUDA call in a void context: report, remember the first. */
static int cuda_ok(cudaError_t e, const char *what, int *rc)
{
  if (e == cudaSuccess)
    return 1;
  if (*rc == GC_SUCCESS) {
    gc_errorf(__FILE__, __LINE__, GC_ECUDA, "%s: %s", what, cudaGetErrorString(e));
    *rc = GC_ECUDA;
  }
  return 0;
}

extern "C" void gc_cuda_sim_free(gc_cuda_sim *s)
{
  if (!s)
    return;
  for (size_t p = 0; s->up && p < s->P; p++)
    gc_compressor_free(s->up[p]);
  for (size_t p = 0; s->wef && p < s->P; p++)
    gc_cuda_ef_free(s->wef[p]);
  free(s->up);
  free(s->wef);
  free(s->wstarted);
  free(s->uplen);
  gc_compressor_free(s->down);
  gc_compressor_free(s->exact);
  gc_cuda_ef_free(s->sef);
  gc_ledger_free(s->ledger);
  cudaFree(s->d_x);
  cudaFree(s->d_agg);
  cudaFree(s->d_scaled);
  cudaFree(s->d_up);
  cudaFree(s->d_down);
  cudaFree(s->d_tmp);
  cudaFree(s->d_flags);
  cudaFree(s->d_info);
  cudaFreeHost(s->h_flags);
  cudaFreeHost(s->h_info);
  if (s->stream)
    cudaStreamDestroy(s->stream);
  free(s);
}

/* Everything that needs no device: the checks that make a configuration
 * unsupported, and the host objects (compressor instances, ledger). */
static int host_setup(gc_cuda_sim *s, const gc_algo_config *cfg)
{
  gc_algo_kind k = cfg->kind;
  if (!(gc__algo(k)->flags & GC__ALGO_GPU)) {
    char names[256];
    GC_ERRORF(GC_EUNSUP, "gc_cuda_sim: method %s has no device transport (%s)",
              gc_algo_name(k), gc__algo_names(GC__ALGO_GPU, ", ", names, sizeof names));
  }
  if (cfg->dtype != GC_F32)
    GC_ERROR("gc_cuda_sim: the device transport runs float32 only", GC_EUNSUP);
  if (gc__algo_up_coding(k) == GC__UP_COMP && !gc_cuda_supports(cfg->up))
    GC_ERRORF(GC_EUNSUP, "gc_cuda_sim: uplink compressor %s has no device twin",
              cfg->up->name);
  if (gc__algo_down_coding(k) == GC__DOWN_COMP && !gc_cuda_supports(cfg->down))
    GC_ERRORF(GC_EUNSUP, "gc_cuda_sim: downlink compressor %s has no device twin",
              cfg->down->name);
  s->cfg = *cfg;
  s->n = cfg->n;
  s->P = cfg->workers;
  if (!(s->uplen = (size_t *) calloc(s->P, sizeof *s->uplen)) ||
      !(s->wstarted = (int *) calloc(s->P, sizeof *s->wstarted)))
    GC_ERROR("gc_cuda_sim: out of memory", GC_ENOMEM);
  if (!(s->ledger = gc_ledger_alloc(s->P)))
    return gc_last_error_code();
  if (gc__algo_up_coding(k) == GC__UP_COMP) {
    if (!(s->up = (gc_compressor **) calloc(s->P, sizeof *s->up)) ||
        !(s->wef = (gc_cuda_ef **) calloc(s->P, sizeof *s->wef)))
      GC_ERROR("gc_cuda_sim: out of memory", GC_ENOMEM);
    for (size_t p = 0; p < s->P; p++) {
      gc_compressor_params prm = cfg->up_params;
      prm.stream = (uint32_t) p;   /* algo.c's alloc_up (no shaped twins) */
      if (!(s->up[p] = gc_compressor_alloc(cfg->up, s->n, &prm)))
        return gc_last_error_code();
    }
    s->upcap = gc_compressor_max_bytes(s->up[0]);
    s->upstride = (s->upcap + 255) & ~(size_t) 255;   /* aligned slots */
  }
  if (gc__algo_down_coding(k) == GC__DOWN_COMP) {
    if (!(s->down = gc_compressor_alloc(cfg->down, s->n, &cfg->down_params)))
      return gc_last_error_code();
    s->downcap = gc_compressor_max_bytes(s->down);
  } else if (gc__algo_down_coding(k) == GC__DOWN_EXACT) {
    /* The threshold-0 message carries exactly the nonzeros of the average,
     * with the index coding gc_sparse_encode_dense picks (the same rule and
     * ties), so it is gc__exact_encode's sparse form but for the type tag
     * (threshold's 0x54, not 0x50), which is rewritten once decoded. */
    gc_compressor_params prm;
    gc_compressor_params_default(&prm);
    prm.threshold = 0.0;
    if (!(s->exact = gc_compressor_alloc(gc_compressor_threshold, s->n, &prm)))
      return gc_last_error_code();
    s->downcap = gc_compressor_max_bytes(s->exact);
    if (s->downcap < s->n * sizeof(float))
      s->downcap = s->n * sizeof(float);
  }
  /* The checkpoint walks compressor state too; no twin keeps any now. */
  for (size_t p = 0; s->up && p < s->P; p++)
    if (gc_compressor_state_bytes(s->up[p]))
      GC_ERRORF(GC_EUNSUP, "gc_cuda_sim: compressor %s keeps state between calls",
                cfg->up->name);
  if (s->down && gc_compressor_state_bytes(s->down))
    GC_ERRORF(GC_EUNSUP, "gc_cuda_sim: compressor %s keeps state between calls",
              cfg->down->name);
  return GC_SUCCESS;
}

static int device_setup(gc_cuda_sim *s, const float *h_x0)
{
  const gc_algo_config *cfg = &s->cfg;
  const size_t n = s->n, P = s->P, vb = n * sizeof(float);
  gc_algo_kind k = cfg->kind;
  GC_CUDA_TRY(cudaStreamCreate(&s->stream));
  GC_CUDA_TRY(cudaMalloc((void **) &s->d_x, vb));
  GC_CUDA_TRY(cudaMalloc((void **) &s->d_agg, vb));
  GC_CUDA_TRY(cudaMalloc((void **) &s->d_flags, (F_WORKER + P) * sizeof *s->d_flags));
  GC_CUDA_TRY(cudaMalloc((void **) &s->d_info, (P + 2) * sizeof *s->d_info));
  GC_CUDA_TRY(cudaMallocHost((void **) &s->h_flags, (F_WORKER + P) * sizeof *s->h_flags));
  GC_CUDA_TRY(cudaMallocHost((void **) &s->h_info, (P + 2) * sizeof *s->h_info));
  if (s->downcap)
    GC_CUDA_TRY(cudaMalloc((void **) &s->d_down, s->downcap));
  if (s->up)
    GC_CUDA_TRY(cudaMalloc((void **) &s->d_up, P * s->upstride));
  if (gc__algo_uses_dgc(cfg))
    GC_CUDA_TRY(cudaMalloc((void **) &s->d_scaled, vb));
  GC_CUDA_TRY(cudaMemcpy(s->d_x, h_x0, vb, cudaMemcpyHostToDevice));

  /* the memories, with gc_worker_alloc's and gc_server_alloc's kinds */
  if (s->up) {
    gc_ef_options o;
    gc__algo_worker_ef_options(cfg, &o);
    for (size_t p = 0; p < P; p++)
      if (!(s->wef[p] = gc_cuda_ef_alloc(gc__algo_worker_ef(cfg), n, &o)))
        return gc_last_error_code();
  }
  if (s->down &&
      !(s->sef = gc_cuda_ef_alloc(gc__algo_server_ef(k), n, NULL)))
    return gc_last_error_code();

  /* One scratch for every twin: they run one after another on one stream. */
  size_t need = 0, b;
  for (size_t p = 0; s->up && p < P; p++) {
    b = 0;
    GC_TRY(gc_cuda_ef_step_sync(s->wef[p], s->up[p], NULL, &b, NULL, 1.0, 0, NULL, s->upcap,
                                NULL, NULL, s->stream));
    need = b > need ? b : need;
    b = 0;
    GC_TRY(gc_cuda_decompress_add_f32(s->up[p], NULL, &b, NULL, 0, 0, 1.0f, NULL, NULL,
                                      s->stream));
    need = b > need ? b : need;
  }
  if (s->down) {
    b = 0;
    GC_TRY(gc_cuda_ef_step_sync(s->sef, s->down, NULL, &b, NULL, 1.0, 0, NULL, s->downcap,
                                NULL, NULL, s->stream));
    need = b > need ? b : need;
    b = 0;
    GC_TRY(gc_cuda_decompress_add_f32(s->down, NULL, &b, NULL, 0, 0, 1.0f, NULL, NULL,
                                      s->stream));
    need = b > need ? b : need;
  }
  if (s->exact) {
    b = 0;
    GC_TRY(gc_cuda_compress_f32(s->exact, NULL, &b, NULL, 0, NULL, s->downcap, NULL,
                                s->stream));
    need = b > need ? b : need;
    b = 0;
    GC_TRY(gc_cuda_decompress_add_f32(s->exact, NULL, &b, NULL, 0, 0, 1.0f, NULL, NULL,
                                      s->stream));
    need = b > need ? b : need;
  }
  s->tmp_bytes = need ? need : 1;
  GC_CUDA_TRY(cudaMalloc(&s->d_tmp, s->tmp_bytes));
  return GC_SUCCESS;
}

extern "C" gc_cuda_sim *gc_cuda_sim_alloc(const gc_algo_config *cfg, const float *h_x0)
{
  if (gc_algo_config_check(cfg) != GC_SUCCESS)
    return NULL;
  gc_cuda_sim *s = (gc_cuda_sim *) calloc(1, sizeof *s);
  if (!s)
    GC_ERROR_NULL("gc_cuda_sim: out of memory", GC_ENOMEM);
  if (host_setup(s, cfg) != GC_SUCCESS || device_setup(s, h_x0) != GC_SUCCESS) {
    gc_cuda_sim_free(s);
    return NULL;
  }
  return s;
}

extern "C" const float *gc_cuda_sim_point(const gc_cuda_sim *s) { return s->d_x; }

extern "C" int gc_cuda_sim_get_point(const gc_cuda_sim *s, float *h_x)
{
  GC_CUDA_TRY(cudaMemcpyAsync(h_x, s->d_x, s->n * sizeof(float), cudaMemcpyDeviceToHost,
                              s->stream));
  GC_CUDA_TRY(cudaStreamSynchronize(s->stream));
  return GC_SUCCESS;
}

extern "C" uint32_t gc_cuda_sim_steps_done(const gc_cuda_sim *s) { return s->steps; }
extern "C" const gc_ledger *gc_cuda_sim_ledger(const gc_cuda_sim *s) { return s->ledger; }
extern "C" size_t gc_cuda_sim_support_union(const gc_cuda_sim *s) { return s->support; }

extern "C" const uint8_t *gc_cuda_sim_down_message(const gc_cuda_sim *s, size_t *len)
{
  *len = s->have_down ? s->downlen : 0;
  if (!s->have_down)
    return NULL;
  /* sgd's dense message is the average's own bytes: it was not copied */
  return gc__algo_down_coding(s->cfg.kind) == GC__DOWN_DENSE ? (const uint8_t *) s->d_agg
                                                             : s->d_down;
}

/* Wait for the stream and bring the flag block and the infos home. */
static int fetch(gc_cuda_sim *s)
{
  GC_CUDA_TRY(cudaMemcpyAsync(s->h_flags, s->d_flags, (F_WORKER + s->P) * sizeof *s->h_flags,
                              cudaMemcpyDeviceToHost, s->stream));
  GC_CUDA_TRY(cudaMemcpyAsync(s->h_info, s->d_info, (s->P + 2) * sizeof *s->h_info,
                              cudaMemcpyDeviceToHost, s->stream));
  GC_CUDA_TRY(cudaStreamSynchronize(s->stream));
  return GC_SUCCESS;
}

/* Workers 0..P-1 with compressed uplinks, in order; the first failure is
 * returned with the earlier workers' steps kept (gc_sim_step's loop). */
static int workers_step(gc_cuda_sim *s, const float *d_grads, double lr, uint32_t t)
{
  const size_t n = s->n;
  const unsigned grid = grid_for(n, BLOCK * 4, 8192);
  for (size_t p = 0; p < s->P; p++) {
    const float *g = d_grads + p * n;
    double wlr = lr;
    if (s->d_scaled) {   /* DGC works on lr*g: the message is a step */
      scale_into<<<grid, BLOCK, 0, s->stream>>>(s->d_scaled, (float) lr, g, n);
      GC_CUDA_LAUNCHED();
      g = s->d_scaled;
      wlr = 1.0;
    }
    size_t tb = s->tmp_bytes;
    int rc = gc_cuda_ef_step_sync(s->wef[p], s->up[p], s->d_tmp, &tb, g, wlr, t,
                                  s->d_up + p * s->upstride, s->upcap, &s->uplen[p], NULL,
                                  s->stream);
    if (rc == GC_EDOM)
      GC_ERRORF(GC_EDOM, "worker %zu (step %u): %s", p, (unsigned) t, gc_last_error());
    if (rc != GC_SUCCESS)
      return rc;
    s->wstarted[p] = 1;
  }
  return GC_SUCCESS;
}

extern "C" int gc_cuda_sim_step(gc_cuda_sim *s, const float *d_grads, double lr)
{
  const uint32_t t = s->steps;
  const size_t n = s->n, P = s->P, vb = n * sizeof(float);
  const gc_algo_kind k = s->cfg.kind;
  if (t == UINT32_MAX)
    GC_ERROR("the step counter is at its limit 2^32 - 1", GC_EINVAL);
  /* worker 0 is the first to see lr (gc_worker_step) */
  if (!(lr >= 0.0) || lr > 1e300)
    GC_ERRORF(GC_EDOM, "worker %zu: step size %g is not finite and >= 0", (size_t) 0, lr);
  const unsigned grid = grid_for(n, BLOCK * 4, 8192);
  const float df = (float) (double) P;
  cudaStream_t st = s->stream;
  unsigned long long *f = s->d_flags;

  flags_reset<<<1, 256, 0, st>>>(f, F_WORKER + P);
  GC_CUDA_LAUNCHED();
  if (gc__algo_up_coding(k) == GC__UP_DENSE) {
    dense_mean<<<grid, BLOCK, 0, st>>>(d_grads, n, P, df, s->d_agg, f);
    GC_CUDA_LAUNCHED();
    for (size_t p = 0; p < P; p++)
      s->uplen[p] = vb;
  } else {
    GC_TRY(workers_step(s, d_grads, lr, t));
    GC_CUDA_TRY(cudaMemsetAsync(s->d_agg, 0, vb, st));
    for (size_t p = 0; p < P; p++) {   /* fixed order 0..P-1 */
      size_t tb = s->tmp_bytes;
      GC_TRY(gc_cuda_decompress_add_f32(s->up[p], s->d_tmp, &tb, s->d_up + p * s->upstride,
                                        s->uplen[p], t, 1.0f, s->d_agg, &s->d_info[p], st));
    }
    mean_finish<<<grid, BLOCK, 0, st>>>(s->d_agg, n, df, f);
    GC_CUDA_LAUNCHED();
  }
  if (gc__algo_down_coding(k) == GC__DOWN_EXACT) {   /* enqueued now, so that one wait
                                                        serves both */
    size_t tb = s->tmp_bytes;
    GC_TRY(gc_cuda_compress_f32(s->exact, s->d_tmp, &tb, s->d_agg, t, s->d_down, s->downcap,
                                &s->d_info[P], st));
  }
  GC_TRY(fetch(s));
  const unsigned long long *h = s->h_flags;
  for (size_t p = 0; gc__algo_up_coding(k) == GC__UP_DENSE && p < P; p++)
    if (h[F_WORKER + p] != NO_INDEX)
      GC_ERRORF(GC_EDOM, "worker %zu: non-finite gradient at index %zu (step %u)", p,
                (size_t) h[F_WORKER + p], (unsigned) t);
  for (size_t p = 0; gc__algo_up_coding(k) == GC__UP_COMP && p < P; p++)
    if (s->h_info[p].status != GC_SUCCESS)
      GC_ERRORF(s->h_info[p].status, "server: uplink message of worker %zu (step %u) is "
                "malformed", p, (unsigned) t);
  s->support = (size_t) h[F_NNZ];
  if (h[F_AGG] != NO_INDEX)
    GC_ERRORF(GC_EDOM, "server: the average overflowed at index %zu (step %u)",
              (size_t) h[F_AGG], (unsigned) t);

  /* the downlink message, and the apply */
  const float sc = (float) gc__algo_apply_scale(k, lr);
  int dense_down = 0;
  const float *dense_src = s->d_agg;
  gc_compressor *dec = NULL;
  switch (gc__algo_down_coding(k)) {
  case GC__DOWN_DENSE:
    s->downlen = vb;
    dense_down = 1;
    break;
  case GC__DOWN_EXACT: {
    const gc_cuda_info *ei = &s->h_info[P];
    if (ei->status != GC_SUCCESS)   /* the average was checked: not expected */
      GC_ERRORF(ei->status, "server: exact downlink encoding failed (step %u)", (unsigned) t);
    s->downlen = (size_t) ei->len;
    if (s->downlen >= vb) {   /* gc__exact_encode: dense when not shorter */
      GC_CUDA_TRY(cudaMemcpyAsync(s->d_down, s->d_agg, vb, cudaMemcpyDeviceToDevice, st));
      s->downlen = vb;
      dense_down = 1;
      dense_src = (const float *) s->d_down;   /* cudaMalloc'd: aligned */
    } else {
      dec = s->exact;
    }
    break;
  }
  default: {
    size_t tb = s->tmp_bytes;
    int rc = gc_cuda_ef_step_sync(s->sef, s->down, s->d_tmp, &tb, s->d_agg, 1.0, t, s->d_down,
                                  s->downcap, &s->downlen, NULL, st);
    if (rc == GC_EDOM)
      GC_ERRORF(GC_EDOM, "server: memory overflowed at step %u", (unsigned) t);
    if (rc != GC_SUCCESS)
      return rc;
    dec = s->down;
    break;
  }
  }
  s->sstarted = 1;
  s->have_down = 1;
  if (dense_down) {
    dense_apply<<<grid, BLOCK, 0, st>>>(s->d_x, n, sc, dense_src, f);
    GC_CUDA_LAUNCHED();
  } else {
    size_t tb = s->tmp_bytes;
    GC_TRY(gc_cuda_decompress_add_f32(dec, s->d_tmp, &tb, s->d_down, s->downlen, t, sc, s->d_x,
                                      &s->d_info[P + 1], st));
    if (dec == s->exact)   /* the message as gc__exact_encode tags it */
      GC_CUDA_TRY(cudaMemsetAsync(s->d_down, GC__WIRE_SPARSE, 1, st));
    check_x<<<grid, BLOCK, 0, st>>>(s->d_x, n, f);
    GC_CUDA_LAUNCHED();
  }
  GC_TRY(fetch(s));
  if (!dense_down && s->h_info[P + 1].status != GC_SUCCESS)
    GC_ERRORF(s->h_info[P + 1].status, "worker %zu: downlink message of step %u is malformed",
              (size_t) 0, (unsigned) t);
  if (s->h_flags[F_X] != NO_INDEX)
    GC_ERRORF(GC_EDIVERGE, "the iterate diverged at step %u (index %zu)", (unsigned) t,
              (size_t) s->h_flags[F_X]);
  GC_TRY(gc_algo_record_step(&s->cfg, s->ledger, t, s->uplen, s->downlen));
  s->steps++;
  return GC_SUCCESS;
}

/* ---- checkpoints ------------------------------------------------------
 * One walk serves size, save and load, in sim.c's and algo.c's order:
 * steps, x, then per worker (started, memory [, DGC momentum], compressor
 * state), then the server (started, memory, downlink compressor state).
 * The vectors are copied between the device and the buffer on the stream. */

namespace {
struct Walk {
  uint8_t *out;
  const uint8_t *in;
  size_t at;
  cudaStream_t st;
  int rc;
};

void walk_host(Walk *w, void *field, size_t len)
{
  if (w->out)
    memcpy(w->out + w->at, field, len);
  if (w->in)
    memcpy(field, w->in + w->at, len);
  w->at += len;
}

/* gc_cuda_ef has no state save/load of its own: its memories are device
 * buffers it owns, whose values are replaced here between steps (hence
 * the casts from its read-only probes). */
void walk_dev(Walk *w, const float *d_v, size_t n)
{
  const size_t len = n * sizeof(float);
  if (w->out)
    cuda_ok(cudaMemcpyAsync(w->out + w->at, d_v, len, cudaMemcpyDeviceToHost, w->st),
            "checkpoint save", &w->rc);
  if (w->in)
    cuda_ok(cudaMemcpyAsync((float *) d_v, w->in + w->at, len, cudaMemcpyHostToDevice, w->st),
            "checkpoint load", &w->rc);
  w->at += len;
}

void walk_ef(Walk *w, const gc_cuda_ef *e, size_t n)
{
  if (!e)
    return;
  walk_dev(w, gc_cuda_ef_memory(e), n);
  if (gc_cuda_ef_momentum(e))
    walk_dev(w, gc_cuda_ef_momentum(e), n);
}

void walk_compressor(Walk *w, gc_compressor *c)
{
  if (!c)
    return;
  if (w->out)
    gc_compressor_state_save(c, w->out + w->at);
  if (w->in)
    gc_compressor_state_load(c, w->in + w->at);
  w->at += gc_compressor_state_bytes(c);
}
} /* namespace */

static int sim_walk(gc_cuda_sim *s, uint8_t *out, const uint8_t *in, size_t *bytes)
{
  Walk w = {out, in, 0, s->stream, GC_SUCCESS};
  walk_host(&w, &s->steps, sizeof s->steps);
  walk_dev(&w, s->d_x, s->n);
  for (size_t p = 0; p < s->P; p++) {
    walk_host(&w, &s->wstarted[p], sizeof s->wstarted[p]);
    if (s->wef)
      walk_ef(&w, s->wef[p], s->n);
    if (s->up)
      walk_compressor(&w, s->up[p]);
  }
  walk_host(&w, &s->sstarted, sizeof s->sstarted);
  walk_ef(&w, s->sef, s->n);
  walk_compressor(&w, s->down);
  if ((out || in) && w.rc == GC_SUCCESS)
    cuda_ok(cudaStreamSynchronize(s->stream), "checkpoint", &w.rc);
  *bytes = w.at;
  return w.rc;
}

extern "C" size_t gc_cuda_sim_state_bytes(const gc_cuda_sim *s)
{
  size_t b = 0;
  sim_walk((gc_cuda_sim *) s, NULL, NULL, &b);   /* sizes only: no CUDA call */
  return b;
}

extern "C" int gc_cuda_sim_state_save(const gc_cuda_sim *s, void *buf)
{
  size_t b;
  return sim_walk((gc_cuda_sim *) s, (uint8_t *) buf, NULL, &b);   /* reads s only */
}

extern "C" int gc_cuda_sim_state_load(gc_cuda_sim *s, const void *buf, size_t len)
{
  size_t want = gc_cuda_sim_state_bytes(s), b;
  if (len != want)
    GC_ERRORF(GC_EBADLEN, "simulator state of %zu bytes, expected %zu for this configuration",
              len, want);
  return sim_walk(s, NULL, (const uint8_t *) buf, &b);
}
