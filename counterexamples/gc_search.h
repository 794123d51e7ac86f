/* gc_search.h -- exact rational runs of unidirectional and bidirectional
 * top-K for the counterexample search (counterexamples/search).
 *
 * gc_sim runs in float64 only, and the average over P = 3 workers is not a
 * dyadic rational, so float64 cannot run those instances exactly.  The
 * search therefore runs every instance twice: once here, in exact rational
 * arithmetic (the algorithms (a) and (b) of theory.md 3 written over
 * fractions, nothing rounded: an operation that would not fit is reported
 * as an overflow), and once through gc_sim in float64.  Wherever the
 * float64 run stays dyadic (so is itself exact) the two must agree step for
 * step: the library is the oracle of this twin. */
#ifndef GC_SEARCH_H
#define GC_SEARCH_H
#include <stddef.h>
#include <stdint.h>
#include "gc_theory.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ---- exact rationals ------------------------------------------------------
 * num/den in lowest terms with den > 0 (zero is 0/1), |num| and den at most
 * INT64_MAX.  Every operation is exact (128-bit intermediates, then
 * reduced) or returns GC_RAT_OVERFLOW when the reduced result does not fit;
 * nothing is rounded.  Lowest terms make equal values bit-identical. */
typedef struct gc_rat {
  int64_t num, den;
} gc_rat;
enum { GC_RAT_OK = 0, GC_RAT_OVERFLOW = 1 };

/* num/den reduced (den != 0). */
int gc_rat_make(int64_t num, int64_t den, gc_rat *r);
int gc_rat_add(gc_rat a, gc_rat b, gc_rat *r);
int gc_rat_sub(gc_rat a, gc_rat b, gc_rat *r);
int gc_rat_mul(gc_rat a, gc_rat b, gc_rat *r);
int gc_rat_div_int(gc_rat a, int64_t k, gc_rat *r);   /* k > 0 */
/* Exact comparisons: -1, 0 or 1 (cmp_abs compares |a| and |b|). */
int gc_rat_cmp(gc_rat a, gc_rat b);
int gc_rat_cmp_abs(gc_rat a, gc_rat b);
/* Nearest-ish double (num and den rounded, then divided): for printing and
 * float comparisons only, never for a verdict on an exact instance. */
double gc_rat_to_double(gc_rat a);
/* "p/q" or "p"; returns the length written (as snprintf). */
int gc_rat_format(gc_rat a, char *buf, size_t cap);

/* TopK of v (length n) by magnitude, exactly k entries (k <= n): keep[i] = 1
 * for the kept ones.  Among equal magnitudes the lower index wins
 * (GC_TIES_LOW) or the higher (GC_TIES_HIGH), as the library's topk.
 * Returns 1 if the tie rule decided a kept value: some kept and some dropped
 * entry have the same non-zero magnitude (a tie among zeros sends 0 either
 * way and decides nothing), else 0. */
int gc_rat_topk(const gc_rat *v, size_t n, size_t k, int ties,
                unsigned char *keep);

/* ---- instances ------------------------------------------------------------
 * f_p(x) = 1/2 ||x - b_p||^2 for p < P, F = (1/P) sum f_p, so x* = mean b_p
 * and F - F* = 1/2 ||x - x*||^2.  Uplink top-K, downlink (bi) top-K_d, step
 * size alpha, start x0, all memories 0. */
enum { GC_SEARCH_MAX_P = 4, GC_SEARCH_MAX_D = 4 };
typedef struct gc_search_instance {
  size_t P, d, k, kd;
  gc_rat alpha;
  gc_rat b[GC_SEARCH_MAX_P * GC_SEARCH_MAX_D];   /* worker-major, P x d */
  gc_rat x0[GC_SEARCH_MAX_D];
} gc_search_instance;

