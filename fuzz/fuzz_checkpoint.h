/* fuzz_checkpoint.h -- the simulators whose checkpoint state fuzz_checkpoint
 * loads, shared with make_corpus.  Input: one byte picks the simulator
 * (modulo FUZZ_CKPT_KINDS), the rest is the state gc_sim_state_load reads
 * (the payload of a training checkpoint after the BN statistics). */
#ifndef FUZZ_CHECKPOINT_H
#define FUZZ_CHECKPOINT_H
#include <stdint.h>
#include <string.h>
#include "gc_algo.h"
#include "gc_npy.h"

/* Six chosen simulators, then every kind of gc_algo.h with topk, so that
 * a new algorithm's state is fuzzed without an edit here. */
enum { FUZZ_CKPT_CHOSEN = 6, FUZZ_CKPT_KINDS = FUZZ_CKPT_CHOSEN + GC_ALGO_COUNT,
       FUZZ_CKPT_N = 24, FUZZ_CKPT_P = 2 };

/* One 4 x 6 layer, for PowerSGD. */
static const gc_segment fuzz_ckpt_layer = { 0, 4, 6 };

/* A simulator of kind k at x0 = 0.25 (every method keeps state: error
 * memories, DGC momentum, EF21 h, the EF21-BC model, PowerSGD's warm
 * start). */
static gc_sim *fuzz_ckpt_sim(unsigned k)
{
  static const struct {
    gc_algo_kind kind;
    const char *comp;
    int dtype;
    double momentum;
  } kinds[FUZZ_CKPT_CHOSEN] = {
    { GC_ALGO_UNI, "topk", GC_F32, 0.9 },
    { GC_ALGO_BI, "topk", GC_F64, 0 },
    { GC_ALGO_EF21, "randk", GC_F32, 0 },
    { GC_ALGO_BI, "powersgd", GC_F32, 0 },
    { GC_ALGO_DOUBLESQUEEZE, "scaled-sign", GC_F64, 0 },
    { GC_ALGO_EF21_BC, "topk", GC_F32, 0 },
  };
  k %= FUZZ_CKPT_KINDS;
  gc_algo_config cfg;
  gc_algo_config_default(&cfg);
  cfg.workers = FUZZ_CKPT_P;
  cfg.n = FUZZ_CKPT_N;
  if (k < FUZZ_CKPT_CHOSEN) {
    cfg.kind = kinds[k].kind;
    cfg.dtype = kinds[k].dtype;
    cfg.momentum = kinds[k].momentum;
    cfg.up = cfg.down = gc_compressor_type_by_name(kinds[k].comp);
  } else {
    cfg.kind = (gc_algo_kind) (k - FUZZ_CKPT_CHOSEN);
    cfg.dtype = GC_F32;   /* topk, the default, both ways */
  }
  cfg.up_params.k = cfg.down_params.k = 5;
  cfg.up_params.rank = cfg.down_params.rank = 2;
  cfg.up_params.segments = cfg.down_params.segments = &fuzz_ckpt_layer;
  cfg.up_params.nsegments = cfg.down_params.nsegments = 1;
  double x0[FUZZ_CKPT_N];
  float x0f[FUZZ_CKPT_N];
  for (size_t i = 0; i < FUZZ_CKPT_N; i++)
    x0[i] = x0f[i] = 0.25f;
  return gc_sim_alloc(&cfg, cfg.dtype == GC_F64 ? (void *) x0 : (void *) x0f);
}

/* Gradients for step t of kind k's simulator: g_p[i] = point[i] - target. */
static void fuzz_ckpt_grads(const gc_sim *s, int dtype, unsigned t,
                            double *g64, float *g32, const void **g)
{
  const void *x = gc_sim_point(s);
  for (size_t p = 0; p < FUZZ_CKPT_P; p++)
    for (size_t i = 0; i < FUZZ_CKPT_N; i++) {
      double xi = dtype == GC_F64 ? ((const double *) x)[i]
                                  : ((const float *) x)[i];
      double v = xi - 0.1 * (double) ((i * 7 + p * 3 + t) % 11);
      g64[p * FUZZ_CKPT_N + i] = v;
      g32[p * FUZZ_CKPT_N + i] = (float) v;
    }
  for (size_t p = 0; p < FUZZ_CKPT_P; p++)
    g[p] = dtype == GC_F64 ? (const void *) (g64 + p * FUZZ_CKPT_N)
                           : (const void *) (g32 + p * FUZZ_CKPT_N);
}

static int fuzz_ckpt_dtype(unsigned k)
{
  k %= FUZZ_CKPT_KINDS;
  return k == 1 || k == 4 ? GC_F64 : GC_F32;
}

#endif /* FUZZ_CHECKPOINT_H */
