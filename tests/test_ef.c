/* test_ef.c -- error-feedback memories (gc_ef.h): the residual algebra in
 * both step-size placements, DGC momentum correction with masking,
 * clipping and warm-up, EF21 state, and the error paths. */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "algo_testcomp.h"
#include "gc_dtype.h"
#include "gc_ef.h"
#include "gc_errno.h"
#include "gc_test.h"

enum { N = 50, K = 5 };

static gc_compressor *topk(size_t k)
{
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  p.k = k;
  gc_compressor *c = gc_compressor_alloc(tc_topk(), N, &p);
  cr_assert(c != NULL);
  return c;
}

/* BEFORE: acc = eps + lr g; eps = acc - C(acc); so eps + C(acc) == acc
 * holds exactly entry by entry for a sparsifier (one of the two is 0). */
Test(ef, residual_before_algebra, .init = gc_test_quiet)
{
  double g[N], prev[N];
  gc_compressor *c = topk(K);
  gc_ef *e = gc_ef_alloc(GC_EF_BEFORE, N, GC_F64, NULL);
  uint8_t buf[1024];
  size_t len;
  double lr = 0.125;
  for (uint32_t t = 0; t < 6; t++) {
    gc_test_fill_normal(g, N, 10 + t);
    memcpy(prev, gc_ef_memory(e), sizeof prev);
    cr_assert(eq(int, gc_ef_step(e, c, g, lr, t, buf, sizeof buf, &len, NULL),
                 GC_SUCCESS));
    const double *acc = gc_ef_accumulator(e), *eps = gc_ef_memory(e),
                 *sent = gc_ef_sent(e);
    size_t nnz = 0;
    for (size_t i = 0; i < N; i++) {
      cr_assert(eq(dbl, acc[i], prev[i] + lr * g[i]));
      cr_assert(eq(dbl, eps[i] + sent[i], acc[i]));
      cr_assert(eps[i] == 0.0 || sent[i] == 0.0);
      nnz += sent[i] != 0.0;
    }
    cr_assert(eq(sz, nnz, (size_t) K));
  }
  cr_assert(eq(dbl, gc_ef_apply_scale(GC_EF_BEFORE, lr), 1.0));
  gc_ef_free(e);
  gc_compressor_free(c);
}

/* AFTER (DoubleSqueeze): acc = g + eps, memory on the gradient scale. */
Test(ef, residual_after_algebra, .init = gc_test_quiet)
{
  double g[N], prev[N];
  gc_compressor *c = topk(K);
  gc_ef *e = gc_ef_alloc(GC_EF_AFTER, N, GC_F64, NULL);
  uint8_t buf[1024];
  size_t len;
  for (uint32_t t = 0; t < 4; t++) {
    gc_test_fill_normal(g, N, 20 + t);
    memcpy(prev, gc_ef_memory(e), sizeof prev);
    cr_assert(eq(int, gc_ef_step(e, c, g, 0.3, t, buf, sizeof buf, &len, NULL),
                 GC_SUCCESS));
    const double *acc = gc_ef_accumulator(e), *eps = gc_ef_memory(e),
                 *sent = gc_ef_sent(e);
    for (size_t i = 0; i < N; i++) {
      cr_assert(eq(dbl, acc[i], g[i] + prev[i]));
      cr_assert(eq(dbl, eps[i] + sent[i], acc[i]));
    }
  }
  cr_assert(eq(dbl, gc_ef_apply_scale(GC_EF_AFTER, 0.3), 0.3));
  gc_ef_free(e);
  gc_compressor_free(c);
}

/* Momentum correction: u = m u + g, v = v + u; after sending, u and v are 0
 * on the sent support (masking) and v keeps the rest. */
