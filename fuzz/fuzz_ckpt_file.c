/* fuzz_ckpt_file.c -- a training checkpoint file as `gradcomp train
 * --resume` reads it (gc_ckpt_file_read: the header, the length and CRC
 * checks, the meta lines, the fingerprint, rank and epoch comparisons) on
 * arbitrary bytes, for the run of fuzz_ckpt_file.h.  Property: a status
 * comes back, and only with the run's payload length. */
#include "fuzz_memfile.h"
#include "fuzz_ckpt_file.h"
#include "gc_checkpoint.h"
#include "gc_errno.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
  static gc_train_config c;
  static int ready;
  if (!ready) {
    gc_set_error_handler_off();
    gc_train_config_default(&c);
    ready = 1;
  }
  uint8_t *payload = NULL;
  if (gc_ckpt_file_read(fuzz_memfile(0, d, n), &c, 0, 1, 1,
                        FUZZ_CKPT_FILE_STEPS, FUZZ_CKPT_FILE_STATE,
                        &payload) == GC_SUCCESS) {
    if (n != GC_CKPT_HDR + FUZZ_CKPT_FILE_STATE + (size_t) (d[8] | d[9] << 8 |
                                                           d[10] << 16 |
                                                           (uint32_t) d[11] << 24))
      abort();   /* a success must have read exactly the file */
    free(payload);
  }
  return 0;
}
