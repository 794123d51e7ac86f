/* gc_algo_rules.h -- one descriptor row per method of gc_algo.h: how it
 * codes its messages, which error-feedback memories its nodes keep, how the
 * workers apply the downlink, whether it is a collective, and which probes,
 * bounds and devices apply to it (gc__ names; not installed).  The table
 * is in lib/algo/algo.c.  algo.c composes the CPU step from these rows and
 * cuda/algo/sim.cu the GPU's, so the two cannot drift apart; the probes
 * (lib/algo/xi_probe.c, theory/trajectory.c), the bounds (theory/bounds.c), training
 * (train/train.c) and the front end read the same rows, so no file
 * outside the table asks "is this kind A or B". */
#ifndef GC_ALGO_RULES_H
#define GC_ALGO_RULES_H
#include "gc_algo.h"
#include "gc_ef.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Uplink messages: the gradient itself, or a compressor behind the
 * worker's memory. */
typedef enum { GC__UP_DENSE, GC__UP_COMP } gc__up_coding;
/* Downlink messages: dense, exact (the average's nonzeros, dense where
 * that is shorter), or a compressor's message. */
typedef enum { GC__DOWN_DENSE, GC__DOWN_EXACT, GC__DOWN_COMP } gc__down_coding;

/* What the server does with the average (1/P) sum m^p. */
typedef enum {
  GC__SERVER_DENSE,    /* send it densely                                  */
  GC__SERVER_EXACT,    /* send it exactly (GC__DOWN_EXACT)                 */
  GC__SERVER_EF,       /* compress it behind the server memory server_ef   */
  GC__SERVER_EF21,     /* h += average; send h densely                     */
  GC__SERVER_EF21_BC   /* h += average; x -= lr h; send C_s(x - w), w += q */
} gc__server_rule;

/* How the workers apply the decoded downlink D to their copy x. */
typedef enum {
  GC__APPLY_GRAD,      /* x -= lr D: D is on the gradient scale          */
  GC__APPLY_STEP,      /* x -= D: the step size is inside D              */
  GC__APPLY_MODEL      /* x += D: D moves the model copy itself (EF21-BC) */
} gc__apply_rule;

/* Who talks to whom, for the ledger, the network model and MPI. */
typedef enum {
  GC__COLL_NONE,       /* parameter server: P uplinks, one broadcast       */
  GC__COLL_ALLREDUCE,  /* ring allreduce of the n values (dense uplink) or
                          of the K values every rank shares             */
  GC__COLL_ALLGATHER   /* each rank sends its message to the P-1 others   */
} gc__collective;

/* The error memory E_t of theory.md 4.3 that the probes measure and the
 * bounds read (gc_algo.h: the probe views). */
typedef enum {
  GC__MEM_NONE,        /* no memory: E_t = 0                              */
  GC__MEM_WORKER,      /* worker memories eps^p only, in model units      */
  GC__MEM_SERVER,      /* worker memories and the server's delta, model
                          units: xi_bi applies                           */
  GC__MEM_SERVER_GRAD, /* the server's delta on the gradient scale (x lr) */
  GC__MEM_OTHER        /* memories outside 4.3 (EF21's h)                 */
} gc__memory;

/* flags */
enum {
  GC__ALGO_DGC = 1u << 0,          /* momentum > 0 runs the DGC memory on lr*g */
  GC__ALGO_SHARED_DRAWS = 1u << 1, /* every rank keeps up_params.stream      */
  GC__ALGO_GPU = 1u << 2,          /* cuda/algo/sim.cu has its step (and so
                                      training's --device cuda step)       */
  GC__ALGO_TRAIN_BOUNDS = 1u << 3  /* training's --bounds (theory.md 4.3)  */
};

/* The theorems of theory/bounds.c whose algorithm the method is; the
 * bounds check every other assumption on the run. */
enum {
  GC__BOUND_NONCONVEX = 1u << 0,   /* nonconvex_4.3: a memory of 4.3      */
  GC__BOUND_EF_SGD = 1u << 1,      /* ef_sgd_4.6: one EF node (the uplink's
                                      with P = 1, else the downlink's)    */
  GC__BOUND_EF21 = 1u << 2,        /* ef21_3d                             */
  GC__BOUND_MEM_SGD = 1u << 3,     /* mem_sgd_2.4 (with P = 1)            */
  GC__BOUND_OMEGA_EF = 1u << 4     /* omega_ef_4.8                        */
};

typedef struct gc__algo_desc {
  const char *name;          /* gc_algo_name, --algorithm                    */
  gc__up_coding up;
  gc__down_coding down;
  gc__server_rule server;
  gc_ef_kind worker_ef;      /* GC_EF_NONE with a dense uplink              */
  gc_ef_kind server_ef;      /* GC__SERVER_EF's memory, else GC_EF_NONE      */
  gc__apply_rule apply;
  gc__collective collective;
  gc__memory memory;
  unsigned flags;            /* GC__ALGO_*                                   */
  unsigned bounds;           /* GC__BOUND_*                                  */
} gc__algo_desc;

/* The row of kind k; for a kind outside the table a row named "unknown"
 * that applies nothing (gc_algo_config_check refuses such a kind). */
const gc__algo_desc *gc__algo(gc_algo_kind k);
/* The names of the kinds whose flags include every bit of `flags` (0: all
 * kinds), in kind order, joined by sep; truncated to fit cap.  For the
 * messages that list which methods support something. */
const char *gc__algo_names(unsigned flags, const char *sep, char *buf,
                           size_t cap);

int gc__algo_up_coding(gc_algo_kind k);
int gc__algo_down_coding(gc_algo_kind k);
/* The scale the workers apply the decoded downlink with: x += scale * D. */
double gc__algo_apply_scale(gc_algo_kind k, double lr);
/* Momentum: the DGC memory on lr*g (GC__ALGO_DGC and momentum > 0). */
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
