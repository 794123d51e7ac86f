/* fuzz_config.c -- the `gradcomp train --config FILE` parser (read_config,
 * then the option parser over its "--key value" list) on arbitrary bytes.
 * The parser is static in cmd_train.c, so this file includes it, as
 * llm.c's test_gpt2.c includes train_gpt2.c.  Property: a status comes
 * back, and every string it built is freed exactly once. */
#include "fuzz_memfile.h"
#include "../experiments/cmd_train.c"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
  char **av = NULL;
  int ac = 0;
  if (read_config(fuzz_memfile(0, d, n), &av, &ac) != 0)
    return 0;
  opts o;
  opts_init(&o);
  if (parse(&o, ac, av, "fuzz.conf") == 0) {
    /* what gc_cmd_train does next with the parsed names */
    const char *model = gc_train_config_model(&o.c);
    if (!o.lr_set)
      o.c.lr = tuned_lr(model, o.c.workers, o.c.algorithm);
  }
  free_config(av, ac);
  return 0;
}
