/* bench_cuda.c -- `gradcomp bench compress --device cuda`: the CPU bench's
 * table for the GPU encoders (gc_cuda_compress_f32), timed with CUDA events
 * on one stream, each figure the median of --repeat runs after a warm-up.
 * It takes the CPU bench's options (gc_bench_parse): lists of d and
 * densities, --compressors, --repeat, --quick, plus --no-torch.
 *
 * Columns: compressor,d,density,threads,median_s,gbps,ratio_stream,ratio_memcpy
 *   threads       0 (one GPU; the columns are the CPU table's first eight)
 *   gbps          input bytes 4d / median_s / 1e9
 *   ratio_stream  median of a read-only streaming pass over x (the
 *                 deterministic norm kernel) / median_s
 *   ratio_memcpy  median of a device-to-device copy of x / median_s
 * Both baselines are measured in the same run on the same buffer, so the
 * ratios compare like with like.  Every compressor with a GPU encoder
 * (gc_cuda_supports: all but PowerSGD) gets a row, with the CPU bench's
 * parameters (qsgd: s = 4, one bucket; threshold: gc_bench_threshold), and
 * dense ones run once per d with density 0, as on the CPU.  When PyTorch
 * with CUDA is importable, a torch.topk row on the same vector follows
 * (optional, never required). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "gc_bench.h"
#include "gc_cli.h"
#include "gc_compressor.h"
#include "gc_cuda.h"
#include "gc_errno.h"
#include "gc_rng.h"

#define CMD "bench compress --device cuda"

#define GC_CHECK_CUDA(call)                                                  \
  do {                                                                       \
    cudaError_t e_ = (call);                                                 \
    if (e_ != cudaSuccess) {                                                 \
      fprintf(stderr, "gradcomp bench: %s:%d: %s: %s\n", __FILE__, __LINE__, \
              #call, cudaGetErrorString(e_));                                \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

/* torch.topk on the same vector (written to a raw file): median seconds,
 * or a negative value when PyTorch with CUDA is not usable. */
static double torch_topk(const float *h_x, size_t d, size_t k, int reps)
{
  const char *py = gc_cli_python_with(
      "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)");
  if (!py)
    return -1;
  char path[64];
  snprintf(path, sizeof path, "/tmp/gc-bench-cuda-%ld.f32", (long) getpid());
  FILE *f = fopen(path, "wb");
  if (!f)
    return -1;
  int ok = fwrite(h_x, sizeof *h_x, d, f) == d;
  ok &= fclose(f) == 0;
  if (!ok) {
    remove(path);
    return -1;
  }
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "'%s' -c \"import torch\n"
           "x = torch.from_file('%s', size=%zu, dtype=torch.float32).cuda()\n"
           "ts = []\n"
           "for r in range(%d):\n"
           "    a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)\n"
           "    a.record(); torch.topk(x.abs(), %zu, sorted=False); b.record(); b.synchronize()\n"
           "    ts.append(a.elapsed_time(b) * 1e-3)\n"
           "ts = sorted(ts[1:]); print(ts[len(ts) // 2])\"",
           py, path, d, reps + 1, k);
  FILE *p = popen(cmd, "r");
  double s = -1;
  if (p) {
    if (fscanf(p, "%lf", &s) != 1)
      s = -1;
    pclose(p);
  }
  remove(path);
  return s;
}

