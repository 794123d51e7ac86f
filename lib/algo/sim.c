/* sim.c -- the step driver (gc_transport.h) and its first transport, the
 * in-process one: P workers and one server in a loop, one model copy x
 * (all workers hold the same one), every message recorded in the ledger.
 * With a transport the same driver runs the nodes of one process and lets
 * the transport move the messages.  Message buffers are sized once at
 * allocation. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gc_algo.h"
#include "gc_vec.h"
#include "gc_errno.h"
#include "gc_algo_internal.h"
#include "gc_clock.h"
#include "gc_error_internal.h"
#include "gc_transport.h"

struct gc_sim {
  gc_algo_config cfg;
  gc_transport tr;       /* type NULL: in-process                    */
  size_t lo, hi;         /* local workers [lo, hi)                   */
  gc_worker **w;         /* [P], NULL outside [lo, hi)               */
  gc_worker *applier;    /* applies the downlink where no worker is  */
  gc_server *s;          /* NULL where the server runs elsewhere     */
  gc_ledger *ledger;
  void *x;               /* the workers' model copy (EF21-BC: w)   */
  uint8_t *upbuf;        /* P * upcap bytes                          */
  size_t upcap, downcap;
  const uint8_t **up;    /* [P] pointers into upbuf                  */
  size_t *uplen;         /* [P]                                      */
  uint8_t *down;
  uint32_t steps;
  double worker_s, server_s;   /* wall time inside the two sides */
  double comm_s;               /* and inside the transport       */
  size_t threads;              /* for the workers' steps (>= 1)     */
  int *wst;                    /* [P] status of each worker's step  */
  char *werr;                  /* [P][WERR] its error message       */
};

enum { WERR = 512 };

void gc_sim_free(gc_sim *s)
{
  if (!s)
    return;
  if (s->w)
    for (size_t p = 0; p < s->cfg.workers; p++)
      gc_worker_free(s->w[p]);
  free(s->w);
  gc_worker_free(s->applier);
  gc_server_free(s->s);
  gc_ledger_free(s->ledger);
  free(s->x);
  free(s->upbuf);
  free(s->up);
  free(s->uplen);
  free(s->down);
  free(s->wst);
  free(s->werr);
  free(s);
}

/* GC_ENOMEM only for its own buffers: a failing callee has reported its
 * own code and reason (a bad compressor setting is GC_EINVAL). */
gc_sim *gc_sim_alloc_transport(const gc_algo_config *cfg, const void *x0,
                               const gc_transport *tr)
{
  if (gc_algo_config_check(cfg) != GC_SUCCESS)
    return NULL;
  size_t P = cfg->workers;
  if (tr && !(tr->worker_lo <= tr->worker_hi && tr->worker_hi <= P))
    GC_ERROR_NULL("transport: local workers outside [0, P)", GC_EINVAL);
  size_t upcap = gc_algo_max_up_bytes(cfg);
  size_t downcap = gc_algo_max_down_bytes(cfg);
  if (!upcap || !downcap)
    return NULL;   /* a compressor could not be allocated */
  gc_sim *s = calloc(1, sizeof *s);
  if (!s)
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  s->cfg = *cfg;
  s->upcap = upcap;
  s->downcap = downcap;
  s->lo = tr ? tr->worker_lo : 0;
  s->hi = tr ? tr->worker_hi : P;
  if (tr)
    s->tr = *tr;
  int ok = (s->w = calloc(P, sizeof *s->w)) &&
           (s->x = malloc(cfg->n * (size_t) cfg->dtype)) &&
           (s->upbuf = malloc(P * s->upcap)) &&
           (s->up = calloc(P, sizeof *s->up)) &&
           (s->uplen = calloc(P, sizeof *s->uplen)) &&
           (s->down = malloc(s->downcap)) &&
           (s->wst = calloc(P, sizeof *s->wst)) &&
           (s->werr = calloc(P, WERR));
  s->threads = 1;
  if (!ok) {
    gc_sim_free(s);
    GC_ERROR_NULL("simulator: out of memory", GC_ENOMEM);
  }
  ok = (s->ledger = gc_ledger_alloc(P)) != NULL;
  if (ok && (!tr || tr->server))
    ok = (s->s = gc_server_alloc(cfg)) != NULL;
  for (size_t p = s->lo; ok && p < s->hi; p++)
    ok = (s->w[p] = gc_worker_alloc(cfg, p)) != NULL;
  if (ok && s->lo == s->hi)   /* no local worker: one to decode with */
    ok = (s->applier = gc_worker_alloc(cfg, 0)) != NULL;
  if (ok) {
    memcpy(s->x, x0, cfg->n * (size_t) cfg->dtype);
    ok = !s->s || gc_server_set_model(s->s, x0) == GC_SUCCESS;
  }
  if (!ok) {
    gc_sim_free(s);
    return NULL;
  }
  return s;
}