/* How an exact run ended. */
enum {
  GC_RUN_CYCLE = 0,   /* the full state repeated: an exact limit cycle     */
  GC_RUN_OPEN,        /* max_steps without a repeat (limit_f: last half)  */
  GC_RUN_OVERFLOW     /* a value did not fit in gc_rat: no exact result   */
};
typedef struct gc_search_run {
  int status;
  long steps;         /* steps taken (OVERFLOW: the step that overflowed,
                         or the whole run when the cycle's mean did)      */
  long start, period; /* CYCLE: state(start + period) == state(start)     */
  int ties;           /* decisive top-K ties met, uplinks and downlink    */
  gc_rat limit;       /* CYCLE: mean F-F* over the cycle, exact           */
  double limit_f;     /* CYCLE: limit as a double; OPEN: mean F-F* over
                         the last half of the run (rounded)               */
} gc_search_run;

/* Scratch for runs of up to max_steps steps (states, hash table). */
typedef struct gc_search_ws gc_search_ws;
gc_search_ws *gc_search_ws_alloc(long max_steps);
void gc_search_ws_free(gc_search_ws *w);   /* NULL is a no-op */

/* One exact run of uni (bi = 0) or bi (bi = 1) with tie rule `ties`, with
 * cycle detection on the full state (x, every eps^p, delta) exactly as
 * gc_theory_cycle_run does it in float64.  GC_EINVAL for sizes beyond
 * GC_SEARCH_MAX_* or k, kd outside [1, d]; an overflow is a status of the
 * run, not an error. */
int gc_search_run_exact(gc_search_ws *w, const gc_search_instance *in, int bi,
                        int ties, gc_search_run *res);

/* ---- verdicts -------------------------------------------------------------
 * bi against uni by the limit (mean F-F* over the limit cycle).  Two limits
 * both below GC_SEARCH_CONVERGED (absolute) both converge: equal.  Else a
 * run without a cycle leaves it undecided (no_cycle).  Exact runs then
 * compare exactly; float runs up to 1e-9 relative (a mean of at most
 * max_steps rounded terms, each within a few ulps). */
#define GC_SEARCH_CONVERGED 1e-12
enum { GC_VERDICT_BETTER = 0, GC_VERDICT_WORSE, GC_VERDICT_EQUAL,
       GC_VERDICT_NO_CYCLE, GC_VERDICT_COUNT };
const char *gc_search_verdict_name(int v);   /* "bi_better", ... */
/* Neither run may be an overflow. */
int gc_search_verdict_exact(const gc_search_run *uni, const gc_search_run *bi);
int gc_search_verdict_float(const gc_cycle_result *uni,
                            const gc_cycle_result *bi);

/* ---- one instance, both arithmetics, both tie rules ---------------------- */
typedef struct gc_search_result {
  int exact;                  /* all four exact runs ended without overflow */
  gc_search_run ex[2][2];     /* [tie rule][0 uni, 1 bi], rule 0 = GC_TIES_LOW */
  gc_cycle_result fl[2][2];   /* the same runs through gc_sim in float64    */
  int verdict[2];             /* per rule: exact verdict if exact, else float */
  int verdict_float[2];       /* per rule, from the float64 runs            */
  int ties[2];                /* decisive ties per rule, uni + bi, from the
                                 runs that gave verdict[]                   */
  int checked;                /* runs whose float64 twin was dyadic (exact)
                                 and agreed with the rational run           */
} gc_search_result;
/* Run the instance both ways with both tie rules (max_steps of w).
 * GC_EINVAL if a float64 run that stayed dyadic disagrees with its rational
 * twin (start, period, ties or limit): one of the two implementations is
 * wrong, and no verdict from this instance can be trusted. */
int gc_search_eval(gc_search_ws *w, const gc_search_instance *in,
                   gc_search_result *res);
/* "exact" iff res->exact (all four rational runs ended without an
 * overflow), else "float": the label of the instance's verdict. */
const char *gc_search_arithmetic_name(const gc_search_result *res);
/* 1 iff no decisive tie was met in the runs behind the verdicts (then the
 * two tie rules run the same trajectories), else 0. */
int gc_search_tie_free(const gc_search_result *res);

#ifdef __cplusplus
}
#endif
#endif /* GC_SEARCH_H */
