/* test_cuda_compress.c -- the GPU compressors against the library, bit for
 * bit: the whole wire message (hence the decoded output), the status and
 * the info counts.  Every comparison is exact (style.md §2.5: selection and
 * data movement are exact; the quantizers' scales follow the CPU's
 * summation order).  GPU tests skip when no device is visible; the host-only
 * tests (argument errors, two-phase sizing, "no device") run everywhere. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_compressor.h"
#include "gc_cuda.h"
#include "gc_errno.h"
#include "gc_rng.h"
#include "gc_test.h"
#include "gc_test_cuda.h"

/* ---- inputs ----------------------------------------------------------- */

enum { IN_DISTINCT, IN_TIES, IN_ZEROS, IN_NORMAL, IN_NAN, IN_INF, IN_COUNT };
static const char *in_name[] = {"distinct", "ties", "signed-zeros", "normal", "nan", "inf"};

static void fill(float *x, size_t n, int kind, uint64_t seed)
{
  switch (kind) {
  case IN_DISTINCT:
    gc_test_fill_distinct(x, n, seed);
    break;
  case IN_TIES:   /* few magnitudes, many ties, random signs */
    for (size_t i = 0; i < n; i++) {
      uint32_t u = gc_rng_u32(seed, 3, 0, i);
      x[i] = (u & 1 ? -1.0f : 1.0f) * (2.385f + (float) ((u >> 1) % 3));
    }
    break;
  case IN_ZEROS:  /* +0 and -0 with a few nonzeros: k may exceed nnz(x) */
    for (size_t i = 0; i < n; i++) {
      uint32_t u = gc_rng_u32(seed, 4, 0, i);
      x[i] = u % 5 == 0 ? (float) ((u >> 8) % 7) - 3.0f : (u & 2 ? -0.0f : 0.0f);
    }
    break;
  default:
    gc_test_fill_normal_f32(x, n, seed);
    if (kind == IN_NAN)
      x[n / 2] = NAN;
    if (kind == IN_INF)
      x[n - 1] = -INFINITY;
    break;
  }
}

/* ---- one comparison ------------------------------------------------------ */

enum { GUARD = 8, GUARD_BYTE = 0xA5 };

/* Compress x with the CPU library and with the GPU, the device message
 * written `misalign` bytes into its allocation; assert the same status, the
 * same message bytes and the same counts, and that no byte of the
 * allocation outside the message changed.  Returns the CPU's info. */
static gc_compress_info compare_at(const gc_compressor_type *T, size_t n,
                                   const gc_compressor_params *p, const float *h_x,
                                   uint32_t step, unsigned misalign, const char *what)
{
  gc_compressor *c = gc_compressor_alloc(T, n, p);
  cr_assert(c != NULL, "%s: alloc %s n=%zu", what, T->name, n);
  size_t cap = gc_compressor_max_bytes(c), len = 0;
  uint8_t *ref = malloc(cap), *got = malloc(cap + GUARD);
  cr_assert(ref && got);
  gc_compress_info info = {0, 0, 0};
  int st = gc_compress_f32(c, h_x, step, ref, cap, &len, &info);

  float *d_x;
  uint8_t *d_alloc, *d_buf;
  gc_cuda_info *d_info, h_info;
  void *d_tmp = NULL;
  size_t tmp = 0;
  GC_TEST_CUDA(cudaMalloc((void **) &d_x, n * sizeof *d_x));
  GC_TEST_CUDA(cudaMalloc((void **) &d_alloc, cap + GUARD));
  GC_TEST_CUDA(cudaMemset(d_alloc, GUARD_BYTE, cap + GUARD));
  d_buf = d_alloc + misalign;
  GC_TEST_CUDA(cudaMalloc((void **) &d_info, sizeof *d_info));
  GC_TEST_CUDA(cudaMemcpy(d_x, h_x, n * sizeof *d_x, cudaMemcpyHostToDevice));
  cr_assert(eq(int, gc_cuda_compress_f32(c, NULL, &tmp, d_x, step, d_buf, cap, d_info, 0),
               GC_SUCCESS));
  GC_TEST_CUDA(cudaMalloc(&d_tmp, tmp ? tmp : 1));
  cr_assert(eq(int, gc_cuda_compress_f32(c, d_tmp, &tmp, d_x, step, d_buf, cap, d_info, 0),
               GC_SUCCESS), "%s: enqueue", what);
  int gst = gc_cuda_info_sync(d_info, &h_info, 0);
  cr_assert(eq(int, gst, st), "%s: %s n=%zu: GPU status %d, CPU %d", what, T->name, n, gst, st);
  if (st == GC_SUCCESS) {
    cr_assert(eq(u64, h_info.len, (uint64_t) len), "%s: %s n=%zu: length", what, T->name, n);
    GC_TEST_CUDA(cudaMemcpy(got, d_alloc, cap + GUARD, cudaMemcpyDeviceToHost));
    const uint8_t *msg = got + misalign;
    size_t first = len;
    for (size_t i = 0; i < len && first == len; i++)
      if (msg[i] != ref[i])
        first = i;
    cr_assert(first == len, "%s: %s n=%zu: messages differ first at byte %zu of %zu "
              "(gpu 0x%02x, cpu 0x%02x)", what, T->name, n, first, len,
              first < len ? msg[first] : 0, first < len ? ref[first] : 0);
    size_t changed = cap + GUARD;
    for (size_t i = 0; i < cap + GUARD && changed == cap + GUARD; i++)
      if ((i < misalign || i >= misalign + len) && got[i] != GUARD_BYTE)
        changed = i;
    cr_assert(changed == cap + GUARD, "%s: %s n=%zu: byte %zu outside the message (at %u, "
              "%zu bytes) changed", what, T->name, n, changed, misalign, len);
    cr_assert(eq(u32, h_info.selected, (uint32_t) info.selected), "%s: selected", what);
    cr_assert(eq(u32, h_info.nnz, (uint32_t) info.nnz), "%s: nnz", what);
    /* the GPU message decodes (and, being identical, to the same vector) */
    float *y = calloc(n, sizeof *y);
    cr_assert(eq(int, gc_decompress_add_f32(c, msg, len, step, 1.0f, y), GC_SUCCESS));
    free(y);
  }
  cudaFree(d_tmp);
  cudaFree(d_info);
  cudaFree(d_alloc);
  cudaFree(d_x);
  free(ref);
  free(got);
  gc_compressor_free(c);
  return info;
}

