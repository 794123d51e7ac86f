/* search_exact.c -- exact rationals, the rational twin of uni and bi top-K,
 * and the per-instance evaluation of the counterexample search. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_errno.h"
#include "gc_search.h"

/* ---- exact rationals ------------------------------------------------------ */

/* Every product of two gc_rat fields is below 2^126 and every sum of two
 * such products below 2^127, so one 128-bit intermediate holds any result
 * exactly before it is reduced. */
__extension__ typedef __int128 wide;
__extension__ typedef unsigned __int128 uwide;

/* Binary gcd of two non-zero 64-bit values (the common case, and much
 * cheaper than 128-bit division). */
static uint64_t gcd64(uint64_t a, uint64_t b)
{
  int shift = __builtin_ctzll(a | b);
  a >>= __builtin_ctzll(a);
  do {
    b >>= __builtin_ctzll(b);
    if (a > b) {
      uint64_t t = a;
      a = b;
      b = t;
    }
    b -= a;
  } while (b);
  return a << shift;
}

static uwide gcd_wide(uwide a, uwide b)
{
  while (b) {
    uwide t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static int reduce(wide num, wide den, gc_rat *r)
{
  if (den < 0) {
    num = -num;
    den = -den;
  }
  uwide a = (uwide) (num < 0 ? -num : num), b = (uwide) den;
  if (a == 0) {
    r->num = 0;
    r->den = 1;
    return GC_RAT_OK;
  }
  if (b != 1) {
    uwide g = (a | b) >> 64 ? gcd_wide(a, b) : gcd64((uint64_t) a, (uint64_t) b);
    num /= (wide) g;
    den /= (wide) g;
  }
  if (num > INT64_MAX || num < -INT64_MAX || den > INT64_MAX)
    return GC_RAT_OVERFLOW;
  r->num = (int64_t) num;
  r->den = (int64_t) den;
  return GC_RAT_OK;
}

int gc_rat_make(int64_t num, int64_t den, gc_rat *r)
{
  return reduce(num, den, r);
}

int gc_rat_add(gc_rat a, gc_rat b, gc_rat *r)
{
  return reduce((wide) a.num * b.den + (wide) b.num * a.den,
                (wide) a.den * b.den, r);
}

int gc_rat_sub(gc_rat a, gc_rat b, gc_rat *r)
{
  return reduce((wide) a.num * b.den - (wide) b.num * a.den,
                (wide) a.den * b.den, r);
}

int gc_rat_mul(gc_rat a, gc_rat b, gc_rat *r)
{
  return reduce((wide) a.num * b.num, (wide) a.den * b.den, r);
}

int gc_rat_div_int(gc_rat a, int64_t k, gc_rat *r)
{
  return reduce(a.num, (wide) a.den * k, r);
}

int gc_rat_cmp(gc_rat a, gc_rat b)
{
  wide l = (wide) a.num * b.den, g = (wide) b.num * a.den;
  return (l > g) - (l < g);
}

int gc_rat_cmp_abs(gc_rat a, gc_rat b)
{
  wide l = (wide) (a.num < 0 ? -a.num : a.num) * b.den;
  wide g = (wide) (b.num < 0 ? -b.num : b.num) * a.den;
  return (l > g) - (l < g);
}

double gc_rat_to_double(gc_rat a)
{
  return (double) a.num / (double) a.den;
}

int gc_rat_format(gc_rat a, char *buf, size_t cap)
{
  if (a.den == 1)
    return snprintf(buf, cap, "%lld", (long long) a.num);
  return snprintf(buf, cap, "%lld/%lld", (long long) a.num, (long long) a.den);
}

int gc_rat_topk(const gc_rat *v, size_t n, size_t k, int ties,
                unsigned char *keep)
{
  /* Rank each entry by the entries that beat it: larger magnitude, or equal
   * magnitude and the index the tie rule prefers.  n is tiny here. */
  for (size_t i = 0; i < n; i++) {
    size_t beaten = 0;
    for (size_t j = 0; j < n; j++) {
      if (j == i)
        continue;
      int c = gc_rat_cmp_abs(v[j], v[i]);
      if (c > 0 || (c == 0 && (ties == GC_TIES_HIGH ? j > i : j < i)))
        beaten++;
    }
    keep[i] = beaten < k;
  }
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++)
      if (keep[i] && !keep[j] && v[i].num != 0 &&
          gc_rat_cmp_abs(v[i], v[j]) == 0)
        return 1;
  return 0;
}

/* ---- the rational twin of (a) and (b) ------------------------------------ */

/* Fractions per full state at most: x, P worker memories, the server memory. */
#define STATE_MAX (GC_SEARCH_MAX_D * (GC_SEARCH_MAX_P + 2))

struct gc_search_ws {
  long max_steps;
  gc_rat *states;   /* (max_steps + 1) * STATE_MAX */
  double *gap;      /* max_steps + 1, F-F* rounded (for open runs) */
  long *slot;       /* hash table: 0 empty, else state index + 1 */
  size_t nslot;
};

gc_search_ws *gc_search_ws_alloc(long max_steps)
{
  if (max_steps < 2)
    GC_ERROR_NULL("an exact run needs at least 2 steps", GC_EINVAL);
  gc_search_ws *w = calloc(1, sizeof *w);
  if (!w)
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  size_t cap = (size_t) max_steps + 1;
  w->max_steps = max_steps;
  w->nslot = 1;
  while (w->nslot < 2 * cap + 2)
    w->nslot <<= 1;
  w->states = malloc(cap * STATE_MAX * sizeof *w->states);
  w->gap = malloc(cap * sizeof *w->gap);
  w->slot = malloc(w->nslot * sizeof *w->slot);
  if (!w->states || !w->gap || !w->slot) {
    gc_search_ws_free(w);
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  }
  return w;
}

void gc_search_ws_free(gc_search_ws *w)
{
  if (!w)
    return;
  free(w->states);
  free(w->gap);
  free(w->slot);
  free(w);
}

static uint64_t hash_state(const gc_rat *s, size_t m)
{
  uint64_t h = 1469598103934665603ull;   /* FNV-1a over the fields */
  for (size_t i = 0; i < m; i++) {
    h = (h ^ (uint64_t) s[i].num) * 1099511628211ull;
    h = (h ^ (uint64_t) s[i].den) * 1099511628211ull;
  }
  return h;
}

/* Insert state t (already at w->states + t*m); return the index of an
 * equal earlier state, or -1.  Lowest terms make equality bitwise. */
static long insert_state(gc_search_ws *w, long t, size_t m)
{
  const gc_rat *s = w->states + (size_t) t * STATE_MAX;
  size_t mask = w->nslot - 1, h = (size_t) hash_state(s, m) & mask;
  while (w->slot[h] > 0) {
    const gc_rat *o = w->states + (size_t) (w->slot[h] - 1) * STATE_MAX;
    if (!memcmp(o, s, m * sizeof *s))
      return w->slot[h] - 1;
    h = (h + 1) & mask;
  }
  w->slot[h] = t + 1;
  return -1;
}

/* F - F* = 1/2 ||x - x*||^2, exactly. */
static int gap_exact(const gc_rat *x, const gc_rat *xstar, size_t d, gc_rat *g)
{
  gc_rat s = { 0, 1 }, e, e2;
  for (size_t i = 0; i < d; i++)
    if (gc_rat_sub(x[i], xstar[i], &e) || gc_rat_mul(e, e, &e2) ||
        gc_rat_add(s, e2, &s))
      return GC_RAT_OVERFLOW;
  return gc_rat_div_int(s, 2, g);
}

static double gap_double(const gc_rat *x, const gc_rat *xstar, size_t d)
{
  double s = 0;
  for (size_t i = 0; i < d; i++) {
    double e = gc_rat_to_double(x[i]) - gc_rat_to_double(xstar[i]);
    s += e * e;
  }
  return 0.5 * s;
}

/* One step of (a) or (b) on the state s = (x, eps^1..eps^P, delta), in
 * place; the operations of theory.md 3 in the order gc_sim does them.
 * Adds the decisive ties met to *ties. */
static int step_exact(const gc_search_instance *in, int bi, int ties,
                      gc_rat *s, int *nties)
{
  size_t P = in->P, d = in->d;
  gc_rat *x = s, *delta = s + d * (P + 1);
  gc_rat acc[GC_SEARCH_MAX_D], sum[GC_SEARCH_MAX_D], g;
  unsigned char keep[GC_SEARCH_MAX_D];
  for (size_t i = 0; i < d; i++)
    sum[i] = (gc_rat) { 0, 1 };
  for (size_t p = 0; p < P; p++) {
    gc_rat *eps = s + d * (1 + p);
    for (size_t i = 0; i < d; i++)   /* acc = eps + alpha (x - b_p) */
      if (gc_rat_sub(x[i], in->b[p * d + i], &g) ||
          gc_rat_mul(in->alpha, g, &g) || gc_rat_add(eps[i], g, &acc[i]))
        return GC_RAT_OVERFLOW;
    *nties += gc_rat_topk(acc, d, in->k, ties, keep);
    for (size_t i = 0; i < d; i++) {   /* m = TopK(acc), eps = acc - m */
      eps[i] = keep[i] ? (gc_rat) { 0, 1 } : acc[i];
      if (keep[i] && gc_rat_add(sum[i], acc[i], &sum[i]))
        return GC_RAT_OVERFLOW;
    }
  }
  for (size_t i = 0; i < d; i++)   /* m = (1/P) sum m^p */
    if (gc_rat_div_int(sum[i], (int64_t) P, &sum[i]))
      return GC_RAT_OVERFLOW;
  if (bi) {   /* u = delta + m, q = TopK_d(u), delta = u - q, x -= q */
    gc_rat *u = acc;
    for (size_t i = 0; i < d; i++)
      if (gc_rat_add(delta[i], sum[i], &u[i]))
        return GC_RAT_OVERFLOW;
    *nties += gc_rat_topk(u, d, in->kd, ties, keep);
    for (size_t i = 0; i < d; i++) {
      delta[i] = keep[i] ? (gc_rat) { 0, 1 } : u[i];
      sum[i] = keep[i] ? u[i] : (gc_rat) { 0, 1 };
    }
  }
  for (size_t i = 0; i < d; i++)
    if (gc_rat_sub(x[i], sum[i], &x[i]))
      return GC_RAT_OVERFLOW;
  return GC_RAT_OK;
}

int gc_search_run_exact(gc_search_ws *w, const gc_search_instance *in, int bi,
                        int ties, gc_search_run *res)
{
  memset(res, 0, sizeof *res);
  size_t P = in->P, d = in->d, m = d * (P + 2);
  if (P < 1 || P > GC_SEARCH_MAX_P || d < 1 || d > GC_SEARCH_MAX_D)
    GC_ERRORF(GC_EINVAL, "exact runs take 1 <= P <= %d, 1 <= d <= %d "
              "(P = %zu, d = %zu)", GC_SEARCH_MAX_P, GC_SEARCH_MAX_D, P, d);
  if (in->k < 1 || in->k > d || in->kd < 1 || in->kd > d)
    GC_ERRORF(GC_EINVAL, "need 1 <= K, K_d <= d = %zu (K = %zu, K_d = %zu)",
              d, in->k, in->kd);
  gc_rat xstar[GC_SEARCH_MAX_D];
  for (size_t i = 0; i < d; i++) {
    gc_rat s = { 0, 1 };
    for (size_t p = 0; p < P && !res->status; p++)
      if (gc_rat_add(s, in->b[p * d + i], &s))
        res->status = GC_RUN_OVERFLOW;
    if (res->status || gc_rat_div_int(s, (int64_t) P, &xstar[i])) {
      res->status = GC_RUN_OVERFLOW;
      return GC_SUCCESS;
    }
  }
  memset(w->slot, 0, w->nslot * sizeof *w->slot);
  gc_rat *s0 = w->states;
  for (size_t i = 0; i < m; i++)
    s0[i] = i < d ? in->x0[i] : (gc_rat) { 0, 1 };
  long t = 0, found = -1;
  for (;;) {
    gc_rat *s = w->states + (size_t) t * STATE_MAX;
    w->gap[t] = gap_double(s, xstar, d);
    if ((found = insert_state(w, t, m)) >= 0 || t == w->max_steps)
      break;
    gc_rat *next = s + STATE_MAX;
    memcpy(next, s, m * sizeof *s);
    if (step_exact(in, bi, ties, next, &res->ties)) {
      res->status = GC_RUN_OVERFLOW;
      res->steps = t;
      return GC_SUCCESS;
    }
    t++;
  }
  res->steps = t;
  if (found < 0) {   /* open: the rounded mean over the last half */
    double sum = 0;
    for (long i = t / 2; i < t; i++)
      sum += w->gap[i];
    res->status = GC_RUN_OPEN;
    res->limit_f = sum / (double) (t - t / 2);
    return GC_SUCCESS;
  }
  res->start = found;
  res->period = t - found;
  gc_rat sum = { 0, 1 }, g;
  for (long i = found; i < t; i++)
    if (gap_exact(w->states + (size_t) i * STATE_MAX, xstar, d, &g) ||
        gc_rat_add(sum, g, &sum)) {
      res->status = GC_RUN_OVERFLOW;
      return GC_SUCCESS;
    }
  if (gc_rat_div_int(sum, res->period, &res->limit)) {
    res->status = GC_RUN_OVERFLOW;
    return GC_SUCCESS;
  }
  res->status = GC_RUN_CYCLE;
  res->limit_f = gc_rat_to_double(res->limit);
  return GC_SUCCESS;
}

/* ---- verdicts ------------------------------------------------------------- */

const char *gc_search_verdict_name(int v)
{
  static const char *name[GC_VERDICT_COUNT] = { "bi_better", "bi_worse",
                                                "equal", "no_cycle" };
  return v >= 0 && v < GC_VERDICT_COUNT ? name[v] : "?";
}

/* The tolerance as the exact fraction 1/10^12, so that "below" is decided
 * exactly for exact limits. */
static const gc_rat converged = { 1, 1000000000000 };

static int run_converged(const gc_search_run *r)
{
  return r->status == GC_RUN_CYCLE ? gc_rat_cmp(r->limit, converged) < 0
                                   : r->limit_f < GC_SEARCH_CONVERGED;
}

int gc_search_verdict_exact(const gc_search_run *uni, const gc_search_run *bi)
{
  if (run_converged(uni) && run_converged(bi))
    return GC_VERDICT_EQUAL;
  if (uni->status != GC_RUN_CYCLE || bi->status != GC_RUN_CYCLE)
    return GC_VERDICT_NO_CYCLE;
  int c = gc_rat_cmp(bi->limit, uni->limit);
  return c < 0 ? GC_VERDICT_BETTER : c > 0 ? GC_VERDICT_WORSE
                                           : GC_VERDICT_EQUAL;
}

int gc_search_verdict_float(const gc_cycle_result *uni,
                            const gc_cycle_result *bi)
{
  if (uni->limit < GC_SEARCH_CONVERGED && bi->limit < GC_SEARCH_CONVERGED)
    return GC_VERDICT_EQUAL;
  if (!uni->period || !bi->period)
    return GC_VERDICT_NO_CYCLE;
  double tol = 1e-9 * fmax(uni->limit, bi->limit);
  return bi->limit < uni->limit - tol   ? GC_VERDICT_BETTER
         : bi->limit > uni->limit + tol ? GC_VERDICT_WORSE
                                        : GC_VERDICT_EQUAL;
}

/* ---- one instance --------------------------------------------------------- */

static int float_problem(const gc_search_instance *in, gc_problem **out)
{
  gc_problem *prob = gc_problem_alloc(in->P, in->d, GC_PROBLEM_DIAG);
  if (!prob)
    return gc_last_error_code() ? gc_last_error_code() : GC_ENOMEM;
  for (size_t i = 0; i < in->P * in->d; i++) {
    prob->a[i] = 1.0;
    prob->b[i] = gc_rat_to_double(in->b[i]);
  }
  for (size_t i = 0; i < in->d; i++)
    prob->x0[i] = gc_rat_to_double(in->x0[i]);
  int st = gc_problem_finalize(prob);
  if (st != GC_SUCCESS) {
    gc_problem_free(prob);
    return st;
  }
  *out = prob;
  return GC_SUCCESS;
}

/* A float64 run that stayed dyadic is exact, so its rational twin must
 * have taken the same path: same cycle, same ties, same limit (the float
 * mean over the cycle is rounded once per term). */
static int twins_agree(const gc_search_run *e, const gc_cycle_result *f)
{
  if (e->status == GC_RUN_OVERFLOW)
    return 1;   /* the exact side could not finish: nothing to compare */
  if (e->ties != f->ties)
    return 0;
  if (e->status == GC_RUN_OPEN)
    return f->period == 0;
  return f->period == e->period && f->start == e->start &&
         fabs(f->limit - e->limit_f) <= 1e-12 * fmax(f->limit, e->limit_f);
}

int gc_search_eval(gc_search_ws *w, const gc_search_instance *in,
                   gc_search_result *res)
{
  static const int rules[2] = { GC_TIES_LOW, GC_TIES_HIGH };
  static const gc_algo_kind kinds[2] = { GC_ALGO_UNI, GC_ALGO_BI };
  memset(res, 0, sizeof *res);
  gc_problem *prob = NULL;
  GC_TRY(float_problem(in, &prob));
  double lr = gc_rat_to_double(in->alpha);
  int st = GC_SUCCESS;
  res->exact = 1;
  for (int r = 0; r < 2 && st == GC_SUCCESS; r++)
    for (int a = 0; a < 2 && st == GC_SUCCESS; a++) {
      gc_search_run *e = &res->ex[r][a];
      gc_cycle_result *f = &res->fl[r][a];
      if ((st = gc_search_run_exact(w, in, a, rules[r], e)) != GC_SUCCESS ||
          (st = gc_theory_cycle_run(prob, kinds[a], in->k, in->kd, rules[r],
                                    lr, w->max_steps, f)) != GC_SUCCESS)
        break;
      res->exact &= e->status != GC_RUN_OVERFLOW;
      if (f->exact) {
        if (!twins_agree(e, f)) {
          gc_errorf(__FILE__, __LINE__, GC_EINVAL,
                    "%s with ties %s: the rational run (status %d, cycle "
                    "from %ld, period %ld, %d ties, limit %.17g) and the "
                    "dyadic float64 run (cycle from %ld, period %ld, %d "
                    "ties, limit %.17g) disagree", a ? "bi" : "uni",
                    r ? "high" : "low", e->status, e->start, e->period,
                    e->ties, e->limit_f, f->start, f->period, f->ties,
                    f->limit);
          st = GC_EINVAL;
          break;
        }
        res->checked += e->status != GC_RUN_OVERFLOW;
      }
    }
  gc_problem_free(prob);
  if (st != GC_SUCCESS)
    return st;
  for (int r = 0; r < 2; r++) {
    res->verdict_float[r] = gc_search_verdict_float(&res->fl[r][0],
                                                    &res->fl[r][1]);
    if (res->exact) {
      res->verdict[r] = gc_search_verdict_exact(&res->ex[r][0], &res->ex[r][1]);
      res->ties[r] = res->ex[r][0].ties + res->ex[r][1].ties;
    } else {
      res->verdict[r] = res->verdict_float[r];
      res->ties[r] = res->fl[r][0].ties + res->fl[r][1].ties;
    }
  }
  return GC_SUCCESS;
}

int gc_search_tie_free(const gc_search_result *res)
{
  return res->ties[0] == 0 && res->ties[1] == 0;
}

const char *gc_search_arithmetic_name(const gc_search_result *res)
{
  return res->exact ? "exact" : "float";
}
