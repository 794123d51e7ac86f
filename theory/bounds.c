/* bounds.c -- the bound formulas of theory.md 4.6 and 3(d), to be
 * evaluated with constants measured along a trajectory, and the Gaussian
 * top-K tail share of 4.5.  The 4.3 bound is the library's
 * gc_bound_nonconvex (gc_probe.h), which training evaluates too. */
#include <math.h>

#include <gsl/gsl_cdf.h>

#include "gc_theory.h"

double gc_bound_ef_sgd(double f0_gap, double lr, size_t T, double L,
                       double s2, double delta)
{
  if (!(lr > 0) || !(delta > 0))
    return INFINITY;
  return 2.0 * f0_gap / (lr * (double) (T + 1)) + 0.5 * lr * L * s2
         + 4.0 * lr * lr * L * L * s2 * (1.0 - delta) / (delta * delta);
}

double gc_bound_ef21(double f0_gap, double lr, size_t T, double L,
                     double L_tilde, double delta, double G0)
{
  if (T == 0 || !(lr > 0) || !(delta > 0) || delta > 1)
    return INFINITY;
  double theta = 1.0 - sqrt(1.0 - delta);
  double beta = (1.0 - delta) / theta;
  /* The guarantee only holds below this step size; report +Inf above it
   * rather than a number that no theorem backs. */
  double lr_max = 1.0 / (L + L_tilde * sqrt(beta / theta));
  if (lr > lr_max)
    return INFINITY;
  return 2.0 * f0_gap / (lr * (double) T) + G0 / (theta * (double) T);
}

double gc_theory_gauss_share(double rho)
{
  if (!(rho > 0) || rho >= 1)
    return rho >= 1 ? 0.0 : 1.0;
  double tau = gsl_cdf_ugaussian_Pinv(1.0 - 0.5 * rho);
  double phi = exp(-0.5 * tau * tau) / 2.5066282746310002 /* sqrt(2 pi) */;
  return 1.0 - rho - 2.0 * tau * phi;
}
