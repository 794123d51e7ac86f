/* fuzz_config.c -- the `gradcomp train --config FILE` parser
 * (gc_train_opts_read_config, then the option parser over its "--key
 * value" list) on arbitrary bytes.  Property: a status comes back, and
 * every string it built is freed exactly once. */
#include "fuzz_memfile.h"
#include "gc_train_options.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
  char **av = NULL;
  int ac = 0;
  if (gc_train_opts_read_config(fuzz_memfile(0, d, n), &av, &ac) != 0)
    return 0;
  gc_train_opts o;
  gc_train_opts_init(&o);
  if (gc_train_opts_parse(&o, ac, av, "fuzz.conf") == 0) {
    /* what gc_cmd_train does next with the parsed names */
    const char *model = gc_train_config_model(&o.c);
    if (!o.lr_set)
      o.c.lr = gc_train_opts_tuned_lr(model, o.c.workers, o.c.algorithm);
  }
  gc_train_opts_free_config(av, ac);
  return 0;
}
