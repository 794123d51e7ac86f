/* gc_bench.h -- the benchmarks of `gradcomp bench` (libgcbench.a): the
 * targets that cmd_bench.c dispatches to, and what `bench compress` shares
 * between its CPU target (bench_compress.c, which defines these) and its
 * GPU target (bench_cuda.c): the options, the median and the threshold
 * parameter. */
#ifndef GC_BENCH_H
#define GC_BENCH_H
#include <stddef.h>
#include <stdio.h>

#include "gc_cli.h"
#include "gc_compressor.h"

/* The targets: each returns the process exit status. */
int gc_bench_compress(int argc, char **argv);        /* CPU (bench_compress.c) */
int gc_bench_compress_cuda(int argc, char **argv);   /* GPU (bench_cuda.c)     */
int gc_bench_train(int argc, char **argv);           /* bench_train.c          */
int gc_bench_train_cuda(int argc, char **argv);      /* GPU (bench_train_cuda.c) */
int gc_bench_comm(int argc, char **argv);            /* bench_comm.c           */
/* The --device cuda part of the two targets' --help (train: 1), in every
 * build (cmd_bench.c). */
void gc_bench_usage_device(FILE *out, int train);

/* The options of `gradcomp bench compress`, parsed in one place for the
 * CPU and the GPU target so both take the same command line:
 *   --csv FILE  --d N[,N]  --density R[,R]  --compressors a,b  --repeat R
 *   --quick (d = 1e6, 3 repeats)  --no-torch (only where torch >= 0)
 *   --threads T[,T] (the CPU compressors' OpenMP threads, default 1)
 *   and the compressor options of gc_bench_comp_default
 * The caller fills the defaults first.  --device is consumed by
 * cmd_bench.c before either target sees the arguments. */
enum { GC_BENCH_MAXL = 8, GC_BENCH_MAXC = 64 };
typedef struct gc_bench_opts {
  const char *csv;
  double d[GC_BENCH_MAXL], density[GC_BENCH_MAXL];
  size_t nd, ndensity;
  int repeat;
  int threads[GC_BENCH_MAXL];   /* --threads: each row's OpenMP threads */
  size_t nthreads;
  const gc_compressor_type *types[GC_BENCH_MAXC];  /* --compressors, else */
  size_t ntypes;                                  /* every registered one */
  int named;                                      /* --compressors given  */
  int torch;   /* the optional torch.topk row: 1, 0 (--no-torch); -1: none */
  /* the compressor options (gc_cli.h) a sweep leaves free: --levels
   * (qsgd's s, 4 here), --bucket, --clip, --ties, --gauss-loops,
   * --sample-ratio; set by gc_bench_parse */
  gc_cli_comp comp;
} gc_bench_opts;
/* comp's fields and defaults, for gc_bench_parse and the --help. */
gc_cli_comp gc_bench_comp_default(void);
/* Returns -1 to go on, else the exit status (0 after --help, 2). */
int gc_bench_parse(const char *cmd, void (*usage)(FILE *out), int argc, char **argv,
                   gc_bench_opts *o);
/* The targets' --help, each with its --device cuda part, so that both
 * devices print the same text (bench_compress.c, bench_train.c). */
void gc_bench_compress_usage(FILE *out);
void gc_bench_train_usage(FILE *out);
/* Median of t[0..n-1] (sorts t); the mean of the middle two when n is even. */
double gc_bench_median(double *t, int n);
/* The threshold v that keeps a fraction density of N(0,1) entries, so the
 * threshold compressor runs at the density of the others. */
double gc_bench_threshold(double density);

/* The five reference models in PyTorch (same shapes and layers), for the
 * peers of `bench train` on the CPU and on the GPU. */
#define GC_BENCH_TORCH_MODELS \
  "def vgg():\n" \
  "  L=[]; c=3\n" \
  "  for v in [64,64,'M',128,128,'M',256,256,256,256,'M',512,512,512,512,'M',512,512,512,512,'M']:\n" \
  "    if v=='M': L.append(nn.MaxPool2d(2))\n" \
  "    else: L+= [nn.Conv2d(c,v,3,padding=1), nn.BatchNorm2d(v), nn.ReLU()]; c=v\n" \
  "  return nn.Sequential(*L, nn.Flatten(), nn.Linear(512,10))\n" \
  "M={'mnist-mlp': lambda: nn.Sequential(nn.Flatten(), nn.Linear(784,64), nn.ReLU(), nn.Linear(64,10), nn.LogSoftmax(1)),\n" \
  " 'fmnist-mlp': lambda: nn.Sequential(nn.Flatten(), nn.Linear(784,256), nn.ReLU(), nn.Linear(256,128), nn.ReLU(), nn.Linear(128,64), nn.ReLU(), nn.Linear(64,10), nn.LogSoftmax(1)),\n" \
  " 'mnist-cnn': lambda: nn.Sequential(nn.Conv2d(1,32,3), nn.ReLU(), nn.Conv2d(32,64,3), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(.25), nn.Flatten(), nn.Linear(9216,128), nn.ReLU(), nn.Dropout(.25), nn.Linear(128,10), nn.LogSoftmax(1)),\n" \
  " 'fmnist-cnn': lambda: nn.Sequential(nn.Conv2d(1,16,5,padding=2), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16,32,5,padding=2), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1568,10), nn.LogSoftmax(1)),\n" \
  " 'cifar-vgg19': vgg}\n"

#endif /* GC_BENCH_H */
