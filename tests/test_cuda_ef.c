/* test_cuda_ef.c -- the device decoders and the whole worker step (issue
 * #16) against the library, bit for bit.
 *
 * The llm.c-style whole-step test: the same gradients, seed and steps go
 * through gc_ef_step on the CPU and gc_cuda_ef_step_sync on the device,
 * for every compressor with a device twin and every error-feedback kind;
 * the messages, their lengths, the info counts and the memories after
 * each step must be identical.  Every comparison is exact: the device
 * repeats the CPU's float operations in the CPU's order (style.md §2.5),
 * which is stronger than issue #16's "same coordinates where no near-ties
 * exist" and needs no tolerance.  All tests skip without a device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "gc_compressor.h"
#include "gc_cuda.h"
#include "gc_dtype.h"
#include "gc_ef.h"
#include "gc_errno.h"
#include "gc_test.h"
#include "gc_test_cuda.h"

enum { N = 4099, STEPS = 3 };

static gc_compressor *make(const gc_compressor_type *T, size_t n)
{
  gc_compressor_params p;
  gc_compressor_params_default(&p);
  p.density = 0.05;
  p.threshold = 0.5;
  p.levels = 4;
  p.bucket = 512;
  p.seed = 7;
  p.clip = T == gc_compressor_terngrad ? 2.5 : 0.0;
  gc_compressor *c = gc_compressor_alloc(T, n, &p);
  cr_assert(c != NULL, "alloc %s", T->name);
  return c;
}

/* Compare n floats bit for bit (memcmp: -0 vs +0 and NaN payloads count). */
static void same_floats(const float *d_got, const float *want, size_t n, const char *what)
{
  float *got = malloc(n * sizeof *got);
  cr_assert(got != NULL);
  GC_TEST_CUDA(cudaMemcpy(got, d_got, n * sizeof *got, cudaMemcpyDeviceToHost));
  size_t first = n;
  for (size_t i = 0; i < n && first == n; i++)
    if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
      first = i;
  cr_assert(first == n, "%s: differs first at %zu (gpu %a, cpu %a)", what, first,
            first < n ? (double) got[first] : 0.0, first < n ? (double) want[first] : 0.0);
  free(got);
}

TestSuite(cuda_ef, .init = gc_test_quiet);

/* Every twin's decoder on the CPU's message: y0 + 0.5 C(x) equal to the
 * CPU's; then a truncated and a mistagged message give GC_ECORRUPT with y
 * untouched. */
Test(cuda_ef, decoders_match_the_cpu)
{
  gc_test_require_gpu();
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *y0 = malloc(N * sizeof *y0);
  cr_assert(x && y && y0);
  gc_test_fill_normal_f32(x, N, 11);
  gc_test_fill_normal_f32(y0, N, 12);
  float *d_y;
  uint8_t *d_buf;
  gc_cuda_info *d_info, h_info;
  GC_TEST_CUDA(cudaMalloc((void **) &d_y, N * sizeof *d_y));
  GC_TEST_CUDA(cudaMalloc((void **) &d_info, sizeof *d_info));
  for (const gc_compressor_type *const *t = gc_compressor_types(); *t; t++) {
    if (!gc_cuda_supports(*t))
      continue;
    gc_compressor *c = make(*t, N);
    size_t cap = gc_compressor_max_bytes(c), len = 0, tmp = 0;
    uint8_t *msg = malloc(cap);
    cr_assert(msg != NULL);
    const uint32_t step = 5;
    cr_assert(eq(int, gc_compress_f32(c, x, step, msg, cap, &len, NULL), GC_SUCCESS));
    memcpy(y, y0, N * sizeof *y);
    cr_assert(eq(int, gc_decompress_add_f32(c, msg, len, step, 0.5f, y), GC_SUCCESS));
    GC_TEST_CUDA(cudaMalloc((void **) &d_buf, cap));
    GC_TEST_CUDA(cudaMemcpy(d_buf, msg, len, cudaMemcpyHostToDevice));
    cr_assert(eq(int, gc_cuda_decompress_add_f32(c, NULL, &tmp, d_buf, len, step, 0.5f, d_y,
                                                 d_info, 0), GC_SUCCESS));
    void *d_tmp;
    GC_TEST_CUDA(cudaMalloc(&d_tmp, tmp));
    /* valid, truncated by one byte, and with a wrong tag */
    for (int variant = 0; variant < 3; variant++) {
      GC_TEST_CUDA(cudaMemcpy(d_y, y0, N * sizeof *d_y, cudaMemcpyHostToDevice));
      uint8_t tag = (uint8_t) (msg[0] ^ 0x40);
      if (variant == 2)
        GC_TEST_CUDA(cudaMemcpy(d_buf, &tag, 1, cudaMemcpyHostToDevice));
      cr_assert(eq(int, gc_cuda_decompress_add_f32(c, d_tmp, &tmp, d_buf,
                                                   variant == 1 ? len - 1 : len, step, 0.5f,
                                                   d_y, d_info, 0), GC_SUCCESS));
      int st = gc_cuda_info_sync(d_info, &h_info, 0);
      cr_assert(eq(int, st, variant ? GC_ECORRUPT : GC_SUCCESS), "%s variant %d", (*t)->name,
                variant);
      same_floats(d_y, variant ? y0 : y, N, (*t)->name);
    }
    cudaFree(d_tmp);
    cudaFree(d_buf);
    free(msg);
    gc_compressor_free(c);
  }
  cudaFree(d_info);
  cudaFree(d_y);
  free(x);
  free(y);
  free(y0);
}

