/* gc_bench.h -- what `gradcomp bench compress` shares between its CPU
 * target (bench_compress.c, which defines these) and its GPU target
 * (bench_cuda.c): the options, the median and the threshold parameter. */
#ifndef GC_BENCH_H
#define GC_BENCH_H
#include <stddef.h>
#include <stdio.h>

#include "gc_compressor.h"

/* The options of `gradcomp bench compress`, parsed in one place for the
 * CPU and the GPU target so both take the same command line:
 *   --csv FILE  --d N[,N]  --density R[,R]  --compressors a,b  --repeat R
 *   --quick (d = 1e6, 3 repeats)  --no-torch (only where torch >= 0)
 *   --threads T (the CPU compressors' OpenMP threads, default 1)
 * The caller fills the defaults first.  --device is consumed by
 * cmd_bench.c before either target sees the arguments. */
enum { GC_BENCH_MAXL = 8, GC_BENCH_MAXC = 64 };
typedef struct gc_bench_opts {
  const char *csv;
  double d[GC_BENCH_MAXL], density[GC_BENCH_MAXL];
  size_t nd, ndensity;
  int repeat;
  int threads;
  const gc_compressor_type *types[GC_BENCH_MAXC];  /* --compressors, else */
  size_t ntypes;                                  /* every registered one */
  int named;                                      /* --compressors given  */
  int torch;   /* the optional torch.topk row: 1, 0 (--no-torch); -1: none */
} gc_bench_opts;
/* Returns -1 to go on, else the exit status (0 after --help, 2). */
int gc_bench_parse(const char *cmd, void (*usage)(FILE *out), int argc, char **argv,
                   gc_bench_opts *o);
/* Median of t[0..n-1] (sorts t); the mean of the middle two when n is even. */
double gc_bench_median(double *t, int n);
/* The threshold v that keeps a fraction density of N(0,1) entries, so the
 * threshold compressor runs at the density of the others. */
double gc_bench_threshold(double density);

#endif /* GC_BENCH_H */
