/* select.cu -- exact top-k by multi-block radix select, hard threshold,
 * Gaussian-k and DGC, all ending in one deterministic stable compaction,
 * and random-k (Floyd's draw in parallel; x checked once for NaN/Inf,
 * then read at the k picks).
 *
 * Top-k.  The k-th largest |x| is found without sorting: the 31-bit
 * magnitude key is cut into digits of 11, 11 and 10 bits; each pass builds a
 * global histogram of the next digit among the entries whose higher digits
 * equal the prefix found so far, and a one-block kernel picks the digit
 * where the count from the top reaches the k still wanted.  After three
 * passes the key T of the k-th entry is exact, together with the number of
 * entries that tie at T (eq_total) and how many of them are kept (rem).
 * The compaction then keeps every key > T and the first rem keys == T in
 * index order (the last rem for GC_TIES_HIGH).  Positions come from
 * per-tile counts and one scan, so the output is in ascending index order
 * and independent of block scheduling: no atomics decide any position.
 *
 * Cost: 3 histogram reads + 1 count read + 1 scatter read of x, plus
 * k writes; no host synchronisation. */
#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <float.h>
#include <math.h>

#include <type_traits>

#include <gsl/gsl_cdf.h>

#include "gc_cuda_internal.cuh"
#include "gc_rng.h"

using namespace gc_cuda;

namespace {

enum { BINS = 2048, HIST_CAP = 2048 /* blocks of the histogram kernels */ };

__host__ __device__ constexpr unsigned pass_shift(int p) { return p == 0 ? 21 : p == 1 ? 10 : 0; }
__host__ __device__ constexpr unsigned pass_bits(int p) { return p == 2 ? 10 : 11; }

static_assert(std::is_trivially_default_constructible<SelState>::value,
              "SelState{} must zero every field");

__global__ void init_state(SelState *st, uint32_t k)
{
  *st = SelState{};
  st->krem = k;
}

/* One histogram pass.  With EF (pass 0 only) the accumulator update
 * acc += alpha * g is done here, so the fused path reads g once. */
template <int PASS, bool EF>
__global__ void __launch_bounds__(BLOCK)
histogram(const float *__restrict__ x, float *acc, const float *__restrict__ g,
          float alpha, size_t n, SelState *st, uint32_t *hist)
{
  __shared__ uint32_t sh[BINS];
  if (st->radix_off)
    return;
  for (unsigned b = threadIdx.x; b < BINS; b += BLOCK)
    sh[b] = 0;
  __syncthreads();
  const uint32_t prefix = PASS ? st->prefix : 0, mask = PASS ? st->mask : 0;
  const unsigned shift = pass_shift(PASS), dmask = (1u << pass_bits(PASS)) - 1;
  int bad = 0;
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK) {
    float v;
    if (EF) {
      /* no FMA: the CPU rounds the product and the sum separately */
      v = __fadd_rn(acc[i], __fmul_rn(alpha, g[i]));
      acc[i] = v;
    } else {
      v = x[i];
    }
    uint32_t key = mag_key(v);
    if (PASS == 0)
      bad |= nonfinite(v);
    if ((key & mask) == prefix)
      atomicAdd(&sh[(key >> shift) & dmask], 1u);
  }
  if (PASS == 0)
    flag_block_nonfinite(bad, &st->bad);
  __syncthreads();
  for (unsigned b = threadIdx.x; b < BINS; b += BLOCK)
    if (sh[b])
      atomicAdd(&hist[b], sh[b]);
}

/* Pick the digit where the count from the largest digit down reaches krem.
 * Bins are visited in descending digit order: thread t owns positions
 * 8t..8t+7 of that order. */
template <int PASS>
__global__ void __launch_bounds__(256) pick_digit(SelState *st, const uint32_t *hist)
{
  typedef cub::BlockScan<uint32_t, 256> Scan;
  __shared__ typename Scan::TempStorage tmp;
  if (st->radix_off)
    return;
  const unsigned nb = 1u << pass_bits(PASS), per = BINS / 256;
  uint32_t h[BINS / 256], sum = 0;
  for (unsigned j = 0; j < per; j++) {
    unsigned pos = threadIdx.x * per + j;
    h[j] = pos < nb ? hist[nb - 1 - pos] : 0;
    sum += h[j];
  }
  uint32_t before;
  Scan(tmp).ExclusiveSum(sum, before);
  const uint32_t krem = st->krem;
  __syncthreads();   /* every thread has read krem before it changes */
  for (unsigned j = 0; j < per; j++) {
    unsigned pos = threadIdx.x * per + j;
    if (pos < nb && before < krem && krem <= before + h[j]) {
      uint32_t digit = nb - 1 - pos;
      st->prefix |= digit << pass_shift(PASS);
      st->mask |= (nb - 1) << pass_shift(PASS);
      st->krem = krem - before;
      if (PASS == 2) {
        st->T = st->prefix;
        st->eq_total = h[j];
        st->rem = krem - before;
      }
    }
    before += h[j];
  }
}

/* ---- the compaction shared by every selector ---------------------------
 * Class of an entry: 0 dropped, 1 kept, 2 tie candidate (kept by rank). */
struct TopkClass {
  __device__ int operator()(size_t, float v, const SelState &s) const
  {
    uint32_t key = mag_key(v);
    return key > s.T ? 1 : key == s.T ? 2 : 0;
  }
};
/* |x| > thr compared in double, as the CPU compares a double threshold. */
struct AboveClass {
  double v;
  bool from_state;
  __device__ int operator()(size_t, float x, const SelState &s) const
  {
    double t = from_state ? s.thr_sel : v;
    return fabs((double) x) > t ? 1 : 0;
  }
};

/* Counts (kept in the low 32 bits, ties in the high 32) per tile.  With
 * CHECK (a selector with no earlier pass over x: threshold) this pass also
 * sets st->bad for NaN/Inf, which the scatter and the finish kernels read;
 * it then counts whatever the flag, since other blocks are setting it. */