struct ef_case {
  gc_ef_kind kind;
  int nesterov, masking;
  double clip_norm;
  const char *name;
};

static const struct ef_case ef_cases[] = {
  {GC_EF_NONE, 0, 1, 0.0, "none"},
  {GC_EF_BEFORE, 0, 1, 0.0, "before"},
  {GC_EF_AFTER, 0, 1, 0.0, "after"},
  {GC_EF_DGC, 0, 1, 0.0, "dgc"},
  {GC_EF_DGC, 1, 0, 3.0, "dgc-nesterov-unmasked-clipped"},
  {GC_EF_EF21, 0, 1, 0.0, "ef21"},
};

/* STEPS worker steps of one (compressor, memory) pair on both sides. */
static void whole_step(const gc_compressor_type *T, const struct ef_case *ec)
{
  gc_ef_options o;
  gc_ef_options_default(&o);
  o.nesterov = ec->nesterov;
  o.masking = ec->masking;
  o.clip_norm = ec->clip_norm;
  o.workers = 4;
  gc_compressor *c_cpu = make(T, N), *c_gpu = make(T, N);
  gc_ef *e = gc_ef_alloc(ec->kind, N, GC_F32, &o);
  gc_cuda_ef *de = gc_cuda_ef_alloc(ec->kind, N, &o);
  cr_assert(e && de, "%s/%s: alloc", T->name, ec->name);
  size_t cap = gc_compressor_max_bytes(c_cpu), tmp = 0;
  uint8_t *msg = malloc(cap), *got = malloc(cap), *d_buf;
  float *g = malloc(N * sizeof *g), *d_g;
  cr_assert(msg && got && g);
  GC_TEST_CUDA(cudaMalloc((void **) &d_buf, cap));
  GC_TEST_CUDA(cudaMalloc((void **) &d_g, N * sizeof *d_g));
  cr_assert(eq(int, gc_cuda_ef_step_sync(de, c_gpu, NULL, &tmp, d_g, 0.1, 0, d_buf, cap, NULL,
                                         NULL, 0), GC_SUCCESS));
  void *d_tmp;
  GC_TEST_CUDA(cudaMalloc(&d_tmp, tmp));
  for (uint32_t step = 0; step < STEPS; step++) {
    gc_test_fill_normal_f32(g, N, 100 + step);
    GC_TEST_CUDA(cudaMemcpy(d_g, g, N * sizeof *g, cudaMemcpyHostToDevice));
    size_t len = 0, glen = 0;
    gc_compress_info info, ginfo;
    cr_assert(eq(int, gc_ef_step(e, c_cpu, g, 0.1, step, msg, cap, &len, &info), GC_SUCCESS));
    cr_assert(eq(int, gc_cuda_ef_step_sync(de, c_gpu, d_tmp, &tmp, d_g, 0.1, step, d_buf, cap,
                                           &glen, &ginfo, 0), GC_SUCCESS),
              "%s/%s step %u", T->name, ec->name, step);
    cr_assert(eq(sz, glen, len), "%s/%s step %u: length", T->name, ec->name, step);
    GC_TEST_CUDA(cudaMemcpy(got, d_buf, len, cudaMemcpyDeviceToHost));
    cr_assert(memcmp(got, msg, len) == 0, "%s/%s step %u: message bytes", T->name, ec->name,
              step);
    cr_assert(eq(sz, ginfo.nnz, info.nnz), "%s/%s step %u: nnz", T->name, ec->name, step);
    cr_assert(eq(sz, ginfo.selected, info.selected), "%s/%s step %u: selected", T->name,
              ec->name, step);
    same_floats(gc_cuda_ef_sent(de), gc_ef_sent(e), N, "sent");
    if (gc_ef_memory(e))
      same_floats(gc_cuda_ef_memory(de), gc_ef_memory(e), N, "memory");
    if (gc_ef_momentum(e))
      same_floats(gc_cuda_ef_momentum(de), gc_ef_momentum(e), N, "momentum");
  }
  /* a non-finite gradient: GC_EDOM on both, memories kept */
  g[N / 3] = (float) NAN;
  GC_TEST_CUDA(cudaMemcpy(d_g, g, N * sizeof *g, cudaMemcpyHostToDevice));
  size_t len = 0;
  cr_assert(eq(int, gc_ef_step(e, c_cpu, g, 0.1, STEPS, msg, cap, &len, NULL), GC_EDOM));
  cr_assert(eq(int, gc_cuda_ef_step_sync(de, c_gpu, d_tmp, &tmp, d_g, 0.1, STEPS, d_buf, cap,
                                         &len, NULL, 0), GC_EDOM));
  if (gc_ef_memory(e))
    same_floats(gc_cuda_ef_memory(de), gc_ef_memory(e), N, "memory after GC_EDOM");
  cudaFree(d_tmp);
  cudaFree(d_g);
  cudaFree(d_buf);
  free(g);
  free(got);
  free(msg);
  gc_cuda_ef_free(de);
  gc_ef_free(e);
  gc_compressor_free(c_gpu);
  gc_compressor_free(c_cpu);
}

