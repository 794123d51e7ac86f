/* bench_compress.c -- `gradcomp bench compress`: speed of compress+encode
 * for every registered compressor on N(0,1) float32 input, as ratios to a
 * streaming read (a sum over the same array) and to a copy, both the
 * fastest this CPU does and measured in the same run, so the figures
 * travel between machines. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <gsl/gsl_cdf.h>

#include "gc_bench.h"
#include "gc_cli.h"
#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_isa.h"
#include "gc_rng.h"

static const char *CMD = "bench compress";

gc_cli_comp gc_bench_comp_default(void)
{
  /* K and the density are the --density sweep's, threshold's v follows
   * it (gc_bench_threshold), powersgd is skipped (no shapes) */
  gc_cli_comp c = { .take = GC_CLI_P_ALL & ~(GC_CLI_P_K | GC_CLI_P_DENSITY |
                                             GC_CLI_P_THRESHOLD | GC_CLI_P_RANK) };
  gc_compressor_params_default(&c.up);
  c.up.levels = 4;
  return c;
}

void gc_bench_compress_usage(FILE *out)
{
  gc_cli_comp comp = gc_bench_comp_default();
  fprintf(out,
          "usage: gradcomp bench compress [--device cpu|cuda] [--csv FILE] [--d N[,N]]\n"
          "                [--density R[,R]] [--compressors a,b] [--repeat R] [--quick]\n"
          "                [--threads T[,T]] [COMPRESSOR OPTIONS]\n"
          "Median time of compress+encode on N(0,1) float32 input,\n"
          "with input GB/s and ratios to the fastest streaming read and copy of the\n"
          "same array (vector loops of the CPU's widest instruction set; GC_ISA=\n"
          "sse2|avx2|avx512 caps it) measured in the same run, whose rows also\n"
          "give the read and copy bandwidth of all cores.  x_stream is the median\n"
          "ratio of each run to a read just before it.  Defaults: d = 1e6,2.5e7;\n"
          "density = 0.001,0.01,0.1; every registered compressor; --quick: d = 1e6,\n"
          "3 repeats; --threads T[,T]: the compressors run their loops on T OpenMP\n"
          "threads (1), each row once per T; x_1thr is a row's speedup over the\n"
          "same row on one thread when 1 is listed (1,2: both cores); the all-core\n"
          "read's is what memory allows a compressor bound by reading x, the\n"
          "all-core copy's one that also writes a message as long as x.\n"
          "threshold's v keeps the density's share of N(0,1) entries.\n"
          "Compressor options (each compressor reads the ones it uses):\n");
  gc_cli_compressor_usage(out, &comp);
  gc_bench_usage_device(out, 0);
}

static int cmp_int(const void *a, const void *b)
{
  int x = *(const int *) a, y = *(const int *) b;
  return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

/* The baselines: the fastest read and copy of the array this CPU can do,
 * in the widest instruction set it has (gc__isa, so GC_ISA=sse2 caps the
 * baseline with the library).  A read is a float sum over independent
 * accumulators (a whole cache line per iteration, so it is limited by
 * memory, not by the add latency); a copy is the faster of libc's memcpy
 * and a vector loop with streaming stores.  Built for SSE2 without these
 * paths the read reached two thirds of what the memory gives, and every
 * ratio came out inflated by the difference. */
static float read_sse2(const float *x, size_t n)
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

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_VECTOR_BASELINES 1
__attribute__((target("avx2")))
static float read_avx2(const float *x, size_t n)
{
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
  }
  float t[8], s = 0;
  _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (int j = 0; j < 8; j++)
    s += t[j];
  return s + read_sse2(x + i, n - i);
}

__attribute__((target("avx512f")))
static float read_avx512(const float *x, size_t n)
{
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + i + 48));
  }
  float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  return s + read_sse2(x + i, n - i);
}

/* Streaming stores bypass the cache: no read-for-ownership of dst. */
__attribute__((target("avx2")))
static void copy_avx2(float *dst, const float *x, size_t n)
{
  size_t i = 0;
  while (i < n && ((uintptr_t) (dst + i) & 31))
    dst[i] = x[i], i++;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 32; j += 8)
      _mm256_stream_ps(dst + i + j, _mm256_loadu_ps(x + i + j));
  _mm_sfence();
  for (; i < n; i++)
    dst[i] = x[i];
}

__attribute__((target("avx512f")))
static void copy_avx512(float *dst, const float *x, size_t n)
{
  size_t i = 0;
  while (i < n && ((uintptr_t) (dst + i) & 63))
    dst[i] = x[i], i++;
  for (; i + 64 <= n; i += 64)
    for (int j = 0; j < 64; j += 16)
      _mm512_stream_ps(dst + i + j, _mm512_loadu_ps(x + i + j));
  _mm_sfence();
  for (; i < n; i++)
    dst[i] = x[i];
}
#endif