template <class Cls, bool CHECK>
__global__ void __launch_bounds__(BLOCK)
tile_count(const float *__restrict__ x, size_t n, Cls cls, SelState *st, uint64_t *tiles)
{
  typedef cub::BlockReduce<uint64_t, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  const SelState s = *st;
  size_t base = (size_t) blockIdx.x * TILE;
  uint64_t c = 0;
  int bad = 0;
  if (CHECK || !s.bad)
    for (unsigned j = 0; j < ITEMS; j++) {
      size_t i = base + (size_t) j * BLOCK + threadIdx.x;   /* coalesced */
      if (i < n) {
        float v = x[i];
        if (CHECK)
          bad |= nonfinite(v);
        int k = cls(i, v, s);
        c += k == 1 ? 1u : k == 2 ? ((uint64_t) 1 << 32) : 0u;
      }
    }
  uint64_t total = Reduce(tmp).Sum(c);
  if (threadIdx.x == 0)
    tiles[blockIdx.x] = total;
  if (CHECK)
    flag_block_nonfinite(bad, &st->bad);
}

/* Stable scatter: entries in blocked arrangement (thread t owns ITEMS
 * consecutive indices), so ranks follow the index order; only the first
 * `limit` kept entries are written (DGC's truncation).  With ZERO the
 * selected entries of `zero` are cleared (error-feedback residual). */
template <class Cls, bool ZERO>
__global__ void __launch_bounds__(BLOCK)
scatter(const float *x, size_t n, Cls cls, int ties, uint64_t limit, const SelState *st,
        const uint64_t *tiles, uint32_t *d_idx, float *d_val, float *zero)
{
  typedef cub::BlockLoad<float, BLOCK, ITEMS, cub::BLOCK_LOAD_TRANSPOSE> Load;
  typedef cub::BlockScan<uint64_t, BLOCK> Scan;
  __shared__ union {
    typename Load::TempStorage load;
    typename Scan::TempStorage scan;
  } tmp;
  const SelState s = *st;
  if (s.bad)
    return;
  size_t base = (size_t) blockIdx.x * TILE;
  int valid = (int) (n - base < (size_t) TILE ? n - base : (size_t) TILE);
  float v[ITEMS];
  Load(tmp.load).Load(x + base, v, valid, 0.0f);
  __syncthreads();
  int cl[ITEMS];
  uint64_t c = 0;
  for (int j = 0; j < ITEMS; j++) {
    int pos = threadIdx.x * ITEMS + j;
    cl[j] = pos < valid ? cls(base + pos, v[j], s) : 0;
    c += cl[j] == 1 ? 1u : cl[j] == 2 ? ((uint64_t) 1 << 32) : 0u;
  }
  uint64_t ex;
  Scan(tmp.scan).ExclusiveSum(c, ex);
  ex += tiles[blockIdx.x];
  uint64_t gt = (uint32_t) ex, eq = ex >> 32;
  /* ties kept: eq ranks [0, rem) (low) or [eq_total - rem, eq_total) (high) */
  const uint64_t lo = ties == GC_TIES_HIGH ? (uint64_t) s.eq_total - s.rem : 0;
  const uint64_t hi = lo + s.rem;
  for (int j = 0; j < ITEMS; j++) {
    if (!cl[j])
      continue;
    bool keep = cl[j] == 1 || (eq >= lo && eq < hi);
    /* kept ties before this entry: eq ranks in [lo, min(eq, hi)) */
    uint64_t ties_before = eq <= lo ? 0 : (eq < hi ? eq : hi) - lo;
    uint64_t out = gt + ties_before;
    if (keep && out < limit) {
      size_t i = base + (size_t) threadIdx.x * ITEMS + j;
      d_idx[out] = (uint32_t) i;
      d_val[out] = v[j];
      if (ZERO)
        zero[i] = 0.0f;
    }
    if (cl[j] == 1)
      gt++;
    else
      eq++;
  }
}

/* Results of a top-k: selected = k, nnz = k unless the k-th key is 0. */
__global__ void finish_topk(const SelState *st, uint32_t k, gc_cuda_info *info)
{
  if (st->bad) {
    info->status = GC_EDOM;
    info->selected = info->nnz = 0;
    return;
  }
  info->status = GC_SUCCESS;
  info->selected = k;
  info->nnz = st->T == 0 ? (uint32_t) (st->total & 0xffffffffu) : k;
  info->loops = 0;
}

/* Results of a threshold selection: everything kept is nonzero (thr >= 0). */
__global__ void finish_above(const SelState *st, gc_cuda_info *info)
{
  if (st->bad) {
    info->status = GC_EDOM;
    info->selected = info->nnz = 0;
    return;
  }
  info->status = GC_SUCCESS;
  info->selected = info->nnz = (uint32_t) (st->total & 0xffffffffu);
  info->loops = st->loops;
}

struct Scratch {
  SelState *st;
  uint32_t *hist;     /* 3 passes x BINS */
  uint64_t *tiles;
};

Scratch carve(Carver &cv, size_t n)
{
  Scratch s;
  s.st = cv.take<SelState>(1);
  s.hist = cv.take<uint32_t>(3 * BINS);
  s.tiles = cv.take<uint64_t>(tiles_of(n));
  return s;
}

int check_n(size_t n)
{
  if (n == 0)
    GC_ERROR("cannot select from an empty vector (n = 0)", GC_EBADLEN);
  if (n >= ((size_t) 1 << 32))
    GC_ERROR("vector length must be below 2^32", GC_EINVAL);
  return GC_SUCCESS;
}

/* check_n, and 1 <= k <= n for the selectors of k entries. */
int check_nk(size_t n, size_t k, const char *who)
{
  GC_TRY(check_n(n));
  if (k < 1 || k > n)
    GC_ERRORF(GC_EINVAL, "%s: k = %zu must lie in [1, n = %zu]", who, k, n);
  return GC_SUCCESS;
}

/* The end of the two-phase sizing (gc_cuda.h), after the carving: without
 * scratch write its size (*sizing = true, the caller returns); with it,
 * check that it is large enough. */