Test(cuda_ef, whole_worker_step_matches_gc_ef_step)
{
  gc_test_require_gpu();
  for (const gc_compressor_type *const *t = gc_compressor_types(); *t; t++)
    if (gc_cuda_supports(*t))
      for (size_t i = 0; i < sizeof ef_cases / sizeof ef_cases[0]; i++)
        whole_step(*t, &ef_cases[i]);
}

/* One message on both decoders: the same status, and y the CPU's bit for
 * bit (y0 untouched when the message is refused). */
static void decode_both(gc_compressor *c, size_t n, const uint8_t *msg, size_t len,
                        const float *y0, float *y, float *d_y, uint8_t *d_buf,
                        void *d_tmp, size_t tmp, gc_cuda_info *d_info, const char *what)
{
  memcpy(y, y0, n * sizeof *y);
  int want = gc_decompress_add_f32(c, msg, len, 0, 0.5f, y);
  if (want != GC_SUCCESS)
    memcpy(y, y0, n * sizeof *y);
  GC_TEST_CUDA(cudaMemcpy(d_buf, msg, len, cudaMemcpyHostToDevice));
  GC_TEST_CUDA(cudaMemcpy(d_y, y0, n * sizeof *d_y, cudaMemcpyHostToDevice));
  cr_assert(eq(int, gc_cuda_decompress_add_f32(c, d_tmp, &tmp, d_buf, len, 0, 0.5f, d_y,
                                               d_info, 0), GC_SUCCESS));
  gc_cuda_info h_info;
  int got = gc_cuda_info_sync(d_info, &h_info, 0);
  cr_assert(eq(int, got, want), "%s: gpu status %d, cpu %d", what, got, want);
  same_floats(d_y, y, n, what);
}

/* The index sections (raw, delta, bitmap) are checked in parallel on the
 * device: every rule of the CPU's walk must still hold.  Valid top-K
 * messages whose delta sections span several of the checker's 4096-byte
 * tiles, every byte of small index sections changed (continuation bits
 * set and cleared, gaps grown past n, bitmap marks added and removed),
 * hand-made raw sections (ascending, repeated, descending, out of range),
 * a delta gap of six bytes and one running off the section, and counts
 * one too high or low: the GPU agrees with gc_decompress_add_f32. */
