/* problem.c -- synthetic quadratic problems (docs/theory.md 5.1, 5.2 and the
 * prescribed-spectrum quadratics of issue 3), their exact constants from
 * LAPACK, and their gradients. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>

#include "gc_errno.h"
#include "gc_npy.h"
#include "gc_rng.h"
#include "gc_theory.h"

gc_problem *gc_problem_alloc(size_t workers, size_t n, int kind)
{
  if (workers == 0 || n == 0)
    GC_ERROR_NULL("a problem needs P >= 1 workers and d >= 1", GC_EINVAL);
  if (kind == GC_PROBLEM_DENSE && n > 20000)
    GC_ERROR_NULL("dense quadratics are limited to d <= 20000 (use rotate=0)",
                  GC_EINVAL);
  gc_problem *p = calloc(1, sizeof *p);
  if (!p)
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  p->kind = kind;
  p->workers = workers;
  p->n = n;
  size_t na = kind == GC_PROBLEM_DENSE ? workers * n * n : workers * n;
  p->a = calloc(na, sizeof *p->a);
  p->b = calloc(workers * n, sizeof *p->b);
  p->x0 = calloc(n, sizeof *p->x0);
  p->xstar = calloc(n, sizeof *p->xstar);
  p->work = calloc(2 * n, sizeof *p->work);
  if (!p->a || !p->b || !p->x0 || !p->xstar || !p->work) {
    gc_problem_free(p);
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  }
  snprintf(p->name, sizeof p->name, "problem");
  return p;
}

void gc_problem_free(gc_problem *p)
{
  if (!p)
    return;
  free(p->a);
  free(p->b);
  free(p->x0);
  free(p->xstar);
  free(p->work);
  free(p);
}

/* y = A_w v for worker w. */
static void apply_a(const gc_problem *p, size_t w, const double *v, double *y)
{
  size_t n = p->n;
  if (p->kind == GC_PROBLEM_DIAG) {
    const double *a = p->a + w * n;
    for (size_t i = 0; i < n; i++)
      y[i] = a[i] * v[i];
  } else {
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int) n, (int) n, 1.0,
                p->a + w * n * n, (int) n, v, 1, 0.0, y, 1);
  }
}

/* Largest |eigenvalue| of a symmetric n x n matrix (copied). */
static int sym_eig(const double *a, size_t n, double *w)
{
  double *t = malloc(n * n * sizeof *t);
  if (!t)
    GC_ERROR("out of memory", GC_ENOMEM);
  memcpy(t, a, n * n * sizeof *t);
  lapack_int info = LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'N', 'U', (lapack_int) n,
                                  t, (lapack_int) n, w);
  free(t);
  if (info != 0)
    GC_ERRORF(GC_EDOM, "LAPACKE_dsyev failed (info %d)", (int) info);
  return GC_SUCCESS;
}

