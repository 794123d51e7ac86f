/* fuzz_checkpoint.c -- a simulator's checkpoint state (gc_sim_state_load,
 * what `gradcomp train --resume` restores after the file's CRC check) on
 * arbitrary bytes, then two steps from it.  Property: whatever the state
 * (NaN memories, any step count), load and step return a status. */
#include <stdlib.h>
#include "fuzz_checkpoint.h"
#include "gc_errno.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
  static int quiet;
  if (n < 1)
    return 0;
  if (!quiet) {
    gc_set_error_handler_off();
    quiet = 1;
  }
  unsigned k = d[0] % FUZZ_CKPT_KINDS;
  gc_sim *s = fuzz_ckpt_sim(k);
  if (!s)
    abort();   /* the fixed configurations are valid */
  if (gc_sim_state_load(s, d + 1, n - 1) != GC_SUCCESS) {
    gc_sim_free(s);
    return 0;
  }
  double g64[FUZZ_CKPT_P * FUZZ_CKPT_N];
  float g32[FUZZ_CKPT_P * FUZZ_CKPT_N];
  const void *g[FUZZ_CKPT_P];
  for (unsigned t = 0; t < 2; t++) {
    fuzz_ckpt_grads(s, fuzz_ckpt_dtype(k), t, g64, g32, g);
    if (gc_sim_step(s, g, 0.05) != GC_SUCCESS)
      break;
  }
  gc_sim_free(s);
  return 0;
}
