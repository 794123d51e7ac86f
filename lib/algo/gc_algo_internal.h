/* gc_algo_internal.h -- what algo.c shares with sim.c and training
 * beyond gc_algo.h (gc__ names; not installed). */
#ifndef GC_ALGO_INTERNAL_H
#define GC_ALGO_INTERNAL_H
#include "gc_algo.h"
#ifdef __cplusplus
extern "C" {
#endif

/* The step size gc_worker_apply scales with, for a process that applies
 * the downlink without stepping a worker (sim.c, over a transport). */
void gc__worker_set_lr(gc_worker *w, double lr);

#ifdef __cplusplus
}
#endif
#endif /* GC_ALGO_INTERNAL_H */