Test(ef, dgc_momentum_and_masking, .init = gc_test_quiet)
{
  double g[N], u[N] = { 0 }, v[N] = { 0 };
  gc_ef_options o;
  gc_ef_options_default(&o);
  o.momentum = 0.9;
  gc_compressor *c = topk(K);
  gc_ef *e = gc_ef_alloc(GC_EF_DGC, N, GC_F64, &o);
  uint8_t buf[1024];
  size_t len;
  for (uint32_t t = 0; t < 5; t++) {
    gc_test_fill_normal(g, N, 30 + t);
    for (size_t i = 0; i < N; i++) {
      u[i] = 0.9 * u[i] + g[i];
      v[i] += u[i];
    }
    cr_assert(eq(int, gc_ef_step(e, c, g, 0.1, t, buf, sizeof buf, &len, NULL),
                 GC_SUCCESS));
    const double *eu = gc_ef_momentum(e), *ev = gc_ef_memory(e),
                 *sent = gc_ef_sent(e);
    size_t masked = 0;
    for (size_t i = 0; i < N; i++) {
      if (sent[i] != 0.0) {
        cr_assert(eq(dbl, sent[i], v[i]), "sent the corrected v");
        cr_assert(eq(dbl, eu[i], 0.0), "u masked at %zu", i);
        cr_assert(eq(dbl, ev[i], 0.0), "v masked at %zu", i);
        u[i] = v[i] = 0.0;
        masked++;
      } else {
        cr_assert(ieee_ulp_eq(dbl, eu[i], u[i], 4));
        cr_assert(ieee_ulp_eq(dbl, ev[i], v[i], 4));
      }
    }
    cr_assert(eq(sz, masked, (size_t) K));
  }
  gc_ef_free(e);
  gc_compressor_free(c);
}

Test(ef, dgc_nesterov, .init = gc_test_quiet)
{
  double g[N], u[N] = { 0 }, v[N] = { 0 };
  gc_ef_options o;
  gc_ef_options_default(&o);
  o.momentum = 0.5;
  o.nesterov = 1;
  gc_compressor *c = topk(N);   /* keep everything: no masking effect */
  gc_ef *e = gc_ef_alloc(GC_EF_DGC, N, GC_F64, &o);
  uint8_t buf[1024];
  size_t len;
  for (uint32_t t = 0; t < 3; t++) {
    gc_test_fill_normal(g, N, 40 + t);
    for (size_t i = 0; i < N; i++) {
      u[i] = (u[i] + g[i]) * 0.5;
      v[i] = v[i] + u[i] + g[i];
    }
    gc_ef_step(e, c, g, 1.0, t, buf, sizeof buf, &len, NULL);
    const double *sent = gc_ef_sent(e);
    for (size_t i = 0; i < N; i++)
      cr_assert(ieee_ulp_eq(dbl, sent[i], v[i], 4));
    memset(u, 0, sizeof u);   /* all entries were sent: all masked */
    memset(v, 0, sizeof v);
  }
  gc_ef_free(e);
  gc_compressor_free(c);
}

/* rho = 0.001, W = 4: c = 0.001^(1/5); rho_e = c^(e+1) for e < 4. */
Test(ef, dgc_warmup_schedule)
{
  double c = pow(0.001, 0.2);
  double want[] = { c, c * c, c * c * c, c * c * c * c, 0.001, 0.001 };
  for (unsigned e = 0; e < 6; e++)
    cr_assert(ieee_ulp_eq(dbl, gc_dgc_warmup_density(0.001, 4, e), want[e], 8),
              "epoch %u", e);
  /* the same against DGC's printed values, rounded to 6 decimals */
  cr_assert(fabs(gc_dgc_warmup_density(0.001, 4, 0) - 0.251189) < 1e-6);
  cr_assert(fabs(gc_dgc_warmup_density(0.001, 4, 3) - 0.003981) < 1e-6);
  cr_assert(eq(dbl, gc_dgc_warmup_density(0.01, 0, 0), 0.01));
  cr_assert(gc_dgc_warmup_density(0.001, 4, 1) > gc_dgc_warmup_density(0.001, 4, 2));
}

/* Clipping: ||x|| is brought to max/sqrt(P) when above it, untouched below. */
Test(ef, clipping)
{
  double x[4] = { 3, 4, 0, 0 };   /* norm 5 */
  double f = gc_clip_global_norm_f64(x, 4, 4.0, 4);   /* threshold 2 */
  cr_assert(ieee_ulp_eq(dbl, f, 0.4, 2));
  cr_assert(ieee_ulp_eq(dbl, sqrt(x[0] * x[0] + x[1] * x[1]), 2.0, 4));
  double y[2] = { 0.3, 0.4 };
  cr_assert(eq(dbl, gc_clip_global_norm_f64(y, 2, 1.0, 1), 1.0));
  cr_assert(eq(dbl, y[0], 0.3));
  float z[2] = { 30.0f, 40.0f };
  gc_clip_global_norm_f32(z, 2, 10.0, 1);
  /* float32 scaling of values ~10: a few u = 6e-8 relative, ~1e-6 */
  cr_assert(fabs(hypot(z[0], z[1]) - 10.0) < 1e-5);
  /* and inside a DGC memory: the momentum sees the clipped gradient */
  gc_ef_options o;
  gc_ef_options_default(&o);
  o.clip_norm = 1.0;
  o.workers = 4;
  o.momentum = 0.0;
  gc_compressor *c = topk(N);
  gc_ef *e = gc_ef_alloc(GC_EF_DGC, N, GC_F64, &o);
  double g[N];
  gc_test_fill_normal(g, N, 5);
  uint8_t buf[1024];
  size_t len;
  gc_ef_step(e, c, g, 1.0, 0, buf, sizeof buf, &len, NULL);
  double s = 0;
  const double *sent = gc_ef_sent(e);
  for (size_t i = 0; i < N; i++) s += sent[i] * sent[i];
  /* double scaling and a norm of N terms: a few u = 1.1e-16 */
  cr_assert(fabs(sqrt(s) - 0.5) < 1e-12);
  gc_ef_free(e);
  gc_compressor_free(c);
}