int gc_problem_finalize(gc_problem *p)
{
  size_t n = p->n, P = p->workers;
  double *c = calloc(n, sizeof *c), *t = malloc(n * sizeof *t);
  double *w = malloc(n * sizeof *w);
  double *abar = NULL;
  int st = GC_SUCCESS;
  if (!c || !t || !w) {
    st = GC_ENOMEM;
    gc_error("out of memory", __FILE__, __LINE__, st);
    goto done;
  }
  /* c = (1/P) sum_p A_p b_p: the right-hand side of the normal equations. */
  for (size_t q = 0; q < P; q++) {
    apply_a(p, q, p->b + q * n, t);
    for (size_t i = 0; i < n; i++)
      c[i] += t[i] / (double) P;
  }
  double lt2 = 0;
  if (p->kind == GC_PROBLEM_DIAG) {
    double L = -INFINITY, mu = INFINITY;
    for (size_t i = 0; i < n; i++) {
      double s = 0;
      for (size_t q = 0; q < P; q++)
        s += p->a[q * n + i];
      s /= (double) P;
      L = fmax(L, s);
      mu = fmin(mu, s);
      w[i] = s;
    }
    for (size_t q = 0; q < P; q++) {
      double lq = 0;
      for (size_t i = 0; i < n; i++)
        lq = fmax(lq, fabs(p->a[q * n + i]));
      lt2 += lq * lq;
    }
    p->L = L;
    p->mu = mu;
    if (!(mu > 0)) {
      st = GC_EDOM;
      gc_error("the average Hessian is not positive definite: F has no minimiser",
               __FILE__, __LINE__, st);
      goto done;
    }
    for (size_t i = 0; i < n; i++)
      p->xstar[i] = c[i] / w[i];
  } else {
    abar = calloc(n * n, sizeof *abar);
    if (!abar) {
      st = GC_ENOMEM;
      gc_error("out of memory", __FILE__, __LINE__, st);
      goto done;
    }
    for (size_t q = 0; q < P; q++) {
      const double *aq = p->a + q * n * n;
      for (size_t i = 0; i < n * n; i++)
        abar[i] += aq[i] / (double) P;
      if ((st = sym_eig(aq, n, w)) != GC_SUCCESS)
        goto done;
      double lq = fmax(fabs(w[0]), fabs(w[n - 1]));   /* ascending order */
      lt2 += lq * lq;
    }
    if ((st = sym_eig(abar, n, w)) != GC_SUCCESS)
      goto done;
    p->mu = w[0];
    p->L = w[n - 1];
    if (!(p->mu > 0)) {
      st = GC_EDOM;
      gc_error("the average Hessian is not positive definite: F has no minimiser",
               __FILE__, __LINE__, st);
      goto done;
    }
    memcpy(p->xstar, c, n * sizeof *c);
    lapack_int info = LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', (lapack_int) n, 1,
                                    abar, (lapack_int) n, p->xstar, 1);
    if (info != 0) {
      st = GC_EDOM;
      gc_errorf(__FILE__, __LINE__, st, "LAPACKE_dposv failed (info %d)", (int) info);
      goto done;
    }
  }
  p->L_tilde = sqrt(lt2 / (double) P);
  p->fstar = gc_problem_value(p, p->xstar);
done:
  free(c);
  free(t);
  free(w);
  free(abar);
  return st;
}

/* (1/2P) sum_w (x - c_w)^T A_w (x - c_w), with c_w = c + w * cstride:
 * F(x) for c_w = b_w, F(x) - F* for c_w = x* (cstride 0).  Uses p->work. */
static double half_mean_quad(const gc_problem *p, const double *x,
                             const double *c, size_t cstride)
{
  size_t n = p->n;
  double *r = p->work, *ar = p->work + n, s = 0;
  for (size_t q = 0; q < p->workers; q++) {
    const double *cq = c + q * cstride;
    for (size_t i = 0; i < n; i++)
      r[i] = x[i] - cq[i];
    apply_a(p, q, r, ar);
    double sq = 0;   /* per-worker partial sums, added in worker order */
    for (size_t i = 0; i < n; i++)
      sq += r[i] * ar[i];
    s += sq;
  }
  return 0.5 * s / (double) p->workers;
}

double gc_problem_value(const gc_problem *p, const double *x)
{
  return half_mean_quad(p, x, p->b, p->n);
}

double gc_problem_gap(const gc_problem *p, const double *x)
{
  /* F(x) - F* = 1/2 e^T Abar e with e = x - x*, since grad F(x*) = 0. */
  return half_mean_quad(p, x, p->xstar, 0);
}

void gc_problem_worker_grad(const gc_problem *p, size_t w, const double *x,
                            double *g)
{
  size_t n = p->n;
  const double *b = p->b + w * n;
  if (p->kind == GC_PROBLEM_DIAG) {
    const double *a = p->a + w * n;
    for (size_t i = 0; i < n; i++)
      g[i] = a[i] * (x[i] - b[i]);
  } else {
    /* g = A_w x - A_w b_w, as one gemv on the difference (in the second
     * half of p->work: gc_problem_grad holds its sum in the first) */
    double *r = p->work + n;
    for (size_t i = 0; i < n; i++)
      r[i] = x[i] - b[i];
    apply_a(p, w, r, g);
  }
}

