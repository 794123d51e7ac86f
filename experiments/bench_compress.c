/* bench_compress.c -- `gradcomp bench compress`: single-thread speed of
 * compress+encode for every registered compressor on N(0,1) float32 input,
 * as ratios to a streaming read (a sum over the same array) and to memcpy,
 * both measured in the same run, so the figures travel between machines. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "gc_bench.h"
#include "gc_cli.h"
#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_rng.h"

static const char *CMD = "bench compress";

static void usage(FILE *out)
{
  fprintf(out,
          "usage: gradcomp bench compress [--device cpu] [--csv FILE] [--d N[,N]]\n"
          "                [--density R[,R]] [--compressors a,b] [--repeat R] [--quick]\n"
          "Median single-thread time of compress+encode on N(0,1) float32 input,\n"
          "with input GB/s and ratios to a streaming read and to memcpy of the same\n"
          "array measured in the same run.  Defaults: d = 1e6,2.5e7; density =\n"
          "0.001,0.01,0.1; every registered compressor; --quick: d = 1e6, 3 repeats.\n");
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

/* Sixteen independent accumulators: the loop vectorises and is limited by
 * memory, not by the latency of one float add chain. */
static float stream_sum(const float *x, size_t n)
{
  float acc[16] = {0};
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; j++)
      acc[j] += x[i + j];
  for (; i < n; i++)
    acc[0] += x[i];
  float s = 0;
  for (int j = 0; j < 16; j++)
    s += acc[j];
  return s;
}

double gc_bench_median(double *t, int n)
{
  qsort(t, (size_t) n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

double gc_bench_threshold(double density)
{
  return -gsl_cdf_ugaussian_Pinv(density / 2);   /* P(|Z| > v) = density */
}

int gc_bench_parse(const char *cmd, void (*usage_fn)(FILE *out), int argc, char **argv,
                   gc_bench_opts *o)
{
  gc_cli_args args = GC_CLI_ARGS(cmd, "", usage_fn, argc, argv);
  static const char *const flags[] = { "--quick", "--no-torch", NULL };
  args.flags = flags;
  const char *a, *v;
  while (gc_cli_next(&args, &a, &v)) {
    if (!strcmp(a, "--quick")) {
      o->nd = 1;
      o->d[0] = 1e6;
      o->repeat = 3;
    } else if (!strcmp(a, "--no-torch") && o->torch >= 0) {
      o->torch = 0;
    } else if (!strcmp(a, "--csv")) {
      o->csv = v;
    } else if (!strcmp(a, "--compressors")) {
      if (!(o->ntypes = gc_cli_compressors(cmd, a, v, o->types, GC_BENCH_MAXC)))
        return 2;
      o->named = 1;
    } else if (!strcmp(a, "--d")) {
      if (!(o->nd = gc_cli_doubles(cmd, a, v, o->d, GC_BENCH_MAXL)))
        return 2;
    } else if (!strcmp(a, "--density")) {
      if (!(o->ndensity = gc_cli_doubles(cmd, a, v, o->density, GC_BENCH_MAXL)))
        return 2;
    } else if (!strcmp(a, "--repeat")) {
      size_t r;
      if (gc_cli_size(cmd, a, v, &r))
        return 2;
      if (r < 1 || r > 1000)
        return gc_cli_usage_error(cmd, "--repeat: %zu is outside [1, 1000]", r);
      o->repeat = (int) r;
    } else {
      return gc_cli_unknown(&args, a);
    }
  }
  if (args.exit >= 0)
    return args.exit;
  for (const gc_compressor_type *const *T = gc_compressor_types(); !o->named && *T; T++)
    if (o->ntypes < GC_BENCH_MAXC)
      o->types[o->ntypes++] = *T;
  for (size_t j = 0; j < o->nd; j++)
    if (!(o->d[j] >= 1 && o->d[j] < 4294967296.0 && o->d[j] == floor(o->d[j])))
      return gc_cli_usage_error(cmd, "--d: %g is not a length in [1, 2^32)", o->d[j]);
  for (size_t j = 0; j < o->ndensity; j++)
    if (!(o->density[j] > 0 && o->density[j] <= 1))
      return gc_cli_usage_error(cmd, "--density: %g is outside (0,1]", o->density[j]);
  return -1;
}

static void machine(void)
{
  char model[256] = "unknown";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "model name", 10)) {
        char *c = strchr(line, ':');
        if (c) {
          snprintf(model, sizeof model, "%s", c + 2);
          model[strcspn(model, "\n")] = '\0';
        }
        break;
      }
    fclose(f);
  }
  printf("# machine: %s\n", model);
#ifdef __VERSION__
  printf("# compiler: %s", "gcc/cc " __VERSION__);
#endif
#ifdef __OPTIMIZE__
  printf(", optimised");
#endif
#ifdef __AVX512F__
  printf(", -mavx512f");
#elif defined(__AVX2__)
  printf(", -mavx2");
#elif defined(__SSE2__)
  printf(", SSE2 baseline (no -march)");
#endif
  printf("; library scans built with GCC O3 pragma; single thread\n");
}