static float stream_read(const float *x, size_t n)
{
#ifdef HAVE_VECTOR_BASELINES
  int isa = gc__isa();
  if (isa >= GC__ISA_AVX512)
    return read_avx512(x, n);
  if (isa >= GC__ISA_AVX2)
    return read_avx2(x, n);
#endif
  return read_sse2(x, n);
}

static void libc_copy(float *dst, const float *x, size_t n)
{
  memcpy(dst, x, n * sizeof *x);
}

/* The vector copy of the chosen instruction set, or NULL (SSE2). */
static void (*vector_copy(void))(float *, const float *, size_t)
{
#ifdef HAVE_VECTOR_BASELINES
  int isa = gc__isa();
  if (isa >= GC__ISA_AVX512)
    return copy_avx512;
  if (isa >= GC__ISA_AVX2)
    return copy_avx2;
#endif
  return NULL;
}

/* Thread t's contiguous share [*lo, *hi) of n entries among T. */
static void share_of(size_t n, int T, int t, size_t *lo, size_t *hi)
{
  *lo = n / (size_t) T * (size_t) t;
  *hi = t == T - 1 ? n : *lo + n / (size_t) T;
}

/* Read of the whole array by T threads, each a contiguous share. */
static float stream_read_threads(const float *x, size_t n, int T)
{
  float s = 0;
  #pragma omp parallel for schedule(static) num_threads(T) reduction(+ : s)
  for (int t = 0; t < T; t++) {
    size_t lo, hi;
    share_of(n, T, t, &lo, &hi);
    s += stream_read(x + lo, hi - lo);
  }
  return s;
}

/* A copy of the whole array by T threads, each a contiguous share. */
static void copy_threads(void (*copy)(float *, const float *, size_t), float *dst,
                         const float *x, size_t n, int T)
{
  #pragma omp parallel for schedule(static) num_threads(T)
  for (int t = 0; t < T; t++) {
    size_t lo, hi;
    share_of(n, T, t, &lo, &hi);
    copy(dst + lo, x + lo, hi - lo);
  }
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
  o->comp = gc_bench_comp_default();
  while (gc_cli_next(&args, &a, &v)) {
    int taken = gc_cli_compressor_option(&args, a, v, &o->comp);
    if (taken == GC_CLI_TAKEN)
      continue;
    if (taken != GC_CLI_NOT_MINE)
      return taken;
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
    } else if (!strcmp(a, "--threads")) {
      double th[GC_BENCH_MAXL];
      if (!(o->nthreads = gc_cli_doubles(cmd, a, v, th, GC_BENCH_MAXL)))
        return 2;
      for (size_t j = 0; j < o->nthreads; j++) {
        if (!(th[j] >= 1 && th[j] <= 256 && th[j] == floor(th[j])))
          return gc_cli_usage_error(cmd, "--threads: %g is not a thread count in [1, 256]",
                                    th[j]);
        o->threads[j] = (int) th[j];
      }
      /* ascending, so that a row's one-thread time is known when its other
       * rows are printed */
      qsort(o->threads, o->nthreads, sizeof *o->threads, cmp_int);
    } else if (!strcmp(a, "--repeat")) {
      size_t r;
      if (gc_cli_size_in(cmd, a, v, 1, 1000, &r))
        return 2;
      o->repeat = (int) r;
    } else {
      return gc_cli_unknown(&args, a);
    }
  }
  if (args.exit >= 0)
    return args.exit;
  if (gc_cli_compressor_finish(&args, &o->comp))
    return 2;
  for (const gc_compressor_type *const *T = gc_compressor_types(); !o->named && *T; T++)
    if (o->ntypes < GC_BENCH_MAXC)
      o->types[o->ntypes++] = *T;
  for (size_t j = 0; j < o->nd; j++)
    if (!(o->d[j] >= 1 && o->d[j] < 4294967296.0 && o->d[j] == floor(o->d[j])))
      return gc_cli_usage_error(cmd, "--d: %g is not a length in [1, 2^32)", o->d[j]);
  for (size_t j = 0; j < o->ndensity; j++)
    if (!(o->density[j] > 0 && o->density[j] <= 1))
      return gc_cli_usage_error(cmd, "--density: %g must be in (0, 1]", o->density[j]);
  return -1;
}

static int cores(void)
{
#ifdef _OPENMP
  return omp_get_num_procs();
#else
  return 1;
#endif
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
  printf("# cpu: %s, %d cores; vector ISA used: %s (the CPU has %s; GC_ISA caps it)\n",
         model, cores(), gc__isa_name(gc__isa()), gc__isa_name(gc__isa_cpu()));
#ifdef __VERSION__
  printf("# compiler: %s", "gcc/cc " __VERSION__);
#endif
#ifdef __OPTIMIZE__
  printf(", optimised");
#endif
  printf("; hot loops dispatched at run time\n");
}