int finish_carve(const Carver &cv, size_t *tmp_bytes, const char *who, bool *sizing)
{
  *sizing = cv.base == nullptr;
  if (*sizing)
    *tmp_bytes = cv.bytes();
  else if (*tmp_bytes < cv.bytes())
    GC_ERRORF(GC_EINVAL, "%s: scratch of %zu bytes, %zu needed", who, *tmp_bytes, cv.bytes());
  return GC_SUCCESS;
}

/* The three radix passes from the state's prefix, mask and krem (they do
 * nothing while st->radix_off is set); with acc/g the pass-0 EF update. */
int radix_passes(const Scratch &s, const float *d_x, float *d_acc, const float *d_g,
                 float alpha, size_t n, cudaStream_t stream)
{
  unsigned grid = grid_for(n, BLOCK * 8, HIST_CAP);
  GC_CUDA_TRY(cudaMemsetAsync(s.hist, 0, 3 * BINS * sizeof(uint32_t), stream));
  const float *src = d_acc ? d_acc : d_x;
  if (d_acc)
    histogram<0, true><<<grid, BLOCK, 0, stream>>>(nullptr, d_acc, d_g, alpha, n, s.st, s.hist);
  else
    histogram<0, false><<<grid, BLOCK, 0, stream>>>(d_x, nullptr, nullptr, 0.f, n, s.st, s.hist);
  GC_CUDA_LAUNCHED();
  pick_digit<0><<<1, 256, 0, stream>>>(s.st, s.hist);
  GC_CUDA_LAUNCHED();
  histogram<1, false><<<grid, BLOCK, 0, stream>>>(src, nullptr, nullptr, 0.f, n, s.st, s.hist + BINS);
  GC_CUDA_LAUNCHED();
  pick_digit<1><<<1, 256, 0, stream>>>(s.st, s.hist + BINS);
  GC_CUDA_LAUNCHED();
  histogram<2, false><<<grid, BLOCK, 0, stream>>>(src, nullptr, nullptr, 0.f, n, s.st, s.hist + 2 * BINS);
  GC_CUDA_LAUNCHED();
  pick_digit<2><<<1, 256, 0, stream>>>(s.st, s.hist + 2 * BINS);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

/* Radix select of the k-th key from a fresh state. */
int radix_select(const Scratch &s, const float *d_x, float *d_acc,
                 const float *d_g, float alpha, size_t n, size_t k,
                 cudaStream_t stream)
{
  init_state<<<1, 1, 0, stream>>>(s.st, (uint32_t) k);
  GC_CUDA_LAUNCHED();
  return radix_passes(s, d_x, d_acc, d_g, alpha, n, stream);
}

/* Count, scan, scatter.  CHECK: the count pass flags NaN/Inf (tile_count). */
template <class Cls, bool ZERO, bool CHECK = false>
int compact(const Scratch &s, const float *d_x, size_t n, Cls cls, int ties, size_t limit,
            uint32_t *d_idx, float *d_val, float *zero, cudaStream_t stream)
{
  size_t nt = tiles_of(n);
  tile_count<Cls, CHECK><<<(unsigned) nt, BLOCK, 0, stream>>>(d_x, n, cls, s.st, s.tiles);
  GC_CUDA_LAUNCHED();
  scan_tiles<<<1, 1024, 0, stream>>>(s.tiles, nt, &s.st->total);
  GC_CUDA_LAUNCHED();
  scatter<Cls, ZERO><<<(unsigned) nt, BLOCK, 0, stream>>>(d_x, n, cls, ties, limit, s.st,
                                                          s.tiles, d_idx, d_val, zero);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

int topk_common(void *d_tmp, size_t *tmp_bytes, const float *d_x, float *d_acc,
                const float *d_g, float alpha, size_t n, size_t k, int ties,
                uint32_t *d_idx, float *d_val, gc_cuda_info *d_info,
                cudaStream_t stream)
{
  GC_TRY(check_nk(n, k, "top-k"));
  if (ties != GC_TIES_LOW && ties != GC_TIES_HIGH)
    GC_ERROR("top-k: ties must be GC_TIES_LOW or GC_TIES_HIGH", GC_EINVAL);
  Carver cv(d_tmp);
  Scratch s = carve(cv, n);
  bool sizing;
  GC_TRY(finish_carve(cv, tmp_bytes, "top-k", &sizing));
  if (sizing)
    return GC_SUCCESS;
  GC_TRY(radix_select(s, d_x, d_acc, d_g, alpha, n, k, stream));
  if (d_acc)
    GC_TRY((compact<TopkClass, true>(s, d_acc, n, TopkClass(), ties, k, d_idx, d_val, d_acc,
                                     stream)));
  else
    GC_TRY((compact<TopkClass, false>(s, d_x, n, TopkClass(), ties, k, d_idx, d_val, nullptr,
                                      stream)));
  finish_topk<<<1, 1, 0, stream>>>(s.st, (uint32_t) k, d_info);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

/* ---- Gaussian-k --------------------------------------------------------
 * mean and std from the shifted sums S1 = sum (x_i - x_0), S2 = sum
 * (x_i - x_0)^2 in sparse_gaussk.c's order (gauss_partials below), so the
 * threshold is the CPU's to the last bit; the threshold loop runs on the
 * device: each round counts |x| > thr and a one-thread kernel adjusts thr
 * or marks the loop done, so the host never waits.  Rounds after `done`
 * return at once. */
/* sparse_gaussk.c FN(gauss_thr): mu = c0 + S1/n, var = (S2 - S1^2/n)/(n-1),
 * thr = mu + |z| sigma, spelled with _rn so that nothing is fused; false
 * where the sums may have left the range in which they scale exactly with
 * x (S2, S1^2 or thr not finite, or S2 < n 2^-102 = n FLT_MIN 2^24). */
__device__ bool gauss_thr(double c0, double S1, double S2, size_t n, double absz,
                          double *thr)
{
  double mu = __dadd_rn(c0, __ddiv_rn(S1, (double) n)), sq = __dmul_rn(S1, S1);
  double var = n > 1 ? __ddiv_rn(__dsub_rn(S2, __ddiv_rn(sq, (double) n)), (double) (n - 1))
                     : 0.0;
  double sigma = sqrt(var > 0 ? var : 0.0);
  *thr = __dadd_rn(mu, __dmul_rn(absz, sigma));
  return isfinite(S2) && isfinite(sq) && isfinite(*thr) &&
         !(S2 < __dmul_rn((double) n, 0x1p-102));
}

/* The shift of sparse_gaussk.c FN(gauss_shift) for float32: max |x| to
 * [2^24, 2^25). */
__device__ int gauss_shift(uint32_t amax)
{
  return 24 - ilogb((double) __uint_as_float(amax));
}

__global__ void gauss_init(SelState *st, const float *x, const double *sums, size_t n,
                           double absz)
{
  double thr;
  bool ok = gauss_thr((double) x[0], sums[0], sums[1], n, absz, &thr);
  st->thr = thr;
  st->thr_sel = st->thr;
  st->done = 0;
  st->loops = 0;
  st->count = 0;
  st->rescale = !ok && !st->bad;
  st->amax = 0;
}

/* Where the sums left their range: max |x| for the shift (x is finite). */
__global__ void __launch_bounds__(BLOCK)
gauss_absmax(const float *__restrict__ x, size_t n, SelState *st)
{
  typedef cub::BlockReduce<uint32_t, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  if (!st->rescale)
    return;
  uint32_t m = 0;
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK)
    m = max(m, mag_key(x[i]));
  m = Reduce(tmp).Reduce(m, [](uint32_t a, uint32_t b) { return a > b ? a : b; });
  if (threadIdx.x == 0 && m)
    atomicMax(&st->amax, m);
}

/* The threshold from the sums of x 2^sh (gauss_partials<true>), scaled
 * back: exact in double for float32 x, so the loop below runs on it as
 * the CPU's on its scaled threshold.  x = 0 keeps gauss_init's. */
__global__ void gauss_rescaled_init(SelState *st, const float *x, const double *sums,
                                    size_t n, double absz)
{
  if (!st->rescale || st->amax == 0)
    return;
  int sh = gauss_shift(st->amax);
  double thr;
  gauss_thr((double) __double2float_rn(ldexp((double) x[0], sh)), sums[0], sums[1], n, absz,
            &thr);
  st->thr = ldexp(thr, -sh);
  st->thr_sel = st->thr;
}

__global__ void __launch_bounds__(BLOCK)
count_above(const float *__restrict__ x, size_t n, SelState *st)
{
  typedef cub::BlockReduce<uint32_t, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  if (st->done || st->bad)
    return;
  const double thr = st->thr;
  uint32_t c = 0;
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK)
    c += fabs((double) x[i]) > thr;
  uint32_t t = Reduce(tmp).Sum(c);
  if (threadIdx.x == 0 && t)
    atomicAdd(&st->count, t);   /* integer sum: order does not matter */
}

__global__ void gauss_adjust(SelState *st, uint32_t k)
{
  if (st->done || st->bad)
    return;
  uint32_t c = st->count;
  st->count = 0;
  st->loops++;
  st->thr_sel = st->thr;   /* the CPU keeps the last evaluated selection */
  /* theory.md §2.5 step 3, compared in double to avoid 2k/3 rounding */
  if ((double) c < 2.0 * k / 3.0)
    st->thr *= 0.5;
  else if ((double) c > 4.0 * k / 3.0)
    st->thr *= 1.5;
  else
    st->done = 1;
}

/* The partials of the shifted sums, one per block of SUM_BLOCK entries, as
 * sparse_gaussk.c forms them: 16 float lanes, lane j adding x[i+j] - c0 and
 * its square (product and sum rounded apart: no FMA) for i = lo, lo+16, ...
 * while a whole group of 16 fits; lane 0 then takes the tail in index
 * order; the partial is ((0.0 + a[0]) + a[1]) + ... + a[15] in double.
 * Here lane j of a block is thread j of a half-warp, which folds the lanes
 * in that order through shuffles.  NaN/Inf in x sets st->bad.  SCALED:
 * the sums of x 2^sh (sparse_gaussk.c FN(gauss_sums_shifted)), only where
 * gauss_init set st->rescale; every thread returns at once otherwise. */
enum { GAUSS_LANES = 16 };

template <bool SCALED>
__global__ void __launch_bounds__(BLOCK)
gauss_partials(const float *__restrict__ x, size_t n, size_t nblk, double *part, SelState *st)
{
  if (SCALED && (!st->rescale || st->amax == 0))
    return;
  const int sh = SCALED ? gauss_shift(st->amax) : 0;
  /* x 2^sh rounded to float as the CPU's (REAL) ldexp((double) v, sh) */
  auto in = [sh](float v) {
    return SCALED ? __double2float_rn(ldexp((double) v, sh)) : v;
  };
  const size_t t = (size_t) blockIdx.x * BLOCK + threadIdx.x, b = t / GAUSS_LANES;
  const unsigned j = (unsigned) (t % GAUSS_LANES);
  const float c0 = in(x[0]);
  float a1 = 0.0f, a2 = 0.0f;
  int bad = 0;
  if (b < nblk) {
    size_t lo = b * SUM_BLOCK, hi = n - lo < SUM_BLOCK ? n : lo + SUM_BLOCK;
    size_t full = lo + (hi - lo) / GAUSS_LANES * GAUSS_LANES;
    for (size_t i = lo + j; i < full; i += GAUSS_LANES) {
      float v = x[i], d = __fsub_rn(in(v), c0);
      bad |= nonfinite(v);
      a1 = __fadd_rn(a1, d);
      a2 = __fadd_rn(a2, __fmul_rn(d, d));
    }
    if (j == 0)
      for (size_t i = full; i < hi; i++) {
        float v = x[i], d = __fsub_rn(in(v), c0);
        bad |= nonfinite(v);
        a1 = __fadd_rn(a1, d);
        a2 = __fadd_rn(a2, __fmul_rn(d, d));
      }
  }
  /* every thread reaches the shuffles: lanes past nblk add zeros that
   * nobody stores */
  const unsigned first = threadIdx.x & 31 & ~(unsigned) (GAUSS_LANES - 1);
  double p1 = 0.0, p2 = 0.0;
  for (unsigned l = 0; l < GAUSS_LANES; l++) {
    p1 = __dadd_rn(p1, (double) __shfl_sync(0xffffffffu, a1, first + l));
    p2 = __dadd_rn(p2, (double) __shfl_sync(0xffffffffu, a2, first + l));
  }
  if (j == 0 && b < nblk) {
    part[b] = p1;
    part[nblk + b] = p2;
  }
  flag_block_nonfinite(bad, &st->bad);
}

/* ---- DGC (theory.md §2.6, sparse_dgc.c FN(dgc)) ---------------------------
 * The host computes the sample geometry (stride, start from gc_rng, count,
 * rank) exactly as the CPU; the device gathers the strided |x| (clamped to
 * FLT_MAX as the CPU clamps them), radix-selects the rank-th largest sample
 * (exact), counts |x| >= thr on the full vector, then runs the CPU's at most
 * ten adaptation rounds as one-thread decisions between count passes.  When
 * a round finds more than 1.3 ns candidates, the CPU takes the exact top-ns
 * of I, which is the global top-ns with the same tie rule (I holds every
 * |x_i| >= thr, and more than ns of them): the gated radix passes compute
 * it.  The compaction keeps either that top-ns or the first ns of
 * {|x| >= thr} in index order. */
struct DgcSample {
  size_t stride, start, m, top;
  bool sampled;   /* n > m: the reference adapts only then */
};

DgcSample dgc_sample(size_t n, size_t k, double sample_ratio, uint64_t seed, uint32_t rs,
                     uint32_t step)
{
  DgcSample d = {1, 0, n, 0, false};
  double rho = (double) k / (double) n;
  double m0 = fmax(ceil(sample_ratio * (double) n), ceil(2.0 / rho));
  if (m0 < (double) n) {
    d.stride = n / (size_t) m0;
    if (d.stride > 1) {
      d.start = gc_rng_below(gc_rng_u32(seed, rs, step, 0), (uint32_t) d.stride);
      d.m = (n - d.start + d.stride - 1) / d.stride;
    }
  }
  d.top = (size_t) ceil(rho * (double) d.m);
  if (d.top < 1)
    d.top = 1;
  if (d.top > d.m)
    d.top = d.m;
  d.sampled = n > d.m;
  return d;
}

__global__ void __launch_bounds__(BLOCK)
dgc_gather(const float *__restrict__ x, size_t start, size_t stride, size_t m, float *smp)
{
  for (size_t j = (size_t) blockIdx.x * BLOCK + threadIdx.x; j < m;
       j += (size_t) gridDim.x * BLOCK) {
    float a = fabsf(x[start + j * stride]);
    smp[j] = a <= FLT_MAX ? a : FLT_MAX;   /* NaN and Inf sort as FLT_MAX */
  }
}

/* thr = the sample selection's key, a float; then the first count. */
__global__ void dgc_start(SelState *st, const SelState *smp)
{
  st->thr = (double) __uint_as_float(smp->T);
  st->count = 0;
  st->rescan = 1;
  st->loops = 1;
  st->done = 0;
  st->radix_off = 1;
}

/* |x_i| >= thr  <=>  !(|x_i| <= NEXTDOWN(thr)) for the CPU's thr >= 0,
 * compared as magnitude keys.  CHECK (the first pass) also flags NaN/Inf;
 * it must not read st->bad, which its own blocks are setting. */
template <bool CHECK>
__global__ void __launch_bounds__(BLOCK)
dgc_count(const float *__restrict__ x, size_t n, SelState *st)
{
  typedef cub::BlockReduce<uint32_t, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  if (!st->rescan || (!CHECK && st->bad))
    return;
  const uint32_t tkey = __float_as_uint((float) st->thr);
  uint32_t c = 0;
  int bad = 0;
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK) {
    float v = x[i];
    if (CHECK)
      bad |= nonfinite(v);
    c += mag_key(v) >= tkey;
  }
  uint32_t t = Reduce(tmp).Sum(c);
  if (CHECK)
    flag_block_nonfinite(bad, &st->bad);
  if (threadIdx.x == 0 && t)
    atomicAdd(&st->count, t);
}

