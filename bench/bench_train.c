/* bench_train.c -- `gradcomp bench train`: milliseconds per worker step
 * (forward + backward + top-K compression of the gradient at density
 * 0.001) of each reference model at batch 10 and 64, on T threads (1 by
 * default).  Ours uses threads as training does: T workers step in
 * parallel, each on its own thread, and a step's time is the wall time
 * over the steps done (the median of BLOCKS timed blocks).  When a Python
 * with torch is found ($GRADCOMP_PYTHON, else python3 on the PATH, else
 * /usr/bin/python3, where Debian's python3-torch lives), the same models
 * run in PyTorch with torch.set_num_threads(T), timed the same way in the
 * same invocation, and the ratio ours/torch is printed; it is an optional
 * peer, never a dependency.
 * Reports the OpenBLAS kernel of both sides. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gc_bench.h"
#include "gc_cli.h"
#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_nn.h"
#include "gc_rng.h"

/* Each side times BLOCKS blocks of reps steps after one warm-up step and
 * reports the median block: a single block let one slow stretch of the
 * machine (or of torch's allocator) decide a row; on one thread torch's
 * MNIST-CNN batch-64 step ranged 46-70 ms from run to run. */
#define BLOCKS 3
#define STR(x) #x
#define XSTR(x) STR(x)

/* PyTorch twins of the models (same shapes), timed like ours. */
static const char torch_script[] =
  "import sys, time, torch, torch.nn as nn, torch.nn.functional as F\n"
  "BLOCKS = " XSTR(BLOCKS) "\n"
  "torch.set_num_threads(int(sys.argv[4]) if len(sys.argv) > 4 else 1)\n"
  GC_BENCH_TORCH_MODELS
  "name, B, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])\n"
  "if name == '--info':\n"
  "  a = torch.randn(64,64); a @ a\n"
  "  libs = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'blas' in l})\n"
  "  print('torch', torch.__version__, 'BLAS:', ' '.join(libs) or 'built in'); sys.exit()\n"
  "m = M[name](); m.train()\n"
  "shape = (B,3,32,32) if name=='cifar-vgg19' else (B,1,28,28)\n"
  "x = torch.randn(shape); y = torch.randint(0,10,(B,))\n"
  "ps = list(m.parameters()); d = sum(p.numel() for p in ps); k = max(1, int(0.001*d))\n"
  "def step():\n"
  "  m.zero_grad(); o = m(x)\n"
  "  l = F.nll_loss(o,y) if name!='cifar-vgg19' else F.cross_entropy(o,y)\n"
  "  l.backward(); g = torch.cat([p.grad.reshape(-1) for p in ps]); torch.topk(g.abs(), k)\n"
  "step()\n"
  "ms = []\n"
  "for _ in range(BLOCKS):\n"
  "  t = time.perf_counter()\n"
  "  for _ in range(reps): step()\n"
  "  ms.append((time.perf_counter()-t)/reps*1e3)\n"
  "print(sorted(ms)[len(ms)//2])\n";

/* libgomp's spin rounds for the torch peer: the caller's GOMP_SPINCOUNT,
 * else 3000.  Torch's OpenMP threads beside its OpenBLAS pool ran its
 * 2-thread steps up to 3x slower with libgomp's 300000 (MNIST-MLP batch
 * 64: 1.55 ms against 0.49). */
static const char *torch_spin(void)
{
  const char *v = getenv("GOMP_SPINCOUNT");
  return v && v[0] && strspn(v, "0123456789") == strlen(v) ? v : "3000";
}

/* Run the torch script; its first output line, or "" on failure. */
static void torch_run(const char *py, const char *script, const char *args,
                      int threads, char *line, size_t cap)
{
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=%d GOMP_SPINCOUNT=%s '%s' %s %s %d 2>/dev/null",
           threads, torch_spin(), py, script, args, threads);
  line[0] = 0;
  FILE *p = popen(cmd, "r");
  if (!p)
    return;
  if (!fgets(line, (int) cap, p))
    line[0] = 0;
  line[strcspn(line, "\n")] = 0;
  pclose(p);
}

static double torch_ms(const char *py, const char *script, const char *model,
                       size_t B, int reps, int threads)
{
  char args[128], line[256];
  snprintf(args, sizeof args, "%s %zu %d", model, B, reps);
  torch_run(py, script, args, threads, line, sizeof line);
  char *end;
  double v = strtod(line, &end);
  return end == line ? NAN : v;
}

