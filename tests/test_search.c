/* test_search.c -- the counterexample search (counterexamples/search):
 * exact rationals, decisive-tie counts, verdicts per tie rule, the exact /
 * float labels, and the program's CSV. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_errno.h"
#include "gc_search.h"
#include "gc_test.h"

static gc_rat Q(int64_t num, int64_t den)
{
  gc_rat r;
  cr_assert(eq(int, gc_rat_make(num, den, &r), GC_RAT_OK));
  return r;
}

static int rat_is(gc_rat r, int64_t num, int64_t den)
{
  return r.num == num && r.den == den;
}

/* An instance from integer targets (P x d, worker-major) and start. */
static gc_search_instance make(size_t P, size_t d, size_t k, int alpha_den,
                               const int *b, const int *x0)
{
  gc_search_instance in;
  memset(&in, 0, sizeof in);
  in.P = P;
  in.d = d;
  in.k = in.kd = k;
  in.alpha = Q(1, alpha_den);
  for (size_t i = 0; i < P * d; i++)
    in.b[i] = Q(b[i], 1);
  for (size_t i = 0; i < d; i++)
    in.x0[i] = Q(x0[i], 1);
  return in;
}

static gc_search_ws *ws;
static void setup(void)
{
  gc_test_quiet();
  ws = gc_search_ws_alloc(4000);
  cr_assert(ws != NULL);
}
static void teardown(void)
{
  gc_search_ws_free(ws);
}

/* ---- rationals ------------------------------------------------------------ */

Test(rational, lowest_terms_and_exact_operations)
{
  cr_assert(rat_is(Q(6, -4), -3, 2));
  cr_assert(rat_is(Q(0, -7), 0, 1));
  gc_rat r;
  cr_assert(0 == gc_rat_add(Q(1, 6), Q(1, 3), &r) && rat_is(r, 1, 2));
  cr_assert(0 == gc_rat_sub(Q(1, 3), Q(1, 3), &r) && rat_is(r, 0, 1));
  cr_assert(0 == gc_rat_mul(Q(-2, 3), Q(9, 4), &r) && rat_is(r, -3, 2));
  cr_assert(0 == gc_rat_div_int(Q(3, 4), 3, &r) && rat_is(r, 1, 4));
  /* products reduce before the range check: (2^62/3) * (3/2^62) = 1 */
  cr_assert(0 == gc_rat_mul(Q(INT64_C(1) << 62, 3), Q(3, INT64_C(1) << 62), &r) &&
            rat_is(r, 1, 1));
}

Test(rational, overflow_is_reported_not_rounded)
{
  gc_rat r;
  cr_assert(eq(int, gc_rat_add(Q(INT64_MAX, 1), Q(1, 1), &r), GC_RAT_OVERFLOW));
  cr_assert(eq(int, gc_rat_mul(Q(1, INT64_C(1) << 40), Q(1, INT64_C(1) << 30),
                               &r), GC_RAT_OVERFLOW));
  cr_assert(eq(int, gc_rat_div_int(Q(1, INT64_MAX), 2, &r), GC_RAT_OVERFLOW));
  /* 1/3 + 1/5 needs no more than 15 */
  cr_assert(0 == gc_rat_add(Q(1, 3), Q(1, 5), &r) && rat_is(r, 8, 15));
}

Test(rational, comparison_is_exact_where_doubles_are_not)
{
  gc_rat a = Q((INT64_C(1) << 53) + 1, INT64_C(1) << 53), one = Q(1, 1);
  cr_assert(gc_rat_to_double(a) == 1.0);   /* the double cannot tell */
  cr_assert(eq(int, gc_rat_cmp(a, one), 1));
  cr_assert(eq(int, gc_rat_cmp(one, a), -1));
  cr_assert(eq(int, gc_rat_cmp_abs(Q(-1, 3), Q(2, 6)), 0));
  cr_assert(eq(int, gc_rat_cmp(Q(-1, 3), Q(2, 6)), -1));
  char buf[48];
  gc_rat_format(Q(9, 256), buf, sizeof buf);
  cr_assert(eq(str, buf, "9/256"));
  gc_rat_format(Q(-4, 2), buf, sizeof buf);
  cr_assert(eq(str, buf, "-2"));
}