/* One adaptation round of sparse_dgc.c FN(dgc), same tests in the same
 * order; the exact top-ns arms the radix passes (prefix 0, krem = ns). */
__global__ void dgc_adjust(SelState *st, uint32_t ns)
{
  st->rescan = 0;
  if (st->bad || st->done)
    return;
  uint32_t c = st->count;
  if ((double) c > 1.3 * (double) ns) {
    st->radix_off = 0;
    st->prefix = 0;
    st->mask = 0;
    st->krem = ns;
    st->done = 1;
  } else if (c > ns || !((double) c < 0.8 * (double) ns)) {
    st->done = 1;
  } else {
    /* thr = (REAL) (0.8 * thr): the product in double, then to float */
    float thr = (float) st->thr;
    st->thr = (double) __double2float_rn(__dmul_rn(0.8, (double) thr));
    st->count = 0;
    st->rescan = 1;
    st->loops++;
  }
}

/* The exact top-ns when the radix passes ran, else |x| >= thr (the scatter
 * keeps the first ns of those). */
struct DgcClass {
  __device__ int operator()(size_t, float v, const SelState &s) const
  {
    uint32_t key = mag_key(v);
    if (!s.radix_off)
      return key > s.T ? 1 : key == s.T ? 2 : 0;
    return key >= __float_as_uint((float) s.thr) ? 1 : 0;
  }
};

