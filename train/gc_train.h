/* gc_train.h -- data-parallel training of the reference nets through the
 * algorithm (gc_sim): the run's configuration, the device seam (nets on
 * another device, cuda/'s gc_cuda_nn_device), and a run's data, nets and
 * simulator stepped one step at a time (train.c).  The epoch driver, run
 * folder, logs and checkpoints are gc_train_run.h's (run.c).  The layer
 * between the library (lib/: it prints nothing and knows no run folder)
 * and the front end. */
#ifndef GC_TRAIN_H
#define GC_TRAIN_H
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include "gc_algo.h"
#include "gc_data.h"
#include "gc_netmodel.h"
#include "gc_nn.h"
#include "gc_transport.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ---- another device for the nets (a type table, as gc_compressor_type) ---
 * Training (gc_train_config.device) can compute its gradients and
 * evaluations on another device: cuda/ provides gc_cuda_nn_device
 * (gc_cuda_nn.h); lib itself knows no device.  All pointers here are host
 * memory; the implementation moves what it needs.  The same model, layer
 * layout and formulas as gc_nn (float rounding may differ: the CPU is the
 * oracle, tests state the tolerance). */
typedef struct gc_nn_device_type {
  const char *name;                                   /* "cuda"          */
  /* A workspace for `groups` mini-batches of at most `batch` examples of
   * `model` (gc_nn_alloc_model's names); NULL after reporting. */
  void *(*alloc)(const char *model, size_t groups, size_t batch);
  void (*free)(void *dev);                            /* NULL: no-op     */
  /* G <= groups mini-batches of B <= batch examples each: group g is
   * x[g B .. g B + B) ([G B][in_dim]) with labels y[g B ..).  For each g:
   * forward at w (length d), loss[g] = its mean loss, grads + g d =
   * d loss[g] / dw.  train != 0: batch statistics, each group with its own
   * running statistics stats + g ns (updated in place, as gc_nn_forward),
   * dropout keyed by (seed, worker0 + g, step), as if group g were worker
   * worker0 + g; train == 0: evaluation mode with the running statistics
   * stats (ns, read only), no dropout, seed/worker0/step unused.
   * GC_SUCCESS, GC_EINVAL (G or B too large), GC_ECUDA. */
  int (*grads)(void *dev, const float *w, float *stats, const float *x,
               const uint8_t *y, size_t G, size_t B, int train, uint64_t seed,
               uint32_t worker0, uint32_t step, double *loss, float *grads);
  /* Test accuracy and mean loss over ds at w in evaluation mode, as
   * gc_nn_evaluate. */
  int (*evaluate)(void *dev, const float *w, const float *stats,
                  const gc_dataset *ds, double *acc, double *loss);
  /* Optional (NULL: every step of the algorithm runs on the CPU through
   * gc_sim): the algorithm's step on the device too, so that nothing of
   * size P d crosses to the host.  Its state is gc_sim's, byte for byte
   * (gc_sim_state_save's layout), and its steps must be gc_sim_step's bit
   * for bit: training moves the state to the CPU for the steps it probes
   * and for checkpoints and evaluation, and back.
   * step_alloc: for cfg (as gc_sim_alloc) from x0 (host, length d), or
   * NULL after reporting (GC_EUNSUP: the method or compressor has no
   * device twin; training then steps on the CPU).  step_grads: grads (train
   * mode, G = P workers from worker 0) at the step's own point, the
   * gradients kept on the device for step_run.  step_run: gc_sim_step on
   * them, *support = gc_server_support_union. */
  void *(*step_alloc)(void *dev, const gc_algo_config *cfg, const float *x0);
  void (*step_free)(void *step);                      /* NULL: no-op     */
  int (*step_grads)(void *step, float *stats, const float *x,
                    const uint8_t *y, size_t B, uint64_t seed, uint32_t t,
                    double *loss);
  int (*step_run)(void *step, double lr, size_t *support);
  const gc_ledger *(*step_ledger)(const void *step);
  size_t (*step_state_bytes)(const void *step);
  int (*step_state_save)(const void *step, void *buf);
  int (*step_state_load)(void *step, const void *buf, size_t len);
} gc_nn_device_type;

