/* gc_compressor.h -- the compressor family: a GSL-style type table
 * (gsl_rng_type pattern) plus the wire format.
 *
 * Every compressor turns a vector x (length n, float32 or float64) into a
 * real byte message and decodes such a message into y += scale * C(x).
 * The byte counts reported anywhere in gradcomp are the lengths of these
 * messages.  Residuals for error feedback are formed by decoding with
 * scale = -1 into a copy of x.
 *
 * Determinism: a message is a pure function of (x, params, step).  Random
 * compressors draw from gc_rng.h keyed by (params.seed, params.stream, step,
 * element index), never by thread, so CPU, GPU and any thread count give the
 * same bytes.  One exception keeps state between calls: PowerSGD's warm
 * start (lowrank.c), whose message is a pure function of (x, params) and
 * the inputs of the instance's earlier compress calls.  Index limit:
 * n < 2^32. */
#ifndef GC_COMPRESSOR_H
#define GC_COMPRESSOR_H
#include <stddef.h>
#include <stdint.h>
#include "gc_dtype.h"
#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)   /* the API libgradcomp.so exports */
#endif

enum { GC_TIES_LOW = 0, GC_TIES_HIGH = 1 };   /* which index wins equal |x| */

/* A slice of the vector with a layer shape (PowerSGD): the rows*cols
 * entries x[offset .. offset + rows*cols) hold a row-major rows x cols
 * matrix (a linear weight out x in; a conv weight out x (in*kh*kw); a bias
 * or BatchNorm vector 1 x len). */
typedef struct gc_segment {
  size_t offset, rows, cols;
} gc_segment;

/* Parameters; gc_compressor_params_default() fills sensible defaults and
 * each type reads only the fields it needs. */
typedef struct gc_compressor_params {
  size_t k;               /* entries kept (sparsifiers); 0: use density   */
  double density;         /* k = max(1, floor(density*n)) when k == 0      */
  unsigned levels;        /* QSGD s >= 1 (default 1)                       */
  size_t bucket;          /* QSGD bucket size, 0 = whole vector            */
  double threshold;       /* threshold-v: keep |x_i| > v (v >= 0)          */
  double clip;            /* TernGrad clip factor c (0 = no clipping; 2.5) */
  uint64_t seed;          /* run seed                                      */
  uint32_t stream;        /* worker or tensor stream (randk: shared = 0)   */
  int ties;               /* GC_TIES_LOW (default) or GC_TIES_HIGH         */
  unsigned gauss_loops;   /* Gaussian-k threshold adjustments (3; 5 = gaussian2) */
  double sample_ratio;    /* DGC sampling ratio (default 0.01)             */
  unsigned rank;          /* PowerSGD rank r >= 1 (default 2)              */
  const gc_segment *segments; /* layer shapes (GC_COMP_NEEDS_SHAPE types):  */
  size_t nsegments;       /* any order, non-overlapping, inside [0, n);
                             gc_compressor_alloc copies the array, so it
                             need not outlive the call (default NULL, 0)  */
} gc_compressor_params;

void gc_compressor_params_default(gc_compressor_params *p);
/* sizeof(gc_compressor_params) as compiled into the library: bindings that
 * mirror the struct (python/gradcomp) check theirs against it. */
size_t gc_compressor_params_size(void);

/* What one compress call produced, beside the bytes. */
typedef struct gc_compress_info {
  size_t nnz;         /* nonzeros of the decoded C(x)                        */
  size_t selected;    /* entries sent (sparsifiers: achieved count vs k)     */
  unsigned loops;     /* threshold evaluations (gaussk, dgc)                 */
} gc_compress_info;

/* Flags of a type. */
enum {
  GC_COMP_BIASED = 1u << 0,     /* E C(x) != x                              */
  GC_COMP_RANDOM = 1u << 1,     /* uses the RNG                             */
  GC_COMP_SPARSE = 1u << 2,     /* output has few nonzeros                  */
  GC_COMP_CONTRACTIVE = 1u << 3,/* ||C(x)-x||^2 <= (1-delta)||x||^2 always  */
  GC_COMP_NEEDS_SHAPE = 1u << 4,/* needs layer shapes (PowerSGD)            */
  GC_COMP_KEEPS_K = 1u << 5,    /* keeps (about) k entries: uses k/density  */
  GC_COMP_COUNT_VARIES = 1u << 6/* KEEPS_K with a data-dependent count
                                   (gaussk, dgc): compare selected with k  */
};

/* A compressor type.  State is allocated by gc_compressor_alloc with
 * state_size bytes (zeroed), then init() sizes its own workspaces.  The
 * encode/decode functions must not allocate. */
typedef struct gc_compressor_type {
  const char *name;        /* "topk", "qsgd", ... (command-line name)      */
  const char *summary;     /* one line for `gradcomp compress --list`      */
  unsigned flags;
  size_t state_size;
  int (*init)(void *state, size_t n, const gc_compressor_params *p);
  void (*release)(void *state);                 /* frees what init took */
  size_t (*max_bytes)(const void *state);       /* bound on any message */
  int (*encode_f32)(void *state, const float *x, uint32_t step,
                    uint8_t *buf, size_t cap, size_t *len,
                    gc_compress_info *info);
  int (*encode_f64)(void *state, const double *x, uint32_t step,
                    uint8_t *buf, size_t cap, size_t *len,
                    gc_compress_info *info);
  int (*decode_f32)(const void *state, const uint8_t *buf, size_t len,
                    uint32_t step, float scale, float *y);
  int (*decode_f64)(const void *state, const uint8_t *buf, size_t len,
                    uint32_t step, double scale, double *y);
  /* What an instance carries from one call to the next (PowerSGD's warm
   * start), for checkpoints; all three NULL for stateless types. */
  size_t (*state_bytes)(const void *state);
  void (*state_save)(const void *state, void *buf);
  void (*state_load)(void *state, const void *buf);
} gc_compressor_type;

