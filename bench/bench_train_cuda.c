/* bench_train_cuda.c -- `gradcomp bench train --device cuda`: training
 * throughput on one GPU, in images per second, of P simulated workers with
 * B examples each (default P = 20, B = 100: 2000 images a step), for dense
 * SGD and the unidirectional and bidirectional top-K methods, each step
 * being what `gradcomp train --device cuda` does: the P workers' forward
 * and backward passes in one call (gc_cuda_nn), then the algorithm's step
 * (gc_cuda_sim: error feedback, compression, decoding and the server on
 * the device; --step cpu: the gradients copied to the host and gc_sim).
 * Inputs are random images of the model's shape (throughput does not
 * depend on the data).  When a Python with torch and CUDA is found, the
 * same models run in PyTorch on the same GPU in the same invocation, with
 * a plain top-K step: each worker's forward/backward in turn, its gradient
 * flattened, error feedback, torch.topk of |acc|, the P messages averaged
 * and applied; float32 without TF32 on both sides.
 * Columns: model,algorithm,step,workers,batch,ms_per_step,ms_compute,
 *          images_per_s,ratio_to_dense */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "gc_algo.h"
#include "gc_bench.h"
#include "gc_cli.h"
#include "gc_cuda.h"
#include "gc_cuda_nn.h"
#include "gc_cuda_sim.h"
#include "gc_errno.h"
#include "gc_train.h"
#include "gc_npy.h"
#include "gc_rng.h"

#define CMD "bench train --device cuda"

static const char torch_gpu_script[] =
  "import sys, time, torch, torch.nn as nn, torch.nn.functional as F\n"
  "torch.backends.cuda.matmul.allow_tf32 = False; torch.backends.cudnn.allow_tf32 = False\n"
  GC_BENCH_TORCH_MODELS
  "name, algo, P, B, steps, rho = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])\n"
  "dev = 'cuda'; m = M[name]().to(dev); m.train()\n"
  "shape = (3,32,32) if name=='cifar-vgg19' else (1,28,28)\n"
  "x = torch.randn((P,B)+shape, device=dev); y = torch.randint(0,10,(P,B), device=dev)\n"
  "ps = list(m.parameters()); d = sum(p.numel() for p in ps); k = max(1, int(rho*d)); lr = 0.01\n"
  "mem = [torch.zeros(d, device=dev) for _ in range(P)] if algo != 'sgd' else None\n"
  "def step():\n"
  "  agg = torch.zeros(d, device=dev)\n"
  "  for p in range(P):\n"
  "    for q in ps: q.grad = None\n"
  "    o = m(x[p]); l = F.cross_entropy(o, y[p]) if name=='cifar-vgg19' else F.nll_loss(o, y[p]); l.backward()\n"
  "    g = torch.cat([q.grad.reshape(-1) for q in ps])\n"
  "    if mem is None: agg += g; continue\n"
  "    acc = mem[p] + lr*g; idx = torch.topk(acc.abs(), k, sorted=False).indices\n"
  "    msg = torch.zeros_like(acc); msg[idx] = acc[idx]; mem[p] = acc - msg; agg += msg\n"
  "  agg /= P\n"
  "  if mem is None: agg *= lr\n"
  "  with torch.no_grad():\n"
  "    o = 0\n"
  "    for q in ps: n = q.numel(); q -= agg[o:o+n].view_as(q); o += n\n"
  "step(); step(); torch.cuda.synchronize(); t = time.perf_counter()\n"
  "for _ in range(steps): step()\n"
  "torch.cuda.synchronize(); s = (time.perf_counter()-t)/steps\n"
  "print('%.6f' % s)\n";

typedef struct bench {
  size_t P, B, steps;
  double seconds;           /* > 0: steps from the warm-up's time instead */
  double density;
  int on_device;            /* the step: gc_cuda_sim (1) or gc_sim (0)   */
} bench;

/* A table line to stdout (at once) and to the CSV. */
static void emit(const char *line, FILE *out)
{
  fputs(line, stdout);
  fflush(stdout);
  if (out)
    fputs(line, out);
}

/* One row: images/s from the seconds per step, and over dense_ips (the
 * same side's sgd); s_comp NAN leaves ms_compute empty. */
static void emit_row(FILE *out, const char *model, const char *algo, const char *who,
                     const bench *b, double s_step, double s_comp, double dense_ips)
{
  char line[256], comp[32] = "";
  double ips = (double) (b->P * b->B) / s_step;
  if (isfinite(s_comp))
    snprintf(comp, sizeof comp, "%.3f", s_comp * 1e3);
  snprintf(line, sizeof line, "%s,%s,%s,%zu,%zu,%.3f,%s,%.1f,%.3f\n", model, algo, who,
           b->P, b->B, s_step * 1e3, comp, ips, ips / dense_ips);
  emit(line, out);
}