/* ---- top-K with ties ------------------------------------------------------ */

Test(rational, topk_tie_rules_and_decisive_ties)
{
  unsigned char keep[3];
  gc_rat v[3] = { Q(1, 2), Q(-1, 2), Q(1, 4) };
  cr_assert(eq(int, gc_rat_topk(v, 3, 1, GC_TIES_LOW, keep), 1));
  cr_assert(keep[0] && !keep[1] && !keep[2]);
  cr_assert(eq(int, gc_rat_topk(v, 3, 1, GC_TIES_HIGH, keep), 1));
  cr_assert(0 == keep[0] && keep[1] && !keep[2]);
  /* both equal entries kept: the rule decides nothing */
  cr_assert(eq(int, gc_rat_topk(v, 3, 2, GC_TIES_HIGH, keep), 0));
  cr_assert(keep[0] && keep[1] && !keep[2]);
  /* equal values written differently are one magnitude */
  gc_rat w[2] = { Q(1, 3), Q(-2, 6) };
  cr_assert(eq(int, gc_rat_topk(w, 2, 1, GC_TIES_LOW, keep), 1));
  /* a tie among zeros sends 0 whichever is kept: not decisive */
  gc_rat z[3] = { Q(1, 1), Q(0, 1), Q(0, 1) };
  cr_assert(eq(int, gc_rat_topk(z, 3, 2, GC_TIES_HIGH, keep), 0));
  cr_assert(keep[0] && !keep[1] && keep[2]);
}

/* ---- exact runs ----------------------------------------------------------- */

/* Worked by hand (K = 1, alpha = 1/2, b_p = 0, x0 = (1,1)): at t = 0 both
 * workers hold acc = (1/2,1/2), two decisive ties; ties low sends
 * (1/2,0), x_1 = (1/2,1), then acc = (1/4,1) and (1/2,0) decide nothing,
 * x_3 = 0 with every memory 0: a cycle of period 1 from t = 3, limit 0.
 * Ties high mirrors it.  Counting a tie once per step instead of once per
 * selection would give 1. */
Test(exact, worker_ties_counted_per_selection, .init = setup, .fini = teardown)
{
  static const int b[4] = { 0, 0, 0, 0 }, x0[2] = { 1, 1 };
  gc_search_instance in = make(2, 2, 1, 2, b, x0);
  for (int rule = 0; rule < 2; rule++)
    for (int bi = 0; bi < 2; bi++) {
      gc_search_run r;
      cr_assert(0 == gc_search_run_exact(ws, &in, bi, rule, &r));
      cr_assert(eq(int, r.status, GC_RUN_CYCLE));
      cr_assert(eq(int, r.ties, 2), "rule %d bi %d: %d ties", rule, bi, r.ties);
      cr_assert(eq(long, r.start, 3));
      cr_assert(eq(long, r.period, 1));
      cr_assert(rat_is(r.limit, 0, 1));
    }
}

/* Worked by hand for two steps (alpha = 1/2, b = (0,1),(1,0), x0 = (1,1)):
 * the uplinks (1/2,0) and (0,1/2) have no tie, their mean (1/4,1/4) is a
 * decisive tie of the server's TopK_d; the second step has none (bi under
 * either rule; uni never ties here). */
Test(exact, server_tie_counted, .init = setup, .fini = teardown)
{
  gc_search_ws *two = gc_search_ws_alloc(2);
  cr_assert(two != NULL);
  static const int b[4] = { 0, 1, 1, 0 }, x0[2] = { 1, 1 };
  gc_search_instance in = make(2, 2, 1, 2, b, x0);
  for (int rule = 0; rule < 2; rule++) {
    gc_search_run u, v;
    cr_assert(0 == gc_search_run_exact(two, &in, 0, rule, &u));
    cr_assert(0 == gc_search_run_exact(two, &in, 1, rule, &v));
    cr_assert(eq(int, u.status, GC_RUN_OPEN));
    cr_assert(eq(int, v.status, GC_RUN_OPEN));
    cr_assert(eq(int, u.ties, 0));
    cr_assert(eq(int, v.ties, 1), "rule %d: %d server ties", rule, v.ties);
  }
  gc_search_ws_free(two);
}