static gc_compress_info compare(const gc_compressor_type *T, size_t n,
                                const gc_compressor_params *p, const float *h_x,
                                uint32_t step, const char *what)
{
  return compare_at(T, n, p, h_x, step, 0, what);
}

static const size_t sizes[] = {1, 2, 7, 255, 256, 4097, 65537, 100003};

/* k in {1, n/4, n-1, n} (deduplicated, k >= 1). */
static size_t ks_of(size_t n, size_t ks[4])
{
  size_t cand[4] = {1, n / 4, n - 1, n}, m = 0;
  for (int i = 0; i < 4; i++) {
    int dup = cand[i] < 1;
    for (size_t j = 0; j < m; j++)
      dup |= ks[j] == cand[i];
    if (!dup)
      ks[m++] = cand[i];
  }
  return m;
}

static void sweep_sparse(const gc_compressor_type *T, int ties)
{
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s], ks[4], m = ks_of(n, ks);
    float *x = malloc(n * sizeof *x);
    for (int kind = 0; kind < IN_COUNT; kind++) {
      fill(x, n, kind, 1000 + n);
      for (size_t j = 0; j < m; j++) {
        gc_compressor_params p;
        gc_compressor_params_default(&p);
        p.k = ks[j];
        p.ties = ties;
        p.seed = 77;
        char what[96];
        snprintf(what, sizeof what, "%s k=%zu ties=%d", in_name[kind], ks[j], ties);
        compare(T, n, &p, x, 3, what);
      }
    }
    free(x);
  }
}

/* ---- GPU suites ---------------------------------------------------------- */

TestSuite(cuda_compress, .init = gc_test_quiet);

Test(cuda_compress, topk_ties_low) { gc_test_require_gpu(); sweep_sparse(gc_compressor_topk, GC_TIES_LOW); }
Test(cuda_compress, topk_ties_high) { gc_test_require_gpu(); sweep_sparse(gc_compressor_topk, GC_TIES_HIGH); }
Test(cuda_compress, randk) { gc_test_require_gpu(); sweep_sparse(gc_compressor_randk, GC_TIES_LOW); }
Test(cuda_compress, randk_unbiased) { gc_test_require_gpu(); sweep_sparse(gc_compressor_randk_unbiased, GC_TIES_LOW); }
/* Gaussian-k with params.k set: z from k/n (the density sweeps below take
 * it from params.density). */
Test(cuda_compress, gaussk_explicit_k) { gc_test_require_gpu(); sweep_sparse(gc_compressor_gaussk, GC_TIES_LOW); }

/* Top-k's two paths (select.cu): the bucket path, where the k-th largest
 * key's bucket (top 14 bits of |x|) holds few enough keys, with ties inside
 * that bucket resolved by index; and the exact radix fallback when the
 * bucket is crowded (a zero vector, one repeated magnitude, more ties than
 * the candidate cap).  Sizes straddle the compaction tile (4096) and the
 * candidate cap (65536); k in {1, a bucket edge, many, n}. */
