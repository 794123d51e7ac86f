/* test_ledger.c -- the byte ledger: totals per direction, step and worker,
 * broadcast rows, the CSV writer and the error paths. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_algo.h"
#include "gc_errno.h"
#include "gc_test.h"

Test(ledger, totals_and_queries, .init = gc_test_quiet)
{
  gc_ledger *l = gc_ledger_alloc(3);
  uint64_t up = 0, down = 0;
  for (uint32_t t = 0; t < 200; t++) {   /* past the first growth */
    for (size_t p = 0; p < 3; p++) {
      size_t b = 10 * t + p + 1;
      cr_assert(eq(int, gc_ledger_record(l, t, p, GC_UP, b), GC_SUCCESS));
      up += b;
      cr_assert(eq(int, gc_ledger_record(l, t, p, GC_DOWN, 7), GC_SUCCESS));
      down += 7;
    }
    cr_assert(eq(int, gc_ledger_record_broadcast(l, t, 7), GC_SUCCESS));
  }
  cr_assert(eq(u64, gc_ledger_total(l, GC_UP), up));
  cr_assert(eq(u64, gc_ledger_total(l, GC_DOWN), down));
  cr_assert(eq(u64, gc_ledger_total(l, GC_LEDGER_BCAST), 200 * 7));
  cr_assert(eq(u64, gc_ledger_step_total(l, 5, GC_UP), 51 + 52 + 53));
  cr_assert(eq(u64, gc_ledger_step_total(l, 5, GC_DOWN), 21));
  cr_assert(eq(u64, gc_ledger_step_total(l, 5, GC_LEDGER_BCAST), 7));
  cr_assert(eq(u64, gc_ledger_step_total(l, 100000, GC_UP), 0));
  uint64_t w1 = 0;
  for (uint32_t t = 0; t < 200; t++) w1 += 10 * t + 2;
  cr_assert(eq(u64, gc_ledger_worker_total(l, 1, GC_UP), w1));
  cr_assert(eq(u64, gc_ledger_worker_total(l, 2, GC_DOWN), 1400));
  cr_assert(eq(sz, gc_ledger_rows(l), (size_t) 200 * 7));
  cr_assert(eq(int, gc_ledger_record(l, 0, 3, GC_UP, 1), GC_EINVAL));
  cr_assert(eq(int, gc_ledger_record(l, 0, 0, 5, 1), GC_EINVAL));
  gc_ledger_clear(l);
  cr_assert(eq(u64, gc_ledger_total(l, GC_UP), 0));
  cr_assert(eq(u64, gc_ledger_step_total(l, 5, GC_UP), 0));
  gc_ledger_free(l);
  gc_ledger_free(NULL);
  cr_assert_null(gc_ledger_alloc(0));
}

/* Per-step totals cover the steps recorded, not 0 .. step: a simulator
 * resumed at a large step (fuzz_checkpoint: a counter near 2^32 made the
 * ledger ask for 96 GB) records its first step at once, and steps before
 * the first one recorded can still come later. */
Test(ledger, steps_far_from_zero, .init = gc_test_quiet)
{
  gc_ledger *l = gc_ledger_alloc(1);
  const uint32_t big = 4000000000u;
  cr_assert(eq(int, gc_ledger_record(l, big, 0, GC_UP, 11), GC_SUCCESS));
  cr_assert(eq(int, gc_ledger_record(l, big + 300, 0, GC_UP, 13), GC_SUCCESS));
  cr_assert(eq(int, gc_ledger_record(l, big - 70, 0, GC_UP, 17), GC_SUCCESS));
  cr_assert(eq(int, gc_ledger_record(l, big, 0, GC_UP, 19), GC_SUCCESS));
  /* the totals span the steps recorded: keep the test's span small */
  cr_assert(eq(int, gc_ledger_record(l, big + 1000, 0, GC_DOWN, 23), GC_SUCCESS));
  cr_assert(eq(u64, gc_ledger_step_total(l, big, GC_UP), 30));
  cr_assert(eq(u64, gc_ledger_step_total(l, big + 300, GC_UP), 13));
  cr_assert(eq(u64, gc_ledger_step_total(l, big - 70, GC_UP), 17));
  cr_assert(eq(u64, gc_ledger_step_total(l, big + 1000, GC_DOWN), 23));
  cr_assert(eq(u64, gc_ledger_step_total(l, big - 71, GC_UP), 0));
  cr_assert(eq(u64, gc_ledger_step_total(l, 0, GC_UP), 0));
  cr_assert(eq(u64, gc_ledger_total(l, GC_UP), 60));
  gc_ledger_free(l);
}