Test(cuda_ef, sparse_index_sections_checked_as_the_cpu)
{
  gc_test_require_gpu();
  static const struct { size_t n; double density; } cases[] = {
    {1000003, 0.005}, {300007, 0.02}, {4099, 0.01}, {4099, 0.6}, {77, 0.3}, {9, 1.0}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    size_t n = cases[ci].n;
    gc_compressor_params p;
    gc_compressor_params_default(&p);
    p.density = cases[ci].density;
    gc_compressor *c = gc_compressor_alloc(gc_compressor_topk, n, &p);
    cr_assert(c != NULL);
    size_t cap = gc_compressor_max_bytes(c) + 64, len = 0, tmp = 0;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *y0 = malloc(n * sizeof *y0);
    uint8_t *msg = calloc(1, cap), *mut = calloc(1, cap);
    cr_assert(x && y && y0 && msg && mut);
    gc_test_fill_distinct(x, n, 21 + ci);
    gc_test_fill_normal_f32(y0, n, 22 + ci);
    cr_assert(eq(int, gc_compress_f32(c, x, 0, msg, cap, &len, NULL), GC_SUCCESS));
    float *d_y;
    uint8_t *d_buf;
    gc_cuda_info *d_info;
    void *d_tmp;
    GC_TEST_CUDA(cudaMalloc((void **) &d_y, n * sizeof *d_y));
    GC_TEST_CUDA(cudaMalloc((void **) &d_buf, cap));
    GC_TEST_CUDA(cudaMalloc((void **) &d_info, sizeof *d_info));
    cr_assert(eq(int, gc_cuda_decompress_add_f32(c, NULL, &tmp, d_buf, len, 0, 0.5f, d_y,
                                                 d_info, 0), GC_SUCCESS));
    GC_TEST_CUDA(cudaMalloc(&d_tmp, tmp));
    char what[160];
    snprintf(what, sizeof what, "n=%zu coding %u valid", n, msg[2]);
    decode_both(c, n, msg, len, y0, y, d_y, d_buf, d_tmp, tmp, d_info, what);
    uint32_t cnt = (uint32_t) msg[3] | (uint32_t) msg[4] << 8 | (uint32_t) msg[5] << 16 |
                   (uint32_t) msg[6] << 24;
    size_t isec = len - 7 - 4 * (size_t) cnt;
    /* every byte of the index section (a spread of them when long) */
    static const uint8_t flips[] = {0x80, 0x7f, 0x01, 0xff};
    size_t stride = isec > 600 ? isec / 150 : 1;
    for (size_t q = 0; q < isec; q += stride)
      for (size_t f = 0; f < sizeof flips; f++) {
        memcpy(mut, msg, len);
        mut[7 + q] ^= flips[f];
        snprintf(what, sizeof what, "n=%zu coding %u byte %zu ^ 0x%02x", n, msg[2], q, flips[f]);
        decode_both(c, n, mut, len, y0, y, d_y, d_buf, d_tmp, tmp, d_info, what);
      }
    /* the count one off, with the length to match or not */
    for (int dc = -1; dc <= 1; dc += 2) {
      memcpy(mut, msg, len);
      uint32_t c2 = cnt + (uint32_t) dc;
      memcpy(mut + 3, &c2, 4);
      snprintf(what, sizeof what, "n=%zu count %d", n, dc);
      decode_both(c, n, mut, len, y0, y, d_y, d_buf, d_tmp, tmp, d_info, what);
      decode_both(c, n, mut, len + 4 * (size_t) (dc > 0), y0, y, d_y, d_buf, d_tmp, tmp,
                  d_info, what);
    }
    if (n < 100) {
      /* hand-made sections: raw u32 indices, a 6-byte gap, a gap running
       * off the section */
      static const uint32_t raws[][3] = {{0, 5, 8}, {3, 3, 9}, {7, 4, 60}, {1, 2, 77}};
      for (size_t r = 0; r < 4; r++) {
        uint8_t *m = mut;
        m[0] = msg[0]; m[1] = 4; m[2] = 0;                       /* raw */
        uint32_t three = 3;
        memcpy(m + 3, &three, 4);
        memcpy(m + 7, raws[r], 12);
        float v[3] = {1.5f, -2.25f, 0.125f};
        memcpy(m + 19, v, 12);
        snprintf(what, sizeof what, "raw {%u,%u,%u}", raws[r][0], raws[r][1], raws[r][2]);
        decode_both(c, n, m, 31, y0, y, d_y, d_buf, d_tmp, tmp, d_info, what);
      }
      static const uint8_t gaps[][7] = {
        {0x81, 0x80, 0x80, 0x80, 0x80, 0x00, 0x02},   /* six bytes, then 2 */
        {0x81, 0x80, 0x80, 0x80, 0x00, 0x02, 0x03},   /* five bytes: 1 + 0; too big */
        {0x01, 0x02, 0x83, 0x81, 0x81, 0x81, 0x81}};  /* the last runs off */
      for (size_t r = 0; r < 3; r++) {
        uint8_t *m = mut;
        m[0] = msg[0]; m[1] = 4; m[2] = 1;                       /* delta */
        uint32_t two = 2;
        memcpy(m + 3, &two, 4);
        memcpy(m + 7, gaps[r], 7);
        float v[2] = {1.5f, -2.25f};
        memcpy(m + 14, v, 8);
        snprintf(what, sizeof what, "delta case %zu", r);
        decode_both(c, n, m, 22, y0, y, d_y, d_buf, d_tmp, tmp, d_info, what);
      }
    }
    cudaFree(d_tmp);
    cudaFree(d_info);
    cudaFree(d_buf);
    cudaFree(d_y);
    free(x); free(y); free(y0); free(msg); free(mut);
    gc_compressor_free(c);
  }
}