void gc_problem_add_noise(const gc_problem *p, size_t w, uint32_t step,
                          double *g)
{
  if (p->sigma > 0)
    for (size_t i = 0; i < p->n; i++)
      g[i] += p->sigma * gc_rng_normal(p->seed, (uint32_t) w, step, i);
}

void gc_problem_grad(const gc_problem *p, const double *x, double *g)
{
  size_t n = p->n;
  double *t = p->work;
  memset(g, 0, n * sizeof *g);
  for (size_t q = 0; q < p->workers; q++) {
    gc_problem_worker_grad(p, q, x, t);
    for (size_t i = 0; i < n; i++)
      g[i] += t[i];
  }
  for (size_t i = 0; i < n; i++)
    g[i] /= (double) p->workers;
}

/* Haar orthogonal Q (n x n, row-major) from the QR of a Gaussian matrix:
 * Q R = G, then Q <- Q diag(sign(R_jj)) makes the factorisation unique, so
 * Q is Haar-distributed (Mezzadri 2007) and a pure function of the key. */
static int haar(size_t n, uint64_t seed, uint32_t stream, double *q)
{
  double *tau = malloc(n * sizeof *tau), *sgn = malloc(n * sizeof *sgn);
  if (!tau || !sgn) {
    free(tau);
    free(sgn);
    GC_ERROR("out of memory", GC_ENOMEM);
  }
  for (size_t i = 0; i < n * n; i++)
    q[i] = gc_rng_normal(seed, stream, 0, i);
  lapack_int info = LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, (lapack_int) n,
                                   (lapack_int) n, q, (lapack_int) n, tau);
  if (info == 0) {
    for (size_t j = 0; j < n; j++)
      sgn[j] = q[j * n + j] < 0 ? -1.0 : 1.0;
    info = LAPACKE_dorgqr(LAPACK_ROW_MAJOR, (lapack_int) n, (lapack_int) n,
                          (lapack_int) n, q, (lapack_int) n, tau);
  }
  if (info == 0)
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < n; j++)
        q[i * n + j] *= sgn[j];
  free(tau);
  free(sgn);
  if (info != 0)
    GC_ERRORF(GC_EDOM, "LAPACK QR failed (info %d)", (int) info);
  return GC_SUCCESS;
}

/* Finalise p and hand it out named `name`; p is freed on failure. */
static int finish(gc_problem *p, const char *name, gc_problem **out)
{
  int st = gc_problem_finalize(p);
  if (st != GC_SUCCESS) {
    gc_problem_free(p);
    return st;
  }
  snprintf(p->name, sizeof p->name, "%s", name);
  *out = p;
  return GC_SUCCESS;
}

/* Targets, start and noise of both quadratics (rotated or not), so that
 * the two draw the same b_p (streams 2000 + p) and x0 (stream 3000). */
static int finish_quadratic(gc_problem *p, double hetero, double x0_scale,
                            double sigma, uint64_t seed, const char *name,
                            gc_problem **out)
{
  size_t n = p->n;
  for (size_t w = 0; w < p->workers; w++)
    for (size_t i = 0; i < n; i++)
      p->b[w * n + i] = hetero * gc_rng_normal(seed, 2000u + (uint32_t) w, 0, i);
  for (size_t i = 0; i < n; i++)
    p->x0[i] = x0_scale * gc_rng_normal(seed, 3000u, 0, i);
  p->sigma = sigma;
  p->seed = seed;
  return finish(p, name, out);
}