/* EF21: c = C(g - h), h += c; gradient initialisation sets h = g. */
Test(ef, ef21_state, .init = gc_test_quiet)
{
  double g[N], h[N] = { 0 };
  gc_compressor *c = topk(K);
  gc_ef *e = gc_ef_alloc(GC_EF_EF21, N, GC_F64, NULL);
  uint8_t buf[1024];
  size_t len;
  for (uint32_t t = 0; t < 4; t++) {
    gc_test_fill_normal(g, N, 50 + t);
    gc_ef_step(e, c, g, 0.1, t, buf, sizeof buf, &len, NULL);
    const double *sent = gc_ef_sent(e), *eh = gc_ef_memory(e);
    for (size_t i = 0; i < N; i++) {
      if (sent[i] != 0.0)
        cr_assert(eq(dbl, sent[i], g[i] - h[i]));
      h[i] += sent[i];
      cr_assert(eq(dbl, eh[i], h[i]));
    }
  }
  gc_test_fill_normal(g, N, 99);
  cr_assert(eq(int, gc_ef_ef21_set(e, g), GC_SUCCESS));
  cr_assert(eq(int, memcmp(gc_ef_memory(e), g, sizeof g), 0));
  gc_ef *b = gc_ef_alloc(GC_EF_BEFORE, N, GC_F64, NULL);
  cr_assert(eq(int, gc_ef_ef21_set(b, g), GC_EINVAL));
  gc_ef_free(b);
  gc_ef_free(e);
  gc_compressor_free(c);
}

Test(ef, float32_before, .init = gc_test_quiet)
{
  float g[N];
  gc_test_fill_normal_f32(g, N, 3);
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  p.k = K;
  gc_compressor *c = gc_compressor_alloc(tc_topk(), N, &p);
  gc_ef *e = gc_ef_alloc(GC_EF_BEFORE, N, GC_F32, NULL);
  uint8_t buf[1024];
  size_t len;
  cr_assert(eq(int, gc_ef_step(e, c, g, 0.5, 0, buf, sizeof buf, &len, NULL),
               GC_SUCCESS));
  const float *acc = gc_ef_accumulator(e), *eps = gc_ef_memory(e),
              *sent = gc_ef_sent(e);
  for (size_t i = 0; i < N; i++) {
    cr_assert(eq(flt, acc[i], 0.5f * g[i]));
    cr_assert(eq(flt, eps[i] + sent[i], acc[i]));
  }
  gc_ef_free(e);
  gc_compressor_free(c);
}

Test(ef, errors, .init = gc_test_quiet)
{
  cr_assert_null(gc_ef_alloc(GC_EF_BEFORE, 0, GC_F64, NULL));
  cr_assert_null(gc_ef_alloc(GC_EF_BEFORE, 4, 3, NULL));
  gc_ef_options o;
  gc_ef_options_default(&o);
  o.momentum = 1.0;
  cr_assert_null(gc_ef_alloc(GC_EF_DGC, 4, GC_F64, &o));
  gc_ef_free(NULL);
  gc_compressor *c = topk(K);
  gc_ef *e = gc_ef_alloc(GC_EF_BEFORE, N, GC_F64, NULL);
  double g[N] = { 0 };
  g[7] = NAN;
  uint8_t buf[1024];
  size_t len;
  cr_assert(eq(int, gc_ef_step(e, c, g, 0.1, 0, buf, sizeof buf, &len, NULL),
               GC_EDOM));
  g[7] = INFINITY;
  cr_assert(eq(int, gc_ef_step(e, c, g, 0.1, 0, buf, sizeof buf, &len, NULL),
               GC_EDOM));
  gc_ef *f = gc_ef_alloc(GC_EF_BEFORE, N - 1, GC_F64, NULL);
  g[7] = 0;
  cr_assert(eq(int, gc_ef_step(f, c, g, 0.1, 0, buf, sizeof buf, &len, NULL),
               GC_EBADLEN));
  gc_ef_free(f);
  gc_ef_free(e);
  gc_compressor_free(c);
}