Test(cuda_compress, topk_bucket_and_fallback)
{
  gc_test_require_gpu();
  const size_t ns[] = {4095, 65536, 65537, 300007};
  for (int a = 0; a < 4; a++) {
    const size_t n = ns[a];
    float *x = malloc(n * sizeof *x);
    cr_assert(x != NULL);
    for (int kind = 0; kind < 5; kind++) {
      for (size_t i = 0; i < n; i++) {
        uint32_t u = gc_rng_u32(31, 5, (uint32_t) kind, i);
        float sgn = u & 1 ? -1.0f : 1.0f;
        switch (kind) {
        case 0:   /* a normal vector on a grid of 1/64: ties in every bucket */
          x[i] = (float) gc_rng_normal(31, 6, 0, i);
          x[i] = (float) (int) (x[i] * 64.0f) / 64.0f;
          break;
        case 1:   /* zeros of both signs: one bucket holds everything */
          x[i] = sgn * 0.0f;
          break;
        case 2:   /* one magnitude */
          x[i] = sgn * 1.5f;
          break;
        case 3:   /* two magnitudes in the same bucket (top 14 bits equal) */
          x[i] = sgn * (u & 2 ? 1.0f : 1.0f + 0x1p-20f);
          break;
        default:  /* a few large values above a crowded bucket of ties */
          x[i] = i % 97 == 0 ? sgn * (8.0f + (float) (i % 5)) : sgn * 0.25f;
          break;
        }
      }
      const size_t ks[] = {1, n / 97, n / 3, n - 1, n};
      for (int j = 0; j < 5; j++)
        for (int t = 0; t < 2; t++) {
          gc_compressor_params p;
          gc_compressor_params_default(&p);
          p.k = ks[j] ? ks[j] : 1;
          p.ties = t ? GC_TIES_HIGH : GC_TIES_LOW;
          char what[96];
          snprintf(what, sizeof what, "bucket kind %d n=%zu k=%zu ties=%d", kind, n, p.k,
                   p.ties);
          compare(gc_compressor_topk, n, &p, x, 0, what);
        }
    }
    free(x);
  }
}

/* Random-K refuses a NaN or Inf anywhere in x, drawn or not (the one rule
 * for non-finite input, sparse_randk.c), on both sides: the steps move the
 * draw, and every one is GC_EDOM. */
Test(cuda_compress, randk_refuses_nonfinite_anywhere)
{
  gc_test_require_gpu();
  const size_t n = 4097;
  float *x = malloc(n * sizeof *x);
  cr_assert(x != NULL);
  gc_test_fill_normal_f32(x, n, 12);
  x[77] = INFINITY;
  x[1234] = NAN;
  const gc_compressor_type *types[] = {gc_compressor_randk, gc_compressor_randk_unbiased};
  for (int t = 0; t < 2; t++) {
    gc_compressor_params p;
    gc_compressor_params_default(&p);
    p.k = n / 4;
    p.seed = 3;
    gc_compressor *c = gc_compressor_alloc(types[t], n, &p);
    cr_assert(c != NULL);
    size_t cap = gc_compressor_max_bytes(c), len;
    uint8_t *buf = malloc(cap);
    cr_assert(buf != NULL);
    int seen[2] = {0, 0};   /* CPU successes, CPU GC_EDOM */
    for (uint32_t step = 0; step < 16; step++) {
      seen[gc_compress_f32(c, x, step, buf, cap, &len, NULL) == GC_EDOM]++;
      char what[64];
      snprintf(what, sizeof what, "NaN and Inf in x, step=%u", step);
      compare(types[t], n, &p, x, step, what);
    }
    cr_assert(seen[0] == 0 && seen[1] == 16, "%s: %d successes, %d GC_EDOM",
              types[t]->name, seen[0], seen[1]);
    free(buf);
    gc_compressor_free(c);
  }
  free(x);
}
Test(cuda_compress, dgc_ties_low) { gc_test_require_gpu(); sweep_sparse(gc_compressor_dgc, GC_TIES_LOW); }
Test(cuda_compress, dgc_ties_high) { gc_test_require_gpu(); sweep_sparse(gc_compressor_dgc, GC_TIES_HIGH); }

/* DGC's paths: no sampling (ratio 1), the adaptation rounds (thr <- 0.8
 * thr while |I| < 0.8 ns), the exact top-ns when |I| > 1.3 ns, and the
 * truncation to the first ns.  The step moves the strided sample's start;
 * a periodic staircase biases a strided sample, so thresholds are re-tried
 * (the CPU's evaluation count shows that this sweep reaches them). */
Test(cuda_compress, dgc_paths)
{
  gc_test_require_gpu();
  const double ratios[] = {0.001, 0.01, 0.2, 1.0}, dens[] = {0.01, 0.3};
  unsigned most_evals = 0;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    float *x = malloc(n * sizeof *x);
    for (int kind = 0; kind <= IN_COUNT; kind++) {
      if (kind == IN_COUNT)   /* the staircase */
        for (size_t i = 0; i < n; i++)
          x[i] = (float) (i % 7) + 1.0f;
      else
        fill(x, n, kind, 6000 + n);
      for (int r = 0; r < 4; r++)
        for (int d = 0; d < 2; d++)
          for (uint32_t step = 0; step < 3; step++) {
            gc_compressor_params p;
            gc_compressor_params_default(&p);
            p.density = dens[d];
            p.sample_ratio = ratios[r];
            p.seed = 11;
            p.stream = 1;
            char what[96];
            snprintf(what, sizeof what, "%s ratio=%g density=%g step=%u",
                     kind < IN_COUNT ? in_name[kind] : "staircase", ratios[r], dens[d], step);
            gc_compress_info info = compare(gc_compressor_dgc, n, &p, x, step, what);
            most_evals = info.loops > most_evals ? info.loops : most_evals;
          }
    }
    free(x);
  }
  cr_assert(most_evals > 1, "no case re-tried DGC's threshold");
}

/* Every size and input against each value of one double parameter
 * (`field`, an offsetof into gc_compressor_params, printed as `name`). */