/* ---- training (train.c) ------------------------------------------------ */
typedef struct gc_train_config {
  const char *dataset;      /* mnist | fmnist | cifar10                    */
  const char *model;        /* default: gc_nn_model_default(dataset)       */
  const char *data_dir;     /* folder holding <dataset>/                   */
  size_t workers;           /* P                                           */
  int noniid;               /* 0: IID shards; 1: two label shards each     */
  size_t batch;             /* B per worker                                */
  size_t epochs;
  double lr, momentum;      /* momentum: local heavy ball on the gradient  */
  const char *algorithm;    /* sgd uni bi downlink doublesqueeze ef21      */
  const char *compressor;   /* uplink and downlink type name (topk)        */
  double density, density_down;
  unsigned rank;            /* PowerSGD rank r (2)                         */
  /* The compressors' other parameters (K, levels, bucket, ...), or NULL
   * for the library's defaults; density, density_down, rank, seed and
   * the layer shapes above replace theirs. */
  const gc_compressor_params *up_params, *down_params;
  uint64_t seed;
  size_t threads;           /* steps, probes, evaluation (0: OpenMP default) */
  const char *out;          /* run folder                                  */
  int resume, quiet;
  size_t max_steps;         /* stop after this many steps in total (0: no) */
  size_t train_subset;      /* use the first N training examples (0: all)  */
  size_t test_subset;       /* evaluate on the first N test examples (0: all) */
  const char *config_file;  /* recorded in config.json                     */
  /* --bounds: the non-convex bound of theory.md 4.3 evaluated with
   * constants measured along the run, beside the measured mean
   * ||grad f(x_t)||^2, in DIR/bounds.csv (see gc_train_run). */
  size_t bounds_every;      /* a row every N epochs (0: off)               */
  size_t bounds_samples;    /* full-gradient samples per epoch (3)         */
  size_t bounds_hvps;       /* Hessian-vector products per L estimate (10) */
  size_t bounds_batch;      /* examples in the fixed batch for L (1000)    */
  /* Where the nets run: NULL for the CPU (gc_nn), else a device type whose
   * grads/evaluate replace gc_nn's (the P workers' mini-batches in one
   * call).  Compression, the algorithm and every file stay as on the CPU. */
  const gc_nn_device_type *device;
  /* Scale-out (gradcomp train --transport mpi).  NULL: every worker and
   * the server in this process.  Otherwise this process is the run's
   * process `proc` (its MPI rank) and steps the transport's local workers
   * and/or server (gc_sim_alloc_transport): it keeps only its workers'
   * shards of the training set, computes only their gradients, and the
   * transport's
   * gather_aux/bcast_aux (required) carry the BatchNorm statistics and
   * losses.  Rank 0 must run the server: it holds the ledger, evaluates
   * and writes the run folder (config.json, log.csv, model.npy,
   * checkpoint.json); every rank writes its own checkpoint-eN-rR.bin.
   * The log's probes (xi, delta) read every worker's state and are off
   * (nan, noted in config.json); --bounds and a device are refused. */
  const gc_transport *transport;
  int proc;
  /* The alpha-beta network model (gc_netmodel.h), or NULL: log.csv gains
   * net_comm_s (the epoch's modelled communication seconds, from the
   * ledger's per-step bytes) and time_model_cum (the run's cumulative
   * time_compute + time_compress + time_aggregate + net_comm_s). */
  const gc_net_model *net;
  /* Where the run is, for a signal handler (may be NULL): where[0] the
   * epoch being run (1-based), where[1] the steps done. */
  volatile sig_atomic_t *where;
  /* Start over in an out that holds a run (its files are removed first);
   * without it gc_train_run refuses such a folder unless resume is set. */
  int force;
  /* The driver's steps.csv: a row every log_every steps and at each
   * epoch's end (0: at epoch ends only). */
  size_t log_every;
} gc_train_config;

void gc_train_config_default(gc_train_config *c);
/* What a configuration means where it leaves a field to its default: the
 * model (the data set's default when unset) and the downlink density (the
 * uplink's when 0). */