/* One model, one algorithm: median seconds per step and of the compute. */
static int time_algo(const bench *b, gc_cuda_nn *nn, const char *model,
                     const char *algo, const float *h_w0, float *d_stats,
                     const float *d_x, const uint8_t *d_y, double *d_loss,
                     float *d_grads, float *h_grads, double *s_step,
                     double *s_comp)
{
  size_t d = gc_cuda_nn_nparams(nn), P = b->P;
  gc_algo_config a;
  gc_algo_config_default(&a);
  if (gc_algo_by_name(algo, &a.kind))
    return gc_cli_fail(CMD, GC_EINVAL, "%s", algo);
  a.workers = P;
  a.n = d;
  a.dtype = GC_F32;
  a.up = a.down = gc_compressor_topk;
  a.up_params.density = a.down_params.density = b->density;
  gc_cuda_sim *gs = NULL;
  gc_sim *cs = NULL;
  float *d_point = NULL;
  if (b->on_device) {
    if (!(gs = gc_cuda_sim_alloc(&a, h_w0)))
      return gc_cli_fail(CMD, gc_last_error_code(), "%s %s: step", model, algo);
  } else {
    if (!(cs = gc_sim_alloc(&a, h_w0)))
      return gc_cli_fail(CMD, gc_last_error_code(), "%s %s: step", model, algo);
    gc_sim_set_threads(cs, (size_t) sysconf(_SC_NPROCESSORS_ONLN));
    if (cudaMalloc((void **) &d_point, d * sizeof *d_point) != cudaSuccess) {
      gc_sim_free(cs);
      return gc_cli_fail(CMD, GC_ECUDA, "out of device memory");
    }
  }
  int st = GC_SUCCESS;
  enum { MAX_STEPS = 1000 };
  size_t steps = b->seconds > 0 ? MAX_STEPS : b->steps, runs = steps + 2;
  double *ts = malloc(runs * sizeof *ts), *tc = malloc(runs * sizeof *tc);
  const void **gp = malloc(P * sizeof *gp);
  if (!ts || !tc || !gp)
    st = GC_ENOMEM;
  for (size_t p = 0; st == GC_SUCCESS && p < P; p++)
    gp[p] = h_grads + p * d;
  for (size_t r = 0; r < runs && st == GC_SUCCESS; r++) {
    double t0 = gc_cli_now();
    const float *pt = d_point;
    if (gs) {
      pt = gc_cuda_sim_point(gs);
    } else if (cudaMemcpy(d_point, gc_sim_point(cs), d * sizeof *d_point,
                          cudaMemcpyHostToDevice) != cudaSuccess) {
      st = GC_ECUDA;
      break;
    }
    st = gc_cuda_nn_grads(nn, pt, d_stats, d_x, d_y, P, b->B, 1, 1, 0,
                          (uint32_t) r, d_loss, d_grads, 0);
    if (st == GC_SUCCESS && cudaDeviceSynchronize() != cudaSuccess)
      st = GC_ECUDA;
    double t1 = gc_cli_now();
    if (st == GC_SUCCESS && gs)
      st = gc_cuda_sim_step(gs, d_grads, 0.01);
    if (st == GC_SUCCESS && cs) {
      if (cudaMemcpy(h_grads, d_grads, P * d * sizeof *h_grads,
                     cudaMemcpyDeviceToHost) != cudaSuccess)
        st = GC_ECUDA;
      else
        st = gc_sim_step(cs, gp, 0.01);
    }
    if (st == GC_SUCCESS && cudaDeviceSynchronize() != cudaSuccess)
      st = GC_ECUDA;
    ts[r] = gc_cli_now() - t0;
    tc[r] = t1 - t0;
    if (r == 1 && b->seconds > 0) {   /* --seconds: as many as fit, 3 or more */
      double n = ts[1] > 0 ? b->seconds / ts[1] : MAX_STEPS;
      steps = n < 3 ? 3 : n > MAX_STEPS ? MAX_STEPS : (size_t) n;
      runs = steps + 2;
    }
  }
  if (st == GC_SUCCESS) {
    /* the first two steps are warm-up (allocation, cuBLAS heuristics) */
    *s_step = gc_bench_median(ts + 2, (int) steps);
    *s_comp = gc_bench_median(tc + 2, (int) steps);
  } else {
    gc_cli_fail(CMD, st, "%s %s failed", model, algo);
  }
  free(ts);
  free(tc);
  free(gp);
  gc_cuda_sim_free(gs);
  gc_sim_free(cs);
  cudaFree(d_point);
  return st == GC_SUCCESS ? 0 : 1;
}