int gc_problem_quadratic(size_t workers, size_t n, const double *lambda,
                         double hetero, double x0_scale, double sigma,
                         uint64_t seed, gc_problem **out)
{
  *out = NULL;
  gc_problem *p = gc_problem_alloc(workers, n, GC_PROBLEM_DENSE);
  if (!p)
    return GC_ENOMEM;
  double *q = malloc(n * n * sizeof *q);
  if (!q) {
    gc_problem_free(p);
    GC_ERROR("out of memory", GC_ENOMEM);
  }
  int st = GC_SUCCESS;
  for (size_t w = 0; w < workers && st == GC_SUCCESS; w++) {
    if ((st = haar(n, seed, 1000u + (uint32_t) w, q)) != GC_SUCCESS)
      break;
    const double *lw = lambda + w * n;
    double *a = p->a + w * n * n;
    /* A = Q diag(lambda) Q^T, upper triangle computed and mirrored so that
     * A is exactly symmetric. */
    for (size_t i = 0; i < n; i++)
      for (size_t j = i; j < n; j++) {
        double s = 0;
        for (size_t k = 0; k < n; k++)
          s += q[i * n + k] * lw[k] * q[j * n + k];
        a[i * n + j] = a[j * n + i] = s;
      }
  }
  free(q);
  if (st != GC_SUCCESS) {
    gc_problem_free(p);
    return st;
  }
  return finish_quadratic(p, hetero, x0_scale, sigma, seed, "quadratic", out);
}

/* Diagonal quadratic with the same spectrum law, for any d (no rotation). */
static int diag_quadratic(size_t workers, size_t n, const double *lambda,
                          double hetero, double x0_scale, double sigma,
                          uint64_t seed, gc_problem **out)
{
  *out = NULL;
  gc_problem *p = gc_problem_alloc(workers, n, GC_PROBLEM_DIAG);
  if (!p)
    return GC_ENOMEM;
  memcpy(p->a, lambda, workers * n * sizeof *lambda);
  return finish_quadratic(p, hetero, x0_scale, sigma, seed, "quadratic-diag", out);
}

int gc_problem_toy(double x0_sigma, uint64_t seed, gc_problem **out)
{
  *out = NULL;
  enum { P = 3, D = 100 };
  static const double targets[P] = { 1, 5, 10 };
  gc_problem *p = gc_problem_alloc(P, D, GC_PROBLEM_DIAG);
  if (!p)
    return GC_ENOMEM;
  for (size_t w = 0; w < P; w++)
    for (size_t i = 0; i < D; i++) {
      p->a[w * D + i] = 1.0;
      p->b[w * D + i] = targets[w];
    }
  for (size_t i = 0; i < D; i++)
    p->x0[i] = 20.0 + x0_sigma * gc_rng_normal(seed, 0, 0, i);
  p->seed = seed;
  return finish(p, "toy", out);
}

int gc_problem_cycle9(gc_problem **out)
{
  *out = NULL;
  gc_problem *p = gc_problem_alloc(2, 2, GC_PROBLEM_DIAG);
  if (!p)
    return GC_ENOMEM;
  for (size_t i = 0; i < 4; i++)
    p->a[i] = 1.0;
  p->b[0] = 0; p->b[1] = -1;   /* f_1 = 1/2 ||x - (0,-1)||^2 */
  p->b[2] = 0; p->b[3] = 1;    /* f_2 = 1/2 ||x - (0, 1)||^2 */
  p->x0[0] = -3;
  p->x0[1] = -1;
  return finish(p, "cycle9", out);
}

static int read_f64(const char *dir, const char *file, gc_array *a, int must)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (!must)
      return GC_EIO;   /* optional file: quietly absent */
    GC_ERRORF(GC_EIO, "cannot open %s", path);
  }
  fclose(f);
  GC_TRY(gc_npy_read(path, a));
  return gc_array_convert(a, GC_F64);
}

