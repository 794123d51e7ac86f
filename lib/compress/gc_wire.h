/* gc_wire.h -- internal: the sparse message layout shared by the
 * sparsifiers (sparse_*.c) and the gc_sparse_* functions (wire.c).  The
 * byte layout and the closed-form sizes are documented in wire.c.
 * Not installed; index limit n < 2^32. */
#ifndef GC_WIRE_H
#define GC_WIRE_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

enum { GC__WIRE_HDR = 7 };   /* type, precision, coding, u32 count */

/* Message types (byte 0): one per compressor, so that a message handed to
 * the wrong decoder is rejected. */
enum {
  GC__WIRE_SPARSE = 0x50,   /* gc_sparse_encode_dense_*            */
  GC__WIRE_TOPK = 0x51,     /* topk                                */
  GC__WIRE_RANDK = 0x52,    /* randk                               */
  GC__WIRE_RANDKU = 0x53,   /* randk-unbiased: indices implicit
                               (shared seed)                       */
  GC__WIRE_THRESHOLD = 0x54, /* threshold                          */
  GC__WIRE_GAUSSK = 0x55,   /* gaussk                              */
  GC__WIRE_DGC = 0x56,      /* dgc                                 */
  GC__WIRE_SPARSE_END       /* one past the last: a new tag goes before it */
};

/* Index codings (byte 2). */
enum {
  GC__IDX_RAW = 0,       /* c little-endian u32                 */
  GC__IDX_DELTA = 1,     /* c LEB128 gaps i_j - i_{j-1} - 1     */
  GC__IDX_BITMAP = 2,    /* ceil(n/8) bytes, bit i = index i    */
  GC__IDX_IMPLICIT = 3   /* none: the decoder rebuilds them     */
};

/* The index coding the encoder picks for c ascending indices idx < n (the
 * smallest section; ties go raw, delta, bitmap in that order), and its
 * size in *index_bytes. */
int gc__wire_choose(size_t n, const uint32_t *idx, size_t c, size_t *index_bytes);
/* Upper bound of a message with c values of vbytes each (any coding). */
size_t gc__wire_bound(size_t n, size_t c, size_t vbytes);

/* Write a message: header, indices (coding chosen here unless implicit),
 * values x[idx[j]] * factor.  idx ascending unless implicit.  *nnz receives
 * the number of nonzero x[idx[j]] (counted while the values are copied).
 * Returns GC_SUCCESS or GC_ENOSPACE. */
int gc__wire_encode_f32(uint8_t type, size_t n, const uint32_t *idx, size_t c,
                        int implicit, const float *x, float factor,
                        uint8_t *buf, size_t cap, size_t *len, size_t *nnz);
int gc__wire_encode_f64(uint8_t type, size_t n, const uint32_t *idx, size_t c,
                        int implicit, const double *x, double factor,
                        uint8_t *buf, size_t cap, size_t *len, size_t *nnz);

/* The coding the encoder picks for c ascending indices of [0, n) whose
 * delta coding takes delta bytes (raw, delta, bitmap: the smallest, ties
 * in that order), *index_bytes its index section; and the header it
 * writes.  For encoders that write a message's sections themselves
 * (random-K's dense draws, from their bitmap). */
int gc__wire_pick(size_t n, size_t c, size_t delta, size_t *index_bytes);
void gc__wire_put_header(uint8_t *buf, uint8_t type, size_t vbytes, int coding, size_t c);

/* The header of an implicit message of c values of vbytes bytes, which
 * the caller writes at buf + GC__WIRE_HDR (random-K-unbiased, as it
 * draws); *len the message's length.  Returns GC_SUCCESS or GC_ENOSPACE. */
int gc__wire_implicit_head(uint8_t type, size_t c, size_t vbytes, uint8_t *buf, size_t cap,
                           size_t *len);

/* gc__wire_encode with the values already gathered: val[j] = x[idx[j]]
 * (factor 1), the same bytes. */
int gc__wire_encode_vals_f32(uint8_t type, size_t n, const uint32_t *idx,
                             size_t c, const float *val, uint8_t *buf,
                             size_t cap, size_t *len, size_t *nnz);
int gc__wire_encode_vals_f64(uint8_t type, size_t n, const uint32_t *idx,
                             size_t c, const double *val, uint8_t *buf,
                             size_t cap, size_t *len, size_t *nnz);

/* The LEB128 code of g (seven bits a byte, low first, the high bit
 * saying another follows): its length, and gc__leb_put writes it at p and
 * returns the next free byte.  The delta coding's gaps are such codes. */
static inline size_t gc__leb_len(uint32_t g)
{
  return 1u + (g >= 1u << 7) + (g >= 1u << 14) + (g >= 1u << 21) + (g >= 1u << 28);
}

static inline uint8_t *gc__leb_put(uint8_t *p, uint32_t g)
{
  while (g >= 128) {
    *p++ = (uint8_t) (g | 0x80);
    g >>= 7;
  }
  *p++ = (uint8_t) g;
  return p;
}

/* The code at p (written by gc__leb_put, or checked by the decoder's
 * pass over a message) into *g; returns the byte after it. */
static inline const uint8_t *gc__leb_get(const uint8_t *p, uint32_t *g)
{
  uint32_t v = 0;
  for (int sh = 0;; sh += 7) {
    uint8_t b = *p++;
    v |= (uint32_t) (b & 0x7f) << sh;
    if (!(b & 0x80))
      break;
  }
  *g = v;
  return p;
}