__global__ void finish_dgc(const SelState *st, uint32_t ns, gc_cuda_info *info)
{
  if (st->bad) {
    info->status = GC_EDOM;
    info->selected = info->nnz = 0;
    return;
  }
  uint32_t c = st->radix_off ? (uint32_t) (st->total & 0xffffffffu) : ns;
  info->status = GC_SUCCESS;
  info->selected = c < ns ? c : ns;
  info->nnz = 0;   /* counted by the encoder when it writes the values */
  info->loops = st->loops;
}

/* ---- random-K: Floyd's algorithm in parallel -----------------------------
 * sparse_randk.c draws, for c = 0..k-1 and j = n-k+c, t_c = below(u_c, j+1) and
 * takes t_c unless it is already taken, in which case it takes j.  Every
 * t_c is a pure function of c, so all draws run at once; what is sequential
 * is "already taken".  Value v is in S_{c-1} iff some draw c' < c aimed at
 * it (first(v) < c), or v = j_{c'} for c' < c and draw c' collided (it then
 * took j_{c'}).  first() is a hash table of atomicMin over draw numbers
 * (deterministic: a minimum), and the second case is followed as a chain of
 * strictly decreasing draw numbers. */
__device__ __forceinline__ uint32_t hslot(uint32_t v, uint32_t hmask)
{
  v ^= v >> 16;
  v *= 0x85ebca6bu;
  v ^= v >> 13;
  v *= 0xc2b2ae35u;
  v ^= v >> 16;
  return v & hmask;
}