static void sweep_param(const gc_compressor_type *T, uint64_t seed, size_t field,
                        const char *name, const double *vals, int nv)
{
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    float *x = malloc(n * sizeof *x);
    for (int kind = 0; kind < IN_COUNT; kind++) {
      fill(x, n, kind, seed + n);
      for (int v = 0; v < nv; v++) {
        gc_compressor_params p;
        gc_compressor_params_default(&p);
        *(double *) ((char *) &p + field) = vals[v];
        char what[64];
        snprintf(what, sizeof what, "%s %s=%g", in_name[kind], name, vals[v]);
        compare(T, n, &p, x, 0, what);
      }
    }
    free(x);
  }
}

/* Most (size, density) pairs here have a fractional density * n, so that
 * k = floor(density n) and z (drawn from the density) disagree: the GPU
 * must take z from the density, as sparse_gaussk.c does, not from k/n. */
Test(cuda_compress, gaussk)
{
  gc_test_require_gpu();
  const double dens[] = {0.001, 0.01, 0.25};
  sweep_param(gc_compressor_gaussk, 2000, offsetof(gc_compressor_params, density), "density",
              dens, 3);
}

/* Lengths that reach every case of the blocked sums behind Gaussian-k's
 * mean/std and TernGrad's clip bound (blocks of 1024, pairwise tree over
 * the blocks): the tail alone (1), one block with a tail (1023), a block of
 * one entry (1025), an odd number of blocks (16*1024 + 17), and 3073 blocks
 * (3*1024*1024 + 5: odd at several tree levels, and more blocks than one
 * GPU tree pass takes). */
static const size_t sum_sizes[] = {1, 1023, 1025, 16 * 1024 + 17, 3 * 1024 * 1024 + 5};

/* The inputs of fill(), plus data far from 0 (1000 + N(0,1)), where the
 * sums' shift by x[0] matters. */
static const char *fill_sums(float *x, size_t n, int kind, uint64_t seed)
{
  if (kind < IN_COUNT) {
    fill(x, n, kind, seed);
    return in_name[kind];
  }
  gc_test_fill_normal_f32(x, n, seed);
  for (size_t i = 0; i < n; i++)
    x[i] += 1000.0f;
  return "offset";
}

/* Inputs whose shifted sums leave their range (the squares overflow at
 * 2^60 and 2^100, round to subnormals at 2^-60 and 2^-100): the CPU
 * recomputes the statistics on x 2^sh, and so must the twin. */
Test(cuda_compress, gaussk_sums_out_of_range)
{
  gc_test_require_gpu();
  static const int shifts[] = {60, 100, -60, -100};
  for (size_t s = 0; s < sizeof sum_sizes / sizeof sum_sizes[0]; s++) {
    size_t n = sum_sizes[s];
    float *x = malloc(n * sizeof *x);
    cr_assert(x != NULL);
    for (size_t j = 0; j < sizeof shifts / sizeof shifts[0]; j++) {
      gc_test_fill_normal_f32(x, n, 7100 + n);
      for (size_t i = 0; i < n; i++)
        x[i] = ldexpf(x[i], shifts[j]);
      gc_compressor_params p;
      gc_compressor_params_default(&p);
      p.density = 0.01;
      char what[96];
      snprintf(what, sizeof what, "normal x 2^%d", shifts[j]);
      compare(gc_compressor_gaussk, n, &p, x, 0, what);
    }
    free(x);
  }
}

Test(cuda_compress, gaussk_sum_orders)
{
  gc_test_require_gpu();
  const double dens[] = {0.001, 0.01, 0.25};
  const unsigned loops[] = {3, 5};
  for (size_t s = 0; s < sizeof sum_sizes / sizeof sum_sizes[0]; s++) {
    size_t n = sum_sizes[s];
    float *x = malloc(n * sizeof *x);
    cr_assert(x != NULL);
    for (int kind = 0; kind <= IN_COUNT; kind++) {
      const char *name = fill_sums(x, n, kind, 7000 + n);
      for (int d = 0; d < 3; d++)
        for (int l = 0; l < 2; l++) {
          gc_compressor_params p;
          gc_compressor_params_default(&p);
          p.density = dens[d];
          p.gauss_loops = loops[l];
          char what[96];
          snprintf(what, sizeof what, "%s density=%g loops=%u", name, dens[d], loops[l]);
          compare(gc_compressor_gaussk, n, &p, x, 0, what);
        }
    }
    free(x);
  }
}

Test(cuda_compress, threshold)
{
  gc_test_require_gpu();
  /* 2.385 hits the ties exactly (strict >); 0.1 is not a float */
  const double vs[] = {0.0, 0.1, 1.5, 2.385, 1e30};
  sweep_param(gc_compressor_threshold, 3000, offsetof(gc_compressor_params, threshold), "v",
              vs, 5);
}

static void sweep_dense(const gc_compressor_type *T, double clip)
{
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    float *x = malloc(n * sizeof *x);
    for (int kind = 0; kind < IN_COUNT; kind++) {
      fill(x, n, kind, 4000 + n);
      gc_compressor_params p;
      gc_compressor_params_default(&p);
      p.seed = 5;
      p.stream = 2;
      p.clip = clip;
      for (uint32_t step = 0; step < 3; step++)
        compare(T, n, &p, x, step, in_name[kind]);
    }
    free(x);
  }
}