/* One d of the table: baselines, then every compressor x density. */
static int bench_d(const gc_bench_opts *o, size_t d, FILE *out, cudaStream_t st,
                   cudaEvent_t ev_a, cudaEvent_t ev_b, double *t, const char *gpu)
{
  int reps = o->repeat;
  float *h_x = malloc(d * sizeof *h_x);
  if (!h_x)
    return gc_cli_fail(CMD, 0, "out of memory for d = %zu", d);
  for (size_t i = 0; i < d; i++)
    h_x[i] = (float) gc_rng_normal(12345, 0, 0, i);
  float *d_x, *d_copy;
  double *d_sums;
  gc_cuda_info *d_info;
  GC_CHECK_CUDA(cudaMalloc((void **) &d_x, d * sizeof *d_x));
  GC_CHECK_CUDA(cudaMalloc((void **) &d_copy, d * sizeof *d_copy));
  GC_CHECK_CUDA(cudaMalloc((void **) &d_sums, 3 * sizeof *d_sums));
  GC_CHECK_CUDA(cudaMalloc((void **) &d_info, sizeof *d_info));
  GC_CHECK_CUDA(cudaMemcpy(d_x, h_x, d * sizeof *d_x, cudaMemcpyHostToDevice));

  /* one warm-up, then reps timed runs into t[] (seconds) */
#define TIME(stmt)                                                          \
  do {                                                                      \
    stmt;                                                                   \
    for (int r_ = 0; r_ < reps; r_++) {                                     \
      float ms_;                                                            \
      GC_CHECK_CUDA(cudaEventRecord(ev_a, st));                             \
      stmt;                                                                 \
      GC_CHECK_CUDA(cudaEventRecord(ev_b, st));                             \
      GC_CHECK_CUDA(cudaEventSynchronize(ev_b));                            \
      GC_CHECK_CUDA(cudaEventElapsedTime(&ms_, ev_a, ev_b));                \
      t[r_] = 1e-3 * ms_;                                                   \
    }                                                                       \
  } while (0)

  TIME(GC_CHECK_CUDA(cudaMemcpyAsync(d_copy, d_x, d * sizeof *d_x, cudaMemcpyDeviceToDevice, st)));
  double t_copy = gc_bench_median(t, reps);
  size_t norm_bytes = 0;
  void *d_norm_tmp = NULL;
  gc_cuda_norms_f32(NULL, &norm_bytes, d_x, d, NULL, NULL, NULL, st);
  GC_CHECK_CUDA(cudaMalloc(&d_norm_tmp, norm_bytes));
  TIME(if (gc_cuda_norms_f32(d_norm_tmp, &norm_bytes, d_x, d, d_sums, d_sums + 1, d_sums + 2, st))
         exit(gc_cli_fail(CMD, 1, "the streaming-read baseline failed")));
  double t_stream = gc_bench_median(t, reps);
  fprintf(stderr, "gradcomp bench: %s, d = %zu, %d repeats; copy %.3g GB/s\n",
          gpu, d, reps, 4.0 * (double) d / t_copy * 1e-9);

  int status = 0;
  for (size_t ri = 0; ri < o->ndensity; ri++) {
    double density = o->density[ri];
    for (size_t ti = 0; ti < o->ntypes; ti++) {
      const gc_compressor_type *T = o->types[ti];
      if (!gc_cuda_supports(T)) {
        if (o->named && ri == 0)
          fprintf(stderr, "gradcomp %s: %s has no GPU encoder (skipped)\n", CMD, T->name);
        continue;
      }
      /* dense compressors do not depend on the density: once per d */
      int sparse = (T->flags & GC_COMP_SPARSE) != 0;
      if (!sparse && ri > 0)
        continue;
      /* as the CPU bench runs them (qsgd: s = 4 and, by default, one bucket
       * of d entries, whose norm is a chain of d dependent adds on either
       * device) */
      gc_compressor_params p = o->comp.up;
      p.density = density;
      p.threshold = gc_bench_threshold(density);
      gc_compressor *c = gc_compressor_alloc(T, d, &p);
      if (!c) {
        status = gc_cli_fail(CMD, 1, "%s", T->name);
        continue;
      }
      size_t cap = gc_compressor_max_bytes(c), tmp = 0;
      uint8_t *d_buf;
      void *d_tmp;
      int rc = gc_cuda_compress_f32(c, NULL, &tmp, d_x, 0, NULL, cap, d_info, st);
      if (rc != GC_SUCCESS) {
        gc_compressor_free(c);
        status = gc_cli_fail(CMD, rc, "%s", T->name);
        continue;
      }
      GC_CHECK_CUDA(cudaMalloc((void **) &d_buf, cap));
      GC_CHECK_CUDA(cudaMalloc(&d_tmp, tmp ? tmp : 1));
      TIME(rc |= gc_cuda_compress_f32(c, d_tmp, &tmp, d_x, 0, d_buf, cap, d_info, st));
      gc_cuda_info h_info;
      rc |= gc_cuda_info_sync(d_info, &h_info, st);
      if (rc) {
        status = gc_cli_fail(CMD, rc, "%s failed", T->name);
      } else {
        double m = gc_bench_median(t, reps);
        fprintf(out, "%s,%zu,%g,0,%.6g,%.4g,%.4g,%.4g\n", T->name, d, sparse ? density : 0.0,
                m, 4.0 * (double) d / m * 1e-9, t_stream / m, t_copy / m);
        fflush(out);
      }
      cudaFree(d_tmp);
      cudaFree(d_buf);
      gc_compressor_free(c);
    }
    if (o->torch) {
      size_t k = (size_t) (density * (double) d);
      double ts = torch_topk(h_x, d, k ? k : 1, reps);
      if (ts > 0)
        fprintf(out, "torch.topk,%zu,%g,0,%.6g,%.4g,%.4g,%.4g\n", d, density, ts,
                4.0 * (double) d / ts * 1e-9, t_stream / ts, t_copy / ts);
      else
        fprintf(stderr, "gradcomp bench: PyTorch with CUDA not importable; no torch.topk row\n");
    }
  }
#undef TIME
  cudaFree(d_norm_tmp);
  cudaFree(d_info);
  cudaFree(d_sums);
  cudaFree(d_copy);
  cudaFree(d_x);
  free(h_x);
  return status;
}

int gc_bench_compress_cuda(int argc, char **argv)
{
  gc_bench_opts o = { .d = {25e6}, .nd = 1, .density = {0.001}, .ndensity = 1,
                      .repeat = 20, .torch = 1 };
  int status = gc_bench_parse(CMD, gc_bench_compress_usage, argc, argv, &o);
  if (status >= 0)
    return status;
  char why[256];
  if (gc_cuda_available(why, sizeof why) != GC_SUCCESS)
    return gc_cli_fail(CMD, 0, "no CUDA device visible (%s)", why);
  struct cudaDeviceProp prop;
  int dev = 0;
  GC_CHECK_CUDA(cudaGetDevice(&dev));
  GC_CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));

  FILE *out = stdout;
  if (o.csv && !(out = fopen(o.csv, "w")))
    return gc_cli_fail(CMD, 0, "cannot write %s", o.csv);
  double *t = malloc((size_t) o.repeat * sizeof *t);
  if (!t)
    return gc_cli_fail(CMD, 0, "out of memory");
  cudaStream_t st;
  cudaEvent_t a, b;
  GC_CHECK_CUDA(cudaStreamCreate(&st));
  GC_CHECK_CUDA(cudaEventCreate(&a));
  GC_CHECK_CUDA(cudaEventCreate(&b));
  fprintf(out, "compressor,d,density,threads,median_s,gbps,ratio_stream,ratio_memcpy\n");
  status = 0;
  for (size_t di = 0; di < o.nd; di++)
    status |= bench_d(&o, (size_t) o.d[di], out, st, a, b, t, prop.name);
  if (out != stdout)
    fclose(out);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(st);
  free(t);
  return status;
}