/* Median seconds of `repeat` runs of the read on T threads. */
static double time_read(const float *x, size_t n, int T, double *t, int repeat)
{
  volatile float sink = 0;
  for (int r = 0; r < repeat; r++) {
    double t0 = gc_cli_now();
    sink += T > 1 ? stream_read_threads(x, n, T) : stream_read(x, n);
    t[r] = gc_cli_now() - t0;
  }
  (void) sink;
  return gc_bench_median(t, repeat);
}

static double time_copy(void (*copy)(float *, const float *, size_t), int T, float *dst,
                        const float *x, size_t n, double *t, int repeat)
{
  volatile float sink = 0;
  for (int r = 0; r < repeat; r++) {
    double t0 = gc_cli_now();
    if (T > 1)
      copy_threads(copy, dst, x, n, T);
    else
      copy(dst, x, n);
    t[r] = gc_cli_now() - t0;
    sink += dst[(size_t) r % n];
  }
  (void) sink;
  return gc_bench_median(t, repeat);
}

/* Median seconds of `repeat` compressions of x on th threads (*tm), and
 * the median ratio of each to a read just before it (*xs): on a shared
 * machine the load drifts between a baseline measured once and a
 * compressor measured later, so each run is paired with its own read. */
static int time_compressor(gc_compressor *c, const float *x, size_t n, int th, uint8_t *buf,
                           size_t cap, double *t, double *pair, int repeat, double *tm,
                           double *xs)
{
#ifdef _OPENMP
  omp_set_num_threads(th);
#else
  (void) th;
#endif
  int st = GC_SUCCESS;
  size_t len;
  for (int r = 0; r < repeat && st == GC_SUCCESS; r++) {
    volatile float sink = stream_read(x, n);
    (void) sink;
    double t0 = gc_cli_now();
    sink = stream_read(x, n);
    double t1 = gc_cli_now();
    st = gc_compress_f32(c, x, (uint32_t) r, buf, cap, &len, NULL);
    t[r] = gc_cli_now() - t1;
    pair[r] = (t1 - t0) / t[r];
  }
  if (st == GC_SUCCESS) {
    *tm = gc_bench_median(t, repeat);
    *xs = gc_bench_median(pair, repeat);
  }
  return st;
}

