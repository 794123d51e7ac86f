/* ef.cu -- error-feedback memories on the device (gc_ef.h's kinds, float32).
 *
 * Each pass is lib/algo/ef.c's loop with the same float operations in the same
 * order (explicit _rn intrinsics, so nvcc cannot contract a product and a
 * sum into an FMA the CPU does not use).  As on the CPU, the memories
 * change only after the message is out: the accumulator and DGC's new
 * momentum are built in scratch, and a failed step leaves the state. */
#include <math.h>
#include <stdlib.h>

#include "gc_cuda_internal.cuh"

using namespace gc_cuda;

struct gc_cuda_ef {
  gc_ef_kind kind;
  size_t n;
  gc_ef_options opt;
  float *d_mem;    /* eps, v (DGC) or h (EF21); NULL for NONE */
  float *d_mom;    /* u (DGC) */
  float *d_acc;    /* the vector compressed last */
  float *d_sent;   /* decoded C(acc) */
  float *d_next;   /* DGC: clipped g, then u' (swapped with d_mom on commit) */
};

namespace {

enum { BAD_ACC = 1u, BAD_G = 2u };

/* DGC's global-norm clipping (gc_clip_global_norm_f32): the sum of
 * (double) x_i^2 in index order, one thread, because that order fixes the
 * rounded bits; clip[0] = 1 when the norm exceeds thr, clip[1] =
 * (float)(thr / norm) then. */
__global__ void clip_factor(const float *g, size_t n, double thr, float *clip)
{
  double s = 0.0;
  for (size_t i = 0; i < n; i++)
    s = __dadd_rn(s, __dmul_rn((double) g[i], (double) g[i]));
  double nrm = sqrt(s);
  clip[0] = nrm > thr ? 1.0f : 0.0f;
  clip[1] = nrm > thr ? __double2float_rn(__ddiv_rn(thr, nrm)) : 1.0f;
}

__global__ void __launch_bounds__(BLOCK)
clip_apply(const float *g, size_t n, const float *clip, float *out)
{
  const bool scale = clip[0] != 0.0f;
  const float f = clip[1];
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK)
    out[i] = scale ? __fmul_rn(f, g[i]) : g[i];
}

/* acc (and DGC's u' into next) from g and the memories; flags BAD_ACC for a
 * non-finite acc and BAD_G for a non-finite g. */
__global__ void __launch_bounds__(BLOCK)
accumulate(int kind, const float *g, size_t n, float lr, float m, int nesterov,
           const float *mem, const float *mom, float *acc, float *next, uint32_t *flags)
{
  int bad_acc = 0, bad_g = 0;
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK) {
    const float gi = g[i];
    float a;
    switch (kind) {
    case GC_EF_NONE:     /* acc = lr*g */
      a = __fmul_rn(lr, gi);
      break;
    case GC_EF_BEFORE:   /* acc = eps + lr*g */
      a = __fadd_rn(mem[i], __fmul_rn(lr, gi));
      break;
    case GC_EF_AFTER:    /* acc = g + 1*eps */
      a = __fadd_rn(gi, __fmul_rn(1.0f, mem[i]));
      break;
    case GC_EF_EF21:     /* acc = g + (-1)*h */
      a = __fadd_rn(gi, __fmul_rn(-1.0f, mem[i]));
      break;
    default: {           /* DGC: u' = m u + g (Nesterov m (u + g)), v' = v + u' (+ g) */
      float u = nesterov ? __fmul_rn(m, __fadd_rn(mom[i], gi)) : __fadd_rn(gi, __fmul_rn(m, mom[i]));
      a = nesterov ? __fadd_rn(__fadd_rn(mem[i], u), gi) : __fadd_rn(mem[i], u);
      next[i] = u;
      break;
    }
    }
    acc[i] = a;
    bad_acc |= nonfinite(a);
    bad_g |= nonfinite(gi);
  }
  if (__syncthreads_or(bad_acc) && threadIdx.x == 0)
    atomicOr(flags, BAD_ACC);
  if (__syncthreads_or(bad_g) && threadIdx.x == 0)
    atomicOr(flags, BAD_G);
}