Test(cuda_compress, identity) { gc_test_require_gpu(); sweep_dense(gc_compressor_identity, 0); }
Test(cuda_compress, sign) { gc_test_require_gpu(); sweep_dense(gc_compressor_sign, 0); }
Test(cuda_compress, scaled_sign) { gc_test_require_gpu(); sweep_dense(gc_compressor_scaled_sign, 0); }
Test(cuda_compress, fp16) { gc_test_require_gpu(); sweep_dense(gc_compressor_fp16, 0); }
Test(cuda_compress, bf16) { gc_test_require_gpu(); sweep_dense(gc_compressor_bf16, 0); }
Test(cuda_compress, terngrad) { gc_test_require_gpu(); sweep_dense(gc_compressor_terngrad, 0); }
/* clip > 0: the std follows quant_source.c's blocked order, so the bound
 * (and every code) is exact too. */
Test(cuda_compress, terngrad_clipped) { gc_test_require_gpu(); sweep_dense(gc_compressor_terngrad, 2.5); }

Test(cuda_compress, terngrad_clipped_sum_orders)
{
  gc_test_require_gpu();
  for (size_t s = 0; s < sizeof sum_sizes / sizeof sum_sizes[0]; s++) {
    size_t n = sum_sizes[s];
    float *x = malloc(n * sizeof *x);
    cr_assert(x != NULL);
    for (int kind = 0; kind <= IN_COUNT; kind++) {
      const char *name = fill_sums(x, n, kind, 8000 + n);
      gc_compressor_params p;
      gc_compressor_params_default(&p);
      p.seed = 5;
      p.stream = 2;
      p.clip = kind % 2 ? 1.0 : 2.5;   /* 1.0 clips many entries */
      for (uint32_t step = 0; step < 2; step++)
        compare(gc_compressor_terngrad, n, &p, x, step, name);
    }
    free(x);
  }
}

/* QSGD: levels, buckets (0 = one bucket of n, the sequential norm chain;
 * 1 and 7 leave all-zero buckets among the signed zeros) and steps. */
Test(cuda_compress, qsgd)
{
  gc_test_require_gpu();
  const unsigned levels[] = {1, 4, 255};
  const size_t buckets[] = {0, 1, 7, 512};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    float *x = malloc(n * sizeof *x);
    for (int kind = 0; kind < IN_COUNT; kind++) {
      fill(x, n, kind, 5000 + n);
      for (int l = 0; l < 3; l++)
        for (int b = 0; b < 4; b++)
          for (uint32_t step = 0; step < 2; step++) {
            gc_compressor_params p;
            gc_compressor_params_default(&p);
            p.levels = levels[l];
            p.bucket = buckets[b];
            p.seed = 5;
            p.stream = 2;
            char what[96];
            snprintf(what, sizeof what, "%s s=%u bucket=%zu step=%u", in_name[kind], levels[l],
                     buckets[b], step);
            compare(gc_compressor_qsgd, n, &p, x, step, what);
          }
    }
    free(x);
  }
}

/* The longest code: with s = 2^32 - 1 an entry that is its bucket's whole
 * norm gets xi = s, coded as gamma(2^32) (65 bits) and a sign.  Device
 * buffers 0-3 bytes past an aligned address move the bit stream against
 * the words it is written in.  A norm beyond FLT_MAX is GC_EDOM on both
 * sides, in the first bucket or a later one. */
Test(cuda_compress, qsgd_edges)
{
  gc_test_require_gpu();
  const size_t ns[] = {1, 5, 4097, 65537};
  const size_t buckets[] = {1, 2, 3, 0};
  const unsigned levels[] = {4294967295u, 4};
  for (int t = 0; t < 4; t++) {
    size_t n = ns[t];
    float *x = malloc(n * sizeof *x);
    gc_test_fill_normal_f32(x, n, 31 + n);
    for (int l = 0; l < 2; l++)
      for (int b = 0; b < 4; b++)
        for (unsigned mis = 0; mis < 4; mis++) {
          gc_compressor_params p;
          gc_compressor_params_default(&p);
          p.levels = levels[l];
          p.bucket = buckets[b];
          p.seed = 9;
          char what[96];
          snprintf(what, sizeof what, "s=%u bucket=%zu misalign=%u", levels[l], buckets[b], mis);
          compare_at(gc_compressor_qsgd, n, &p, x, 1, mis, what);
        }
    free(x);
  }
  const float big[] = {1.0f, -2.0f, 3.0e38f, -3.0e38f, 0.5f, 0.25f};
  for (size_t bucket = 0; bucket < 4; bucket += 2) {
    gc_compressor_params p;
    gc_compressor_params_default(&p);
    p.bucket = bucket;   /* 0: one bucket; 2: the second of three overflows */
    gc_compressor *c = gc_compressor_alloc(gc_compressor_qsgd, 6, &p);
    size_t cap = gc_compressor_max_bytes(c), len;
    uint8_t *buf = malloc(cap);
    cr_assert(eq(int, gc_compress_f32(c, big, 0, buf, cap, &len, NULL), GC_EDOM),
              "the CPU rejects an overflowing norm (bucket %zu)", bucket);
    free(buf);
    gc_compressor_free(c);
    compare(gc_compressor_qsgd, 6, &p, big, 0, "overflowing norm");
  }
}