__global__ void __launch_bounds__(BLOCK)
floyd_draw(size_t n, size_t k, uint64_t seed, uint32_t rs, uint32_t step, uint32_t *t,
           uint32_t *hkeys, uint32_t *hfirst, uint32_t hmask)
{
  for (size_t c = (size_t) blockIdx.x * BLOCK + threadIdx.x; c < k;
       c += (size_t) gridDim.x * BLOCK) {
    size_t j = n - k + c;
    uint32_t v = gc_rng_below(gc_rng_u32(seed, rs, step, c), (uint32_t) (j + 1));
    t[c] = v;
    for (uint32_t h = hslot(v, hmask);; h = (h + 1) & hmask) {
      uint32_t prev = atomicCAS(&hkeys[h], 0xffffffffu, v);
      if (prev == 0xffffffffu || prev == v) {
        atomicMin(&hfirst[h], (uint32_t) c);
        break;
      }
    }
  }
}

__device__ uint32_t first_draw(uint32_t v, const uint32_t *hkeys, const uint32_t *hfirst,
                               uint32_t hmask)
{
  for (uint32_t h = hslot(v, hmask);; h = (h + 1) & hmask) {
    uint32_t key = hkeys[h];
    if (key == v)
      return hfirst[h];
    if (key == 0xffffffffu)
      return 0xffffffffu;   /* not aimed at by any draw */
  }
}

__global__ void __launch_bounds__(BLOCK)
floyd_resolve(size_t n, size_t k, const uint32_t *t, const uint32_t *hkeys,
              const uint32_t *hfirst, uint32_t hmask, uint32_t *draw, uint32_t *bits)
{
  const size_t base = n - k;
  for (size_t c = (size_t) blockIdx.x * BLOCK + threadIdx.x; c < k;
       c += (size_t) gridDim.x * BLOCK) {
    size_t cc = c;
    uint32_t v = t[c];
    bool collided = false;
    for (;;) {
      if (first_draw(v, hkeys, hfirst, hmask) < cc) {
        collided = true;
        break;
      }
      if (v >= base && v - base < cc) {   /* v = j_{c'}: taken iff c' collided */
        cc = v - base;
        v = t[cc];
        continue;
      }
      break;
    }
    uint32_t pick = collided ? (uint32_t) (base + c) : t[c];
    if (draw)
      draw[c] = pick;
    if (bits)
      atomicOr(&bits[pick >> 5], 1u << (pick & 31));
  }
}

/* The ascending order (randk) from the bitmap of picks, without reading x:
 * tiles of BLOCK bitmap words, one word per thread; the tiles' popcounts
 * are scanned (scan_tiles), then every word writes its set bits in order
 * from its exclusive offset.  Bits past n are zero and the k picks are
 * distinct, so exactly k indices come out, ascending. */
__global__ void __launch_bounds__(BLOCK)
bit_tile_count(const uint32_t *bits, size_t nw, uint64_t *tiles)
{
  typedef cub::BlockReduce<uint32_t, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  const size_t w = (size_t) blockIdx.x * BLOCK + threadIdx.x;
  uint32_t t = Reduce(tmp).Sum(w < nw ? (uint32_t) __popc(bits[w]) : 0u);
  if (threadIdx.x == 0)
    tiles[blockIdx.x] = t;
}

__global__ void __launch_bounds__(BLOCK)
bit_scatter(const uint32_t *bits, size_t nw, const uint64_t *tiles, size_t k, uint32_t *idx)
{
  typedef cub::BlockScan<uint32_t, BLOCK> Scan;
  __shared__ typename Scan::TempStorage tmp;
  const size_t w = (size_t) blockIdx.x * BLOCK + threadIdx.x;
  uint32_t word = w < nw ? bits[w] : 0u, off;
  Scan(tmp).ExclusiveSum((uint32_t) __popc(word), off);
  for (uint64_t out = tiles[blockIdx.x] + off; word && out < k; out++) {
    idx[out] = (uint32_t) (32 * w + (unsigned) (__ffs((int) word) - 1));
    word &= word - 1;   /* lowest set bit first: ascending */
  }
}

/* NaN/Inf anywhere in x sets st->bad: random-K refuses such an x whether
 * or not it draws the entry, as sparse_randk.c does (the one rule for
 * non-finite input, design.md). */
__global__ void __launch_bounds__(BLOCK)
flag_nonfinite(const float *x, size_t n, SelState *st)
{
  int bad = 0;
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK)
    bad |= nonfinite(x[i]);
  flag_block_nonfinite(bad, &st->bad);
}

/* val[c] = x[idx[c]]. */
__global__ void __launch_bounds__(BLOCK)
gather_values(const float *x, const uint32_t *idx, size_t k, float *val)
{
  for (size_t c = (size_t) blockIdx.x * BLOCK + threadIdx.x; c < k;
       c += (size_t) gridDim.x * BLOCK)
    val[c] = x[idx[c]];
}

__global__ void finish_count(const SelState *st, uint32_t k, gc_cuda_info *info)
{
  info->status = st->bad ? GC_EDOM : GC_SUCCESS;
  info->selected = st->bad ? 0 : k;
  info->nnz = 0;   /* counted by the encoder when it writes the values */
  info->loops = 0;
}

} /* namespace */

/* ---- public entry points ----------------------------------------------- */