const char *gc_train_config_model(const gc_train_config *c);
double gc_train_config_density_down(const gc_train_config *c);
/* The algorithm configuration a run of c gives gc_sim (dimension, method,
 * compressors and their settings), for a transport sized before the run
 * (gc_mpi_alloc).  *segs [out]: the layer shapes a shaped compressor
 * (PowerSGD) reads through a->up_params, malloc'ed (free() it once a is
 * no longer used), or NULL.  GC_EINVAL names an unknown model, method or
 * compressor; GC_ENOMEM. */
int gc_train_algo_config(const gc_train_config *c, gc_algo_config *a,
                         gc_segment **segs);

/* A run's data, nets and simulator (INITIALIZE / ITERATE / TEST, as GSL):
 *   t = gc_train_alloc(c);
 *   for each epoch e: gc_train_epoch(t, e);
 *       for s < steps_per_epoch: gc_train_step(t, e, s, probe, &info);
 *       gc_train_eval(t, &acc, &loss); gc_train_take_bytes(t, ...);
 *   gc_train_free(t);
 * The run folder, log, checkpoint files, progress and bounds.csv are the
 * driver's (run.c: gc_train_run).  The driver fields of
 * gc_train_config (out, epochs, resume, force, quiet, max_steps, where, net,
 * bounds_every's output) are not read here, but bounds_every > 0 builds
 * the measuring apparatus of --bounds and checks its assumptions. */
typedef struct gc_train gc_train;

/* What a driver needs to describe and log a run (gc_train_describe). */
typedef struct gc_train_info {
  size_t d, ns;               /* parameters; BatchNorm running statistics */
  size_t k, k_down;           /* resolved K and K_d                       */
  size_t threads;             /* for this process's workers               */
  size_t steps_per_epoch;
  size_t train_examples;      /* the whole run's (all shards)             */
  size_t test_examples;       /* here (0 away from process 0)             */
  int leader;                 /* evaluates: the folder is written here    */
  double bounds_gamma;        /* --bounds: sqrt(1-K/d) or sqrt(1-K_d/d)   */
  const char *bounds_xi;      /* "xi", "xi_bi" or "none"                  */
  size_t bounds_batch;        /* examples in the fixed batch for L        */
  double bounds_fd_step;      /* h of the Hessian-vector differences      */
  const char *device_step_refused; /* why c->device's step was refused
                                 (GC_EUNSUP: the algorithm steps on the
                                 CPU), or NULL; valid while t lives      */
} gc_train_info;

/* One step's numbers (gc_train_step). */
typedef struct gc_train_step_info {
  double loss;                /* mean of the P workers' batch losses      */
  size_t support;             /* |union of the uplink supports| (0 away
                                 from the server's process)               */
  size_t selected_min, selected_max; /* fewest and most entries a worker's
                                 compressed uplink sent, over the workers
                                 this process steps on the CPU (gaussk,
                                 dgc: the achieved count against k)       */
  size_t selected_workers;    /* how many: 0 for a dense uplink, a step on
                                 the device, a process without workers
                                 (then the two above are 0)               */
  double selected_sum;        /* their sum                                */
  double xi, delta;           /* a probed step: the method's xi (4.2/4.4)
                                 and the workers' mean uplink contraction
                                 (4.1), on the server's process; NaN when
                                 undefined or not probed                  */
  double compute_s, stats_s;  /* wall seconds: this process's gradients;
                                 the statistics exchange                  */
} gc_train_step_info;

/* The constants --bounds reads at every step (gc_train_bound_constants). */
typedef struct gc_train_bound_consts {
  double m2_max, m2_mean;     /* ||gbar_t||^2 over every step so far      */
  double xi_max, xi_mean;     /* the method's xi, NaN before a sample     */
  size_t xi_samples;
  /* the ladder of theory.md 4.9 (model units; 0 for SGD: no memory) */
  double gamma_hat_max;       /* max_t ||a_t - TopK(a_t)||/||a_t||        */
  double mem_norm_max;        /* max_t ||E_t||                            */
  double mem_norm2;           /* ||E_T||^2 after the last step            */
  double mem2_mean;           /* mean_{t<T} ||E_t||^2 (E_0 = 0)            */
  double rec2_mean;           /* mean_{t<T} e_t^2 of rung r2_xi            */
  double rec_excess;          /* max_t (||E_t|| - e_t), <= 0 expected      */
  double worker_mem2;         /* mean_p ||eps^p||^2 after the last step    */
  double server_mem2;         /* ||delta||^2 after the last step (0: none) */
} gc_train_bound_consts;