/* The registry.  Each family file defines its types and a NULL-terminated
 * list; gc_compressor_types() concatenates the families. */
const gc_compressor_type *const *gc_compressor_types(void);
const gc_compressor_type *gc_compressor_type_by_name(const char *name);

typedef struct gc_compressor gc_compressor;   /* opaque instance */

/* Allocate an instance for vectors of length n.  Returns NULL after
 * reporting GC_EBADLEN (n == 0), GC_EINVAL (n >= 2^32, k > n, density
 * outside (0,1], levels < 1, negative threshold, a GC_COMP_NEEDS_SHAPE
 * type without segments, rank 0 or above a segment's min(rows, cols),
 * segments that overlap or leave [0, n), ...) or GC_ENOMEM.  The segments are copied:
 * gc_compressor_get_params() points at the instance's copy. */
gc_compressor *gc_compressor_alloc(const gc_compressor_type *T, size_t n,
                                   const gc_compressor_params *p);
void gc_compressor_free(gc_compressor *c);          /* NULL is a no-op */

const gc_compressor_type *gc_compressor_type_of(const gc_compressor *c);
size_t gc_compressor_n(const gc_compressor *c);
/* Resolved k of a GC_COMP_KEEPS_K type, 0 for the others. */
size_t gc_compressor_k(const gc_compressor *c);
const gc_compressor_params *gc_compressor_get_params(const gc_compressor *c);
size_t gc_compressor_max_bytes(const gc_compressor *c);

/* The state an instance carries between calls, for checkpoints: 0 bytes
 * for stateless types.  save writes gc_compressor_state_bytes(c) bytes;
 * load reads as many into an instance allocated with the same type, n
 * and parameters, which then continues bit-identically. */
size_t gc_compressor_state_bytes(const gc_compressor *c);
void gc_compressor_state_save(const gc_compressor *c, void *buf);
void gc_compressor_state_load(gc_compressor *c, const void *buf);

/* Compress x (length n) at iteration `step` into buf (capacity cap bytes;
 * gc_compressor_max_bytes() always suffices).  *len receives the message
 * length.  info may be NULL.
 * Returns GC_SUCCESS, GC_EDOM (NaN or Inf anywhere in x, sent or not: the
 * reason names the first index; or a scale the type cannot represent,
 * e.g. a QSGD bucket norm past the precision's range), GC_ENOSPACE.  A
 * message of finite x always decodes. */
int gc_compress_f32(gc_compressor *c, const float *x, uint32_t step,
                    uint8_t *buf, size_t cap, size_t *len,
                    gc_compress_info *info);
int gc_compress_f64(gc_compressor *c, const double *x, uint32_t step,
                    uint8_t *buf, size_t cap, size_t *len,
                    gc_compress_info *info);

/* Decode-accumulate: y += scale * C(x) from a message of `len` bytes.
 * `step` must be the one used to encode (shared-seed random-K rebuilds its
 * indices from it).  Returns GC_SUCCESS or GC_ECORRUPT (truncated, wrong
 * type or precision, index out of range, trailing bytes); y is untouched on
 * error. */
int gc_decompress_add_f32(const gc_compressor *c, const uint8_t *buf,
                          size_t len, uint32_t step, float scale, float *y);
int gc_decompress_add_f64(const gc_compressor *c, const uint8_t *buf,
                          size_t len, uint32_t step, double scale, double *y);

/* ---- sparse messages shared by the algorithms (exact, any support) -----
 * A "sparse vector" message carries nnz (index, value) pairs with the index
 * coding chosen by size (raw u32 / delta+varint / bitmap; one tag byte).
 * The server of unidirectional top-K broadcasts the aggregate this way. */
size_t gc_sparse_max_bytes(size_t n, size_t nnz, int dtype);
/* Encode the nonzeros of x (length n) exactly. */
int gc_sparse_encode_dense_f32(const float *x, size_t n, uint8_t *buf,
                               size_t cap, size_t *len, size_t *nnz);
int gc_sparse_encode_dense_f64(const double *x, size_t n, uint8_t *buf,
                               size_t cap, size_t *len, size_t *nnz);
/* y += scale * decoded; same errors as gc_decompress_add_*. */
int gc_sparse_decode_add_f32(const uint8_t *buf, size_t len, size_t n,
                             float scale, float *y);
int gc_sparse_decode_add_f64(const uint8_t *buf, size_t len, size_t n,
                             double scale, double *y);

/* The compressors (defined in their family files). */
extern const gc_compressor_type *const gc_compressor_identity;
extern const gc_compressor_type *const gc_compressor_topk;
extern const gc_compressor_type *const gc_compressor_randk;
extern const gc_compressor_type *const gc_compressor_randk_unbiased;
extern const gc_compressor_type *const gc_compressor_threshold;
extern const gc_compressor_type *const gc_compressor_gaussk;
extern const gc_compressor_type *const gc_compressor_dgc;
extern const gc_compressor_type *const gc_compressor_qsgd;
extern const gc_compressor_type *const gc_compressor_terngrad;
extern const gc_compressor_type *const gc_compressor_sign;
extern const gc_compressor_type *const gc_compressor_scaled_sign;
extern const gc_compressor_type *const gc_compressor_fp16;
extern const gc_compressor_type *const gc_compressor_bf16;
extern const gc_compressor_type *const gc_compressor_powersgd;

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_COMPRESSOR_H */
