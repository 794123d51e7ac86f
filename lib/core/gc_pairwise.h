/* gc_pairwise.h -- sums in the pairwise order that cuda/ reproduces (gc__
 * names, not installed). */
#ifndef GC_PAIRWISE_H
#define GC_PAIRWISE_H
#include <stdint.h>

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

#endif /* GC_PAIRWISE_H */