/* A failed step leaves the memories as they were, for every kind: DGC's
 * fused pass writes u' and v' to scratch and commits them only after the
 * message is out.  Failures: a buffer too small (after the accumulator is
 * built), NaN and Inf in g (also through DGC's clipping).  The run then
 * continues bit-identically to one that never saw the failed calls. */
Test(ef, failed_step_leaves_state, .init = gc_test_quiet)
{
  gc_compressor *c = topk(K);
  for (int kind = GC_EF_NONE; kind <= GC_EF_EF21; kind++)
    for (int v = 0; v < (kind == GC_EF_DGC ? 4 : 1); v++) {
      gc_ef_options o;
      gc_ef_options_default(&o);
      o.nesterov = v & 1;
      o.clip_norm = v & 2 ? 1.5 : 0.0;
      gc_ef *a = gc_ef_alloc((gc_ef_kind) kind, N, GC_F64, &o);
      gc_ef *b = gc_ef_alloc((gc_ef_kind) kind, N, GC_F64, &o);
      size_t bytes = gc_ef_state_bytes(a);
      uint8_t buf[1024], sa[4 * N * sizeof(double)], sb[sizeof sa];
      size_t len;
      double g[N], bad[N];
      for (uint32_t t = 0; t < 4; t++) {
        gc_test_fill_normal(g, N, 60 + t);
        cr_assert(eq(int, gc_ef_step(a, c, g, 0.25, t, buf, sizeof buf, &len, NULL),
                     GC_SUCCESS));
        gc_ef_state_save(a, sa);
        cr_assert(eq(int, gc_ef_step(a, c, g, 0.25, t, buf, 3, &len, NULL),
                     GC_ENOSPACE), "kind %d", kind);
        memcpy(bad, g, sizeof bad);
        bad[t + 1] = t & 1 ? NAN : INFINITY;
        cr_assert(eq(int, gc_ef_step(a, c, bad, 0.25, t, buf, sizeof buf, &len, NULL),
                     GC_EDOM), "kind %d", kind);
        gc_ef_state_save(a, sb);
        cr_assert(memcmp(sa, sb, bytes) == 0, "kind %d v %d step %u: state moved",
                  kind, v, (unsigned) t);
        cr_assert(eq(int, gc_ef_step(b, c, g, 0.25, t, buf, sizeof buf, &len, NULL),
                     GC_SUCCESS));
      }
      gc_ef_state_save(b, sb);
      cr_assert(memcmp(sa, sb, bytes) == 0, "kind %d v %d: runs differ", kind, v);
      gc_ef_free(a);
      gc_ef_free(b);
    }
  gc_compressor_free(c);
}

/* The fused DGC pass against the textbook recursion in float32, masking
 * off: v keeps the residual v' - C(v') and u = u' everywhere. */
Test(ef, dgc_float32_without_masking, .init = gc_test_quiet)
{
  float g[N], u[N] = { 0 }, v[N] = { 0 };
  gc_ef_options o;
  gc_ef_options_default(&o);
  o.momentum = 0.75;
  o.masking = 0;
  gc_compressor *c = topk(K);
  gc_ef *e = gc_ef_alloc(GC_EF_DGC, N, GC_F32, &o);
  uint8_t buf[1024];
  size_t len;
  for (uint32_t t = 0; t < 5; t++) {
    gc_test_fill_normal_f32(g, N, 70 + t);
    for (size_t i = 0; i < N; i++) {
      u[i] = g[i] + 0.75f * u[i];
      v[i] = v[i] + u[i];
    }
    cr_assert(eq(int, gc_ef_step(e, c, g, 0.1, t, buf, sizeof buf, &len, NULL),
                 GC_SUCCESS));
    const float *eu = gc_ef_momentum(e), *ev = gc_ef_memory(e), *sent = gc_ef_sent(e);
    for (size_t i = 0; i < N; i++) {
      v[i] -= sent[i];
      cr_assert(eq(flt, eu[i], u[i]), "u at %zu", i);   /* same operations: exact */
      cr_assert(eq(flt, ev[i], v[i]), "v at %zu", i);
    }
  }
  gc_ef_free(e);
  gc_compressor_free(c);
}