int gc_problem_load_npy(const char *dir, gc_problem **out)
{
  *out = NULL;
  gc_array A = {0}, B = {0}, X = {0};
  int st;
  if ((st = read_f64(dir, "b.npy", &B, 1)) != GC_SUCCESS)
    return st;
  if ((st = read_f64(dir, "x0.npy", &X, 1)) != GC_SUCCESS) {
    gc_array_free(&B);
    return st;
  }
  int haveA = read_f64(dir, "A.npy", &A, 0) == GC_SUCCESS;
  gc_problem *p = NULL;
  size_t n = X.count, P = 0;
  if (B.ndim == 2 && B.shape[1] == n)
    P = B.shape[0];
  else if (B.ndim == 1 && B.count == n)
    P = 1;
  if (P == 0 || n == 0) {
    gc_errorf(__FILE__, __LINE__, GC_EFORMAT,
              "%s/b.npy must have shape (P,%zu) to match x0.npy", dir, n);
    st = GC_EFORMAT;
    goto done;
  }
  int kind = GC_PROBLEM_DIAG;
  if (haveA) {
    if (A.ndim == 3 && A.shape[0] == P && A.shape[1] == n && A.shape[2] == n)
      kind = GC_PROBLEM_DENSE;
    else if (A.ndim == 2 && A.shape[0] == n && A.shape[1] == n)
      kind = GC_PROBLEM_DENSE;
    else if (A.ndim == 2 && A.shape[0] == P && A.shape[1] == n)
      kind = GC_PROBLEM_DIAG;
    else {
      gc_errorf(__FILE__, __LINE__, GC_EFORMAT,
                "%s/A.npy must have shape (P,d,d), (d,d) or (P,d) with P=%zu d=%zu",
                dir, P, n);
      st = GC_EFORMAT;
      goto done;
    }
  }
  if (!(p = gc_problem_alloc(P, n, kind))) {
    st = GC_ENOMEM;
    goto done;
  }
  const double *ad = A.data;
  if (!haveA) {
    for (size_t i = 0; i < P * n; i++)
      p->a[i] = 1.0;
  } else if (kind == GC_PROBLEM_DENSE) {
    for (size_t w = 0; w < P; w++) {
      const double *src = A.ndim == 3 ? ad + w * n * n : ad;
      double *dst = p->a + w * n * n;
      /* symmetrise exactly: the formulas assume A_p = A_p^T */
      for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++)
          dst[i * n + j] = dst[j * n + i] = 0.5 * (src[i * n + j] + src[j * n + i]);
    }
  } else {
    memcpy(p->a, ad, P * n * sizeof *p->a);
  }
  memcpy(p->b, B.data, P * n * sizeof *p->b);
  memcpy(p->x0, X.data, n * sizeof *p->x0);
  for (size_t i = 0; i < P * n; i++)
    if (!isfinite(p->b[i])) {
      gc_errorf(__FILE__, __LINE__, GC_EDOM, "%s/b.npy holds NaN or Inf", dir);
      st = GC_EDOM;
      goto done;
    }
  for (size_t i = 0; i < n; i++)
    if (!isfinite(p->x0[i])) {
      gc_errorf(__FILE__, __LINE__, GC_EDOM, "%s/x0.npy holds NaN or Inf", dir);
      st = GC_EDOM;
      goto done;
    }
  if ((st = gc_problem_finalize(p)) != GC_SUCCESS)
    goto done;
  snprintf(p->name, sizeof p->name, "npy:%.80s", dir);
  *out = p;
  p = NULL;
done:
  gc_problem_free(p);
  gc_array_free(&A);
  gc_array_free(&B);
  gc_array_free(&X);
  return st;
}