/* fp16/bf16 at the rounding edges: halfway cases, subnormals, overflow. */
Test(cuda_compress, half_edges)
{
  gc_test_require_gpu();
  const float e[] = {0.0f, -0.0f, 1.0f + 0x1p-11f, 1.0f + 0x1p-10f + 0x1p-11f, 65504.0f,
                     65519.99f, 65520.0f, -65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f,
                     0x1p-126f, 0x1p-149f, 3.0e38f, -3.4028235e38f, 1.00390625f,
                     1.01171875f};
  size_t n = sizeof e / sizeof e[0];
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  compare(gc_compressor_fp16, n, &p, e, 0, "edges");
  compare(gc_compressor_bf16, n, &p, e, 0, "edges");
}

/* Fused EF + top-k: acc <- acc + alpha g, top-k of acc, selected entries of
 * acc zeroed; against the CPU: the same sum (no FMA), the topk message of
 * the new acc, and acc - C(acc) by decoding with scale -1. */
Test(cuda_compress, ef_topk_fused)
{
  gc_test_require_gpu();
  const size_t n = 100003, k = 997;
  const float alpha = 0.1f;
  float *e = malloc(n * sizeof *e), *g = malloc(n * sizeof *g), *acc = malloc(n * sizeof *acc);
  gc_test_fill_normal_f32(e, n, 1);
  gc_test_fill_normal_f32(g, n, 2);
  for (size_t i = 0; i < n; i++)
    acc[i] = e[i] + alpha * g[i];   /* ISO C: no contraction (-ffp-contract=off) */
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  p.k = k;
  gc_compressor *c = gc_compressor_alloc(gc_compressor_topk, n, &p);
  size_t cap = gc_compressor_max_bytes(c), len;
  uint8_t *msg = malloc(cap);
  cr_assert(eq(int, gc_compress_f32(c, acc, 0, msg, cap, &len, NULL), GC_SUCCESS));
  cr_assert(eq(int, gc_decompress_add_f32(c, msg, len, 0, -1.0f, acc), GC_SUCCESS));

  float *d_acc, *d_g, *d_val;
  uint32_t *d_idx;
  gc_cuda_info *d_info, h_info;
  void *d_tmp;
  size_t tmp = 0;
  GC_TEST_CUDA(cudaMalloc((void **) &d_acc, n * sizeof(float)));
  GC_TEST_CUDA(cudaMalloc((void **) &d_g, n * sizeof(float)));
  GC_TEST_CUDA(cudaMalloc((void **) &d_val, k * sizeof(float)));
  GC_TEST_CUDA(cudaMalloc((void **) &d_idx, k * sizeof(uint32_t)));
  GC_TEST_CUDA(cudaMalloc((void **) &d_info, sizeof *d_info));
  GC_TEST_CUDA(cudaMemcpy(d_acc, e, n * sizeof(float), cudaMemcpyHostToDevice));
  GC_TEST_CUDA(cudaMemcpy(d_g, g, n * sizeof(float), cudaMemcpyHostToDevice));
  cr_assert(eq(int, gc_cuda_ef_topk_f32(NULL, &tmp, d_acc, d_g, alpha, n, k, GC_TIES_LOW,
                                        d_idx, d_val, d_info, 0), GC_SUCCESS));
  GC_TEST_CUDA(cudaMalloc(&d_tmp, tmp));
  cr_assert(eq(int, gc_cuda_ef_topk_f32(d_tmp, &tmp, d_acc, d_g, alpha, n, k, GC_TIES_LOW,
                                        d_idx, d_val, d_info, 0), GC_SUCCESS));
  cr_assert(eq(int, gc_cuda_info_sync(d_info, &h_info, 0), GC_SUCCESS));
  cr_assert(eq(u32, h_info.selected, (uint32_t) k));
  float *res = malloc(n * sizeof *res);
  GC_TEST_CUDA(cudaMemcpy(res, d_acc, n * sizeof(float), cudaMemcpyDeviceToHost));
  cr_assert(memcmp(res, acc, n * sizeof(float)) == 0, "residual differs from the CPU's");
  cudaFree(d_tmp);
  cudaFree(d_info);
  cudaFree(d_idx);
  cudaFree(d_val);
  cudaFree(d_g);
  cudaFree(d_acc);
  free(res);
  free(msg);
  gc_compressor_free(c);
  free(e);
  free(g);
  free(acc);
}

/* ---- large sizes (slow on the CPU side: a separate, named suite) --------- */

TestSuite(cuda_compress_big, .init = gc_test_quiet, .timeout = 600);