/* The memory update from sent = C(acc) (ef.c after the message). */
__global__ void __launch_bounds__(BLOCK)
commit(int kind, int masking, size_t n, const float *acc, const float *sent, float *mem,
       float *mom)
{
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK) {
    switch (kind) {
    case GC_EF_BEFORE:
    case GC_EF_AFTER:    /* eps = acc + (-1)*C(acc) */
      mem[i] = __fadd_rn(acc[i], __fmul_rn(-1.0f, sent[i]));
      break;
    case GC_EF_EF21:     /* h = h + 1*c */
      mem[i] = __fadd_rn(mem[i], __fmul_rn(1.0f, sent[i]));
      break;
    case GC_EF_DGC:      /* masking: v = u = 0 where sent; else v = v' - C(v') */
      if (masking) {
        const bool drop = sent[i] != 0.0f;
        mem[i] = drop ? 0.0f : acc[i];
        if (drop)
          mom[i] = 0.0f;
      } else {
        mem[i] = __fsub_rn(acc[i], sent[i]);
      }
      break;
    default:
      break;
    }
  }
}

} /* namespace */

extern "C" gc_cuda_ef *gc_cuda_ef_alloc(gc_ef_kind kind, size_t n, const gc_ef_options *opt)
{
  if (n == 0)
    GC_ERROR_NULL("error-feedback memory of length 0", GC_EINVAL);
  if ((unsigned) kind > GC_EF_EF21)
    GC_ERROR_NULL("unknown error-feedback kind", GC_EINVAL);
  gc_ef_options o;
  if (opt)
    o = *opt;
  else
    gc_ef_options_default(&o);
  if (kind == GC_EF_DGC && !(o.momentum >= 0.0 && o.momentum < 1.0))
    GC_ERROR_NULL("DGC momentum must lie in [0,1)", GC_EINVAL);
  if (kind == GC_EF_EF21 && o.ef21_init != GC_EF21_INIT_COMPRESSED)
    GC_ERROR_NULL("EF21 with h^0 = gradient has no device twin (gc_ef_ef21_set)", GC_EUNSUP);
  if (o.workers == 0)
    o.workers = 1;
  gc_cuda_ef *e = (gc_cuda_ef *) calloc(1, sizeof *e);
  if (!e)
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  e->kind = kind;
  e->n = n;
  e->opt = o;
  float **bufs[] = {&e->d_acc, &e->d_sent, &e->d_mem, &e->d_mom, &e->d_next};
  size_t nbufs = kind == GC_EF_DGC ? 5 : kind == GC_EF_NONE ? 2 : 3;
  for (size_t b = 0; b < nbufs; b++) {
    cudaError_t err = cudaMalloc((void **) bufs[b], n * sizeof(float));
    if (err == cudaSuccess)
      err = cudaMemset(*bufs[b], 0, n * sizeof(float));
    if (err != cudaSuccess) {
      gc_cuda_ef_free(e);
      gc_errorf(__FILE__, __LINE__, GC_ECUDA, "error-feedback memory: %s",
                cudaGetErrorString(err));
      return NULL;
    }
  }
  return e;
}

extern "C" void gc_cuda_ef_free(gc_cuda_ef *e)
{
  if (!e)
    return;
  cudaFree(e->d_mem);
  cudaFree(e->d_mom);
  cudaFree(e->d_acc);
  cudaFree(e->d_sent);
  cudaFree(e->d_next);
  free(e);
}

extern "C" const float *gc_cuda_ef_memory(const gc_cuda_ef *e) { return e->d_mem; }
extern "C" const float *gc_cuda_ef_momentum(const gc_cuda_ef *e) { return e->d_mom; }
extern "C" const float *gc_cuda_ef_sent(const gc_cuda_ef *e) { return e->d_sent; }

