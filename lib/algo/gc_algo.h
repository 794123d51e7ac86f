/* gc_algo.h -- distributed algorithms written once as worker/server step
 * functions over byte messages (theory.md section 3), the byte ledger, and the
 * in-process transport that drives P workers and one server.
 *
 * One step t (every worker holds the same model copy at the start):
 *   worker p:  gc_worker_step(grad_p at its model copy) -> uplink message
 *   server:    gc_server_step(all uplink messages)      -> downlink message
 *   worker p:  gc_worker_apply(downlink message)        -> model copy updated
 * Collective forms (allreduce, allgather) use the same three calls: the
 * "server" then stands for the collective's reduction, and the ledger counts
 * what each rank would send.  Transports only move the bytes, so the
 * in-process simulator and the MPI driver give bit-identical results.
 * The learning rate is applied where each method applies it: before
 * compression for (a), (b), (b'), after decompression for DoubleSqueeze and
 * EF21. */
#ifndef GC_ALGO_H
#define GC_ALGO_H
#include <stddef.h>
#include <stdint.h>
#include "gc_compressor.h"
#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)   /* the API libgradcomp.so exports */
#endif

typedef enum gc_algo_kind {
  GC_ALGO_SGD = 0,        /* dense: average of the gradients                */
  GC_ALGO_UNI,            /* (a) uplink compression + worker EF             */
  GC_ALGO_BI,             /* (b) + server EF and downlink compression (K_d) */
  GC_ALGO_DOWNLINK,       /* (b') dense uplink, compressed downlink + server EF */
  GC_ALGO_DOUBLESQUEEZE,  /* (c) EF on the gradient scale, lr after         */
  GC_ALGO_EF21,           /* (d) Richtarik et al.                           */
  GC_ALGO_EF21_BC,        /* EF21 + compressed model broadcast              */
  GC_ALGO_ALLREDUCE,      /* dense ring allreduce                           */
  GC_ALGO_ALLREDUCE_RANDK,/* shared-seed random-K values allreduced, EF     */
  GC_ALGO_ALLGATHER,      /* allgather of compressed messages, worker EF    */
  GC_ALGO_COUNT           /* the number of kinds (not a kind)               */
} gc_algo_kind;
/* What each kind does (codings, memories, apply, collective, the probes and
 * bounds that apply) is one row of the table in lib/algo/algo.c, read through
 * gc_algo_rules.h; a new kind is a value here, a row there and its step. */

const char *gc_algo_name(gc_algo_kind k);               /* "uni", "bi", ... */
int gc_algo_by_name(const char *name, gc_algo_kind *k); /* GC_EINVAL if unknown */

typedef struct gc_algo_config {
  gc_algo_kind kind;
  size_t workers;                   /* P >= 1                              */
  size_t n;                         /* model dimension d                   */
  int dtype;                        /* GC_F32 or GC_F64 (gc_dtype.h)       */
  const gc_compressor_type *up;     /* uplink compressor (worker side)     */
  gc_compressor_params up_params;   /* stream is set to the worker rank,
                                       except allreduce-randk (all ranks
                                       keep up_params.stream: shared set)
                                       and shaped types (PowerSGD: the
                                       same first Q on every rank)       */
  const gc_compressor_type *down;   /* downlink compressor (server side)   */
  gc_compressor_params down_params;
  /* Shaped compressors (GC_COMP_NEEDS_SHAPE, PowerSGD) read the layer
   * shapes from up_params.segments / down_params.segments (set both); the
   * arrays are the caller's and must stay valid while the config is used
   * to allocate (gc_sim_alloc, gc_worker_alloc, gc_server_alloc,
   * gc_algo_max_*_bytes).  gc_algo_config_check names a missing list. */
  /* Added by the algo module (gc_algo_config_default sets them): */
  int ef21_init;        /* EF21/EF21-BC h_i^0: GC_EF21_INIT_COMPRESSED
                           (h^0 = C(g(x0)), default) or _GRADIENT (g(x0),
                           sent densely at the first step; gc_ef.h)      */
  double momentum;      /* > 0: uni/allgather/allreduce-randk workers use
                           the DGC memory (momentum correction, masking) on
                           lr*g instead of the plain residual (default 0) */
  int nesterov;         /* DGC Nesterov variant (default 0)               */
  double clip_norm;     /* DGC local clipping of lr*g at clip/sqrt(P), 0 off */
} gc_algo_config;

/* Defaults: SGD, P = 1, float64, topk both ways at density 0.01. */
void gc_algo_config_default(gc_algo_config *cfg);
/* sizeof(gc_algo_config) in the library, for bindings that mirror it. */
size_t gc_algo_config_size(void);
/* GC_EINVAL (naming the field) for P = 0, n = 0 or n >= 2^32, a bad dtype,
 * a missing compressor the method needs, or momentum outside [0,1).  A
 * compressor setting is checked by the compressor when it is allocated. */