gc_sim *gc_sim_alloc(const gc_algo_config *cfg, const void *x0)
{
  return gc_sim_alloc_transport(cfg, x0, NULL);
}

void gc_sim_set_threads(gc_sim *s, size_t threads)
{
#ifdef _OPENMP
  s->threads = threads ? threads : 1;
#else
  (void) threads;
  s->threads = 1;
#endif
}

const void *gc_sim_point(const gc_sim *s) { return s->x; }

const void *gc_sim_model(const gc_sim *s)
{
  const void *m = s->s ? gc_server_model(s->s) : NULL;
  return m ? m : s->x;   /* EF21-BC away from its server: the copy w */
}

/* The one composition of a step, whatever the transport. */
static int sim_step(gc_sim *s, const void *const *grads, double lr)
{
  uint32_t t = s->steps;
  /* The counter keys the RNG and the ledger: it must not wrap to 0 (a
   * restored state can hold any value; fuzz_checkpoint found this). */
  if (t == UINT32_MAX)
    GC_ERROR("the step counter is at its limit 2^32 - 1", GC_EINVAL);
  double t0 = gc__now();
  for (size_t p = s->lo; p < s->hi; p++)
    s->up[p] = s->upbuf + p * s->upcap;
  if (s->threads > 1) {
    /* A failing worker reports on its own thread; its message is passed
     * on, and the first failure in worker order is the one returned. */
    #pragma omp parallel for schedule(static) num_threads((int) s->threads)
    for (size_t p = s->lo; p < s->hi; p++) {
      s->wst[p] = gc_worker_step(s->w[p], grads[p], lr, t, (uint8_t *) s->up[p],
                                 s->upcap, &s->uplen[p]);
      if (s->wst[p])
        snprintf(s->werr + p * WERR, WERR, "%s", gc_last_error());
    }
    for (size_t p = s->lo; p < s->hi; p++)
      if (s->wst[p]) {
        gc__error_restore(s->werr + p * WERR, s->wst[p]);
        return s->wst[p];
      }
  } else {
    int st = GC_SUCCESS;
    for (size_t p = s->lo; p < s->hi && st == GC_SUCCESS; p++)
      st = gc_worker_step(s->w[p], grads[p], lr, t, (uint8_t *) s->up[p],
                          s->upcap, &s->uplen[p]);
    if (st)
      return st;
  }
  double t1 = gc__now();
  if (s->tr.type && s->tr.type->gather_up)
    GC_TRY(s->tr.type->gather_up(s->tr.state, t, s->up, s->uplen));
  double t2 = gc__now();
  size_t downlen = 0;
  if (s->s)
    GC_TRY(gc_server_step(s->s, s->up, s->uplen, lr, t, s->down, s->downcap,
                          &downlen));
  double t3 = gc__now();
  if (s->tr.type && s->tr.type->bcast_down)
    GC_TRY(s->tr.type->bcast_down(s->tr.state, t, s->down, &downlen));
  double t4 = gc__now();
  /* Every worker would apply the same bytes to the same copy: apply once.
   * gc_worker_apply touches only x, so one worker stands for all. */
  gc_worker *w = s->lo < s->hi ? s->w[s->lo] : s->applier;
  if (w == s->applier)
    gc__worker_set_lr(w, lr);
  GC_TRY(gc_worker_apply(w, s->down, downlen, t, s->x));
  size_t bad = gc__vfirst_nonfinite(s->cfg.dtype, s->x, s->cfg.n);
  if (bad < s->cfg.n)
    GC_ERRORF(GC_EDIVERGE, "the iterate diverged at step %u (index %zu)",
              (unsigned) t, bad);
  if (s->s)   /* only the server's process sees every uplink */
    GC_TRY(gc_algo_record_step(&s->cfg, s->ledger, t, s->uplen, downlen));
  s->worker_s += (t1 - t0) + (gc__now() - t4);
  s->server_s += t3 - t2;
  s->comm_s += (t2 - t1) + (t4 - t3);
  s->steps++;
  return GC_SUCCESS;
}