extern "C" int gc_cuda_ef_step_sync(gc_cuda_ef *e, gc_compressor *c, void *d_tmp,
                                    size_t *tmp_bytes, const float *d_g, double lr,
                                    uint32_t step, uint8_t *d_buf, size_t cap, size_t *len,
                                    gc_compress_info *info, cudaStream_t stream)
{
  const size_t n = e->n;
  if (gc_compressor_n(c) != n)
    GC_ERRORF(GC_EBADLEN, "compressor length %zu differs from memory %zu", gc_compressor_n(c),
              n);
  size_t cbytes = 0, dbytes = 0;
  GC_TRY(gc_cuda_compress_f32(c, NULL, &cbytes, d_g, step, d_buf, cap, NULL, stream));
  GC_TRY(gc_cuda_decompress_add_f32(c, NULL, &dbytes, d_buf, 0, step, 1.0f, e->d_sent, NULL,
                                    stream));
  Carver cv(d_tmp);
  uint32_t *flags = cv.take<uint32_t>(1);
  float *clip = cv.take<float>(2);
  gc_cuda_info *d_info = cv.take<gc_cuda_info>(2);
  void *ctmp = cv.take<char>(cbytes);
  void *dtmp = cv.take<char>(dbytes);
  if (!d_tmp) {
    *tmp_bytes = cv.bytes();
    return GC_SUCCESS;
  }
  if (*tmp_bytes < cv.bytes())
    GC_ERRORF(GC_EINVAL, "error feedback: scratch of %zu bytes, %zu needed", *tmp_bytes,
              cv.bytes());
  const unsigned grid = grid_for(n, BLOCK * 4, 8192);
  GC_CUDA_TRY(cudaMemsetAsync(flags, 0, sizeof *flags, stream));
  const float *g = d_g;
  if (e->kind == GC_EF_DGC && e->opt.clip_norm > 0.0) {
    double thr = e->opt.clip_norm / sqrt((double) e->opt.workers);
    clip_factor<<<1, 1, 0, stream>>>(d_g, n, thr, clip);
    GC_CUDA_LAUNCHED();
    clip_apply<<<grid, BLOCK, 0, stream>>>(d_g, n, clip, e->d_next);
    GC_CUDA_LAUNCHED();
    g = e->d_next;   /* accumulate reads each g_i before it writes u'_i there */
  }
  accumulate<<<grid, BLOCK, 0, stream>>>((int) e->kind, g, n, (float) lr,
                                         (float) e->opt.momentum, e->opt.nesterov, e->d_mem,
                                         e->d_mom, e->d_acc, e->d_next, flags);
  GC_CUDA_LAUNCHED();
  GC_TRY(gc_cuda_compress_f32(c, ctmp, &cbytes, e->d_acc, step, d_buf, cap, d_info, stream));
  uint32_t h_flags = 0;
  GC_CUDA_TRY(cudaMemcpyAsync(&h_flags, flags, sizeof h_flags, cudaMemcpyDeviceToHost, stream));
  gc_cuda_info h_info;
  int st = gc_cuda_info_sync(d_info, &h_info, stream);
  if (st == GC_ECUDA)
    return st;
  /* NONE reports a bad g before anything else, as ef.c tests g first */
  if (h_flags & BAD_G)
    GC_ERROR("non-finite gradient", GC_EDOM);
  if (h_flags & BAD_ACC)
    GC_ERROR("error-feedback accumulator overflowed", GC_EDOM);
  if (st != GC_SUCCESS)
    GC_ERRORF(st, "%s: device compression failed", gc_compressor_type_of(c)->name);
  *len = (size_t) h_info.len;
  if (info) {
    info->nnz = h_info.nnz;
    info->selected = h_info.selected;
    info->loops = h_info.loops;
  }
  GC_CUDA_TRY(cudaMemsetAsync(e->d_sent, 0, n * sizeof(float), stream));
  GC_TRY(gc_cuda_decompress_add_f32(c, dtmp, &dbytes, d_buf, *len, step, 1.0f, e->d_sent,
                                    d_info + 1, stream));
  st = gc_cuda_info_sync(d_info + 1, &h_info, stream);
  if (st != GC_SUCCESS)   /* its own message must decode; the state is kept */
    GC_ERRORF(st, "%s: the device could not decode its own message",
              gc_compressor_type_of(c)->name);
  if (e->kind == GC_EF_DGC) {   /* u = u' */
    float *t = e->d_mom;
    e->d_mom = e->d_next;
    e->d_next = t;
  }
  commit<<<grid, BLOCK, 0, stream>>>((int) e->kind, e->opt.masking, n, e->d_acc, e->d_sent,
                                     e->d_mem, e->d_mom);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}