/* The threads the encoders use for a message of c values (1 below 2^18
 * values: small messages are many, and a parallel region costs). */
int gc__wire_threads(size_t c);

/* The most pieces the pieces encoders take (their stack arrays). */
enum { GC__WIRE_PIECES_MAX = 16 };

/* gc__wire_encode_vals of the concatenation of P <= GC__WIRE_PIECES_MAX
 * pieces, pc[j] entries at pi[j] and pv[j] each (ascending across them),
 * left where they lie: the same bytes, written on P threads. */
int gc__wire_encode_pieces_f32(uint8_t type, size_t n, int P, const uint32_t *const *pi,
                               const float *const *pv, const size_t *pc, uint8_t *buf,
                               size_t cap, size_t *len, size_t *nnz);
int gc__wire_encode_pieces_f64(uint8_t type, size_t n, int P, const uint32_t *const *pi,
                               const double *const *pv, const size_t *pc, uint8_t *buf,
                               size_t cap, size_t *len, size_t *nnz);

/* Staged values: a sparsifier may gather the values of its message in
 * the message buffer itself, while it selects and before the index
 * section's size is known, past the largest index section a message of at
 * most cmax values can have (min(4 cmax, ceil(n/8)) bytes), at an offset
 * aligned for vbytes-byte values.  gc__wire_stage returns that place and
 * in *room how many such values fit before buf + cap (NULL when none do).
 * gc__wire_encode_staged then writes header and indices and moves the c
 * <= cmax values val[j] = x[idx[j]] down behind them: the same bytes as
 * gc__wire_encode_vals, without reading x again. */
void *gc__wire_stage(size_t n, size_t cmax, size_t vbytes, uint8_t *buf, size_t cap,
                     size_t *room);
/* gc__wire_encode_staged of P <= GC__WIRE_PIECES_MAX pieces as
 * gc__wire_encode_pieces takes them, the values staged in buf in piece
 * order: pv[0] at or past where the values' section will start, and
 * pv[j + 1] at or past pv[j] + pc[j] (so each moves down, or stays). */
int gc__wire_encode_staged_pieces_f32(uint8_t type, size_t n, int P,
                                      const uint32_t *const *pi, const float *const *pv,
                                      const size_t *pc, uint8_t *buf, size_t cap,
                                      size_t *len, size_t *nnz);
int gc__wire_encode_staged_pieces_f64(uint8_t type, size_t n, int P,
                                      const uint32_t *const *pi, const double *const *pv,
                                      const size_t *pc, uint8_t *buf, size_t cap,
                                      size_t *len, size_t *nnz);
int gc__wire_encode_staged_f32(uint8_t type, size_t n, const uint32_t *idx,
                               size_t c, const float *val, uint8_t *buf,
                               size_t cap, size_t *len, size_t *nnz);
int gc__wire_encode_staged_f64(uint8_t type, size_t n, const uint32_t *idx,
                               size_t c, const double *val, uint8_t *buf,
                               size_t cap, size_t *len, size_t *nnz);

/* The message of c entries whose delta codes the caller has written at
 * buf + GC__WIRE_HDR, delta bytes, where gc__wire_pick chose that coding:
 * the header, and the values val[j] = x[idx[j]] behind the codes, moved
 * down (staged: val lies in buf, as gc__wire_stage places it) or copied.
 * The bytes of gc__wire_encode_staged / gc__wire_encode_vals. */
int gc__wire_encode_coded_f32(uint8_t type, size_t n, size_t c, size_t delta,
                              const float *val, int staged, uint8_t *buf, size_t cap,
                              size_t *len, size_t *nnz);
int gc__wire_encode_coded_f64(uint8_t type, size_t n, size_t c, size_t delta,
                              const double *val, int staged, uint8_t *buf, size_t cap,
                              size_t *len, size_t *nnz);

/* gc__wire_encode_coded of values in P <= GC__WIRE_PIECES_MAX pieces, pc[j]
 * at pv[j]: staged, placed as gc__wire_encode_staged_pieces takes them
 * (each at or past where it goes) and moved down piece by piece, or
 * copied; the same bytes, on P threads. */
int gc__wire_encode_coded_pieces_f32(uint8_t type, size_t n, size_t c, size_t delta, int P,
                                     const float *const *pv, const size_t *pc, int staged,
                                     uint8_t *buf, size_t cap, size_t *len, size_t *nnz);
int gc__wire_encode_coded_pieces_f64(uint8_t type, size_t n, size_t c, size_t delta, int P,
                                     const double *const *pv, const size_t *pc, int staged,
                                     uint8_t *buf, size_t cap, size_t *len, size_t *nnz);

/* Validate a whole explicit-index message of `type` (0: any explicit sparse
 * type) for vectors of length n, then y += scale * values.  y is untouched
 * unless GC_SUCCESS.  Returns GC_SUCCESS or GC_ECORRUPT. */
int gc__wire_decode_add_f32(uint8_t type, const uint8_t *buf, size_t len,
                            size_t n, float scale, float *y);
int gc__wire_decode_add_f64(uint8_t type, const uint8_t *buf, size_t len,
                            size_t n, double scale, double *y);

/* Check the header of an implicit-index message: type, precision vbytes,
 * coding implicit, count == c and len == exact size.  GC_ECORRUPT if not. */
int gc__wire_check_implicit(uint8_t type, size_t vbytes, const uint8_t *buf,
                            size_t len, size_t c);

#ifdef __cplusplus
}
#endif
#endif /* GC_WIRE_H */
