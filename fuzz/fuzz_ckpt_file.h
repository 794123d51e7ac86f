/* fuzz_ckpt_file.h -- the run whose checkpoint files fuzz_ckpt_file reads,
 * shared with make_corpus: the one gc_train_config_default describes, as
 * its process 0 of 1 after epoch 1 of FUZZ_CKPT_FILE_STEPS steps, with
 * FUZZ_CKPT_FILE_STATE bytes of state. */
#ifndef FUZZ_CKPT_FILE_H
#define FUZZ_CKPT_FILE_H

enum { FUZZ_CKPT_FILE_STEPS = 10, FUZZ_CKPT_FILE_STATE = 64 };

#endif /* FUZZ_CKPT_FILE_H */