int gc_algo_config_check(const gc_algo_config *cfg);

/* ---- the byte ledger: every message, per step, worker and direction ---- */
enum { GC_UP = 0, GC_DOWN = 1 };
typedef struct gc_ledger gc_ledger;
gc_ledger *gc_ledger_alloc(size_t workers);
void gc_ledger_free(gc_ledger *l);
int gc_ledger_record(gc_ledger *l, uint32_t step, size_t worker, int dir,
                     size_t bytes);
uint64_t gc_ledger_total(const gc_ledger *l, int dir);          /* all steps */
uint64_t gc_ledger_step_total(const gc_ledger *l, uint32_t step, int dir);
uint64_t gc_ledger_worker_total(const gc_ledger *l, size_t worker, int dir);
/* CSV "step,worker,direction,bytes", one row per message (appended). */
int gc_ledger_write_csv(const gc_ledger *l, const char *path);
/* Added by the algo module.  A broadcast is recorded twice: once per
 * receiving worker (GC_DOWN rows) and once as the message itself
 * (direction GC_LEDGER_BCAST, worker "all" in the CSV); the totals of the
 * queries above take dir = GC_LEDGER_BCAST for the latter. */
enum { GC_LEDGER_BCAST = 2 };
#define GC_LEDGER_BROADCAST SIZE_MAX
int gc_ledger_record_broadcast(gc_ledger *l, uint32_t step, size_t bytes);
size_t gc_ledger_rows(const gc_ledger *l);   /* rows recorded so far */
void gc_ledger_clear(gc_ledger *l);

/* ---- node state and step functions ------------------------------------ */
typedef struct gc_worker gc_worker;
typedef struct gc_server gc_server;

/* NULL after reporting (a bad configuration or compressor setting, by the
 * call that found it, or GC_ENOMEM); gc_last_error_code() says which. */
gc_worker *gc_worker_alloc(const gc_algo_config *cfg, size_t rank);
void gc_worker_free(gc_worker *w);
gc_server *gc_server_alloc(const gc_algo_config *cfg);
void gc_server_free(gc_server *s);
size_t gc_algo_max_up_bytes(const gc_algo_config *cfg);
size_t gc_algo_max_down_bytes(const gc_algo_config *cfg);
/* Added by the algo module.  Record one step's messages in the ledger as
 * the method's transport sends them: parameter-server forms, each uplink
 * message, the downlink once per worker plus one broadcast row; dense
 * allreduce, what each rank sends in a ring allreduce of n values (the
 * chunks it forwards in reduce-scatter and allgather, 2(P-1)/P n values in
 * all); allreduce-randk, the same ring over the K values; allgather, each
 * rank sends its message to the P-1 others.  No downlink for collectives. */
int gc_algo_record_step(const gc_algo_config *cfg, gc_ledger *l,
                        uint32_t step, const size_t *up_len, size_t down_len);
/* EF21-BC: the server's model x (length n) starts at x0 (default 0).
 * GC_EDOM for a non-finite x0. */
int gc_server_set_model(gc_server *s, const void *x0);
const void *gc_server_model(const gc_server *s);   /* NULL except EF21-BC */

/* The index of the first NaN or +-Inf of x (length n, dtype GC_F32 or
 * GC_F64), n when every entry is finite: the check gc_worker_step makes
 * (one vectorised read of x), for a caller whose processes must agree
 * that every gradient is finite before any of them steps its memory. */
size_t gc_first_nonfinite(int dtype, const void *x, size_t n);
/* Worker p: from its stochastic gradient at its model copy (length n,
 * cfg->dtype) and the step size lr, write the uplink message.
 * Returns GC_SUCCESS, GC_EDOM (non-finite gradient), GC_ENOSPACE. */
int gc_worker_step(gc_worker *w, const void *grad, double lr, uint32_t step,
                   uint8_t *up, size_t cap, size_t *len);
/* Server: aggregate the P uplink messages, update its memories and write
 * the downlink message (identical for every worker). */
int gc_server_step(gc_server *s, const uint8_t *const *up,
                   const size_t *up_len, double lr, uint32_t step,
                   uint8_t *down, size_t cap, size_t *len);
/* Worker: apply the downlink message to its model copy x (length n).
 * It changes only x (so one call serves every worker holding the same
 * copy) and uses the step size of this worker's last gc_worker_step:
 * x -= lr*D for SGD, allreduce, (b'), DoubleSqueeze and EF21 (D = the
 * decoded gradient-scale message), x -= D for uni, bi, allgather and
 * allreduce-randk (the step is inside D), x += D for EF21-BC (x is w). */
int gc_worker_apply(gc_worker *w, const uint8_t *down, size_t len,
                    uint32_t step, void *x);