/* theory.md 5.2 exactly: uni cycles with period 9 from t = 3 with mean
 * 9/256; bi sits at x* from t = 3, memories 0 from t = 4; no tie; the
 * float64 twins stay dyadic and agree. */
Test(exact, cycle9_exactly, .init = setup, .fini = teardown)
{
  static const int b[4] = { 0, -1, 0, 1 }, x0[2] = { -3, -1 };
  gc_search_instance in = make(2, 2, 1, 2, b, x0);
  gc_search_result r;
  cr_assert(0 == gc_search_eval(ws, &in, &r));
  cr_assert(r.exact);
  cr_assert(eq(str, (char *) gc_search_arithmetic_name(&r), "exact"));
  for (int rule = 0; rule < 2; rule++) {
    const gc_search_run *u = &r.ex[rule][0], *v = &r.ex[rule][1];
    cr_assert(u->status == GC_RUN_CYCLE && u->start == 3 && u->period == 9);
    cr_assert(rat_is(u->limit, 9, 256));
    cr_assert(v->status == GC_RUN_CYCLE && v->start == 4 && v->period == 1);
    cr_assert(rat_is(v->limit, 0, 1));
    cr_assert(eq(int, r.verdict[rule], GC_VERDICT_BETTER));
  }
  cr_assert(gc_search_tie_free(&r));
  cr_assert(eq(int, r.checked, 4));
}

/* An instance whose verdict the tie rule decides (found by the search):
 * ties low: both methods converge exactly (equal); ties high: bi strictly
 * better.  Each rule's verdict must come from that rule's runs, and those
 * runs must match gc_sim run with the same rule (the dyadic twins). */
Test(exact, verdict_per_tie_rule, .init = setup, .fini = teardown)
{
  static const int b[4] = { -1, -1, 0, -1 }, x0[2] = { -3, -3 };
  gc_search_instance in = make(2, 2, 1, 2, b, x0);
  gc_search_result r;
  cr_assert(0 == gc_search_eval(ws, &in, &r));
  cr_assert(r.exact);
  cr_assert(0 == gc_search_tie_free(&r));
  cr_assert(eq(int, r.verdict[0], GC_VERDICT_EQUAL));
  cr_assert(eq(int, r.verdict[1], GC_VERDICT_BETTER));
  static const int rules[2] = { GC_TIES_LOW, GC_TIES_HIGH };
  for (int rule = 0; rule < 2; rule++) {
    gc_search_run u, v;
    cr_assert(0 == gc_search_run_exact(ws, &in, 0, rules[rule], &u));
    cr_assert(0 == gc_search_run_exact(ws, &in, 1, rules[rule], &v));
    cr_assert(eq(int, gc_search_verdict_exact(&u, &v), r.verdict[rule]));
    cr_assert(eq(int, u.ties + v.ties, r.ties[rule]));
    cr_assert(eq(int, r.verdict_float[rule], r.verdict[rule]));
  }
  cr_assert(r.ties[0] > 0 && r.ties[1] > 0);
  cr_assert(eq(int, r.checked, 4));   /* every run checked against gc_sim */
}

/* Plain SGD (K = d) towards x* = (1/2, 0) from (1, 0): the error halves
 * every step and never reaches 0, so 64-bit fractions overflow.  In float64
 * the iterate rounds onto x* and repeats.  The instance must be labelled
 * float, its verdict taken from float64. */