/* The whole step on the simulator's threads: the workers' compressors
 * (one thread means one: their own OpenMP loops too), the server's
 * aggregate and compression, and the model's update. */
int gc_sim_step(gc_sim *s, const void *const *grads, double lr)
{
#ifdef _OPENMP
  int caller = omp_get_max_threads();
  omp_set_num_threads((int) s->threads);
#endif
  int st = sim_step(s, grads, lr);
#ifdef _OPENMP
  omp_set_num_threads(caller);
#endif
  return st;
}

/* Layout: steps (u32), x, each worker's state, the server's state.  One
 * walk serves size, save (out set) and load (in set), as in algo.c. */
static size_t sim_walk(gc_sim *s, uint8_t *out, const uint8_t *in)
{
  size_t at = 0, xb = s->cfg.n * (size_t) s->cfg.dtype;
  void *raw[2] = { &s->steps, s->x };
  size_t len[2] = { sizeof s->steps, xb };
  for (int i = 0; i < 2; at += len[i++]) {
    if (out)
      memcpy(out + at, raw[i], len[i]);
    if (in)
      memcpy(raw[i], in + at, len[i]);
  }
  for (size_t p = s->lo; p < s->hi; p++) {
    if (out)
      gc_worker_state_save(s->w[p], out + at);
    if (in)
      gc_worker_state_load(s->w[p], in + at);
    at += gc_worker_state_bytes(s->w[p]);
  }
  if (!s->s)
    return at;
  if (out)
    gc_server_state_save(s->s, out + at);
  if (in)
    gc_server_state_load(s->s, in + at);
  return at + gc_server_state_bytes(s->s);
}

size_t gc_sim_state_bytes(const gc_sim *s)
{
  return sim_walk((gc_sim *) s, NULL, NULL);
}

void gc_sim_state_save(const gc_sim *s, void *buf)
{
  sim_walk((gc_sim *) s, buf, NULL);   /* reads s only */
}

int gc_sim_state_load(gc_sim *s, const void *buf, size_t len)
{
  size_t want = gc_sim_state_bytes(s);
  if (len != want)
    GC_ERRORF(GC_EBADLEN, "simulator state of %zu bytes, expected %zu for"
              " this configuration", len, want);
  sim_walk(s, NULL, buf);
  return GC_SUCCESS;
}

void gc_sim_times(const gc_sim *s, double *worker_s, double *server_s)
{
  *worker_s = s->worker_s;
  *server_s = s->server_s;
}

double gc_sim_comm_time(const gc_sim *s) { return s->comm_s; }

uint32_t gc_sim_steps_done(const gc_sim *s) { return s->steps; }
gc_worker *gc_sim_worker(gc_sim *s, size_t p)
{
  return p < s->cfg.workers ? s->w[p] : NULL;   /* NULL where not local */
}
gc_server *gc_sim_server(gc_sim *s) { return s->s; }
const gc_ledger *gc_sim_ledger(const gc_sim *s) { return s->ledger; }
