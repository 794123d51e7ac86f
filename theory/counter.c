/* counter.c -- the counterexample checks of docs/theory.md 5.1 and 5.2 and the
 * exact runs with cycle detection used by the instance search.  Every run
 * goes through gc_sim; this file only evaluates gradients, watches the
 * state and measures. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gc_errno.h"
#include "gc_npy.h"
#include "gc_theory.h"

/* The uni/bi configuration of the counterexamples: top-K both ways. */
static int topk_config(gc_algo_kind kind, const gc_problem *prob, size_t k,
                       size_t kd, int ties, gc_algo_config *cfg)
{
  gc_algo_config_default(cfg);
  cfg->kind = kind;
  cfg->workers = prob->workers;
  cfg->n = prob->n;
  cfg->dtype = GC_F64;
  cfg->up = cfg->down = gc_compressor_type_by_name("topk");
  if (!cfg->up)
    GC_ERROR("the topk compressor is not in this build", GC_EUNSUP);
  if (k == 0 || k > prob->n || kd == 0 || kd > prob->n)
    GC_ERRORF(GC_EINVAL, "need 1 <= K, K_d <= d = %zu (K = %zu, K_d = %zu)",
              prob->n, k, kd);
  cfg->up_params.k = k;
  cfg->up_params.ties = ties;
  cfg->down_params.k = kd;
  cfg->down_params.ties = ties;
  return GC_SUCCESS;
}

/* Open-addressing hash set of state indices, for cycle detection.  The
 * slots are calloc'ed (0 = empty, else index + 1) so that a large table
 * costs only the pages a run that repeats early touches. */
typedef struct state_table {
  size_t m;              /* doubles per state */
  size_t cap;            /* states stored at most */
  size_t nslot;          /* power of two > 2 cap */
  double *states;        /* cap * m */
  long *slot;            /* nslot, 0 = empty, else state index + 1 */
} state_table;

