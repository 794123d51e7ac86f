/* bench_compress.c -- `gradcomp bench compress`: single-thread speed of
 * compress+encode for every registered compressor on N(0,1) float32 input,
 * as ratios to a streaming read (a sum over the same array) and to memcpy,
 * both measured in the same run, so the figures travel between machines. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "gc_cli.h"
#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_rng.h"

static const char *CMD = "bench compress";

static void usage(FILE *out)
{
  fprintf(out,
          "usage: gradcomp bench compress [--csv FILE] [--d N[,N]] [--density R[,R]]\n"
          "                [--compressors a,b] [--repeat R] [--quick]\n"
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

static double median(double *t, int r)
{
  qsort(t, (size_t) r, sizeof *t, cmp_double);
  return r % 2 ? t[r / 2] : 0.5 * (t[r / 2 - 1] + t[r / 2]);
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

static int parse_list(const char *opt, const char *text, double *out, int max)
{
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s", text);
  int m = 0;
  for (char *tok = strtok(tmp, ","); tok; tok = strtok(NULL, ",")) {
    if (m == max)
      return -gc_cli_fail(CMD, 0, "%s: at most %d values", opt, max);
    if (gc_cli_double(CMD, opt, tok, &out[m]))
      return -1;
    m++;
  }
  return m;
}

/* Whether name is one of the comma-separated names in list. */
static int listed(const char *list, const char *name)
{
  size_t l = strlen(name);
  for (const char *p = list;; p++) {
    size_t m = strcspn(p, ",");
    if (m == l && !strncmp(p, name, l))
      return 1;
    p += m;
    if (!*p)
      return 0;
  }
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
  gc_set_error_handler_off();
  double ds[8] = {1e6, 2.5e7}, rhos[8] = {0.001, 0.01, 0.1};
  int nd = 2, nr = 3, repeat = 7;
  const char *csv = NULL, *only = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--quick")) {
      nd = 1;
      ds[0] = 1e6;
      repeat = 3;
      continue;
    } else if (a[0] != '-' || !val) {
      usage(stderr);
      return gc_cli_fail(CMD, 0, "bad or incomplete option '%s'", a);
    }
    i++;
    if (!strcmp(a, "--csv"))
      csv = val;
    else if (!strcmp(a, "--compressors"))
      only = val;
    else if (!strcmp(a, "--d")) {
      if ((nd = parse_list(a, val, ds, 8)) <= 0)
        return 1;
    } else if (!strcmp(a, "--density")) {
      if ((nr = parse_list(a, val, rhos, 8)) <= 0)
        return 1;
      for (int j = 0; j < nr; j++)
        if (!(rhos[j] > 0 && rhos[j] <= 1))
          return gc_cli_fail(CMD, 0, "--density: %g is outside (0,1]", rhos[j]);
    } else if (!strcmp(a, "--repeat")) {
      size_t r;
      if (gc_cli_size(CMD, a, val, &r))
        return 1;
      if (r < 1 || r > 1000)
        return gc_cli_fail(CMD, 0, "--repeat: %zu is outside [1, 1000]", r);
      repeat = (int) r;
    } else {
      usage(stderr);
      return gc_cli_fail(CMD, 0, "unknown option '%s'", a);
    }
  }
  for (int j = 0; j < nd; j++)
    if (!(ds[j] >= 1 && ds[j] < 4294967296.0 && ds[j] == floor(ds[j])))
      return gc_cli_fail(CMD, 0, "--d: %g is not a length in [1, 2^32)", ds[j]);
  if (only) {   /* check the names before any work */
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", only);
    for (char *tok = strtok(tmp, ","); tok; tok = strtok(NULL, ","))
      if (!gc_compressor_type_by_name(tok))
        return gc_cli_fail(CMD, 0, "--compressors: unknown compressor '%s'", tok);
  }
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
  for (int di = 0; di < nd; di++) {
    size_t n = (size_t) ds[di];
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
    double t_stream = median(t, repeat);
    for (int r = 0; r < repeat; r++) {
      double t0 = gc_cli_now();
      memcpy(dst, x, n * sizeof *x);
      t[r] = gc_cli_now() - t0;
      sink += dst[r % n];
    }
    double t_memcpy = median(t, repeat);
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
    for (int ri = 0; ri < nr; ri++) {
      for (const gc_compressor_type *const *T = gc_compressor_types(); *T; T++) {
        if ((*T)->flags & GC_COMP_NEEDS_SHAPE)
          continue;
        if (only && !listed(only, (*T)->name))
          continue;
        /* dense compressors do not depend on the density: run them once */
        if (!((*T)->flags & GC_COMP_SPARSE) && ri > 0 && !only)
          continue;
        gc_compressor_params p;
        gc_compressor_params_default(&p);
        p.density = rhos[ri];
        p.levels = 4;
        /* threshold: the v that keeps a fraction rho of N(0,1) */
        p.threshold = -gsl_cdf_ugaussian_Pinv(rhos[ri] / 2);
        gc_compressor *c = gc_compressor_alloc(*T, n, &p);
        if (!c) {
          fprintf(stderr, "gradcomp %s: %s: %s (skipped)\n", CMD, (*T)->name, gc_last_error());
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
          fprintf(stderr, "gradcomp %s: %s failed: %s\n", CMD, (*T)->name, gc_last_error());
        } else {
          double tm = median(t, repeat);
          char dens[32];
          snprintf(dens, sizeof dens, "%g", (*T)->flags & GC_COMP_SPARSE ? rhos[ri] : 0.0);
          printf("%-16s %10zu %8s %3d %12.6f %8.2f %9.3f %9.3f\n", (*T)->name, n, dens, 1,
                 tm, bytes / tm * 1e-9, t_stream / tm, t_memcpy / tm);
          if (out)
            fprintf(out, "%s,%zu,%s,1,%.9f,%.4f,%.4f,%.4f\n", (*T)->name, n, dens, tm,
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
  if (out)
    fclose(out);
  return rc;
}