Test(cuda_compress_big, topk_1e7_1e8)
{
  gc_test_require_gpu();
  const size_t ns[] = {10000000, 100000000};
  for (int t = 0; t < 2; t++) {
    size_t n = ns[t];
    float *x = malloc(n * sizeof *x);
    cr_assert(x != NULL);
    gc_test_fill_normal_f32(x, n, 9);   /* ties occur naturally at this size */
    const double dens[] = {0.001, 0.1};
    for (int d = 0; d < 2; d++) {
      gc_compressor_params p;
      gc_compressor_params_default(&p);
      p.density = dens[d];
      compare(gc_compressor_topk, n, &p, x, 0, "big normal");
      compare(gc_compressor_threshold, n, &p, x, 0, "big normal");
      compare(gc_compressor_randk, n, &p, x, 1, "big normal");
      compare(gc_compressor_dgc, n, &p, x, 2, "big normal");
    }
    gc_compressor_params p;
    gc_compressor_params_default(&p);
    compare(gc_compressor_gaussk, n, &p, x, 0, "big normal");
    p.levels = 4;
    p.bucket = 512;
    compare(gc_compressor_qsgd, n, &p, x, 0, "big normal");
    p.clip = 2.5;
    compare(gc_compressor_terngrad, n, &p, x, 0, "big normal");
    compare(gc_compressor_sign, n, &p, x, 0, "big normal");
    compare(gc_compressor_scaled_sign, n, &p, x, 0, "big normal");
    compare(gc_compressor_bf16, n, &p, x, 0, "big normal");
    free(x);
  }
}

/* ---- host-only: these run without a GPU ----------------------------------- */

TestSuite(cuda_host, .init = gc_test_quiet);

/* "No device" is an answer with a reason, never a crash. */
Test(cuda_host, available_reports_a_reason)
{
  char why[256] = "unset";
  int st = gc_cuda_available(why, sizeof why);
  cr_assert(st == GC_SUCCESS || st == GC_ECUDA);
  if (st == GC_ECUDA)
    cr_assert(strlen(why) > 0 && strcmp(why, "unset") != 0);
}

/* Argument errors come back before any device work. */
Test(cuda_host, argument_errors)
{
  size_t tmp = 0;
  cr_assert(eq(int, gc_cuda_topk_f32(NULL, &tmp, NULL, 10, 0, GC_TIES_LOW, NULL, NULL, NULL, 0),
               GC_EINVAL));
  cr_assert(eq(int, gc_cuda_topk_f32(NULL, &tmp, NULL, 10, 11, GC_TIES_LOW, NULL, NULL, NULL, 0),
               GC_EINVAL));
  cr_assert(eq(int, gc_cuda_topk_f32(NULL, &tmp, NULL, 10, 3, 7, NULL, NULL, NULL, 0), GC_EINVAL));
  cr_assert(eq(int, gc_cuda_topk_f32(NULL, &tmp, NULL, 0, 1, GC_TIES_LOW, NULL, NULL, NULL, 0),
               GC_EBADLEN));
  cr_assert(eq(int, gc_cuda_threshold_f32(NULL, &tmp, NULL, 10, -1.0, NULL, NULL, NULL, 0),
               GC_EINVAL));
  cr_assert(eq(int, gc_cuda_gaussk_f32(NULL, &tmp, NULL, 10, 11, 0.3, 3, NULL, NULL, NULL, 0),
               GC_EINVAL));
  cr_assert(eq(int, gc_cuda_gaussk_f32(NULL, &tmp, NULL, 10, 3, 0.3, 0, NULL, NULL, NULL, 0),
               GC_EINVAL));
  const double bad_rho[] = {0.0, -0.1, 1.5, NAN};
  for (int i = 0; i < 4; i++)
    cr_assert(eq(int, gc_cuda_gaussk_f32(NULL, &tmp, NULL, 10, 3, bad_rho[i], 3, NULL, NULL,
                                         NULL, 0), GC_EINVAL), "gaussk rho %g", bad_rho[i]);
  cr_assert(eq(int, gc_cuda_gaussk_f32(NULL, &tmp, NULL, 10, 3, 0.35, 3, NULL, NULL, NULL, 0),
               GC_SUCCESS), "gaussk sizing with a density that is not k/n");
  cr_assert(eq(int, gc_cuda_randk_f32(NULL, &tmp, NULL, 10, 0, 1, 0, 0, 1, NULL, NULL, NULL, 0),
               GC_EINVAL));
  const struct { size_t n, k; double ratio; int ties, want; } dgc[] = {
    {10, 0, 0.01, GC_TIES_LOW, GC_EINVAL}, {10, 11, 0.01, GC_TIES_LOW, GC_EINVAL},
    {10, 3, 0.01, 7, GC_EINVAL}, {10, 3, 0.0, GC_TIES_LOW, GC_EINVAL},
    {10, 3, 1.5, GC_TIES_LOW, GC_EINVAL}, {10, 3, NAN, GC_TIES_LOW, GC_EINVAL},
    {0, 1, 0.01, GC_TIES_LOW, GC_EBADLEN}};
  for (size_t i = 0; i < sizeof dgc / sizeof dgc[0]; i++)
    cr_assert(eq(int, gc_cuda_dgc_f32(NULL, &tmp, NULL, dgc[i].n, dgc[i].k, dgc[i].ratio,
                                      dgc[i].ties, 1, 0, 0, NULL, NULL, NULL, 0),
                 dgc[i].want), "dgc case %zu", i);
}