/* Load the data (under a transport: this process's shards; the test set
 * on process 0), build the nets, the initial model (gc_nn_init, seed) and
 * the simulator, and decide the probes.  c is copied (its strings are
 * not).  NULL after reporting: GC_EINVAL names a bad option, the data
 * errors name the file. */
gc_train *gc_train_alloc(const gc_train_config *c);
void gc_train_free(gc_train *t);                      /* NULL is a no-op */
void gc_train_describe(const gc_train *t, gc_train_info *out);
const gc_algo_config *gc_train_algo(const gc_train *t);
size_t gc_train_steps_done(const gc_train *t);
/* Epoch e's batch order: each local worker's shard shuffled, keyed by
 * (seed, worker + 1, e). */
int gc_train_epoch(gc_train *t, size_t e);
/* Step s (< steps_per_epoch) of epoch e: the local workers' losses and
 * gradients on their batch s at the current point, the statistics
 * exchange, gc_sim_step (or the device's step), and with probe != 0 the
 * probes (xi, delta).  Collective under a transport: every process calls
 * it with the same (e, s, probe).  GC_EDIVERGE (non-finite loss, gradient
 * or iterate; the message names the epoch and step), or a callee's code. */
int gc_train_step(gc_train *t, size_t e, size_t s, int probe,
                  gc_train_step_info *out);
/* Test accuracy and mean loss of the current model with the mean running
 * statistics, in evaluation mode; NaN away from process 0. */
int gc_train_eval(gc_train *t, double *acc, double *loss);
/* Wall seconds so far of the algorithm's step: the workers' side (with
 * the steps taken whole on a device) and the server's. */
void gc_train_times(const gc_train *t, double *worker_s, double *server_s);
/* The bytes of the steps since the last call: uplink and downlink (the
 * ledger's GC_UP and GC_DOWN totals; 0 away from the server's process),
 * BatchNorm statistics both ways, and with net != NULL the alpha-beta
 * model's seconds of those steps (gc_netmodel.h), step by step.  Clears
 * the ledgers (memory stays flat over long runs). */
void gc_train_take_bytes(gc_train *t, const gc_net_model *net, uint64_t *up,
                         uint64_t *down, uint64_t *stats, double *net_s);
/* The current model (d floats) and the mean running statistics (ns). */
const float *gc_train_weights(gc_train *t);
const float *gc_train_stats(const gc_train *t);
/* This process's state for a checkpoint: the statistics, then
 * gc_sim_state_save's (the step count, x, the local workers' memories,
 * the server's state where it runs).  load: GC_EBADLEN for a length that
 * is not this configuration's, else the callee's checks; the steps done
 * become the state's. */
size_t gc_train_state_bytes(const gc_train *t);
int gc_train_state_save(gc_train *t, void *buf);
int gc_train_state_load(gc_train *t, const void *buf, size_t len);
/* --bounds (a run allocated with bounds_every > 0; GC_EINVAL otherwise):
 * ||grad f(x)||^2 and f(x) over the whole training partition at the
 * current model, in evaluation mode; the local smoothness L there (power
 * iteration on finite-difference Hessian-vector products over a fixed
 * batch, warm-started from the last direction); the constants read at
 * every step. */
int gc_train_full_grad2(gc_train *t, double *g2, double *f);
int gc_train_smoothness(gc_train *t, double *L);
/* Right after gc_train_full_grad2 at the same model x: with D = grad f(x)
 * - grad f(x - E), E the run's error memories in model units (the virtual
 * iterate of theory.md 4.3; D = 0 for SGD), *gd2 = ||D||^2 and *inner =
 * <D, grad f(x)>, over the training partition in evaluation mode (rungs
 * r5_gradient and r6_inner of 4.9). */
int gc_train_memory_gdiff2(gc_train *t, double *gd2, double *inner);
void gc_train_bound_constants(const gc_train *t, gc_train_bound_consts *out);

#ifdef __cplusplus
}
#endif
#endif /* GC_TRAIN_H */