/* The decoding under gc_worker_apply with the caller's scale: y += scale *
 * D (length n), D the downlink's decoded message; gc_worker_apply is
 * scale -1 for uni, bi, allgather, allreduce-randk, -lr for SGD, (b'),
 * DoubleSqueeze and EF21, +1 for EF21-BC.  A DDP hook wants D itself
 * (scale 1 into zeros).  Errors as gc_worker_apply; y untouched then. */
int gc_worker_decode_down(gc_worker *w, const uint8_t *down, size_t len,
                          uint32_t step, double scale, void *y);

/* Probes: read-only views (length n, cfg->dtype), NULL where the method has
 * no such state.  Valid until the next step call. */
const void *gc_worker_memory(const gc_worker *w);        /* eps^p (or h_i) */
const void *gc_worker_accumulator(const gc_worker *w);   /* acc^p of last step */
/* Entries the last uplink message sent (gc_compress_info.selected: the
 * achieved count of a sparsifier, n for dense messages), 0 before any. */
size_t gc_worker_selected(const gc_worker *w);
const void *gc_worker_sent(const gc_worker *w);          /* decoded m^p       */
const void *gc_server_memory(const gc_server *s);        /* delta (or h)      */
const void *gc_server_aggregate(const gc_server *s);     /* (1/P) sum m^p     */
const void *gc_server_sent(const gc_server *s);          /* decoded downlink  */
/* |S| of the last step, counted as the nonzeros of (1/P) sum m^p: what the
 * unidirectional server broadcasts.  It equals |union supp m^p| unless
 * entries cancel exactly (possible in dyadic toys such as cycle9). */
size_t gc_server_support_union(const gc_server *s);
/* The probes are exactly the quantities of theory.md 4.2-4.4: acc^p =
 * eps^p + lr g^p before compression (DoubleSqueeze: g^p + eps^p; EF21:
 * g^p - h_i), the worker memory after the step, the server memory after
 * the step (bi: delta; downlink-only and DoubleSqueeze: delta in gradient
 * units; EF21: h).  So E_t = (1/P) sum eps^p (+ delta for bi). */

/* Checkpoints: everything a worker or the server carries from one step to
 * the next (memories, DGC momentum, EF21 h, the EF21-BC model, compressor
 * warm starts, whether the first step was taken), as bytes.  save writes
 * *_state_bytes() bytes; load reads as many into an object allocated
 * with the same configuration, which then continues bit-identically. */
size_t gc_worker_state_bytes(const gc_worker *w);
void gc_worker_state_save(const gc_worker *w, void *buf);
void gc_worker_state_load(gc_worker *w, const void *buf);
size_t gc_server_state_bytes(const gc_server *s);
void gc_server_state_save(const gc_server *s, void *buf);
void gc_server_state_load(gc_server *s, const void *buf);

/* ---- the in-process transport ----------------------------------------- */
typedef struct gc_sim gc_sim;
/* x0: the start (length n, cfg->dtype), copied. */
gc_sim *gc_sim_alloc(const gc_algo_config *cfg, const void *x0);
void gc_sim_free(gc_sim *s);
/* Where gradients must be evaluated this step (the workers' model copy). */
const void *gc_sim_point(const gc_sim *s);
/* The server's model (differs from the point only for EF21-BC). */
const void *gc_sim_model(const gc_sim *s);
/* One synchronous step from the P gradients grads[p] (each length n). */
int gc_sim_step(gc_sim *s, const void *const *grads, double lr);
/* Run each step on up to `threads` OpenMP threads: the P workers' steps
 * (error feedback, compression, encoding) side by side, then the server's
 * step and the model's update with the vector passes and compressor loops
 * on those threads; 1 (the default) runs everything on one, the workers in
 * order.  The caller's omp_set_num_threads is put back after each step.
 * The results are bit-identical for any count: each worker touches only
 * its own state and message, the server decodes in worker order, and the
 * threaded passes split by coordinates. */
void gc_sim_set_threads(gc_sim *s, size_t threads);
uint32_t gc_sim_steps_done(const gc_sim *s);
/* The whole simulation state (step count, x, every worker and the server)
 * for checkpoints; load returns GC_EBADLEN when len is not
 * gc_sim_state_bytes(s) of a simulator with the same configuration. */
size_t gc_sim_state_bytes(const gc_sim *s);
void gc_sim_state_save(const gc_sim *s, void *buf);
int gc_sim_state_load(gc_sim *s, const void *buf, size_t len);
gc_worker *gc_sim_worker(gc_sim *s, size_t p);
gc_server *gc_sim_server(gc_sim *s);
const gc_ledger *gc_sim_ledger(const gc_sim *s);
/* Wall seconds spent so far inside gc_sim_step on the workers' side (error
 * feedback, compression, encoding, applying the downlink) and the
 * server's (decoding, aggregation, downlink compression). */
void gc_sim_times(const gc_sim *s, double *worker_s, double *server_s);

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_ALGO_H */
