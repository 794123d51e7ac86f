/* ladder.c -- the bound of theory.md 4.3 and the rungs of 4.9 (gc_ladder.h):
 * closed forms over measured constants, and the running sums a path keeps
 * for them. */
#include <math.h>
#include <string.h>

#include "gc_ladder.h"

double gc_bound_nonconvex_terms(double f0_gap, double lr, size_t T, double L,
                                double M2, double gamma, double xi,
                                double terms[3])
{
  double t[3] = { INFINITY, INFINITY, INFINITY };
  if (T > 0 && lr > 0 && gamma < 1) {
    double c = (gamma + xi) / (1.0 - gamma);
    t[0] = 2.0 * f0_gap / (lr * (double) T);
    t[1] = L * lr * M2;
    t[2] = L * L * lr * lr * M2 * c * c;
  }
  if (terms)
    memcpy(terms, t, sizeof t);
  return t[0] + t[1] + t[2];
}

double gc_bound_nonconvex(double f0_gap, double lr, size_t T, double L,
                          double M2, double gamma, double xi)
{
  return gc_bound_nonconvex_terms(f0_gap, lr, T, L, M2, gamma, xi, NULL);
}

/* ---- the ladder of theory.md 4.9 ------------------------------------------ */

void gc_ladder_path_init(gc_ladder_path *p)
{
  memset(p, 0, sizeof *p);
  p->gh_max = -INFINITY;
  p->rec_excess = -INFINITY;
}

double gc_ladder_path_step(gc_ladder_path *p, int memory, double gamma_hat,
                           double gbar_norm2, double num, double lr,
                           double mem_norm)
{
  p->steps++;
  p->gbar_max = fmax(p->gbar_max, sqrt(gbar_norm2));
  p->gbar2_sum += gbar_norm2;
  double e = 0;
  if (memory) {
    if (isfinite(gamma_hat))
      p->gh_max = fmax(p->gh_max, gamma_hat);
    /* no measured contraction yet: a_s = 0 so far, and the first bracket
     * of the recursion is 0 */
    double gh = fmax(p->gh_max, 0.0), M = lr * p->gbar_max;
    double xi = num / (lr * sqrt(gbar_norm2));
    e = gh * (p->rec + M) + (isfinite(xi) ? xi * M : num);
  }
  if (!memory)
    mem_norm = 0;
  if (isfinite(e) && isfinite(mem_norm)) {
    p->rec = e;
    p->rec2_last = e * e;
    p->mem2_last = mem_norm * mem_norm;
    p->rec2_sum += p->rec2_last;
    p->mem2_sum += p->mem2_last;
    p->rec_excess = fmax(p->rec_excess, mem_norm - e);
    p->mem_max = fmax(p->mem_max, mem_norm);
  }
  return e;
}

double gc_ladder_path_rec2_mean(const gc_ladder_path *p)
{
  return p->steps ? (p->rec2_sum - p->rec2_last) / (double) p->steps : NAN;
}

double gc_ladder_path_mem2_mean(const gc_ladder_path *p)
{
  return p->steps ? (p->mem2_sum - p->mem2_last) / (double) p->steps : NAN;
}

double gc_ladder_path_gbar2_mean(const gc_ladder_path *p)
{
  return p->steps ? p->gbar2_sum / (double) p->steps : NAN;
}

void gc_ladder_path_gdiff(gc_ladder_path *p, double gdiff2, double inner)
{
  p->gd2_last = gdiff2;
  p->gd2_sum += gdiff2;
  p->in_last = inner;
  p->in_sum += inner;
}

void gc_ladder_path_curv(gc_ladder_path *p, double q) { p->cv_sum += q; }

double gc_ladder_path_curv_mean(const gc_ladder_path *p)
{
  return p->steps ? p->cv_sum / (double) p->steps : NAN;
}

double gc_ladder_path_inner_mean(const gc_ladder_path *p)
{
  return p->steps ? (p->in_sum - p->in_last) / (double) p->steps : NAN;
}

double gc_ladder_path_gdiff2_mean(const gc_ladder_path *p)
{
  return p->steps ? (p->gd2_sum - p->gd2_last) / (double) p->steps : NAN;
}

/* Relative slack of the memory checks: rounding of norms summed in a
 * different order than the recursion's. */
#define LADDER_SLACK 1e-9

void gc_bound_ladder(const gc_ladder_in *in, double rung[GC_LADDER_RUNGS])
{
  for (int k = 0; k < GC_LADDER_RUNGS; k++)
    rung[k] = NAN;
  if (in->T == 0 || !(in->lr > 0) || !(in->gamma < 1))
    return;
  double L = in->L, lr = in->lr, g = in->gamma, M = sqrt(in->m2_path);
  double t0 = 2.0 * in->f0_gap / (lr * (double) in->T), sgd = L * lr * in->m2;
  double c0 = (g + in->xi) / (1.0 - g);
  rung[0] = t0 + sgd + L * L * lr * lr * in->m2_mem * c0 * c0;
  /* r1: the worst measured contraction of the recursion's top-K input */
  double gh = g > 0 && isfinite(in->gamma_hat) ? fmin(g, in->gamma_hat) : g;
  double c1 = (gh + in->xi) / (1.0 - gh);
  if (in->mem_norm_max <= c1 * lr * M * (1 + LADDER_SLACK) + 1e-300)
    rung[1] = t0 + sgd + L * L * lr * lr * in->m2_mem * c1 * c1;
  /* the memory terms are 0 without memories (gamma = xi = 0) */
  double rec = g > 0 || in->xi > 0 ? in->rec2_mean : 0;
  double mem = g > 0 || in->xi > 0 ? in->mem2_mean : 0;
  /* r2: the recursion run along the path (e_t >= ||E_t|| checked) */
  if (rec == 0 || in->rec_excess <= LADDER_SLACK * sqrt(in->rec2_mean) + 1e-300)
    rung[2] = t0 + sgd + L * L * rec;
  /* r3: the memories themselves; r4: E||gbar_t||^2 per step, averaged */
  rung[3] = t0 + sgd + L * L * mem;
  rung[4] = t0 + L * lr * in->m2_mean + L * L * mem;
  /* r5: the Young step's ||grad F(x~_t) - grad F(x_t)||^2 itself, not its
   * Lipschitz bound L^2 ||E_t||^2 */
  double gd = g > 0 || in->xi > 0 ? in->gdiff2_mean : 0;
  rung[5] = t0 + L * lr * in->m2_mean + gd;
  /* r6: no Young step: ||grad F(x_t)||^2 = <grad F(x~_t), grad F(x_t)> +
   * <grad F(x_t) - grad F(x~_t), grad F(x_t)>, the first summed through
   * the descent lemma, the second measured */
  double ip = g > 0 || in->xi > 0 ? in->inner_mean : 0;
  rung[6] = 0.5 * t0 + 0.5 * L * lr * in->m2_mean + ip;
  /* r7: the descent lemma with the curvature along the steps taken,
   * (lr^2/2) gbar^T H gbar, instead of (L lr^2/2) ||gbar||^2 */
  rung[7] = 0.5 * t0 + 0.5 * lr * in->curv_mean + ip;
}
