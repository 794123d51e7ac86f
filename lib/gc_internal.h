/* gc_internal.h -- declarations shared between library files (gc__ names,
 * as libuv does); not installed. */
#ifndef GC_INTERNAL_H
#define GC_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "gc_compressor.h"

/* The precision templates (sparse_source.c, quant_source.c, wire_source.c,
 * lowrank_source.c) are included once per REAL with SFX = f32 or f64;
 * FN(encode) names encode_f32 or encode_f64 there. */
#define GC__CAT2(a, b) a##_##b
#define GC__CAT(a, b) GC__CAT2(a, b)
#define FN(name) GC__CAT(name, SFX)

/* Monotonic wall-clock seconds, for the timing columns. */
double gc__now(void);

/* NULL-terminated family lists, one per family file. */
extern const gc_compressor_type *const gc__sparse_types[];
extern const gc_compressor_type *const gc__quant_types[];
extern const gc_compressor_type *const gc__lowrank_types[];

/* k from params: p->k if set, else max(1, floor(density * n)). */
size_t gc__resolve_k(size_t n, const gc_compressor_params *p);

/* Sums whose order a GPU can reproduce bit for bit (cuda/ mirrors it):
 * block partials p[0..m) are combined by the pairwise tree
 *     while m > 1: p[i] = p[2i] + p[2i+1] (i < m/2), an odd m carries
 *     p[m-1] to p[m/2], m = (m+1)/2.
 * The tree is evaluated as the partials stream in: neighbours of equal
 * size merge at once (a binary counter), and what is left folds from the
 * right at the end, which performs the tree's additions in its order.
 * Start from gc__pairwise t = {0}; total of no partials: 0. */
typedef struct gc__pairwise {
  double v[64];      /* subtotals of 2^a, 2^b, ... partials, a > b > ... */
  uint64_t count;
  unsigned top;
} gc__pairwise;

static inline void gc__pairwise_push(gc__pairwise *t, double p)
{
  t->v[t->top++] = p;
  for (uint64_t c = ++t->count; !(c & 1); c >>= 1) {
    t->top--;
    t->v[t->top - 1] += t->v[t->top];
  }
}

static inline double gc__pairwise_total(const gc__pairwise *t)
{
  if (t->top == 0)
    return 0;
  double s = t->v[t->top - 1];
  for (unsigned i = t->top - 1; i-- > 0;)
    s = t->v[i] + s;
  return s;
}

#endif /* GC_INTERNAL_H */
