/* gc_rng.h -- counter-based random numbers (Philox4x32-10, Salmon et al.,
 * SC'11), identical on CPU and GPU.
 *
 * There is no generator state: a value is a pure function of
 * (seed, stream, step, element).  `stream` names a worker or a tensor,
 * `step` the iteration, `block` the element index divided by 4 (each call
 * yields four 32-bit words).  Keying by element instead of by thread is what
 * makes the output independent of the thread count and of the device.
 * Header-only; GC_HD expands to __host__ __device__ under nvcc. */
#ifndef GC_RNG_H
#define GC_RNG_H
#include <stdint.h>
#include <math.h>

#if defined(__CUDACC__)
#define GC_HD __host__ __device__
#else
#define GC_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)   /* the API libgradcomp.so exports */
#endif

typedef struct gc_rng4 { uint32_t v[4]; } gc_rng4;

GC_HD static inline uint32_t gc__mulhilo32(uint32_t a, uint32_t b,
                                           uint32_t *hi)
{
#if defined(__CUDA_ARCH__)
  *hi = __umulhi(a, b);
  return a * b;
#else
  uint64_t p = (uint64_t) a * b;
  *hi = (uint32_t) (p >> 32);
  return (uint32_t) p;
#endif
}

/* Philox4x32 with 10 rounds on counter c and key k. */
GC_HD static inline gc_rng4 gc_philox4x32_10(uint32_t c0, uint32_t c1,
                                             uint32_t c2, uint32_t c3,
                                             uint32_t k0, uint32_t k1)
{
  for (int r = 0; r < 10; r++) {
    uint32_t hi0, hi1;
    uint32_t lo0 = gc__mulhilo32(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = gc__mulhilo32(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  gc_rng4 out = {{c0, c1, c2, c3}};
  return out;
}

/* Four random words for (seed, stream, step, block). */
GC_HD static inline gc_rng4 gc_rng_block(uint64_t seed, uint32_t stream,
                                         uint32_t step, uint64_t block)
{
  return gc_philox4x32_10((uint32_t) block, (uint32_t) (block >> 32), step,
                          stream, (uint32_t) seed, (uint32_t) (seed >> 32));
}

/* The 32-bit word of element i (four elements share one Philox call). */
GC_HD static inline uint32_t gc_rng_u32(uint64_t seed, uint32_t stream,
                                        uint32_t step, uint64_t i)
{
  return gc_rng_block(seed, stream, step, i >> 2).v[i & 3];
}

/* The 16-bit uniform of element i: the i-th little-endian 16-bit unit of
 * the stream of Philox blocks 0, 1, 2, ... (block i / 8, word (i / 2) % 4,
 * the low half for even i).  One Philox call serves eight elements; the
 * quantizers that need only a Bernoulli draw test u < p 2^16, a bias
 * below 2^-16 in p (qsgd, terngrad). */
GC_HD static inline uint32_t gc_rng_u16(uint64_t seed, uint32_t stream,
                                        uint32_t step, uint64_t i)
{
  gc_rng4 r = gc_rng_block(seed, stream, step, i >> 3);
  return (r.v[(i >> 1) & 3] >> (16 * (unsigned) (i & 1))) & 0xffffu;
}

/* Uniform in [0,1) with 24 random bits: exact in float. */
GC_HD static inline float gc_rng_to_f32(uint32_t u)
{
  return (float) (u >> 8) * (1.0f / 16777216.0f);
}

/* Uniform in [0,1) with 53 random bits from two words. */
GC_HD static inline double gc_rng_to_f64(uint32_t a, uint32_t b)
{
  return ((double) (a >> 5) * 67108864.0 + (double) (b >> 6))
         * (1.0 / 9007199254740992.0);
}

/* Uniform in [0,1) for element i, 53 bits (uses words 2i and 2i+1). */
GC_HD static inline double gc_rng_uniform(uint64_t seed, uint32_t stream,
                                          uint32_t step, uint64_t i)
{
  gc_rng4 r = gc_rng_block(seed, stream, step, i >> 1);
  unsigned j = (unsigned) (i & 1) * 2;
  return gc_rng_to_f64(r.v[j], r.v[j + 1]);
}

/* Standard normal for element i (Box-Muller on one Philox block). */
GC_HD static inline double gc_rng_normal(uint64_t seed, uint32_t stream,
                                         uint32_t step, uint64_t i)
{
  gc_rng4 r = gc_rng_block(seed, stream, step, i);
  double u1 = 1.0 - gc_rng_to_f64(r.v[0], r.v[1]);   /* (0,1]: log is finite */
  double u2 = gc_rng_to_f64(r.v[2], r.v[3]);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Uniform integer in [0, m) by Lemire's multiply-shift (bias < m/2^32). */
GC_HD static inline uint32_t gc_rng_below(uint32_t u, uint32_t m)
{
  return (uint32_t) (((uint64_t) u * m) >> 32);
}

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_RNG_H */