/* d_tmp == NULL only sizes: a positive size, no device needed, and the
 * supported set is what the header promises. */
Test(cuda_host, two_phase_sizing)
{
  for (const gc_compressor_type *const *t = gc_compressor_types(); *t; t++) {
    if (!gc_cuda_supports(*t))
      continue;
    gc_compressor_params p;
    gc_compressor_params_default(&p);
    p.threshold = 1.0;
    gc_compressor *c = gc_compressor_alloc(*t, 12345, &p);
    cr_assert(c != NULL, "%s", (*t)->name);
    size_t tmp = 0;
    cr_assert(eq(int, gc_cuda_compress_f32(c, NULL, &tmp, NULL, 0, NULL, 0, NULL, 0), GC_SUCCESS),
              "%s", (*t)->name);
    cr_assert(tmp > 0, "%s: scratch size", (*t)->name);
    gc_compressor_free(c);
  }
  cr_assert(gc_cuda_supports(gc_compressor_topk));
  cr_assert(gc_cuda_supports(gc_compressor_randk_unbiased));
  cr_assert(gc_cuda_supports(gc_compressor_bf16));
}

/* Issues #4, #16: every registered compressor has a device twin (encoder
 * and decoder), except those that need layer shapes (PowerSGD works per
 * layer, not on one vector), and those have none: a new type without a
 * twin fails here instead of returning GC_EUNSUP at run time. */
Test(cuda_host, every_vector_compressor_has_a_device_twin)
{
  size_t listed = 0;
  for (const gc_compressor_type *const *t = gc_compressor_types(); *t; t++, listed++) {
    int vector = !((*t)->flags & GC_COMP_NEEDS_SHAPE);
    cr_assert(eq(int, gc_cuda_supports(*t), vector), "'%s': device twin %s", (*t)->name,
              vector ? "missing" : "unexpected (update this test)");
  }
  cr_assert(listed >= 14, "the registry lists %zu types", listed);
  cr_assert(gc_cuda_supports(gc_compressor_dgc));
  cr_assert(gc_cuda_supports(gc_compressor_qsgd));
  cr_assert(eq(int, gc_cuda_supports(gc_compressor_powersgd), 0));
}

/* The slot is keyed by the type, not by its name: a type that reuses
 * "topk" (an experiment's own variant) gets no kernels meant for another. */
Test(cuda_host, device_slot_is_keyed_by_type_not_name)
{
  gc_compressor_type impostor = *gc_compressor_topk;
  cr_assert(eq(int, gc_cuda_supports(&impostor), 0));
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  p.k = 3;
  gc_compressor *c = gc_compressor_alloc(&impostor, 100, &p);
  cr_assert(c != NULL);
  size_t tmp = 0;
  cr_assert(eq(int, gc_cuda_compress_f32(c, NULL, &tmp, NULL, 0, NULL, 0, NULL, 0), GC_EUNSUP));
  cr_assert(eq(int, gc_cuda_decompress_add_f32(c, NULL, &tmp, NULL, 0, 0, 1.0f, NULL, NULL, 0),
               GC_EUNSUP));
  gc_compressor_free(c);
}

/* The decoders size their scratch without a device, for every twin. */
Test(cuda_host, decoder_two_phase_sizing)
{
  for (const gc_compressor_type *const *t = gc_compressor_types(); *t; t++) {
    if (!gc_cuda_supports(*t))
      continue;
    gc_compressor_params p;
    gc_compressor_params_default(&p);
    p.threshold = 1.0;
    gc_compressor *c = gc_compressor_alloc(*t, 12345, &p);
    cr_assert(c != NULL, "%s", (*t)->name);
    size_t tmp = 0;
    cr_assert(eq(int, gc_cuda_decompress_add_f32(c, NULL, &tmp, NULL, 0, 0, 1.0f, NULL, NULL, 0),
                 GC_SUCCESS), "%s", (*t)->name);
    cr_assert(tmp > 0, "%s: scratch size", (*t)->name);
    gc_compressor_free(c);
  }
}

/* gc_cuda_ef_alloc checks its arguments as gc_ef_alloc does, before any
 * device memory is asked for. */
Test(cuda_host, ef_argument_errors)
{
  gc_ef_options o;
  gc_ef_options_default(&o);
  cr_assert(gc_cuda_ef_alloc(GC_EF_BEFORE, 0, NULL) == NULL);
  cr_assert(eq(int, gc_last_error_code(), GC_EINVAL));
  cr_assert(gc_cuda_ef_alloc((gc_ef_kind) 99, 10, NULL) == NULL);
  cr_assert(eq(int, gc_last_error_code(), GC_EINVAL));
  o.momentum = 1.0;
  cr_assert(gc_cuda_ef_alloc(GC_EF_DGC, 10, &o) == NULL);
  cr_assert(eq(int, gc_last_error_code(), GC_EINVAL));
  gc_ef_options_default(&o);
  o.ef21_init = GC_EF21_INIT_GRADIENT;
  cr_assert(gc_cuda_ef_alloc(GC_EF_EF21, 10, &o) == NULL);
  cr_assert(eq(int, gc_last_error_code(), GC_EUNSUP));
  gc_cuda_ef_free(NULL);
}