/* The PyTorch twin: seconds per step, or NAN. */
static double torch_step(const char *py, const char *script, const char *model,
                         const char *algo, const bench *b)
{
  char cmd[1024], line[512] = "";
  snprintf(cmd, sizeof cmd, "'%s' %s %s %s %zu %zu %zu %g 2>/dev/null", py, script,
           model, algo, b->P, b->B, b->steps, b->density);
  FILE *p = popen(cmd, "r");
  if (!p)
    return NAN;
  if (!fgets(line, sizeof line, p))
    line[0] = 0;
  pclose(p);
  char *end;
  double s = strtod(line, &end);
  return end == line ? NAN : s;
}

int gc_bench_train_cuda(int argc, char **argv)
{
  bench b = { .P = 20, .B = 100, .steps = 10, .density = 0.001, .on_device = 1 };
  const char *csv = NULL, *models = "mnist-cnn,cifar-vgg19";
  int peer = 1;
  gc_cli_args args = GC_CLI_ARGS(CMD, "", gc_bench_train_usage, argc, argv);
  static const char *const flags[] = { "--no-peer", NULL };
  args.flags = flags;
  const char *o, *v;
  while (gc_cli_next(&args, &o, &v)) {
    if (!strcmp(o, "--no-peer"))
      peer = 0;
    else if (!strcmp(o, "--csv"))
      csv = v;
    else if (!strcmp(o, "--models") || !strcmp(o, "--model"))
      models = v;
    else if (!strcmp(o, "--seconds")) {
      if (gc_cli_double(CMD, o, v, &b.seconds))
        return 2;
      if (!(b.seconds > 0))
        return gc_cli_usage_error(CMD, "--seconds must be > 0");
    }
    else if (!strcmp(o, "--workers") || !strcmp(o, "--batch") || !strcmp(o, "--steps")) {
      size_t *dst = !strcmp(o, "--workers") ? &b.P : !strcmp(o, "--batch") ? &b.B : &b.steps;
      if (gc_cli_size(CMD, o, v, dst))
        return 2;
      if (*dst == 0)
        return gc_cli_usage_error(CMD, "%s must be at least 1", o);
    } else if (!strcmp(o, "--density")) {
      /* the compressor options' --density (cli/compopt.c), alone */
      gc_cli_comp comp = { .take = GC_CLI_P_DENSITY };
      gc_compressor_params_default(&comp.up);
      int r = gc_cli_compressor_option(&args, o, v, &comp);
      if (r != GC_CLI_TAKEN)
        return r;
      b.density = comp.up.density;
    } else if (!strcmp(o, "--step")) {
      if (strcmp(v, "cuda") && strcmp(v, "cpu"))
        return gc_cli_usage_error(CMD, "--step must be cuda or cpu, not '%s'", v);
      b.on_device = !strcmp(v, "cuda");
    } else {
      return gc_cli_unknown(&args, o);
    }
  }
  if (args.exit >= 0)
    return args.exit;
  char list[512];
  snprintf(list, sizeof list, "%s", models);
  for (char *s = list, *m; (m = strtok(s, ",")); s = NULL)
    if (!gc_nn_model_dataset(m))
      return gc_cli_usage_error(CMD, "unknown model '%s'", m);
  char why[256];
  if (gc_cuda_available(why, sizeof why) != GC_SUCCESS)
    return gc_cli_fail(CMD, 0, "no CUDA device visible (%s)", why);
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
    return gc_cli_fail(CMD, GC_ECUDA, "cannot read the device's properties");

  const char *py = peer ? gc_cli_python_with(
      "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)") : NULL;
  char script[128] = "";
  if (py) {
    snprintf(script, sizeof script, "/tmp/gc-bench-torch-gpu-%ld.py", (long) getpid());
    FILE *f = fopen(script, "w");
    int ok = f && fputs(torch_gpu_script, f) >= 0;
    if (f && fclose(f) != 0)
      ok = 0;
    if (!ok)
      py = NULL;
  }
  FILE *out = csv ? fopen(csv, "w") : NULL;
  if (csv && !out)
    return gc_cli_fail(CMD, 0, "cannot write %s", csv);
  printf("# %s; P = %zu workers x B = %zu examples per step; top-K density %g;"
         " step on the %s; float32 (no TF32)\n", prop.name, b.P, b.B, b.density,
         b.on_device ? "GPU (gc_cuda_sim)" : "CPU (gc_sim)");
  if (!py)
    printf("# torch with CUDA: not available (set GRADCOMP_PYTHON)\n");
  const char *hdr = "model,algorithm,step,workers,batch,ms_per_step,ms_compute,"
                    "images_per_s,ratio_to_dense\n";
  emit(hdr, out);
  static const char *const algos[] = { "sgd", "uni", "bi" };
  int status = 0;
  snprintf(list, sizeof list, "%s", models);
  for (char *s = list, *model; (model = strtok(s, ",")); s = NULL) {
    gc_cuda_nn *nn = gc_cuda_nn_alloc(model, b.P, b.B);
    gc_nn *cpu = gc_nn_alloc_model(model, 1);
    if (!nn || !cpu) {
      gc_cuda_nn_free(nn);
      gc_nn_free(cpu);
      status = gc_cli_fail(CMD, gc_last_error_code(), "%s: cannot build", model);
      continue;
    }
    size_t d = gc_cuda_nn_nparams(nn), ns = gc_cuda_nn_nstats(nn);
    size_t nin = b.P * b.B * gc_cuda_nn_in_dim(nn);
    float *h_w = malloc(d * sizeof *h_w), *h_x = malloc(nin * sizeof *h_x);
    float *h_st = calloc(b.P * ns + 1, sizeof *h_st);
    float *h_grads = b.on_device ? NULL : malloc(b.P * d * sizeof *h_grads);
    uint8_t *h_y = malloc(b.P * b.B);
    float *d_x = NULL, *d_grads = NULL, *d_stats = NULL;
    uint8_t *d_y = NULL;
    double *d_loss = NULL;
    int ok = h_w && h_x && h_st && h_y && (h_grads || b.on_device);
    if (ok) {
      gc_nn_init(cpu, h_w, h_st, 1);
      for (size_t p = 1; p < b.P; p++)
        memcpy(h_st + p * ns, h_st, ns * sizeof *h_st);
      for (size_t i = 0; i < nin; i++)
        h_x[i] = (float) gc_rng_normal(2, 0, 0, i);
      for (size_t i = 0; i < b.P * b.B; i++)
        h_y[i] = (uint8_t) (i % 10);
      ok = cudaMalloc((void **) &d_x, nin * sizeof *d_x) == cudaSuccess &&
           cudaMalloc((void **) &d_y, b.P * b.B) == cudaSuccess &&
           cudaMalloc((void **) &d_stats, (b.P * ns + 1) * sizeof *d_stats) == cudaSuccess &&
           cudaMalloc((void **) &d_loss, b.P * sizeof *d_loss) == cudaSuccess &&
           cudaMalloc((void **) &d_grads, b.P * d * sizeof *d_grads) == cudaSuccess &&
           cudaMemcpy(d_x, h_x, nin * sizeof *d_x, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(d_y, h_y, b.P * b.B, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(d_stats, h_st, (b.P * ns + 1) * sizeof *d_stats,
                      cudaMemcpyHostToDevice) == cudaSuccess;
    }
    if (!ok) {
      status = gc_cli_fail(CMD, GC_ENOMEM, "%s: out of host or device memory", model);
    } else {
      fprintf(stderr, "gradcomp bench: %s, d = %zu\n", model, d);
      /* each side's ratio is to its own dense (sgd, the first) row */
      double dense = NAN, tdense = NAN;
      for (size_t ai = 0; ai < 3; ai++) {
        double s_step = NAN, s_comp = NAN;
        if (time_algo(&b, nn, model, algos[ai], h_w, d_stats, d_x, d_y, d_loss,
                      d_grads, h_grads, &s_step, &s_comp)) {
          status = 1;
          continue;
        }
        if (ai == 0)
          dense = (double) (b.P * b.B) / s_step;
        emit_row(out, model, algos[ai], b.on_device ? "gradcomp-gpu" : "gradcomp-cpu", &b,
                 s_step, s_comp, dense);
      }
      for (size_t ai = 0; py && ai < 3; ai++) {
        double sec = torch_step(py, script, model, algos[ai], &b);
        if (!isfinite(sec)) {
          fprintf(stderr, "gradcomp bench: the torch peer failed on %s %s\n", model,
                  algos[ai]);
          continue;
        }
        if (ai == 0)
          tdense = (double) (b.P * b.B) / sec;
        emit_row(out, model, algos[ai], "torch", &b, sec, NAN, tdense);
      }
    }
    cudaFree(d_x); cudaFree(d_y); cudaFree(d_stats); cudaFree(d_loss); cudaFree(d_grads);
    free(h_w); free(h_x); free(h_st); free(h_y); free(h_grads);
    gc_nn_free(cpu);
    gc_cuda_nn_free(nn);
  }
  if (py)
    remove(script);
  if (out && gc_cli_csv_close(CMD, out, csv))
    status = 1;
  return status;
}