int gc_bench_compress(int argc, char **argv)
{
  gc_bench_opts o = { .d = {1e6, 2.5e7}, .nd = 2, .density = {0.001, 0.01, 0.1},
                      .ndensity = 3, .repeat = 7, .threads = {1}, .nthreads = 1, .torch = -1 };
  int done = gc_bench_parse(CMD, gc_bench_compress_usage, argc, argv, &o);
  if (done >= 0)
    return done;
  const char *csv = o.csv;
  int repeat = o.repeat;
  FILE *out = NULL;
  if (csv && !(out = fopen(csv, "w")))
    return gc_cli_fail(CMD, 0, "cannot write %s", csv);
  if (out)
    fprintf(out, "compressor,d,density,threads,median_s,gbps,ratio_stream,ratio_memcpy,"
            "speedup_1thread\n");
  machine();
#ifndef _OPENMP
  for (size_t j = 0; j < o.nthreads; j++)
    if (o.threads[j] > 1)
      return gc_cli_usage_error(CMD, "--threads %d: built without OpenMP", o.threads[j]);
#endif
  printf("%-16s %10s %8s %3s %12s %8s %9s %9s %7s\n", "compressor", "d", "density", "thr",
         "median_s", "GB/s", "x_stream", "x_memcpy", "x_1thr");
  double *t = malloc((size_t) repeat * sizeof *t), *pair = malloc((size_t) repeat * sizeof *pair);
  int rc = 0;
  for (size_t di = 0; di < o.nd; di++) {
    size_t n = (size_t) o.d[di];
    float *x = malloc(n * sizeof *x), *dst = malloc(n * sizeof *dst);
    if (!x || !dst || !t || !pair) {
      free(x);
      free(dst);
      rc = gc_cli_fail(CMD, 0, "out of memory for d = %zu", n);
      break;
    }
    for (size_t i = 0; i < n; i++)
      x[i] = (float) gc_rng_normal(2024, 0, 0, i);
    memcpy(dst, x, n * sizeof *x);   /* touch the pages before timing */
    double t_stream = time_read(x, n, 1, t, repeat);
    int ncores = cores();
    double t_all = ncores > 1 ? time_read(x, n, ncores, t, repeat) : t_stream;
    double t_libc = time_copy(libc_copy, 1, dst, x, n, t, repeat), t_memcpy = t_libc;
    const char *copy_name = "libc memcpy";
    if (vector_copy()) {
      double tv = time_copy(vector_copy(), 1, dst, x, n, t, repeat);
      if (tv < t_memcpy) {
        t_memcpy = tv;
        copy_name = gc__isa() >= GC__ISA_AVX512 ? "avx512 streaming stores"
                                                : "avx2 streaming stores";
      }
    }
    double t_copy_all = ncores > 1 ? time_copy(t_memcpy < t_libc ? vector_copy() : libc_copy,
                                               ncores, dst, x, n, t, repeat)
                                   : t_memcpy;
    double bytes = 4.0 * (double) n;
    printf("# d = %zu: read %.2f GB/s on 1 core, %.2f GB/s on %d; copy %.2f GB/s "
           "(%s; libc memcpy %.2f), %.2f GB/s on %d\n", n, bytes / t_stream * 1e-9,
           bytes / t_all * 1e-9, ncores, bytes / t_memcpy * 1e-9, copy_name,
           bytes / t_libc * 1e-9, bytes / t_copy_all * 1e-9, ncores);
    /* The all-core read's x_1thr is the speedup that memory allows a
     * compressor bound by its reads of x; the all-core copy's, one that
     * also writes a message as long as x (identity). */
    static const char *const bname[4] = {"stream-read", "memcpy", "stream-read", "memcpy"};
    double bt[4] = {t_stream, t_memcpy, t_all, t_copy_all};
    double b_one[4] = {t_stream, t_memcpy, t_stream, t_memcpy};
    int bthr[4] = {1, 1, ncores, ncores};
    for (int b = 0; b < (ncores > 1 ? 4 : 2); b++) {
      printf("%-16s %10zu %8s %3d %12.6f %8.2f %9.3f %9.3f %7.3f\n", bname[b], n, "-", bthr[b],
             bt[b], bytes / bt[b] * 1e-9, t_stream / bt[b], t_memcpy / bt[b], b_one[b] / bt[b]);
      if (out)
        fprintf(out, "%s,%zu,0,%d,%.9f,%.4f,%.4f,%.4f,%.4f\n", bname[b], n, bthr[b], bt[b],
                bytes / bt[b] * 1e-9, t_stream / bt[b], t_memcpy / bt[b], b_one[b] / bt[b]);
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
        gc_compressor_params p = o.comp.up;
        p.density = o.density[ri];
        p.threshold = gc_bench_threshold(o.density[ri]);
        gc_compressor *c = gc_compressor_alloc(T, n, &p);
        if (!c) {
          fprintf(stderr, "gradcomp %s: %s: %s (skipped)\n", CMD, T->name, gc_last_error());
          continue;
        }
        size_t cap = gc_compressor_max_bytes(c);
        uint8_t *buf = malloc(cap);
        int st = buf ? GC_SUCCESS : GC_ENOMEM;
        char dens[32];
        snprintf(dens, sizeof dens, "%g", T->flags & GC_COMP_SPARSE ? o.density[ri] : 0.0);
        double t_one = 0;   /* this row's median on one thread, when listed */
        for (size_t hi = 0; hi < o.nthreads && st == GC_SUCCESS; hi++) {
          int th = o.threads[hi];
          double tm, xs;
          if ((st = time_compressor(c, x, n, th, buf, cap, t, pair, repeat, &tm, &xs))) {
            fprintf(stderr, "gradcomp %s: %s failed: %s\n", CMD, T->name, gc_last_error());
            break;
          }
          if (th == 1)
            t_one = tm;
          char speedup[32] = "-", speedup_csv[32] = "";
          if (t_one > 0) {
            snprintf(speedup, sizeof speedup, "%.3f", t_one / tm);
            snprintf(speedup_csv, sizeof speedup_csv, "%.4f", t_one / tm);
          }
          printf("%-16s %10zu %8s %3d %12.6f %8.2f %9.3f %9.3f %7s\n", T->name, n, dens, th,
                 tm, bytes / tm * 1e-9, xs, t_memcpy / tm, speedup);
          if (out)
            fprintf(out, "%s,%zu,%s,%d,%.9f,%.4f,%.4f,%.4f,%s\n", T->name, n, dens, th, tm,
                    bytes / tm * 1e-9, xs, t_memcpy / tm, speedup_csv);
          fflush(stdout);
        }
        free(buf);
        gc_compressor_free(c);
      }
    }
    free(x);
    free(dst);
  }
  free(t);
  free(pair);
  if (out && gc_cli_csv_close(CMD, out, csv))
    rc = 1;
  return rc;
}