int gc_bench_compress(int argc, char **argv)
{
  gc_bench_opts o = { .d = {1e6, 2.5e7}, .nd = 2, .density = {0.001, 0.01, 0.1},
                      .ndensity = 3, .repeat = 7, .torch = -1 };
  int done = gc_bench_parse(CMD, usage, argc, argv, &o);
  if (done >= 0)
    return done;
  const char *csv = o.csv;
  int repeat = o.repeat;
  FILE *out = NULL;
  if (csv && !(out = fopen(csv, "w")))
    return gc_cli_fail(CMD, 0, "cannot write %s", csv);
  if (out)
    fprintf(out, "compressor,d,density,threads,median_s,gbps,ratio_stream,ratio_memcpy\n");
  machine();
  printf("%-16s %10s %8s %3s %12s %8s %9s %9s\n", "compressor", "d", "density", "thr",
         "median_s", "GB/s", "x_stream", "x_memcpy");
  double *t = malloc((size_t) repeat * sizeof *t);
  int rc = 0;
  for (size_t di = 0; di < o.nd; di++) {
    size_t n = (size_t) o.d[di];
    float *x = malloc(n * sizeof *x), *dst = malloc(n * sizeof *dst);
    if (!x || !dst || !t) {
      free(x);
      free(dst);
      rc = gc_cli_fail(CMD, 0, "out of memory for d = %zu", n);
      break;
    }
    for (size_t i = 0; i < n; i++)
      x[i] = (float) gc_rng_normal(2024, 0, 0, i);
    memcpy(dst, x, n * sizeof *x);   /* touch the pages before timing */
    volatile float sink = 0;
    for (int r = 0; r < repeat; r++) {
      double t0 = gc_cli_now();
      sink += stream_sum(x, n);
      t[r] = gc_cli_now() - t0;
    }
    double t_stream = gc_bench_median(t, repeat);
    for (int r = 0; r < repeat; r++) {
      double t0 = gc_cli_now();
      memcpy(dst, x, n * sizeof *x);
      t[r] = gc_cli_now() - t0;
      sink += dst[r % n];
    }
    double t_memcpy = gc_bench_median(t, repeat);
    (void) sink;
    double bytes = 4.0 * (double) n;
    const char *bn[2] = {"stream-read", "memcpy"};
    double bt[2] = {t_stream, t_memcpy};
    for (int b = 0; b < 2; b++) {
      printf("%-16s %10zu %8s %3d %12.6f %8.2f %9.3f %9.3f\n", bn[b], n, "-", 1, bt[b],
             bytes / bt[b] * 1e-9, t_stream / bt[b], t_memcpy / bt[b]);
      if (out)
        fprintf(out, "%s,%zu,0,1,%.9f,%.4f,%.4f,%.4f\n", bn[b], n, bt[b],
                bytes / bt[b] * 1e-9, t_stream / bt[b], t_memcpy / bt[b]);
    }
    for (size_t ri = 0; ri < o.ndensity; ri++) {
      for (size_t ti = 0; ti < o.ntypes; ti++) {
        const gc_compressor_type *T = o.types[ti];
        if (T->flags & GC_COMP_NEEDS_SHAPE) {
          if (o.named && di == 0 && ri == 0)
            fprintf(stderr, "gradcomp %s: %s needs layer shapes (skipped)\n", CMD, T->name);
          continue;
        }
        /* dense compressors do not depend on the density: run them once
         * per d, also when --compressors names them */
        if (!(T->flags & GC_COMP_SPARSE) && ri > 0)
          continue;
        gc_compressor_params p;
        gc_compressor_params_default(&p);
        p.density = o.density[ri];
        p.levels = 4;
        p.threshold = gc_bench_threshold(o.density[ri]);
        gc_compressor *c = gc_compressor_alloc(T, n, &p);
        if (!c) {
          fprintf(stderr, "gradcomp %s: %s: %s (skipped)\n", CMD, T->name, gc_last_error());
          continue;
        }
        size_t cap = gc_compressor_max_bytes(c), len;
        uint8_t *buf = malloc(cap);
        int st = buf ? GC_SUCCESS : GC_ENOMEM;
        for (int r = 0; r < repeat && st == GC_SUCCESS; r++) {
          double t0 = gc_cli_now();
          st = gc_compress_f32(c, x, (uint32_t) r, buf, cap, &len, NULL);
          t[r] = gc_cli_now() - t0;
        }
        if (st) {
          fprintf(stderr, "gradcomp %s: %s failed: %s\n", CMD, T->name, gc_last_error());
        } else {
          double tm = gc_bench_median(t, repeat);
          char dens[32];
          snprintf(dens, sizeof dens, "%g", T->flags & GC_COMP_SPARSE ? o.density[ri] : 0.0);
          printf("%-16s %10zu %8s %3d %12.6f %8.2f %9.3f %9.3f\n", T->name, n, dens, 1,
                 tm, bytes / tm * 1e-9, t_stream / tm, t_memcpy / tm);
          if (out)
            fprintf(out, "%s,%zu,%s,1,%.9f,%.4f,%.4f,%.4f\n", T->name, n, dens, tm,
                    bytes / tm * 1e-9, t_stream / tm, t_memcpy / tm);
        }
        fflush(stdout);
        free(buf);
        gc_compressor_free(c);
      }
    }
    free(x);
    free(dst);
  }
  free(t);
  if (out && gc_cli_csv_close(CMD, out, csv))
    rc = 1;
  return rc;
}