/* One worker step: forward, loss, backward, top-K message of the gradient. */
static void step(gc_nn *nn, const float *w, float *st, const float *x,
                 const uint8_t *y, size_t B, float *g, gc_compressor *c,
                 uint8_t *buf, size_t cap, uint32_t t)
{
  size_t len;
  gc_nn_forward(nn, w, st, x, B, 1, 1, 0, t);
  gc_nn_loss(nn, y);
  gc_nn_backward(nn, w, NULL, g, NULL);
  gc_compress_f32(c, g, t, buf, cap, &len, NULL);
}

void gc_bench_train_usage(FILE *out)
{
  fprintf(out,
          "usage: gradcomp bench train [--device cpu|cuda] [--csv FILE] [--models a,b]\n"
          "                           [--seconds S] [--threads T] [--no-peer]\n"
          "Milliseconds per worker step (forward + backward + top-K at density 0.001) of\n"
          "each reference model (--models a,b, or --model NAME; default all five) at\n"
          "batch 10 and 64, about S seconds each (default 1): the median of three timed\n"
          "blocks after a warm-up step.  With --threads T (default 1) T workers step in\n"
          "parallel, one per thread, and a step takes the wall time over the steps done.\n"
          "When a Python with torch is found ($GRADCOMP_PYTHON, python3, /usr/bin/python3)\n"
          "the same models run there (torch.set_num_threads(T)), timed the same way in\n"
          "the same invocation, and the ratio ours/torch is printed; --no-peer skips\n"
          "them.  CSV columns: model,batch,ms_per_step,torch_ms_per_step,ratio\n");
  gc_bench_usage_device(out, 1);
}