/* The same through a simulator restored from a checkpoint state whose step
 * counter is large: the step runs and is counted under its own number. */
Test(ledger, resumed_simulator, .init = gc_test_quiet)
{
  gc_algo_config c;
  gc_algo_config_default(&c);
  c.kind = GC_ALGO_UNI;
  c.workers = 2;
  c.n = 8;
  c.up = c.down = gc_compressor_topk;
  c.up_params.k = c.down_params.k = 2;
  double x0[8] = { 0 }, g[2][8];
  for (size_t i = 0; i < 8; i++)
    g[0][i] = g[1][i] = 2.385 * (double) i - 3;
  const void *gp[2] = { g[0], g[1] };
  gc_sim *s = gc_sim_alloc(&c, x0);
  cr_assert_not_null(s);
  size_t len = gc_sim_state_bytes(s);
  unsigned char *state = malloc(len);
  gc_sim_state_save(s, state);
  const uint32_t at = 3000000000u;   /* the counter leads the state */
  memcpy(state, &at, sizeof at);
  cr_assert(eq(int, gc_sim_state_load(s, state, len), GC_SUCCESS));
  cr_assert(eq(int, gc_sim_step(s, gp, 0.1), GC_SUCCESS));
  cr_assert(eq(u32, gc_sim_steps_done(s), at + 1));
  const gc_ledger *l = gc_sim_ledger(s);
  cr_assert(gc_ledger_step_total(l, at, GC_UP) > 0);
  cr_assert(eq(u64, gc_ledger_step_total(l, at, GC_UP), gc_ledger_total(l, GC_UP)));
  /* A counter at its limit refuses the step instead of wrapping to 0. */
  const uint32_t last = UINT32_MAX;
  memcpy(state, &last, sizeof last);
  cr_assert(eq(int, gc_sim_state_load(s, state, len), GC_SUCCESS));
  cr_assert(eq(int, gc_sim_step(s, gp, 0.1), GC_EINVAL));
  cr_assert(eq(u32, gc_sim_steps_done(s), UINT32_MAX));
  free(state);
  gc_sim_free(s);
}

Test(ledger, csv, .init = gc_test_quiet)
{
  char path[512];
  snprintf(path, sizeof path, "%s", gc_test_tmp("ledger.csv"));
  unlink(path);
  gc_ledger *l = gc_ledger_alloc(2);
  gc_ledger_record(l, 0, 0, GC_UP, 12);
  gc_ledger_record(l, 0, 1, GC_UP, 13);
  gc_ledger_record(l, 0, 0, GC_DOWN, 9);
  gc_ledger_record(l, 0, 1, GC_DOWN, 9);
  gc_ledger_record_broadcast(l, 0, 9);
  cr_assert(eq(int, gc_ledger_write_csv(l, path), GC_SUCCESS));
  size_t got;
  char *text = gc_test_slurp(path, &got);
  cr_assert_not_null(text);
  cr_assert(got > 0);
  cr_assert(eq(str, text,
               "step,worker,direction,bytes\n0,0,up,12\n0,1,up,13\n"
               "0,0,down,9\n0,1,down,9\n0,all,broadcast,9\n"));
  free(text);
  unlink(path);
  cr_assert(eq(int, gc_ledger_write_csv(l, "/nonexistent-dir/x.csv"), GC_EIO));
  gc_ledger_free(l);
}
