/* bench_cuda.c -- `gradcomp bench compress --device cuda`: the CPU bench's
 * table for the GPU encoders (gc_cuda_compress_f32), timed with CUDA events
 * on one stream, each figure the median of --reps runs after a warm-up.
 *
 * Columns: compressor,d,density,threads,median_s,gbps,ratio_stream,ratio_memcpy
 *   threads       0 (one GPU; the column keeps the CPU table's shape)
 *   gbps          input bytes 4d / median_s / 1e9
 *   ratio_stream  median of a read-only streaming pass over x (the
 *                 deterministic norm kernel) / median_s
 *   ratio_memcpy  median of a device-to-device copy of x / median_s
 * Both baselines are measured in the same run on the same buffer, so the
 * ratios compare like with like.  Every compressor with a GPU encoder
 * (gc_cuda_supports: all but PowerSGD) gets a row, with the CPU bench's
 * parameters where they matter (qsgd: s = 4, one bucket).  When PyTorch
 * with CUDA is importable, a torch.topk row on the same vector follows
 * (optional, never required). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

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

static int cmp_float(const void *a, const void *b)
{
  float x = *(const float *) a, y = *(const float *) b;
  return (x > y) - (x < y);
}

typedef struct timer {
  cudaEvent_t a, b;
  float *ms;
  int reps;
} timer;

static double median_s(timer *t)
{
  qsort(t->ms, (size_t) t->reps, sizeof *t->ms, cmp_float);
  return t->ms[t->reps / 2] * 1e-3;
}

static void usage(FILE *out)
{
  fprintf(out, "usage: gradcomp bench compress --device cuda [--csv FILE] [--d N]\n"
               "       [--density R] [--reps N] [--no-torch]\n"
               "Times every compressor with a GPU encoder on one vector of length d\n"
               "(default 25000000, density 0.001, 20 reps); ratios are against a\n"
               "device-to-device copy and a streaming read measured in the same run.\n");
}

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

int gc_bench_compress_cuda(int argc, char **argv)
{
  const char *csv = NULL;
  size_t d = 25000000, reps = 20;
  double density = 0.001;
  int use_torch = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--device") && has) {
      i++;
    } else if (!strcmp(a, "--csv") && has) {
      csv = argv[++i];
    } else if (!strcmp(a, "--d") && has) {
      if (gc_cli_size(CMD, a, argv[++i], &d))
        return 2;
    } else if (!strcmp(a, "--reps") && has) {
      if (gc_cli_size(CMD, a, argv[++i], &reps))
        return 2;
    } else if (!strcmp(a, "--density") && has) {
      if (gc_cli_double(CMD, a, argv[++i], &density))
        return 2;
    } else if (!strcmp(a, "--no-torch")) {
      use_torch = 0;
    } else {
      fprintf(stderr, "gradcomp bench: unknown or incomplete option '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (d < 1 || d >= ((size_t) 1 << 32) || reps < 1 || reps > 100000 ||
      !(density > 0 && density <= 1)) {
    fprintf(stderr, "gradcomp bench: need 1 <= d < 2^32, 1 <= reps, 0 < density <= 1\n");
    return 2;
  }
  char why[256];
  if (gc_cuda_available(why, sizeof why) != GC_SUCCESS) {
    fprintf(stderr, "gradcomp bench: no CUDA device visible (%s)\n", why);
    return 1;
  }
  struct cudaDeviceProp prop;
  int dev = 0;
  GC_CHECK_CUDA(cudaGetDevice(&dev));
  GC_CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));

  FILE *out = stdout;
  if (csv && !(out = fopen(csv, "w"))) {
    fprintf(stderr, "gradcomp bench: cannot write %s\n", csv);
    return 1;
  }
  float *h_x = malloc(d * sizeof *h_x);
  if (!h_x) {
    fprintf(stderr, "gradcomp bench: out of memory for d = %zu\n", d);
    return 1;
  }
  for (size_t i = 0; i < d; i++)
    h_x[i] = (float) gc_rng_normal(12345, 0, 0, i);

  cudaStream_t st;
  GC_CHECK_CUDA(cudaStreamCreate(&st));
  float *d_x, *d_copy;
  double *d_sums;
  gc_cuda_info *d_info;
  GC_CHECK_CUDA(cudaMalloc((void **) &d_x, d * sizeof *d_x));
  GC_CHECK_CUDA(cudaMalloc((void **) &d_copy, d * sizeof *d_copy));
  GC_CHECK_CUDA(cudaMalloc((void **) &d_sums, 3 * sizeof *d_sums));
  GC_CHECK_CUDA(cudaMalloc((void **) &d_info, sizeof *d_info));
  GC_CHECK_CUDA(cudaMemcpy(d_x, h_x, d * sizeof *d_x, cudaMemcpyHostToDevice));

  timer t;
  t.reps = (int) reps;
  t.ms = malloc(reps * sizeof *t.ms);
  GC_CHECK_CUDA(cudaEventCreate(&t.a));
  GC_CHECK_CUDA(cudaEventCreate(&t.b));

#define TIME(stmt)                                                          \
  do {                                                                      \
    stmt;                                                                   \
    for (size_t r_ = 0; r_ < reps; r_++) {                                  \
      GC_CHECK_CUDA(cudaEventRecord(t.a, st));                              \
      stmt;                                                                 \
      GC_CHECK_CUDA(cudaEventRecord(t.b, st));                              \
      GC_CHECK_CUDA(cudaEventSynchronize(t.b));                             \
      GC_CHECK_CUDA(cudaEventElapsedTime(&t.ms[r_], t.a, t.b));             \
    }                                                                       \
  } while (0)

  TIME(GC_CHECK_CUDA(cudaMemcpyAsync(d_copy, d_x, d * sizeof *d_x, cudaMemcpyDeviceToDevice, st)));
  double t_copy = median_s(&t);
  size_t norm_bytes = 0;
  void *d_norm_tmp = NULL;
  gc_cuda_norms_f32(NULL, &norm_bytes, d_x, d, NULL, NULL, NULL, st);
  GC_CHECK_CUDA(cudaMalloc(&d_norm_tmp, norm_bytes));
  TIME(if (gc_cuda_norms_f32(d_norm_tmp, &norm_bytes, d_x, d, d_sums, d_sums + 1, d_sums + 2, st))
         exit(1));
  double t_stream = median_s(&t);

  fprintf(stderr, "gradcomp bench: %s, d = %zu, density %g, %zu reps; copy %.3g GB/s\n",
          prop.name, d, density, reps, 4.0 * (double) d / t_copy * 1e-9);
  fprintf(out, "compressor,d,density,threads,median_s,gbps,ratio_stream,ratio_memcpy\n");
  int status = 0;
  for (const gc_compressor_type *const *T = gc_compressor_types(); *T; T++) {
    if (!gc_cuda_supports(*T))
      continue;
    gc_compressor_params p;
    gc_compressor_params_default(&p);
    p.density = density;
    p.threshold = 3.0;   /* about 0.27% of N(0,1) entries */
    /* qsgd as the CPU bench runs it: s = 4, one bucket of d entries, whose
     * norm is a chain of d dependent adds on either device */
    p.levels = 4;
    gc_compressor *c = gc_compressor_alloc(*T, d, &p);
    if (!c) {
      status = 1;
      continue;
    }
    size_t cap = gc_compressor_max_bytes(c), tmp = 0;
    uint8_t *d_buf;
    void *d_tmp;
    if (gc_cuda_compress_f32(c, NULL, &tmp, d_x, 0, NULL, cap, d_info, st) != GC_SUCCESS) {
      gc_compressor_free(c);
      status = 1;
      continue;
    }
    GC_CHECK_CUDA(cudaMalloc((void **) &d_buf, cap));
    GC_CHECK_CUDA(cudaMalloc(&d_tmp, tmp ? tmp : 1));
    int rc = 0;
    TIME(rc |= gc_cuda_compress_f32(c, d_tmp, &tmp, d_x, 0, d_buf, cap, d_info, st));
    gc_cuda_info h_info;
    rc |= gc_cuda_info_sync(d_info, &h_info, st);
    if (rc) {
      fprintf(stderr, "gradcomp bench: %s failed: %s\n", (*T)->name, gc_last_error());
      status = 1;
    } else {
      double m = median_s(&t);
      fprintf(out, "%s,%zu,%g,0,%.6g,%.4g,%.4g,%.4g\n", (*T)->name, d, density, m,
              4.0 * (double) d / m * 1e-9, t_stream / m, t_copy / m);
    }
    cudaFree(d_tmp);
    cudaFree(d_buf);
    gc_compressor_free(c);
  }
  if (use_torch) {
    size_t k = (size_t) (density * (double) d);
    double ts = torch_topk(h_x, d, k ? k : 1, (int) reps);
    if (ts > 0)
      fprintf(out, "torch.topk,%zu,%g,0,%.6g,%.4g,%.4g,%.4g\n", d, density, ts,
              4.0 * (double) d / ts * 1e-9, t_stream / ts, t_copy / ts);
    else
      fprintf(stderr, "gradcomp bench: PyTorch with CUDA not importable; no torch.topk row\n");
  }
  if (out != stdout)
    fclose(out);
  cudaFree(d_norm_tmp);
  cudaFree(d_info);
  cudaFree(d_sums);
  cudaFree(d_copy);
  cudaFree(d_x);
  cudaEventDestroy(t.a);
  cudaEventDestroy(t.b);
  cudaStreamDestroy(st);
  free(t.ms);
  free(h_x);
  return status;
}
