/* gc_ef.h -- error-feedback memories (theory.md sections 2.6, 2.8, 3).
 *
 * One gc_ef object holds the memory of one sender (a worker, or the server
 * on the downlink) and turns its input vector g into a compressed message
 * while updating the memory.  The kinds differ in where the step size goes
 * and in what is kept:
 *   NONE       acc = lr*g                       (plain compression)
 *   BEFORE     acc = eps + lr*g, send C(acc), eps = acc - C(acc)
 *              (Alistarh et al. / Zou et al.; the receiver applies 1*C)
 *   AFTER      acc = g + eps,    send C(acc), eps = acc - C(acc)
 *              (DoubleSqueeze; the receiver applies lr*C)
 *   DGC        u = m*u + g (Nesterov: u = m*(u+g)), v = v + u (+g), acc = v,
 *              send C(v), v = v - C(v), u_I = 0 on the sent support I
 *              (momentum correction + factor masking, optional clipping of
 *              g to the global norm clip/sqrt(P); receiver applies lr*C)
 *   EF21       acc = g - h, send c = C(acc), h = h + c (receiver applies the
 *              running mean of the h; see gc_algo.h)
 * Vectors are float32 or float64 (GC_F32/GC_F64 of gc_dtype.h), length n;
 * nothing is allocated after gc_ef_alloc. */
#ifndef GC_EF_H
#define GC_EF_H
#include <stddef.h>
#include <stdint.h>
#include "gc_compressor.h"
#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)   /* the API libgradcomp.so exports */
#endif

typedef enum gc_ef_kind {
  GC_EF_NONE = 0,
  GC_EF_BEFORE,        /* residual, step size applied before compression */
  GC_EF_AFTER,         /* residual, step size applied after (DoubleSqueeze) */
  GC_EF_DGC,           /* DGC momentum correction + masking (+ clipping)  */
  GC_EF_EF21           /* EF21 state h_i                                  */
} gc_ef_kind;

/* EF21 initialisation of h_i^0 (Richtarik et al.): */
enum {
  GC_EF21_INIT_COMPRESSED = 0, /* h^0 = C(grad at x^0): h starts at 0 and the
                                  first message is C(g_0)                   */
  GC_EF21_INIT_GRADIENT = 1    /* h^0 = grad at x^0: the first input is kept
                                  whole (gc_ef_ef21_set) and sent densely    */
};

typedef struct gc_ef_options {
  double momentum;     /* DGC momentum m in [0,1) (default 0.9)            */
  int nesterov;        /* DGC Nesterov variant (default 0)                 */
  int masking;         /* DGC momentum-factor masking (default 1)          */
  double clip_norm;    /* DGC local clipping threshold, 0 = off (default)  */
  size_t workers;      /* P, scales the clipping threshold by P^{-1/2}     */
  int ef21_init;       /* GC_EF21_INIT_* (default COMPRESSED)              */
} gc_ef_options;

void gc_ef_options_default(gc_ef_options *o);

typedef struct gc_ef gc_ef;

/* Allocate a memory for vectors of length n and dtype GC_F32/GC_F64; every
 * memory starts at 0.  opt may be NULL (defaults).  NULL after reporting
 * GC_EINVAL (n == 0, bad dtype, momentum outside [0,1)) or GC_ENOMEM. */
gc_ef *gc_ef_alloc(gc_ef_kind kind, size_t n, int dtype,
                   const gc_ef_options *opt);
void gc_ef_free(gc_ef *e);                    /* NULL is a no-op */
void gc_ef_reset(gc_ef *e);                   /* memories back to 0 */
gc_ef_kind gc_ef_kind_of(const gc_ef *e);

/* Feed input g (length n, the memory's dtype) at step size lr through the
 * memory and compressor c (same n): writes C(acc) into buf (cap bytes,
 * gc_compressor_max_bytes(c) suffices) and updates the memory.
 * Returns GC_SUCCESS, GC_EDOM (non-finite g, or overflow in acc),
 * GC_EBADLEN (c has another n), GC_ENOSPACE, or the compressor's code;
 * on error the memory (and DGC's momentum) is left as it was. */
int gc_ef_step(gc_ef *e, gc_compressor *c, const void *g, double lr,
               uint32_t step, uint8_t *buf, size_t cap, size_t *len,
               gc_compress_info *info);

/* Scale the receiver gives the decoded message: 1 for NONE and BEFORE (the
 * step size is inside the message), lr for AFTER, DGC and EF21. */
double gc_ef_apply_scale(gc_ef_kind kind, double lr);

/* Probes, length n, the memory's dtype (NULL where the kind has none):
 * memory: eps (BEFORE/AFTER), v (DGC), h (EF21); momentum: u (DGC);
 * accumulator: the vector compressed at the last step (acc, v, or g - h);
 * sent: the decoded C(acc) of the last step.  Valid until the next step. */
const void *gc_ef_memory(const gc_ef *e);
const void *gc_ef_momentum(const gc_ef *e);
const void *gc_ef_accumulator(const gc_ef *e);
const void *gc_ef_sent(const gc_ef *e);

/* The state a memory carries from one step to the next (the memory, and
 * DGC's momentum u), for checkpoints: save writes gc_ef_state_bytes(e)
 * bytes to buf; load reads as many into a memory of the same kind, n and
 * dtype. */
size_t gc_ef_state_bytes(const gc_ef *e);
void gc_ef_state_save(const gc_ef *e, void *buf);
void gc_ef_state_load(gc_ef *e, const void *buf);

/* EF21 with GC_EF21_INIT_GRADIENT: set h = g (the caller sends g densely).
 * Returns GC_EDOM for a non-finite g, GC_EINVAL for another kind. */
int gc_ef_ef21_set(gc_ef *e, const void *g);

/* DGC sparsity warm-up (pure): the density at epoch e for the target rho
 * and W warm-up epochs, rho_e = max(c^(e+1), rho) with c = rho^(1/(W+1))
 * for e < W, and rho for e >= W (or W == 0).  rho in (0,1]. */
double gc_dgc_warmup_density(double rho, unsigned warmup_epochs,
                             unsigned epoch);

/* DGC local gradient clipping: scale x (length n) in place so that
 * ||x|| <= max_norm / sqrt(workers); returns the factor applied (1 when
 * no clipping was needed, or max_norm <= 0). */
double gc_clip_global_norm_f32(float *x, size_t n, double max_norm,
                               size_t workers);
double gc_clip_global_norm_f64(double *x, size_t n, double max_norm,
                               size_t workers);

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_EF_H */