Test(exact, overflow_makes_a_float_instance, .init = setup, .fini = teardown)
{
  static const int b[4] = { 0, 0, 1, 0 }, x0[2] = { 1, 0 };
  gc_search_instance in = make(2, 2, 2, 2, b, x0);
  gc_search_result r;
  cr_assert(0 == gc_search_eval(ws, &in, &r));
  cr_assert(eq(int, r.ex[0][0].status, GC_RUN_OVERFLOW));
  cr_assert(r.ex[0][0].steps > 50 && r.ex[0][0].steps < 70);
  cr_assert(0 == r.exact);
  cr_assert(eq(str, (char *) gc_search_arithmetic_name(&r), "float"));
  cr_assert(eq(int, r.verdict[0], r.verdict_float[0]));
  cr_assert(eq(int, r.verdict[0], GC_VERDICT_EQUAL));
  cr_assert(r.fl[0][0].period > 0 && !r.fl[0][0].exact);
}

/* P = 3 averages divide by 3, so float64 is not exact, but the rational
 * runs are: the instance is exact, its limits carry the factor 3. */
Test(exact, p3_exact_in_rationals, .init = setup, .fini = teardown)
{
  static const int b[6] = { 1, -1, 1, -1, 1, 1 }, x0[2] = { 3, -3 };
  gc_search_instance in = make(3, 2, 1, 2, b, x0);
  gc_search_result r;
  cr_assert(0 == gc_search_eval(ws, &in, &r));
  cr_assert(r.exact);
  cr_assert(0 == r.fl[0][0].exact && !r.fl[0][1].exact);
  const gc_search_run *u = &r.ex[0][0], *v = &r.ex[0][1];
  cr_assert(u->status == GC_RUN_CYCLE && v->status == GC_RUN_CYCLE);
  cr_assert(u->limit.den % 3 == 0 && v->limit.den % 3 == 0);
  cr_assert(eq(int, r.verdict[0],
               gc_search_verdict_exact(&r.ex[0][0], &r.ex[0][1])));
}

/* ---- verdict rules -------------------------------------------------------- */

Test(verdict, absolute_tolerance_and_exact_order)
{
  gc_search_run u = { 0 }, v = { 0 };
  u.status = v.status = GC_RUN_CYCLE;
  u.period = v.period = 1;
  u.limit = Q(1, 10000000000000);   /* 1e-13 */
  v.limit = Q(0, 1);
  cr_assert(eq(int, gc_search_verdict_exact(&u, &v), GC_VERDICT_EQUAL));
  u.limit = Q(1, 1000000000000);    /* 1e-12 itself is not below */
  cr_assert(eq(int, gc_search_verdict_exact(&u, &v), GC_VERDICT_BETTER));
  cr_assert(eq(int, gc_search_verdict_exact(&v, &u), GC_VERDICT_WORSE));
  /* exact order where the doubles are equal */
  u.limit = Q((INT64_C(1) << 53) + 1, INT64_C(1) << 53);
  v.limit = Q(1, 1);
  cr_assert(eq(int, gc_search_verdict_exact(&u, &v), GC_VERDICT_BETTER));
  /* an open run decides nothing unless both converge */
  u.status = GC_RUN_OPEN;
  u.limit_f = 0.5;
  cr_assert(eq(int, gc_search_verdict_exact(&u, &v), GC_VERDICT_NO_CYCLE));
  u.limit_f = 1e-13;
  v.limit = Q(0, 1);
  cr_assert(eq(int, gc_search_verdict_exact(&u, &v), GC_VERDICT_EQUAL));

  gc_cycle_result fu = { 0 }, fv = { 0 };
  fu.period = 0;
  fu.limit = 5e-13;
  fv.period = 1;
  fv.limit = 0;
  cr_assert(eq(int, gc_search_verdict_float(&fu, &fv), GC_VERDICT_EQUAL));
  fu.limit = 0.1;
  cr_assert(eq(int, gc_search_verdict_float(&fu, &fv), GC_VERDICT_NO_CYCLE));
  fu.period = 3;
  cr_assert(eq(int, gc_search_verdict_float(&fu, &fv), GC_VERDICT_BETTER));
}

/* ---- the program ---------------------------------------------------------- */

