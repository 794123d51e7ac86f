/* exact.c -- dyadic exactness checks and exact fractions for the
 * counterexamples of docs/theory.md 5.2 and the instance search. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gc_theory.h"

/* A value with |v| < 2^10 and v*2^40 integral has at most 50 significant
 * bits, so the sum of two such values (51 bits), scaling by a power of two
 * and the average over two workers are exact in a 53-bit mantissa.  The
 * algorithms only add two terms at a time (eps + lr g, delta + m, x - m,
 * m1 + m2), so checking every value along a run proves the run exact. */
#define DYADIC_SCALE 1099511627776.0   /* 2^40 */
#define DYADIC_BOUND 1024.0            /* 2^10 */

int gc_dyadic_ok(double v)
{
  if (!isfinite(v) || !(fabs(v) < DYADIC_BOUND))
    return 0;
  double s = v * DYADIC_SCALE;   /* exact: a power-of-two scaling */
  return s == floor(s);
}

int gc_dyadic_vec_ok(const double *x, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (!gc_dyadic_ok(x[i]))
      return 0;
  return 1;
}

int gc_dyadic_format(double v, char *buf, size_t cap)
{
  if (!gc_dyadic_ok(v))
    return snprintf(buf, cap, "%.17g(?)", v);
  long long num = (long long) (v * DYADIC_SCALE);
  long long den = (long long) DYADIC_SCALE;
  while (den > 1 && num % 2 == 0) {
    num /= 2;
    den /= 2;
  }
  if (den == 1)
    return snprintf(buf, cap, "%lld", num);
  return snprintf(buf, cap, "%lld/%lld", num, den);
}

static int by_mag_desc(const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x < y) - (x > y);
}

int gc_topk_has_tie(const double *x, size_t n, size_t k, double *work)
{
  if (k == 0 || k >= n)
    return 0;
  for (size_t i = 0; i < n; i++)
    work[i] = fabs(x[i]);
  qsort(work, n, sizeof *work, by_mag_desc);
  /* Only a tie at the boundary changes the kept set, and a tie among
   * zeros changes nothing that is applied (the value sent is 0). */
  return work[k - 1] == work[k] && work[k] > 0;
}
