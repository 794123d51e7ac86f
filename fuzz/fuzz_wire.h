/* fuzz_wire.h -- the input layout of fuzz_wire, shared with make_corpus:
 * FUZZ_WIRE_HDR bytes that pick a decoder and its setting, then the
 * message.
 *   h[0]  compressor: index into gc_compressor_types(); one past the last
 *         is the "sparse vector" message of gc_sparse_decode_add_*
 *   h[1]  bit 0: float64; bit 1: ties high; bit 2: QSGD buckets
 *   h[2], h[3]  size: n = 1 + (h[2] | h[3] << 8) % 512, or for PowerSGD
 *         one (1 + h[2] % 16) x (1 + h[3] % 16) layer
 *   h[4]  k = 1 + h[4] % n, levels = 1 + h[4] % 16, rank, bucket,
 *         threshold h[4] / 64
 *   h[5]  step */
#ifndef FUZZ_WIRE_H
#define FUZZ_WIRE_H
#include <stdint.h>
#include "gc_compressor.h"

enum { FUZZ_WIRE_HDR = 6 };

typedef struct fuzz_wire {
  const gc_compressor_type *T;   /* NULL: the sparse-vector message       */
  gc_compressor *c;              /* NULL if T is NULL or alloc refused    */
  int f64;
  size_t n;
  uint32_t step;
  gc_segment seg;
} fuzz_wire;

static size_t fuzz_wire_ntypes(void)
{
  size_t m = 0;
  for (const gc_compressor_type *const *t = gc_compressor_types(); *t; t++)
    m++;
  return m;
}

/* Set up w from the header h; returns 0, or -1 when the compressor refuses
 * the setting (nothing to decode then). */
static int fuzz_wire_setup(fuzz_wire *w, const uint8_t *h)
{
  size_t m = fuzz_wire_ntypes(), t = h[0] % (m + 1);
  w->T = t < m ? gc_compressor_types()[t] : NULL;
  w->c = NULL;
  w->f64 = h[1] & 1;
  w->step = h[5];
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  if (w->T && (w->T->flags & GC_COMP_NEEDS_SHAPE)) {
    size_t rows = 1 + h[2] % 16, cols = 1 + h[3] % 16;
    w->n = rows * cols;
    w->seg = (gc_segment) { 0, rows, cols };
    p.segments = &w->seg;
    p.nsegments = 1;
    p.rank = 1 + h[4] % (rows < cols ? rows : cols);
  } else {
    w->n = 1 + ((size_t) h[2] | (size_t) h[3] << 8) % 512;
  }
  if (!w->T)
    return 0;
  p.k = 1 + h[4] % w->n;
  p.levels = 1 + h[4] % 16;
  p.bucket = (h[1] & 4) ? 1 + h[4] % w->n : 0;
  p.threshold = h[4] / 64.0;
  p.ties = (h[1] & 2) ? GC_TIES_HIGH : GC_TIES_LOW;
  p.seed = 0x5eed;
  w->c = gc_compressor_alloc(w->T, w->n, &p);
  return w->c ? 0 : -1;
}

#endif /* FUZZ_WIRE_H */