/* A small run's CSV: one field per column in every row (no comma inside a
 * field), exact rows with a fraction for every cycle, float rows without,
 * verdicts suffixed _float exactly on float rows; exit 0 (found). */
Test(program, csv_rows_are_consistent)
{
  char out[8192], cmd[1024], csv[512];
  snprintf(csv, sizeof csv, "%s", gc_test_tmp("search.csv"));
  snprintf(cmd, sizeof cmd, "%s --class 2x2 --limit 400 --examples 0 --csv %s",
           gc_test_builddir("counterexamples/search"), csv);
  int rc = gc_test_run(cmd, out, sizeof out);
  cr_assert(eq(int, rc, 0), "%s\n%s", cmd, out);
  cr_assert(strstr(out, "P=2 d=2     1152 canonical      400 run  sampled") !=
            NULL, "%s", out);
  size_t len;
  char *text = gc_test_slurp(csv, &len);
  cr_assert(text != NULL);
  remove(csv);
  char *save, *line = strtok_r(text, "\n", &save);
  cr_assert(line && !strncmp(line, "P,d,alpha,targets,x0,uni_limit,bi_limit,"
                             "verdict,arithmetic,", 42));
  size_t ncol = 1, rows = 0, exact = 0, flt = 0;
  for (const char *c = line; *c; c++)
    ncol += *c == ',';
  cr_assert(eq(sz, ncol, 20));
  while ((line = strtok_r(NULL, "\n", &save))) {
    char *f[20], *s2, *tok;
    size_t n = 0;
    /* fields may be empty: split by hand */
    for (tok = line; n < 20; n++) {
      f[n] = tok;
      if (!(s2 = strchr(tok, ',')))
        break;
      *s2 = '\0';
      tok = s2 + 1;
    }
    cr_assert(eq(sz, n + 1, ncol), "row %zu has %zu fields", rows, n + 1);
    int is_exact = !strcmp(f[8], "exact");
    cr_assert(is_exact || !strcmp(f[8], "float"));
    int suffixed = strstr(f[7], "_float") != NULL;
    cr_assert(eq(int, suffixed, !is_exact), "row %zu: %s %s", rows, f[7], f[8]);
    long up = atol(f[12]), bp = atol(f[14]);
    if (is_exact) {
      cr_assert(eq(int, up > 0, f[9][0] != '\0'));
      cr_assert(eq(int, bp > 0, f[10][0] != '\0'));
    } else {
      cr_assert(f[9][0] == '\0' && f[10][0] == '\0');
    }
    /* tie-free under one rule means the same runs under the other */
    if (!strcmp(f[15], "0") || !strcmp(f[16], "0"))
      cr_assert(0 == strcmp(f[15], f[16]) && !strcmp(f[18], "1"));
    exact += (size_t) is_exact;
    flt += (size_t) !is_exact;
    rows++;
  }
  cr_assert(eq(sz, rows, 400));
  cr_assert(exact > 0 && flt > 0);
  free(text);
}

/* Exit 1 when the phenomenon does not reproduce (one instance cannot show
 * it), 2 for a bad command line, with a message naming the option. */
Test(program, exit_statuses)
{
  char out[8192], cmd[1024];
  const char *prog = gc_test_builddir("counterexamples/search");
  snprintf(cmd, sizeof cmd, "%s --class 2x2 --limit 1 --examples 0", prog);
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 1), "%s", out);
  cr_assert(strstr(out, "NOT FOUND") != NULL, "%s", out);
  cr_assert(strstr(out, "P=2 d=2     1152 canonical        1 run  sampled") !=
            NULL, "%s", out);
  snprintf(cmd, sizeof cmd, "%s --class 2x5", prog);
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 2), "%s", out);
  cr_assert(strstr(out, "--class") != NULL, "%s", out);
  snprintf(cmd, sizeof cmd, "%s --limit 0", prog);
  cr_assert(eq(int, gc_test_run(cmd, out, sizeof out), 2), "%s", out);
  cr_assert(strstr(out, "--limit") != NULL, "%s", out);
}