extern "C" int gc_cuda_topk_f32(void *d_tmp, size_t *tmp_bytes, const float *d_x,
                                size_t n, size_t k, int ties, uint32_t *d_idx,
                                float *d_val, gc_cuda_info *d_info, cudaStream_t stream)
{
  return topk_common(d_tmp, tmp_bytes, d_x, nullptr, nullptr, 0.f, n, k, ties,
                     d_idx, d_val, d_info, stream);
}

extern "C" int gc_cuda_ef_topk_f32(void *d_tmp, size_t *tmp_bytes, float *d_acc,
                                   const float *d_g, float alpha, size_t n, size_t k,
                                   int ties, uint32_t *d_idx, float *d_val,
                                   gc_cuda_info *d_info, cudaStream_t stream)
{
  return topk_common(d_tmp, tmp_bytes, nullptr, d_acc, d_g, alpha, n, k, ties,
                     d_idx, d_val, d_info, stream);
}

extern "C" int gc_cuda_threshold_f32(void *d_tmp, size_t *tmp_bytes, const float *d_x,
                                     size_t n, double v, uint32_t *d_idx, float *d_val,
                                     gc_cuda_info *d_info, cudaStream_t stream)
{
  GC_TRY(check_n(n));
  if (!(v >= 0))
    GC_ERROR("threshold: v must be >= 0", GC_EINVAL);
  Carver cv(d_tmp);
  Scratch s = carve(cv, n);
  bool sizing;
  GC_TRY(finish_carve(cv, tmp_bytes, "threshold", &sizing));
  if (sizing)
    return GC_SUCCESS;
  init_state<<<1, 1, 0, stream>>>(s.st, 0);
  GC_CUDA_LAUNCHED();
  AboveClass cls = {v, false};
  /* the count pass flags NaN/Inf: two reads of x, not three */
  GC_TRY((compact<AboveClass, false, true>(s, d_x, n, cls, GC_TIES_LOW, n, d_idx, d_val,
                                            nullptr, stream)));
  finish_above<<<1, 1, 0, stream>>>(s.st, d_info);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

extern "C" int gc_cuda_gaussk_f32(void *d_tmp, size_t *tmp_bytes, const float *d_x,
                                  size_t n, size_t k, double rho, unsigned loops,
                                  uint32_t *d_idx, float *d_val, gc_cuda_info *d_info,
                                  cudaStream_t stream)
{
  GC_TRY(check_nk(n, k, "gaussk"));
  if (!(rho > 0 && rho <= 1))
    GC_ERRORF(GC_EINVAL, "gaussk: density %g is outside (0,1]", rho);
  if (loops < 1)
    GC_ERROR("gaussk: loops must be >= 1, as for gc_compressor_gaussk", GC_EINVAL);
  size_t nblk = (n + SUM_BLOCK - 1) / SUM_BLOCK;
  Carver cv(d_tmp);
  Scratch s = carve(cv, n);
  double *sums = cv.take<double>(2);
  double *part = cv.take<double>(2 * nblk);
  double *spare = cv.take<double>(2 * tree_spare(nblk));
  bool sizing;
  GC_TRY(finish_carve(cv, tmp_bytes, "gaussk", &sizing));
  if (sizing)
    return GC_SUCCESS;
  init_state<<<1, 1, 0, stream>>>(s.st, 0);
  GC_CUDA_LAUNCHED();
  /* one thread per (block, lane): nblk * 16 <= 2^26 threads for n < 2^32 */
  unsigned pgrid = (unsigned) ((nblk * GAUSS_LANES + BLOCK - 1) / BLOCK);
  gauss_partials<false><<<pgrid, BLOCK, 0, stream>>>(d_x, n, nblk, part, s.st);
  GC_CUDA_LAUNCHED();
  GC_TRY(pairwise_total<2>(part, spare, nblk, sums, stream));
  /* |z| exactly as sparse_gaussk.c computes it: GSL on the host, from the density
   * the caller passes (sparse_gaussk.c: params.density unless params.k is set) */
  double absz = fabs(gsl_cdf_ugaussian_Pinv(rho / 2));
  gauss_init<<<1, 1, 0, stream>>>(s.st, d_x, sums, n, absz);
  GC_CUDA_LAUNCHED();
  unsigned grid = grid_for(n, BLOCK * 8, HIST_CAP);
  /* the sums again on x 2^sh where they left their range (the CPU's
   * fallback); each kernel returns at once otherwise, and the tree then
   * adds the spent partials into sums that nobody reads */
  gauss_absmax<<<grid, BLOCK, 0, stream>>>(d_x, n, s.st);
  GC_CUDA_LAUNCHED();
  gauss_partials<true><<<pgrid, BLOCK, 0, stream>>>(d_x, n, nblk, part, s.st);
  GC_CUDA_LAUNCHED();
  GC_TRY(pairwise_total<2>(part, spare, nblk, sums, stream));
  gauss_rescaled_init<<<1, 1, 0, stream>>>(s.st, d_x, sums, n, absz);
  GC_CUDA_LAUNCHED();
  for (unsigned r = 0; r < loops; r++) {
    count_above<<<grid, BLOCK, 0, stream>>>(d_x, n, s.st);
    GC_CUDA_LAUNCHED();
    gauss_adjust<<<1, 1, 0, stream>>>(s.st, (uint32_t) k);
    GC_CUDA_LAUNCHED();
  }
  AboveClass cls = {0.0, true};
  GC_TRY((compact<AboveClass, false>(s, d_x, n, cls, GC_TIES_LOW, n, d_idx, d_val, nullptr,
                                      stream)));
  finish_above<<<1, 1, 0, stream>>>(s.st, d_info);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

extern "C" int gc_cuda_dgc_f32(void *d_tmp, size_t *tmp_bytes, const float *d_x, size_t n,
                               size_t k, double sample_ratio, int ties, uint64_t seed,
                               uint32_t rng_stream, uint32_t step, uint32_t *d_idx,
                               float *d_val, gc_cuda_info *d_info, cudaStream_t stream)
{
  GC_TRY(check_nk(n, k, "dgc"));
  if (ties != GC_TIES_LOW && ties != GC_TIES_HIGH)
    GC_ERROR("dgc: ties must be GC_TIES_LOW or GC_TIES_HIGH", GC_EINVAL);
  if (!(sample_ratio > 0 && sample_ratio <= 1))
    GC_ERRORF(GC_EINVAL, "dgc: sample ratio %g is outside (0,1]", sample_ratio);
  const DgcSample ds = dgc_sample(n, k, sample_ratio, seed, rng_stream, step);
  Carver cv(d_tmp);
  Scratch s = carve(cv, n);
  Scratch sample;   /* the radix select over the samples: no compaction */
  sample.st = cv.take<SelState>(1);
  sample.hist = cv.take<uint32_t>(3 * BINS);
  sample.tiles = nullptr;
  float *smp = cv.take<float>(ds.m);
  bool sizing;
  GC_TRY(finish_carve(cv, tmp_bytes, "dgc", &sizing));
  if (sizing)
    return GC_SUCCESS;
  dgc_gather<<<grid_for(ds.m, BLOCK, 4096), BLOCK, 0, stream>>>(d_x, ds.start, ds.stride, ds.m,
                                                                 smp);
  GC_CUDA_LAUNCHED();
  GC_TRY(radix_select(sample, smp, nullptr, nullptr, 0.f, ds.m, ds.top, stream));
  init_state<<<1, 1, 0, stream>>>(s.st, 0);
  GC_CUDA_LAUNCHED();
  dgc_start<<<1, 1, 0, stream>>>(s.st, sample.st);
  GC_CUDA_LAUNCHED();
  unsigned grid = grid_for(n, BLOCK * 8, HIST_CAP);
  dgc_count<true><<<grid, BLOCK, 0, stream>>>(d_x, n, s.st);
  GC_CUDA_LAUNCHED();
  if (ds.sampled) {
    enum { DGC_ROUNDS = 10 };
    for (int r = 0; r < DGC_ROUNDS; r++) {
      dgc_adjust<<<1, 1, 0, stream>>>(s.st, (uint32_t) k);
      GC_CUDA_LAUNCHED();
      dgc_count<false><<<grid, BLOCK, 0, stream>>>(d_x, n, s.st);
      GC_CUDA_LAUNCHED();
    }
    GC_TRY(radix_passes(s, d_x, nullptr, nullptr, 0.f, n, stream));
  }
  GC_TRY((compact<DgcClass, false>(s, d_x, n, DgcClass(), ties, k, d_idx, d_val, nullptr,
                                    stream)));
  finish_dgc<<<1, 1, 0, stream>>>(s.st, (uint32_t) k, d_info);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

extern "C" int gc_cuda_randk_f32(void *d_tmp, size_t *tmp_bytes, const float *d_x,
                                 size_t n, size_t k, uint64_t seed, uint32_t rng_stream,
                                 uint32_t step, int ascending, uint32_t *d_idx, float *d_val,
                                 gc_cuda_info *d_info, cudaStream_t stream)
{
  GC_TRY(check_nk(n, k, "randk"));
  size_t hsize = 1;
  while (hsize < 2 * k)
    hsize <<= 1;
  /* x is read once for the finiteness rule, then at the k picks.  The
   * ascending order comes from a bitmap
   * of n bits (zeroed, counted and scanned: 3n/8 bytes moved, against 4n
   * for one read of x); sorting the k picks instead (cub::DeviceRadixSort)
   * would need a device already to size its scratch. */
  const size_t nw = (n + 31) / 32, nbt = (nw + BLOCK - 1) / BLOCK;
  Carver cv(d_tmp);
  SelState *st = cv.take<SelState>(1);
  uint32_t *t = cv.take<uint32_t>(k);
  uint32_t *hkeys = cv.take<uint32_t>(hsize);
  uint32_t *hfirst = cv.take<uint32_t>(hsize);
  uint32_t *bits = ascending ? cv.take<uint32_t>(nw) : nullptr;
  uint64_t *btiles = ascending ? cv.take<uint64_t>(nbt) : nullptr;
  bool sizing;
  GC_TRY(finish_carve(cv, tmp_bytes, "randk", &sizing));
  if (sizing)
    return GC_SUCCESS;
  init_state<<<1, 1, 0, stream>>>(st, 0);
  GC_CUDA_LAUNCHED();
  GC_CUDA_TRY(cudaMemsetAsync(hkeys, 0xff, hsize * sizeof(uint32_t), stream));
  GC_CUDA_TRY(cudaMemsetAsync(hfirst, 0xff, hsize * sizeof(uint32_t), stream));
  if (bits)
    GC_CUDA_TRY(cudaMemsetAsync(bits, 0, nw * sizeof(uint32_t), stream));
  unsigned grid = grid_for(k, BLOCK, 4096);
  floyd_draw<<<grid, BLOCK, 0, stream>>>(n, k, seed, rng_stream, step, t, hkeys, hfirst,
                                         (uint32_t) (hsize - 1));
  GC_CUDA_LAUNCHED();
  floyd_resolve<<<grid, BLOCK, 0, stream>>>(n, k, t, hkeys, hfirst, (uint32_t) (hsize - 1),
                                            ascending ? nullptr : d_idx, bits);
  GC_CUDA_LAUNCHED();
  if (ascending) {
    bit_tile_count<<<(unsigned) nbt, BLOCK, 0, stream>>>(bits, nw, btiles);
    GC_CUDA_LAUNCHED();
    scan_tiles<<<1, 1024, 0, stream>>>(btiles, nbt, &st->total);
    GC_CUDA_LAUNCHED();
    bit_scatter<<<(unsigned) nbt, BLOCK, 0, stream>>>(bits, nw, btiles, k, d_idx);
    GC_CUDA_LAUNCHED();
  }
  flag_nonfinite<<<grid_for(n, BLOCK, 4096), BLOCK, 0, stream>>>(d_x, n, st);
  GC_CUDA_LAUNCHED();
  gather_values<<<grid, BLOCK, 0, stream>>>(d_x, d_idx, k, d_val);
  GC_CUDA_LAUNCHED();
  finish_count<<<1, 1, 0, stream>>>(st, (uint32_t) k, d_info);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}
