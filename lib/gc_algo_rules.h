/* gc_algo_rules.h -- how each method of gc_algo.h codes its messages, which
 * error-feedback memories its nodes keep and how the workers apply the
 * downlink (gc__ names; not installed).  algo.c composes the CPU step from
 * these rules and cuda/sim.cu the GPU's, so the two cannot drift apart. */
#ifndef GC_ALGO_RULES_H
#define GC_ALGO_RULES_H
#include "gc_algo.h"
#include "gc_ef.h"
#ifdef __cplusplus
extern "C" {
#endif

enum { GC__UP_DENSE, GC__UP_COMP };                    /* uplink messages */
enum { GC__DOWN_DENSE, GC__DOWN_EXACT, GC__DOWN_COMP }; /* downlink        */

int gc__algo_up_coding(gc_algo_kind k);
int gc__algo_down_coding(gc_algo_kind k);
/* The scale the workers apply the decoded downlink with: x += scale * D. */
double gc__algo_apply_scale(gc_algo_kind k, double lr);
/* Momentum: the DGC memory on lr*g (uni, allgather, allreduce-randk). */
int gc__algo_uses_dgc(const gc_algo_config *cfg);
gc_ef_kind gc__algo_worker_ef(const gc_algo_config *cfg);
/* The options of a worker's memory: cfg's momentum, Nesterov, clipping,
 * P and EF21 start. */
void gc__algo_worker_ef_options(const gc_algo_config *cfg, gc_ef_options *o);
/* The server's memory: bi keeps it on the step (BEFORE), downlink-only and
 * DoubleSqueeze in gradient units (AFTER); GC_EF_NONE for the rest. */
gc_ef_kind gc__algo_server_ef(gc_algo_kind k);

#ifdef __cplusplus
}
#endif
#endif /* GC_ALGO_RULES_H */