/* Whether model is in the comma-separated list (NULL: every model). */
static int listed(const char *list, const char *model)
{
  size_t n = strlen(model);
  for (const char *s = list; s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
    if (!strncmp(s, model, n) && (s[n] == ',' || s[n] == '\0'))
      return 1;
  return list == NULL;
}

int gc_bench_train(int argc, char **argv)
{
  const char *csv = NULL, *models = NULL;
  double budget = 1.0;   /* seconds per entry, roughly */
  int peer = 1;          /* run the PyTorch twins when torch is found */
  int threads = 1;       /* workers stepping in parallel (torch: intra-op) */
  gc_cli_args args = GC_CLI_ARGS("bench train", "", gc_bench_train_usage, argc, argv);
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
    else if (!strcmp(o, "--threads")) {
      size_t t;
      if (gc_cli_size_in("bench train", o, v, 1, 256, &t))
        return 2;
      threads = (int) t;
    }
    else if (!strcmp(o, "--seconds")) {
      if (gc_cli_double("bench train", o, v, &budget))
        return 2;
      if (!(budget > 0))
        return gc_cli_usage_error("bench train", "--seconds must be > 0");
    } else
      return gc_cli_unknown(&args, o);
  }
  if (args.exit >= 0)
    return args.exit;
  char names_list[512];
  snprintf(names_list, sizeof names_list, "%s", models ? models : "");
  for (char *s = names_list, *m; models && (m = strtok(s, ",")); s = NULL)
    if (!gc_nn_model_dataset(m)) {
      fprintf(stderr, "gradcomp bench train: unknown model '%s'; the models are:", m);
      for (const char *const *n = gc_nn_model_names(); *n; n++)
        fprintf(stderr, " %s", *n);
      fputc('\n', stderr);
      return 2;
    }
  gc_nn_blas_single_thread();
  const char *ct = getenv("OPENBLAS_CORETYPE");
  printf("# OpenBLAS kernel: %s (OPENBLAS_CORETYPE %s)\n", gc_nn_blas_core(),
         ct ? ct : "unset: autodetected");
  printf("# threads: %d (ours: %d workers stepping in parallel; torch: "
         "set_num_threads(%d))\n", threads, threads, threads);
  const char *py = peer ? gc_cli_python_with("import torch") : NULL;
  int torch = py != NULL;
  char script[256] = "";
  if (torch) {
    snprintf(script, sizeof script, "/tmp/gc-bench-torch-%ld.py", (long) getpid());
    FILE *f = fopen(script, "w");
    if (!f || fputs(torch_script, f) < 0)
      torch = 0;
    if (f)
      fclose(f);
  }
  if (torch) {
    char info[512];
    torch_run(py, script, "--info 0 0", 1, info, sizeof info);
    printf("# peer: %s, %d thread(s), GOMP_SPINCOUNT=%s: %s\n", py, threads, torch_spin(),
           info);
  } else {
    printf("# torch: not available (set GRADCOMP_PYTHON to a python with torch)\n");
  }
  FILE *out = csv ? fopen(csv, "w") : NULL;
  if (csv && !out)
    return gc_cli_fail("bench train", 0, "cannot write %s", csv);
  const char *hdr = "model,batch,ms_per_step,torch_ms_per_step,ratio\n";
  fputs(hdr, stdout);
  if (out)
    fputs(hdr, out);
  const gc_compressor_type *topk = gc_compressor_type_by_name("topk");
  const char *const *names = gc_nn_model_names();
  static const size_t batches[2] = { 10, 64 };
  for (size_t m = 0; names[m]; m++) {
    if (!listed(models, names[m]))
      continue;
    for (int bi = 0; bi < 2; bi++) {
      size_t B = batches[bi];
      /* per thread: a model (its activations), running statistics, a
       * gradient, a compressor and a message; weights and data shared */
      enum { TMAX = 256 };
      gc_nn *nn[TMAX] = {0};
      float *g[TMAX] = {0}, *st[TMAX] = {0};
      gc_compressor *c[TMAX] = {0};
      uint8_t *buf[TMAX] = {0};
      size_t cap = 0;
      int ok = 1;
      for (int t = 0; t < threads && ok; t++)
        ok = (nn[t] = gc_nn_alloc_model(names[m], B)) != NULL;
      if (!ok)
        return gc_cli_fail("bench train", 1, "cannot build %s", names[m]);
      size_t d = gc_nn_nparams(nn[0]), nin = B * gc_nn_in_dim(nn[0]);
      float *w = malloc(d * sizeof *w), *x = malloc(nin * sizeof *x);
      uint8_t *y = malloc(B);
      gc_compressor_params p;
      gc_compressor_params_default(&p);
      p.density = 0.001;
      ok = w && x && y && topk;
      for (int t = 0; t < threads && ok; t++) {
        ok = (g[t] = malloc(d * sizeof *g[t])) &&
             (st[t] = calloc(gc_nn_nstats(nn[0]) + 1, sizeof *st[t])) &&
             (c[t] = gc_compressor_alloc(topk, d, &p));
        cap = ok ? gc_compressor_max_bytes(c[t]) : 0;
        ok = ok && (buf[t] = malloc(cap + 1));
      }
      if (!ok)
        return gc_cli_fail("bench train", 1, "out of memory or no topk");
      gc_nn_init(nn[0], w, st[0], 1);
      for (int t = 1; t < threads; t++)
        memcpy(st[t], st[0], (gc_nn_nstats(nn[0]) + 1) * sizeof *st[t]);
      for (size_t i = 0; i < nin; i++)
        x[i] = (float) gc_rng_normal(2, 0, 0, i);
      for (size_t b = 0; b < B; b++)
        y[b] = (uint8_t) (b % 10);
      double t0 = gc_cli_now();
      step(nn[0], w, st[0], x, y, B, g[0], c[0], buf[0], cap, 0);   /* warm-up, sizes reps */
      double one = gc_cli_now() - t0;
      int reps = one > 0 ? (int) (budget / BLOCKS / one) : 100;
      reps = reps < 1 ? 1 : reps > 1000 ? 1000 : reps;
      double block_ms[BLOCKS];
      for (int b = 0; b < BLOCKS; b++) {
        t0 = gc_cli_now();
        #pragma omp parallel for schedule(static) num_threads(threads)
        for (int t = 0; t < threads; t++)
          for (int r = 0; r < reps; r++)
            step(nn[t], w, st[t], x, y, B, g[t], c[t], buf[t], cap,
                 (uint32_t) (b * reps + r) + 1);
        block_ms[b] = (gc_cli_now() - t0) / ((double) reps * threads) * 1e3;
      }
      double ms = gc_bench_median(block_ms, BLOCKS);
      double tms = torch ? torch_ms(py, script, names[m], B, reps, threads) : NAN;
      char line[256];
      snprintf(line, sizeof line, "%s,%zu,%.3f,%.3f,%.3f\n", names[m], B, ms,
               tms, ms / tms);
      if (!torch)
        snprintf(line, sizeof line, "%s,%zu,%.3f,,\n", names[m], B, ms);
      fputs(line, stdout);
      fflush(stdout);
      if (out)
        fputs(line, out);
      free(w); free(x); free(y);
      for (int t = 0; t < threads; t++) {
        free(g[t]); free(st[t]); free(buf[t]);
        gc_compressor_free(c[t]);
        gc_nn_free(nn[t]);
      }
    }
  }
  int rc = out && gc_cli_csv_close("bench train", out, csv);
  if (torch)
    remove(script);
  return rc;
}