int gc_problem_parse(const char *text, uint64_t seed, gc_problem **out)
{
  *out = NULL;
  if (!strcmp(text, "toy"))
    return gc_problem_toy(1.0, seed, out);
  if (!strcmp(text, "cycle9"))
    return gc_problem_cycle9(out);
  if (!strncmp(text, "npy:", 4))
    return gc_problem_load_npy(text + 4, out);
  if (strncmp(text, "quadratic", 9) || (text[9] && text[9] != ':'))
    GC_ERRORF(GC_EINVAL, "unknown problem '%s' (toy, cycle9, quadratic[:spec], npy:DIR)",
              text);
  double P = 4, d = 50, L = 10, mu = 0.1, hetero = 1, x0 = 3, sigma = 0;
  double rotate = 1, sd = (double) seed;
  int geom = 1;
  char spec[512];
  snprintf(spec, sizeof spec, "%s", text[9] ? text + 10 : "");
  for (char *tok = strtok(spec, ","); tok; tok = strtok(NULL, ",")) {
    char *eq = strchr(tok, '=');
    if (!eq)
      GC_ERRORF(GC_EINVAL, "quadratic spec: '%s' is not key=value", tok);
    *eq = '\0';
    const char *key = tok, *val = eq + 1;
    if (!strcmp(key, "spectrum")) {
      if (!strcmp(val, "geom"))
        geom = 1;
      else if (!strcmp(val, "lin"))
        geom = 0;
      else
        GC_ERRORF(GC_EINVAL, "quadratic spec: spectrum must be geom or lin, not '%s'", val);
      continue;
    }
    char *end;
    double v = strtod(val, &end);
    if (end == val || *end || !isfinite(v))
      GC_ERRORF(GC_EINVAL, "quadratic spec: %s='%s' is not a number", key, val);
    if (!strcmp(key, "P")) P = v;
    else if (!strcmp(key, "d")) d = v;
    else if (!strcmp(key, "L")) L = v;
    else if (!strcmp(key, "mu")) mu = v;
    else if (!strcmp(key, "hetero")) hetero = v;
    else if (!strcmp(key, "x0")) x0 = v;
    else if (!strcmp(key, "sigma")) sigma = v;
    else if (!strcmp(key, "seed")) sd = v;
    else if (!strcmp(key, "rotate")) rotate = v;
    else
      GC_ERRORF(GC_EINVAL, "quadratic spec: unknown key '%s' "
                "(P, d, L, mu, spectrum, hetero, x0, sigma, seed, rotate)", key);
  }
  if (P < 1 || P != floor(P) || P > 4096)
    GC_ERRORF(GC_EINVAL, "quadratic spec: P=%g must be an integer in [1,4096]", P);
  if (d < 1 || d != floor(d) || d >= 4294967296.0)
    GC_ERRORF(GC_EINVAL, "quadratic spec: d=%g must be a positive integer", d);
  if (!(mu > 0) || !(L >= mu))
    GC_ERRORF(GC_EINVAL, "quadratic spec: need 0 < mu <= L (mu=%g L=%g)", mu, L);
  if (sigma < 0 || sd < 0)
    GC_ERRORF(GC_EINVAL, "quadratic spec: sigma and seed must be >= 0");
  size_t np = (size_t) P, nd = (size_t) d;
  double *lam = malloc(np * nd * sizeof *lam);
  if (!lam)
    GC_ERROR("out of memory", GC_ENOMEM);
  /* Every worker gets the same spectrum (mu .. L), in its own basis. */
  for (size_t w = 0; w < np; w++)
    for (size_t i = 0; i < nd; i++) {
      double s = nd > 1 ? (double) i / (double) (nd - 1) : 0.0;
      lam[w * nd + i] = geom ? mu * pow(L / mu, s) : mu + (L - mu) * s;
    }
  int st = rotate != 0
      ? gc_problem_quadratic(np, nd, lam, hetero, x0, sigma, (uint64_t) sd, out)
      : diag_quadratic(np, nd, lam, hetero, x0, sigma, (uint64_t) sd, out);
  free(lam);
  if (st == GC_SUCCESS)
    snprintf((*out)->name, sizeof (*out)->name, "%.90s", text);
  return st;
}