static uint64_t hash_state(const double *s, size_t m)
{
  uint64_t h = 1469598103934665603ull;   /* FNV-1a over the bytes */
  const unsigned char *b = (const unsigned char *) s;
  for (size_t i = 0; i < m * sizeof *s; i++) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

static int table_init(state_table *T, size_t m, size_t cap)
{
  T->m = m;
  T->cap = cap;
  T->nslot = 1;
  while (T->nslot < 2 * cap + 2)
    T->nslot <<= 1;
  T->states = malloc(cap * m * sizeof *T->states);
  T->slot = calloc(T->nslot, sizeof *T->slot);
  if (!T->states || !T->slot) {
    free(T->states);
    free(T->slot);
    GC_ERROR("out of memory", GC_ENOMEM);
  }
  return GC_SUCCESS;
}

static void table_free(state_table *T)
{
  free(T->states);
  free(T->slot);
}

/* Insert state number t (t == number stored so far, t < cap); return the
 * index of an equal earlier state, or -1. */
static long table_insert(state_table *T, long t, const double *s)
{
  /* +0.0 and -0.0 compare equal but hash differently: canonicalise. */
  double *dst = T->states + (size_t) t * T->m;
  for (size_t i = 0; i < T->m; i++)
    dst[i] = s[i] == 0 ? 0.0 : s[i];
  size_t mask = T->nslot - 1, h = (size_t) hash_state(dst, T->m) & mask;
  while (T->slot[h] > 0) {
    const double *o = T->states + (size_t) (T->slot[h] - 1) * T->m;
    if (!memcmp(o, dst, T->m * sizeof *dst))
      return T->slot[h] - 1;
    h = (h + 1) & mask;
  }
  T->slot[h] = t + 1;
  return -1;
}

/* An exact run: steps of gc_sim with exactness and tie checks, the full
 * state (x, worker memories, server memory) recorded each step. */
typedef struct exact_run {
  const gc_problem *prob;
  gc_sim *sim;
  size_t n, P, k, kd, m;
  int exact, ties;
  double **grads;
  double *state, *u;
  double *mag;           /* n, scratch of gc_topk_has_tie */
} exact_run;

/* Doubles in the full state: x, P worker memories, the server memory. */
static size_t state_len(const gc_problem *prob)
{
  return prob->n * (prob->workers + 2);
}

static void exact_free(exact_run *e)
{
  gc_sim_free(e->sim);
  if (e->grads)
    for (size_t p = 0; p < e->P; p++)
      free(e->grads[p]);
  free(e->grads);
  free(e->state);
  free(e->u);
  free(e->mag);
}

static int exact_init(exact_run *e, const gc_problem *prob, gc_algo_kind kind,
                      size_t k, size_t kd, int ties)
{
  memset(e, 0, sizeof *e);
  gc_algo_config cfg;
  GC_TRY(topk_config(kind, prob, k, kd, ties, &cfg));
  e->prob = prob;
  e->n = prob->n;
  e->P = prob->workers;
  e->k = k;
  e->kd = kd;
  e->m = state_len(prob);
  e->exact = gc_dyadic_vec_ok(prob->x0, e->n);
  int ok = (e->grads = calloc(e->P, sizeof *e->grads)) &&
           (e->state = calloc(e->m, sizeof *e->state)) &&
           (e->u = calloc(e->n, sizeof *e->u)) &&
           (e->mag = calloc(e->n, sizeof *e->mag));
  for (size_t p = 0; ok && p < e->P; p++)
    ok = (e->grads[p] = calloc(e->n, sizeof **e->grads)) != NULL;
  if (ok)
    ok = (e->sim = gc_sim_alloc(&cfg, prob->x0)) != NULL;
  if (!ok) {
    exact_free(e);
    return GC_ENOMEM;
  }
  return GC_SUCCESS;
}

/* Write the current full state to dst (e->m doubles), x first. */
static void exact_state(const exact_run *e, double *dst)
{
  size_t n = e->n;
  memcpy(dst, gc_sim_model(e->sim), n * sizeof *dst);
  for (size_t p = 0; p < e->P; p++) {
    const double *eps = gc_worker_memory(gc_sim_worker(e->sim, p));
    if (eps)
      memcpy(dst + n * (1 + p), eps, n * sizeof *dst);
    else
      memset(dst + n * (1 + p), 0, n * sizeof *dst);
  }
  const double *d = gc_server_memory(gc_sim_server(e->sim));
  if (d)
    memcpy(dst + n * (1 + e->P), d, n * sizeof *dst);
  else
    memset(dst + n * (1 + e->P), 0, n * sizeof *dst);
}

static int exact_step(exact_run *e, double lr)
{
  size_t n = e->n;
  const double *x = gc_sim_point(e->sim);
  /* the server's top-K input u = delta + mean m needs delta before */
  const double *d = gc_server_memory(gc_sim_server(e->sim));
  for (size_t i = 0; i < n; i++)
    e->u[i] = d ? d[i] : 0.0;
  for (size_t p = 0; p < e->P; p++)
    gc_problem_worker_grad(e->prob, p, x, e->grads[p]);
  GC_TRY(gc_sim_step(e->sim, (const void *const *) e->grads, lr));
  gc_server *s = gc_sim_server(e->sim);
  const double *agg = gc_server_aggregate(s);
  for (size_t i = 0; i < n; i++)
    e->u[i] += agg[i];
  for (size_t p = 0; p < e->P; p++) {
    gc_worker *w = gc_sim_worker(e->sim, p);
    const double *acc = gc_worker_accumulator(w);
    if (acc && gc_topk_has_tie(acc, n, e->k, e->mag))
      e->ties++;
    if (e->exact && !(gc_dyadic_vec_ok(acc, n) &&
                      gc_dyadic_vec_ok(gc_worker_sent(w), n) &&
                      gc_dyadic_vec_ok(gc_worker_memory(w), n)))
      e->exact = 0;
  }
  if (gc_server_memory(s) && gc_topk_has_tie(e->u, n, e->kd, e->mag))
    e->ties++;
  if (e->exact && !(gc_dyadic_vec_ok(agg, n) && gc_dyadic_vec_ok(e->u, n) &&
                    gc_dyadic_vec_ok(gc_server_sent(s), n) &&
                    gc_dyadic_vec_ok(gc_sim_model(e->sim), n) &&
                    (!gc_server_memory(s) ||
                     gc_dyadic_vec_ok(gc_server_memory(s), n))))
    e->exact = 0;
  return GC_SUCCESS;
}

int gc_theory_cycle_run(const gc_problem *prob, gc_algo_kind kind, size_t k,
                        size_t k_down, int ties, double lr, long max_steps,
                        gc_cycle_result *res)
{
  memset(res, 0, sizeof *res);
  if (max_steps < 2)
    GC_ERROR("cycle detection needs at least 2 steps", GC_EINVAL);
  exact_run e;
  GC_TRY(exact_init(&e, prob, kind, k, k_down, ties));
  if (!gc_dyadic_ok(lr))
    e.exact = 0;
  state_table T;
  double *gap = malloc(((size_t) max_steps + 1) * sizeof *gap);
  int st = gap ? table_init(&T, e.m, (size_t) max_steps + 1) : GC_ENOMEM;
  if (st != GC_SUCCESS) {
    free(gap);
    exact_free(&e);
    return st;
  }
  long t = 0, found = -1;
  for (;;) {
    exact_state(&e, e.state);
    gap[t] = gc_problem_gap(prob, gc_sim_model(e.sim));
    if ((found = table_insert(&T, t, e.state)) >= 0 || t == max_steps)
      break;
    if ((st = exact_step(&e, lr)) != GC_SUCCESS)
      break;
    t++;
  }
  if (st == GC_SUCCESS) {
    long a, b;   /* average over gap[a..b) */
    if (found >= 0) {
      res->start = found;
      res->period = t - found;
      a = found;
      b = t;
    } else {
      a = t / 2;
      b = t;
    }
    double s = 0;
    for (long i = a; i < b; i++)
      s += gap[i];
    res->limit = s / (double) (b - a);
    res->exact = e.exact;
    res->ties = e.ties;
  }
  table_free(&T);
  free(gap);
  exact_free(&e);
  return st;
}

/* One method of the 2-d example, with the full per-step record. */
static int cycle9_method(const gc_problem *prob, gc_algo_kind kind, int ties,
                         long steps, double *trace, double *gaps,
                         double *states, int *exact, int *nties)
{
  exact_run e;
  GC_TRY(exact_init(&e, prob, kind, 1, 1, ties));
  int st = GC_SUCCESS;
  for (long t = 0; t <= steps; t++) {
    const double *x = states + (size_t) t * e.m;   /* the state starts with x_t */
    exact_state(&e, states + (size_t) t * e.m);
    gaps[t] = gc_problem_gap(prob, x);
    if (t == steps)
      break;
    if ((st = exact_step(&e, 0.5)) != GC_SUCCESS)
      break;
    if (trace) {
      double *r = trace + (size_t) t * GC_CYCLE9_REC;
      const double *x1 = gc_sim_model(e.sim);
      r[0] = x[0];
      r[1] = x[1];
      for (size_t p = 0; p < 2; p++) {
        gc_worker *w = gc_sim_worker(e.sim, p);
        memcpy(r + 2 + 2 * p, gc_worker_sent(w), 2 * sizeof *r);
        memcpy(r + 8 + 2 * p, gc_worker_memory(w), 2 * sizeof *r);
      }
      r[6] = x[0] - x1[0];
      r[7] = x[1] - x1[1];
      const double *d = gc_server_memory(gc_sim_server(e.sim));
      r[12] = d ? d[0] : 0.0;
      r[13] = d ? d[1] : 0.0;
    }
  }
  *exact = e.exact;
  *nties = e.ties;
  exact_free(&e);
  return st;
}

/* The first state of states[0..count) (m doubles each) equal to an earlier
 * one: *start = that earlier t, *period = the distance (0: none). */
static int first_repeat(const double *states, size_t m, long count,
                        long *start, long *period)
{
  state_table T;
  GC_TRY(table_init(&T, m, (size_t) count));
  long found = -1, t;
  for (t = 0; t < count; t++)
    if ((found = table_insert(&T, t, states + (size_t) t * m)) >= 0)
      break;
  *start = found >= 0 ? found : 0;
  *period = found >= 0 ? t - found : 0;
  table_free(&T);
  return GC_SUCCESS;
}

int gc_theory_cycle9(int ties, long steps, gc_cycle_report *rep,
                     double *uni_trace, double *bi_trace)
{
  memset(rep, 0, sizeof *rep);
  if (steps < 30)
    GC_ERROR("the 2-d example needs at least 30 steps", GC_EINVAL);
  gc_problem *prob;
  GC_TRY(gc_problem_cycle9(&prob));
  size_t m = state_len(prob);
  double *gaps = malloc(((size_t) steps + 1) * sizeof *gaps);
  double *states = malloc(((size_t) steps + 1) * m * sizeof *states);
  int st = gaps && states ? GC_SUCCESS : GC_ENOMEM;
  int ex1 = 0, ex2 = 0, t1 = 0, t2 = 0;
  if (st == GC_SUCCESS)
    st = cycle9_method(prob, GC_ALGO_UNI, ties, steps, uni_trace, gaps, states,
                       &ex1, &t1);
  /* The map is deterministic, so the first repeat is the cycle for good. */
  if (st == GC_SUCCESS)
    st = first_repeat(states, m, steps + 1, &rep->uni_start, &rep->uni_period);
  if (st == GC_SUCCESS && rep->uni_period) {
    long a = rep->uni_start, p = rep->uni_period;
    double s = 0, mx = 0;
    for (long t = a; t < a + p; t++) {
      s += gaps[t];
      mx = fmax(mx, gaps[t]);
    }
    rep->uni_mean_gap = s / (double) p;
    rep->uni_max_gap = mx;
  }
  if (st == GC_SUCCESS)
    st = cycle9_method(prob, GC_ALGO_BI, ties, steps, bi_trace, gaps, states,
                       &ex2, &t2);
  if (st == GC_SUCCESS) {
    /* first t from which x = x* = 0 (resp. the whole state is 0), to the end */
    rep->bi_fixed_from = rep->bi_state_from = -1;
    int xzero = 1, szero = 1;
    for (long t = steps; t >= 0 && (xzero || szero); t--) {
      const double *st_t = states + (size_t) t * m;
      xzero &= st_t[0] == 0.0 && st_t[1] == 0.0;
      for (size_t i = 0; i < m; i++)
        szero &= st_t[i] == 0.0;
      if (xzero)
        rep->bi_fixed_from = t;
      if (szero)
        rep->bi_state_from = t;
    }
    rep->bi_final_gap = gaps[steps];
  }
  rep->exact = ex1 && ex2;
  rep->ties = t1 + t2;
  rep->steps = steps;
  free(gaps);
  free(states);
  gc_problem_free(prob);
  return st;
}

int gc_theory_toy(uint64_t seed, int ties, long steps, double lr,
                  const double *x0, const double *x0_down,
                  gc_toy_report *rep, double *gaps)
{
  memset(rep, 0, sizeof *rep);
  if (steps < 2 || !(lr > 0))
    GC_ERROR("the toy needs steps >= 2 and lr > 0", GC_EINVAL);
  gc_problem *prob, *probd;
  GC_TRY(gc_problem_toy(1.0, seed, &prob));
  /* The notebook's downlink-only curve used its function's default start
   * noise sigma = 5 (docs/theory.md 5.1). */
  int st = gc_problem_toy(5.0, seed, &probd);
  if (st != GC_SUCCESS) {
    gc_problem_free(prob);
    return st;
  }
  static const gc_algo_kind kinds[3] = { GC_ALGO_UNI, GC_ALGO_BI,
                                         GC_ALGO_DOWNLINK };
  /* The plateau: t >= 500 as in the notebook; the second half of a shorter
   * run.  xi over [200, 1000), the notebook's window, within the run. */
  rep->mean_from = steps > 500 ? 500 : steps / 2;
  rep->xi_to = steps < 1000 ? steps : 1000;
  rep->xi_from = rep->xi_to < 200 ? rep->xi_to : 200;
  double mean[3] = { 0, 0, 0 };
  double xi_sum = 0, xi_max = 0;
  long xi_cnt = 0;
  for (int a = 0; a < 3 && st == GC_SUCCESS; a++) {
    gc_algo_config cfg;
    const gc_problem *pr = a == 2 ? probd : prob;
    if ((st = topk_config(kinds[a], pr, 1, 1, ties, &cfg)) != GC_SUCCESS)
      break;
    const double *start = a == 2 ? (x0_down ? x0_down : probd->x0)
                                 : (x0 ? x0 : prob->x0);
    gc_theory_run *r = gc_theory_run_alloc(pr, &cfg, start);
    if (!r) {
      st = GC_ENOMEM;
      break;
    }
    gc_probe_row row;
    for (long t = 0; t < steps; t++) {
      if ((st = gc_theory_run_step(r, lr, &row)) != GC_SUCCESS)
        break;
      if (gaps)
        gaps[(size_t) t * 3 + (size_t) a] = row.f_gap;
      if (t >= rep->mean_from)
        mean[a] += row.f_gap;
      if (a == 0 && t >= rep->xi_from && t < rep->xi_to && isfinite(row.xi)) {
        xi_sum += row.xi;
        xi_max = fmax(xi_max, row.xi);
        xi_cnt++;
      }
    }
    if (st == GC_SUCCESS && a == 2) {
      gc_probe_summary s;
      gc_theory_run_summary(r, &s);
      rep->down_final = s.final_gap;
      rep->down_f0 = s.f0_gap;
    }
    gc_theory_run_free(r);
  }
  rep->uni_mean = mean[0] / (double) (steps - rep->mean_from);
  rep->bi_mean = mean[1] / (double) (steps - rep->mean_from);
  rep->uni_xi_mean = xi_cnt ? xi_sum / (double) xi_cnt : NAN;
  rep->uni_xi_max = xi_cnt ? xi_max : NAN;
  gc_problem_free(prob);
  gc_problem_free(probd);
  return st;
}
