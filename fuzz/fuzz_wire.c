/* fuzz_wire.c -- every compressor's wire decoder, and the sparse-vector
 * message of the servers, on arbitrary bytes (layout: fuzz_wire.h).
 * Properties of gc_decompress_add_*: a status comes back, y is untouched
 * unless it is GC_SUCCESS, and decoding is a pure function of the bytes. */
#include <stdlib.h>
#include <string.h>
#include "fuzz_wire.h"
#include "gc_errno.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static int decode(const fuzz_wire *w, const uint8_t *m, size_t len, void *y)
{
  if (!w->T)
    return w->f64 ? gc_sparse_decode_add_f64(m, len, w->n, 0.5, y)
                  : gc_sparse_decode_add_f32(m, len, w->n, 0.5f, y);
  return w->f64 ? gc_decompress_add_f64(w->c, m, len, w->step, 0.5, y)
                : gc_decompress_add_f32(w->c, m, len, w->step, 0.5f, y);
}

static void fill(void *y, const fuzz_wire *w)
{
  for (size_t i = 0; i < w->n; i++) {
    double v = 2.385 * (double) i - 7.0;
    if (w->f64)
      ((double *) y)[i] = v;
    else
      ((float *) y)[i] = (float) v;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
  static int quiet;
  if (!quiet) {
    gc_set_error_handler_off();
    quiet = 1;
  }
  fuzz_wire w;
  if (n < FUZZ_WIRE_HDR || fuzz_wire_setup(&w, d) != 0)
    return 0;
  const uint8_t *m = d + FUZZ_WIRE_HDR;
  size_t len = n - FUZZ_WIRE_HDR, bytes = w.n * (w.f64 ? 8 : 4);
  /* exact-size heap buffers, so a write past n shows up under ASan */
  void *y = malloc(bytes), *ref = malloc(bytes), *again = malloc(bytes);
  if (!y || !ref || !again)
    abort();
  fill(y, &w);
  memcpy(ref, y, bytes);
  int st = decode(&w, m, len, y);
  if (st != GC_SUCCESS) {
    if (memcmp(y, ref, bytes) != 0)
      abort();   /* the contract: y untouched on error */
  } else {
    memcpy(again, ref, bytes);
    if (decode(&w, m, len, again) != GC_SUCCESS || memcmp(again, y, bytes) != 0)
      abort();   /* not a pure function of the message */
  }
  free(y);
  free(ref);
  free(again);
  gc_compressor_free(w.c);
  return 0;
}
