/* gc_winograd.h -- Winograd convolution for the layers of nn.c
 * (winograd.c; gc__ names, not installed). */
#ifndef GC_WINOGRAD_H
#define GC_WINOGRAD_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

/* 3x3 and 5x5 stride-1 convolution by Winograd F(2x2, 3x3) (winograd.c;
 * a 5x5 kernel as four 3x3 sub-kernels), for the layers of nn.c where it
 * applies: out[n][o] (B x O x Ho x Wo, Ho = H + 2 pad - (k - 1)) = sum
 * over c of the zero-padded in[n][c] (B x C x H x W) correlated with
 * filter (o, c), plus bias[o] (bias may be NULL), for the shapes that
 * gc__wino3_applies accepts (5x5: C and O multiples of 4, or the four
 * sub-kernels' channels would not line up).  U is the transformed
 * filter, 16 x O x C (3x3, from gc__wino3_filter) or 16 x O x 4C (5x5,
 * from gc__wino5_filter).  With turned != 0 (3x3 only), U is the
 * transform of a layer with O inputs and C outputs and the convolution
 * runs its kernel turned 180 degrees with channels swapped: that is the
 * layer's input gradient, computed from dout with pad k - 1 - pad (for
 * 5x5, gc__wino5_filter turns the kernel itself).  Scratch sizes (floats)
 * come from gc__wino3_sizes for the largest batch; bias holds O + 3
 * floats. */
typedef struct gc__wino3_scratch {
  float *V, *M, *work, *bias;
} gc__wino3_scratch;
int gc__wino3_applies(size_t ksize, size_t pad, size_t in_c, size_t out_c);
int gc__wino3_pays(size_t B, size_t Ho, size_t Wo);   /* for this batch? */
void gc__wino3_filter(const float *w, size_t O, size_t C, float *U);
/* U (16 x O2 x 4 C2) of the 5x5 filters w (O x C x 5 x 5): those of w
 * (O2 = O, C2 = C), or turned, of its input gradient (O2 = C, C2 = O);
 * tmp: scratch of 36 O C floats (the work buffer). */
void gc__wino5_filter(const float *w, size_t O, size_t C, int turned,
                      float *tmp, float *U);
void gc__wino3_conv(const float *in, size_t B, size_t C, size_t H, size_t W,
                    size_t pad, size_t k, const float *U, int turned, size_t O,
                    const float *bias, float *out, const gc__wino3_scratch *s);
/* dW (O x C x k x k) of the same convolution from its input and dout, by
 * F(3x3, 2x2) per sub-kernel; Mw is scratch of 16 O C (5x5: 64 O C)
 * floats (the filter buffer). */
void gc__wino3_wgrad(const float *in, const float *dout, size_t B, size_t C,
                     size_t H, size_t W, size_t pad, size_t k, size_t O,
                     float *dW, float *Mw, const gc__wino3_scratch *s);
void gc__wino3_sizes(size_t C, size_t H, size_t W, size_t pad, size_t k,
                     size_t O, size_t max_batch, size_t *nV, size_t *nM,
                     size_t *nwork);

#ifdef __cplusplus
}
#endif
#endif /* GC_WINOGRAD_H */
