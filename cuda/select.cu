/* select.cu -- exact top-k, hard threshold, Gaussian-k and DGC, all ending
 * in one deterministic stable compaction, and random-k (Floyd's draw in
 * parallel, x read at the k picks only).
 *
 * Cost model (d = 2.5e7 float32, H100: one read of x = 100 MB / 2.64 TB/s
 * ~ 0.038 ms; a launch ~ 2-3 us; the sparse encoder in wire.cu adds about 7
 * launches).  Before this version: top-k 3 histogram + 1 count + 1 scatter
 * read = 5 reads + 18 launches ~ 0.24 ms predicted, 0.309 measured (pass 0
 * also fought over 2048 shared bins); threshold 2 reads + 12 launches
 * ~ 0.11 predicted, 0.156 measured; Gaussian-k 4 reads; DGC 3 reads + ~40
 * launches.
 *
 * Compaction (all selectors).  One pass: each block takes the next tile
 * of TILE entries from a ticket counter, classifies it, publishes its
 * count and finds its output offset by a decoupled look-back over the
 * tiles before it (a warp reads 32 predecessors at a time, stopping at the
 * nearest one that published its inclusive prefix).  Offsets are exact
 * prefix sums of per-tile counts, so the output is in index order and the
 * same whatever the block scheduling; atomics only hand out tiles.  Was a
 * count pass + one-block scan + scatter pass: one read of x fewer.
 *
 * Top-k.  (1) One histogram pass over the top HBITS = 14 bits of the |x|
 * key (8 exponent + 6 mantissa bits) in per-block shared memory; the last
 * block to finish finds the bucket b holding the k-th largest key.  (2) One
 * compaction pass writes every entry of bucket >= b, in index order, to a
 * list L (|L| < k + |bucket b|) and appends the keys of bucket b to a
 * candidate array.  (3) One block radix-selects the k-th key T among the
 * candidates (the 17 low bits in two digits), with eq_total = #{key == T}
 * and rem = how many of those win.  (4) The compaction of L (small) keeps
 * key > T and the first rem (last rem for GC_TIES_HIGH) keys == T in L's
 * order, which is index order.  When bucket b holds more than CAND_CAP
 * keys (e.g. many equal magnitudes, a zero vector), step (1) instead arms
 * the old exact 3-pass radix select over x (11, 11, 10 bit digits, each
 * pass's digit picked by its last block) and step (4) compacts x itself.
 * Fast path: 2 reads + 6 launches (+ 3 histogram launches that return at
 * once) + the encoder ~ 0.076 + 0.035 ~ 0.11 ms predicted.
 *
 * Threshold: 1 read (the compaction also flags NaN/Inf) + 3 launches + the
 * encoder ~ 0.06-0.08 ms predicted.  Gaussian-k and DGC: one read fewer
 * than before from the compaction (see their sections). */
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

/* Streaming multiprocessors of the current device (grid sizes only: any
 * value gives the same results). */
unsigned sm_count()
{
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      sms < 1)
    sms = 16;
  return (unsigned) sms;
}

/* Zero the `words` 32-bit words at z (a selector's state, histograms,
 * counters and look-back flags, carved contiguously), then set krem and
 * radix_off in the state at the start of z. */
__global__ void __launch_bounds__(BLOCK)
init_scratch(uint32_t *z, size_t words, uint32_t k, uint32_t radix_off)
{
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < words;
       i += (size_t) gridDim.x * BLOCK)
    z[i] = 0;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    SelState *st = reinterpret_cast<SelState *>(z);
    st->krem = k;
    st->radix_off = radix_off;
  }
}

/* Every block of a kernel calls this once, after its global writes; it
 * returns true (to all threads) in the block that finished last, which may
 * then read what every block wrote.  *done must start at 0. */
__device__ __forceinline__ bool last_block(uint32_t *done)
{
  __shared__ uint32_t last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    last = atomicAdd(done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (last)
    __threadfence();
  return last;
}

/* Find, among nb bins read in descending digit order, the digit where the
 * count from the top reaches krem (NT threads, nb <= NT * PER).  Writes
 * digit, the count above it and the bin's count to *out (3 words) from the
 * thread that finds it.  Global bins are read with ld.cg (other blocks'
 * atomics wrote them); SHARED: hist is this block's shared memory. */
template <int NT, int PER, bool SHARED = false>
__device__ void pick_bin(const uint32_t *hist, unsigned nb, uint32_t krem, uint32_t *out)
{
  typedef cub::BlockScan<uint32_t, NT> Scan;
  __shared__ typename Scan::TempStorage tmp;
  uint32_t h[PER], sum = 0;
  for (unsigned j = 0; j < PER; j++) {
    unsigned pos = threadIdx.x * PER + j;
    h[j] = pos >= nb ? 0 : SHARED ? hist[nb - 1 - pos] : __ldcg(&hist[nb - 1 - pos]);
    sum += h[j];
  }
  uint32_t before;
  Scan(tmp).ExclusiveSum(sum, before);
  for (unsigned j = 0; j < PER; j++) {
    unsigned pos = threadIdx.x * PER + j;
    if (pos < nb && before < krem && krem <= before + h[j]) {
      out[0] = nb - 1 - pos;
      out[1] = before;
      out[2] = h[j];
    }
    before += h[j];
  }
}

/* One pass of the exact radix select (the top-k fallback and DGC): a
 * histogram of the next digit among the keys that match the prefix found
 * so far; the last block picks the digit. */
template <int PASS>
__global__ void __launch_bounds__(BLOCK)
histogram(const float *__restrict__ x, size_t n, SelState *st, uint32_t *hist, uint32_t *done)
{
  __shared__ uint32_t sh[BINS];
  __shared__ uint32_t pick[3];
  if (st->radix_off)
    return;
  for (unsigned b = threadIdx.x; b < BINS; b += BLOCK)
    sh[b] = 0;
  __syncthreads();
  const uint32_t prefix = st->prefix, mask = st->mask;
  const unsigned shift = pass_shift(PASS), dmask = (1u << pass_bits(PASS)) - 1;
  int bad = 0;
  for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < n;
       i += (size_t) gridDim.x * BLOCK) {
    float v = x[i];
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
  if (!last_block(done))
    return;
  const uint32_t krem = st->krem;
  pick_bin<BLOCK, BINS / BLOCK>(hist, 1u << pass_bits(PASS), krem, pick);
  __syncthreads();
  if (threadIdx.x == 0) {
    st->prefix = prefix | (pick[0] << shift);
    st->mask = mask | (dmask << shift);
    st->krem = krem - pick[1];
    if (PASS == 2) {
      st->T = st->prefix;
      st->eq_total = pick[2];
      st->rem = krem - pick[1];
    }
  }
}

/* ---- decoupled look-back ------------------------------------------------
 * Per tile a flag (0 nothing yet, 1 aggregate published, 2 inclusive
 * prefix published) and the two values; flags and the ticket start at 0. */
struct Lookback {
  uint32_t *flag;
  uint64_t *agg, *inc;
  uint32_t *ticket;
};

/* Called by warp 0 of the block holding `tile`, with the tile's count;
 * returns (in every lane) the sum of the counts of tiles 0..tile-1 and
 * publishes the inclusive prefix.  The value is written before its flag,
 * with a fence between; the reader fences between flag and value. */
__device__ uint64_t lookback(const Lookback &lb, uint32_t tile, uint64_t aggregate)
{
  const unsigned lane = threadIdx.x & 31;
  volatile uint32_t *flag = lb.flag;
  volatile uint64_t *agg = lb.agg, *inc = lb.inc;
  if (tile == 0) {
    if (lane == 0) {
      inc[0] = aggregate;
      __threadfence();
      flag[0] = 2;
    }
    return 0;
  }
  if (lane == 0) {
    agg[tile] = aggregate;
    __threadfence();
    flag[tile] = 1;
  }
  uint64_t excl = 0;
  for (int64_t end = (int64_t) tile - 1;; end -= 32) {
    const int64_t p = end - (int64_t) lane;   /* lane 0: the nearest */
    uint32_t f;
    do
      f = p >= 0 ? flag[p] : 2u;   /* (tile 0 is inclusive: never passed) */
    while (__any_sync(0xffffffffu, f == 0));
    __threadfence();
    uint64_t v = p >= 0 ? (f == 2 ? inc[p] : agg[p]) : 0;
    const unsigned incl = __ballot_sync(0xffffffffu, f == 2);
    const unsigned stop = incl ? (unsigned) __ffs((int) incl) - 1 : 31;
    if (lane > stop)
      v = 0;
    for (int o = 16; o; o >>= 1)
      v += __shfl_down_sync(0xffffffffu, v, o);
    excl += __shfl_sync(0xffffffffu, v, 0);
    if (incl)
      break;
  }
  if (lane == 0) {
    inc[tile] = excl + aggregate;
    __threadfence();
    flag[tile] = 2;
  }
  return excl;
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

/* Top-k fast path state (zeroed by init_scratch). */
struct FastState {
  uint32_t on;        /* the candidate path runs (else the radix fallback) */
  uint32_t bucket;    /* bucket of the k-th largest key                    */
  uint32_t above;     /* keys in higher buckets (< k)                      */
  uint32_t cand;      /* keys in the bucket                                */
  uint32_t ncand;     /* candidate keys appended so far                    */
  uint32_t pad;
  uint64_t lsize;     /* |L| (total of the first compaction)               */
};

enum { HBITS = 14, HSHIFT = 31 - HBITS, HB = 1 << HBITS, HBLOCK = 1024,
       CAND_MIN = 1 << 16 };

/* Step (2)'s class: bucket >= b kept in L; bucket == b also appended to
 * the candidate keys (each entry is classified exactly once). */
struct BucketClass {
  const FastState *fs;
  uint32_t *ckey, *ncand;
  __device__ int operator()(size_t, float v, const SelState &) const
  {
    const uint32_t key = mag_key(v), b = key >> HSHIFT, bs = fs->bucket;
    if (b == bs)
      ckey[atomicAdd(ncand, 1u)] = key;   /* order-free: only the set matters */
    return b >= bs ? 1 : 0;
  }
};

/* Where a compaction reads: x itself (index = position), or the list L
 * (index from lidx), each only when `when` allows. */
enum When { ALWAYS, IF_FAST, IF_SLOW, IF_FAST_ELSE_X };
struct Source {
  const float *x;
  size_t n;
  const uint32_t *lidx;
  const float *lval;
  const FastState *fs;
  int when;
  /* false: nothing to do.  Else *list says whether L is read. */
  __device__ bool pick(bool *list, size_t *len) const
  {
    const uint32_t on = when == ALWAYS ? 0 : fs->on;
    *list = when == IF_FAST_ELSE_X && on;
    *len = *list ? (size_t) fs->lsize : n;
    return when == ALWAYS || when == IF_FAST_ELSE_X || (when == IF_FAST) == (on != 0);
  }
};

/* One-pass stable compaction (see the top of the file).  Entries in
 * blocked arrangement (thread t owns ITEMS consecutive ones), so ranks
 * follow the index order; only the first `limit` kept entries are written
 * (DGC's truncation).  With ZERO the selected entries of `zero` are
 * cleared (error-feedback residual).  CHECK (threshold: no earlier pass)
 * sets st->bad for NaN/Inf and writes whatever it finds, the finish
 * kernel then reporting GC_EDOM; without it a set st->bad skips the pass.
 * *total gets the packed totals (kept low 32, ties high 32). */
template <class Cls, bool ZERO, bool CHECK>
__global__ void __launch_bounds__(BLOCK)
compact_tiles(Source src, Cls cls, int ties, uint64_t limit, SelState *st, Lookback lb,
              uint32_t *d_idx, float *d_val, float *zero, uint64_t *total)
{
  typedef cub::BlockLoad<float, BLOCK, ITEMS, cub::BLOCK_LOAD_TRANSPOSE> Load;
  typedef cub::BlockScan<uint64_t, BLOCK> Scan;
  __shared__ union {
    typename Load::TempStorage load;
    typename Scan::TempStorage scan;
  } tmp;
  __shared__ uint32_t sh_tile;
  __shared__ uint64_t sh_excl;
  const SelState s = *st;
  if (!CHECK && s.bad)
    return;
  bool list;
  size_t n;
  if (!src.pick(&list, &n))
    return;
  const float *vals = list ? src.lval : src.x;
  const size_t nt = (n + TILE - 1) / TILE;
  /* ties kept: eq ranks [0, rem) (low) or [eq_total - rem, eq_total) (high) */
  const uint64_t lo = ties == GC_TIES_HIGH ? (uint64_t) s.eq_total - s.rem : 0;
  const uint64_t hi = lo + s.rem;
  int bad = 0;
  for (;;) {
    if (threadIdx.x == 0)
      sh_tile = atomicAdd(lb.ticket, 1u);
    __syncthreads();
    const size_t tile = sh_tile;
    if (tile >= nt)
      break;
    const size_t base = tile * TILE;
    const int valid = (int) (n - base < (size_t) TILE ? n - base : (size_t) TILE);
    float v[ITEMS];
    Load(tmp.load).Load(vals + base, v, valid, 0.0f);
    __syncthreads();
    int cl[ITEMS];
    uint64_t c = 0;
    for (int j = 0; j < ITEMS; j++) {
      const int pos = threadIdx.x * ITEMS + j;
      cl[j] = 0;
      if (pos < valid) {
        const size_t i = list ? (size_t) src.lidx[base + pos] : base + pos;
        if (CHECK)
          bad |= nonfinite(v[j]);
        cl[j] = cls(i, v[j], s);
      }
      c += cl[j] == 1 ? 1u : cl[j] == 2 ? ((uint64_t) 1 << 32) : 0u;
    }
    uint64_t ex, agg;
    Scan(tmp.scan).ExclusiveSum(c, ex, agg);
    if (threadIdx.x < 32) {
      uint64_t e = lookback(lb, (uint32_t) tile, agg);
      if (threadIdx.x == 0) {
        sh_excl = e;
        if (tile == nt - 1)
          *total = e + agg;
      }
    }
    __syncthreads();
    ex += sh_excl;
    uint64_t gt = (uint32_t) ex, eq = ex >> 32;
    for (int j = 0; j < ITEMS; j++) {
      if (!cl[j])
        continue;
      bool keep = cl[j] == 1 || (eq >= lo && eq < hi);
      /* kept ties before this entry: eq ranks in [lo, min(eq, hi)) */
      uint64_t ties_before = eq <= lo ? 0 : (eq < hi ? eq : hi) - lo;
      uint64_t out = gt + ties_before;
      if (keep && out < limit) {
        const int pos = threadIdx.x * ITEMS + j;
        size_t i = list ? (size_t) src.lidx[base + pos] : base + pos;
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
    __syncthreads();   /* sh_tile, sh_excl and tmp are reused */
  }
  if (CHECK)
    flag_block_nonfinite(bad, &st->bad);
}

/* ---- top-k step (1): the bucket histogram -------------------------------
 * With EF the accumulator update acc += alpha * g is done here, so the
 * fused path reads g once.  The last block finds the bucket b and either
 * turns the fast path on or arms the radix fallback (radix_off = 0). */
template <bool EF>
__global__ void __launch_bounds__(HBLOCK)
bucket_hist(const float *__restrict__ x, float *acc, const float *__restrict__ g, float alpha,
            size_t n, uint32_t k, uint32_t cand_cap, SelState *st, FastState *fs,
            uint32_t *hist, uint32_t *done)
{
  extern __shared__ uint32_t sh[];   /* HB bins */
  __shared__ uint32_t pick[3];
  for (unsigned b = threadIdx.x; b < HB; b += HBLOCK)
    sh[b] = 0;
  __syncthreads();
  int bad = 0;
  /* base is uniform across the block, so every warp runs whole iterations
   * and the warp votes below see all 32 lanes */
  for (size_t base = (size_t) blockIdx.x * HBLOCK; base < n; base += (size_t) gridDim.x * HBLOCK) {
    const size_t i = base + threadIdx.x;
    const bool in = i < n;
    float v = 0.0f;
    if (in) {
      if (EF) {
        /* no FMA: the CPU rounds the product and the sum separately */
        v = __fadd_rn(acc[i], __fmul_rn(alpha, g[i]));
        acc[i] = v;
      } else {
        v = x[i];
      }
    }
    bad |= nonfinite(v);
    const uint32_t b = in ? mag_key(v) >> HSHIFT : HB;   /* HB: no bin */
    /* a warp of equal buckets (zeros, constants) adds once */
    const uint32_t b0 = __shfl_sync(0xffffffffu, b, 0);
    if (__all_sync(0xffffffffu, b == b0)) {
      if ((threadIdx.x & 31) == 0 && b0 < HB)
        atomicAdd(&sh[b0], 32u);
    } else if (in) {
      atomicAdd(&sh[b], 1u);
    }
  }
  flag_block_nonfinite(bad, &st->bad);
  __syncthreads();
  for (unsigned b = threadIdx.x; b < HB; b += HBLOCK)
    if (sh[b])
      atomicAdd(&hist[b], sh[b]);
  if (!last_block(done))
    return;
  pick_bin<HBLOCK, HB / HBLOCK>(hist, HB, k, pick);
  __syncthreads();
  if (threadIdx.x == 0 && !__ldcg(&st->bad)) {
    fs->bucket = pick[0];
    fs->above = pick[1];
    fs->cand = pick[2];
    fs->on = pick[2] <= cand_cap;
    st->radix_off = !fs->on;   /* the fallback starts from prefix 0, krem k */
  }
}

/* ---- top-k step (3): the k-th key among the candidates ------------------
 * One block; the candidates share the bucket's top HBITS bits, the other 17
 * are two digits (9 then 8 bits).  Leaves T, eq_total and rem as the radix
 * select's last pass would. */
__global__ void __launch_bounds__(HBLOCK)
resolve_cands(SelState *st, const FastState *fs, const uint32_t *ckey, uint32_t k)
{
  __shared__ uint32_t h[512];
  __shared__ uint32_t pick[3];
  if (st->bad || !fs->on)
    return;
  const uint32_t m = fs->ncand;
  uint32_t krem = k - fs->above;
  uint32_t prefix = fs->bucket << HSHIFT, mask = ~0u << HSHIFT, cnt = 0;
  for (int p = 0; p < 2; p++) {
    const unsigned shift = p == 0 ? 8 : 0, nb = p == 0 ? 512 : 256, dm = nb - 1;
    for (unsigned b = threadIdx.x; b < 512; b += HBLOCK)
      h[b] = 0;
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < m; i += HBLOCK) {
      uint32_t key = ckey[i];
      if ((key & mask) == prefix)
        atomicAdd(&h[(key >> shift) & dm], 1u);
    }
    __syncthreads();
    pick_bin<HBLOCK, 1, true>(h, nb, krem, pick);
    __syncthreads();
    prefix |= pick[0] << shift;
    mask |= dm << shift;
    krem -= pick[1];
    cnt = pick[2];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    st->T = prefix;
    st->eq_total = cnt;
    st->rem = krem;
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

/* A selector's scratch.  Everything from st to the look-back flags is
 * carved contiguously and zeroed by one init_scratch launch. */
struct Scratch {
  SelState *st;
  uint32_t *hist;     /* 3 passes x BINS */
  uint32_t *done;     /* 3 completion counters of the radix passes */
  Lookback lb;        /* over the tiles of x */
  uint32_t *zero_from;
  size_t zero_words;
};

Lookback carve_lookback(Carver &cv, size_t tiles)
{
  Lookback lb;
  lb.ticket = cv.take<uint32_t>(1);
  lb.flag = cv.take<uint32_t>(tiles);
  lb.agg = cv.take<uint64_t>(tiles);   /* written before read: not zeroed */
  lb.inc = cv.take<uint64_t>(tiles);
  return lb;
}

/* The zeroed span runs from s.st to the end of what has been carved so
 * far (close_zero): agg/inc inside it are zeroed too, which is harmless. */
Scratch carve(Carver &cv, size_t n)
{
  Scratch s;
  size_t from = (cv.off + 255) & ~(size_t) 255;
  s.st = cv.take<SelState>(1);
  s.hist = cv.take<uint32_t>(3 * BINS);
  s.done = cv.take<uint32_t>(3);
  s.lb = carve_lookback(cv, tiles_of(n));
  s.zero_from = reinterpret_cast<uint32_t *>(s.st);
  s.zero_words = from;   /* offset for now; close_zero turns it into words */
  return s;
}

void close_zero(Scratch &s, const Carver &cv)
{
  s.zero_words = (cv.off - s.zero_words + 3) / 4;
}

int launch_init(const Scratch &s, uint32_t k, uint32_t radix_off, cudaStream_t stream)
{
  init_scratch<<<grid_for(s.zero_words, BLOCK * 4, 1024), BLOCK, 0, stream>>>(
      s.zero_from, s.zero_words, k, radix_off);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
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

/* The three radix passes over src from the state's prefix, mask and krem
 * (they do nothing while st->radix_off is set).  The histograms and the
 * completion counters were zeroed by launch_init; each pass's last block
 * picks its digit. */
int radix_passes(const Scratch &s, const float *src, size_t n, unsigned grid, cudaStream_t stream)
{
  histogram<0><<<grid, BLOCK, 0, stream>>>(src, n, s.st, s.hist, s.done);
  GC_CUDA_LAUNCHED();
  histogram<1><<<grid, BLOCK, 0, stream>>>(src, n, s.st, s.hist + BINS, s.done + 1);
  GC_CUDA_LAUNCHED();
  histogram<2><<<grid, BLOCK, 0, stream>>>(src, n, s.st, s.hist + 2 * BINS, s.done + 2);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

/* Blocks of a look-back compaction: at most what stays resident (every
 * block loops over tiles), and never more than the tiles. */
unsigned compact_grid(size_t n)
{
  return grid_for(n, TILE, 8 * sm_count());
}

template <class Cls, bool ZERO, bool CHECK = false>
int compact(const Scratch &s, const Lookback &lb, Source src, size_t max_len, Cls cls,
            int ties, size_t limit, uint32_t *d_idx, float *d_val, float *zero,
            uint64_t *total, cudaStream_t stream)
{
  compact_tiles<Cls, ZERO, CHECK><<<compact_grid(max_len), BLOCK, 0, stream>>>(
      src, cls, ties, limit, s.st, lb, d_idx, d_val, zero, total);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

Source x_source(const float *x, size_t n)
{
  Source src = {x, n, nullptr, nullptr, nullptr, ALWAYS};
  return src;
}

/* Candidates kept at most: the fast path's scratch is k + cap entries of L
 * and cap candidate keys. */
size_t cand_cap(size_t n)
{
  size_t c = n / 256 > (size_t) CAND_MIN ? n / 256 : (size_t) CAND_MIN;
  return c < n ? c : n;
}

int topk_common(void *d_tmp, size_t *tmp_bytes, const float *d_x, float *d_acc,
                const float *d_g, float alpha, size_t n, size_t k, int ties,
                uint32_t *d_idx, float *d_val, gc_cuda_info *d_info,
                cudaStream_t stream)
{
  GC_TRY(check_nk(n, k, "top-k"));
  if (ties != GC_TIES_LOW && ties != GC_TIES_HIGH)
    GC_ERROR("top-k: ties must be GC_TIES_LOW or GC_TIES_HIGH", GC_EINVAL);
  const size_t ccap = cand_cap(n), lcap = k + ccap < n ? k + ccap : n;
  Carver cv(d_tmp);
  Scratch s = carve(cv, n);
  FastState *fs = cv.take<FastState>(1);
  uint32_t *bhist = cv.take<uint32_t>(HB);
  uint32_t *bdone = cv.take<uint32_t>(1);
  Lookback lbl = carve_lookback(cv, tiles_of(n));   /* the final compaction */
  close_zero(s, cv);
  uint32_t *ckey = cv.take<uint32_t>(ccap);
  uint32_t *lidx = cv.take<uint32_t>(lcap);
  float *lval = cv.take<float>(lcap);
  bool sizing;
  GC_TRY(finish_carve(cv, tmp_bytes, "top-k", &sizing));
  if (sizing)
    return GC_SUCCESS;
  const float *src = d_acc ? d_acc : d_x;
  GC_TRY(launch_init(s, (uint32_t) k, 1, stream));
  const size_t hshared = HB * sizeof(uint32_t);
  const unsigned hgrid = grid_for(n, HBLOCK * 4, 2 * sm_count());
  if (d_acc) {
    GC_CUDA_TRY(cudaFuncSetAttribute(bucket_hist<true>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int) hshared));
    bucket_hist<true><<<hgrid, HBLOCK, hshared, stream>>>(nullptr, d_acc, d_g, alpha, n,
                                                         (uint32_t) k, (uint32_t) ccap, s.st, fs,
                                                         bhist, bdone);
  } else {
    GC_CUDA_TRY(cudaFuncSetAttribute(bucket_hist<false>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int) hshared));
    bucket_hist<false><<<hgrid, HBLOCK, hshared, stream>>>(d_x, nullptr, nullptr, 0.f, n,
                                                          (uint32_t) k, (uint32_t) ccap, s.st, fs,
                                                          bhist, bdone);
  }
  GC_CUDA_LAUNCHED();
  /* (2) bucket >= b into L, in index order; candidates appended */
  Source fast = {src, n, nullptr, nullptr, fs, IF_FAST};
  BucketClass bc = {fs, ckey, &fs->ncand};
  GC_TRY((compact<BucketClass, false>(s, s.lb, fast, n, bc, GC_TIES_LOW, lcap, lidx, lval,
                                      nullptr, &fs->lsize, stream)));
  /* (3) */
  resolve_cands<<<1, HBLOCK, 0, stream>>>(s.st, fs, ckey, (uint32_t) k);
  GC_CUDA_LAUNCHED();
  /* the fallback: exact radix select over x (returns at once when off) */
  GC_TRY(radix_passes(s, src, n, grid_for(n, BLOCK * 8, HIST_CAP), stream));
  /* (4) the compaction of L, or of x after the fallback */
  Source fin = {src, n, lidx, lval, fs, IF_FAST_ELSE_X};
  if (d_acc)
    GC_TRY((compact<TopkClass, true>(s, lbl, fin, n, TopkClass(), ties, k, d_idx, d_val, d_acc,
                                     &s.st->total, stream)));
  else
    GC_TRY((compact<TopkClass, false>(s, lbl, fin, n, TopkClass(), ties, k, d_idx, d_val,
                                      nullptr, &s.st->total, stream)));
  finish_topk<<<1, 1, 0, stream>>>(s.st, (uint32_t) k, d_info);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}

/* ---- Gaussian-k --------------------------------------------------------
 * mean and std from the shifted sums S1 = sum (x_i - x_0), S2 = sum
 * (x_i - x_0)^2 in sparse_source.c's order (gauss_partials below), so the
 * threshold is the CPU's to the last bit; the threshold loop runs on the
 * device: each round counts |x| > thr and a one-thread kernel adjusts thr
 * or marks the loop done, so the host never waits.  Rounds after `done`
 * return at once. */
__global__ void gauss_init(SelState *st, const float *x, const double *sums, size_t n,
                           double absz)
{
  /* sparse_source.c: mu = c0 + S1/n, var = (S2 - S1^2/n)/(n-1); spelled
   * with _rn so that nothing is fused */
  double S1 = sums[0], S2 = sums[1], c0 = x[0];
  double mu = __dadd_rn(c0, __ddiv_rn(S1, (double) n));
  double var = n > 1 ? __ddiv_rn(__dsub_rn(S2, __ddiv_rn(__dmul_rn(S1, S1), (double) n)),
                                 (double) (n - 1))
                     : 0.0;
  double sigma = sqrt(var > 0 ? var : 0.0);
  st->thr = __dadd_rn(mu, __dmul_rn(absz, sigma));
  st->thr_sel = st->thr;
  st->done = 0;
  st->loops = 0;
  st->count = 0;
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
 * sparse_source.c forms them: 16 float lanes, lane j adding x[i+j] - c0 and
 * its square (product and sum rounded apart: no FMA) for i = lo, lo+16, ...
 * while a whole group of 16 fits; lane 0 then takes the tail in index
 * order; the partial is ((0.0 + a[0]) + a[1]) + ... + a[15] in double.
 * Here lane j of a block is thread j of a half-warp, which folds the lanes
 * in that order through shuffles.  NaN/Inf in x sets st->bad. */
enum { GAUSS_LANES = 16 };

__global__ void __launch_bounds__(BLOCK)
gauss_partials(const float *__restrict__ x, size_t n, size_t nblk, double *part, SelState *st)
{
  const size_t t = (size_t) blockIdx.x * BLOCK + threadIdx.x, b = t / GAUSS_LANES;
  const unsigned j = (unsigned) (t % GAUSS_LANES);
  const float c0 = x[0];
  float a1 = 0.0f, a2 = 0.0f;
  int bad = 0;
  if (b < nblk) {
    size_t lo = b * SUM_BLOCK, hi = n - lo < SUM_BLOCK ? n : lo + SUM_BLOCK;
    size_t full = lo + (hi - lo) / GAUSS_LANES * GAUSS_LANES;
    for (size_t i = lo + j; i < full; i += GAUSS_LANES) {
      float v = x[i], d = __fsub_rn(v, c0);
      bad |= nonfinite(v);
      a1 = __fadd_rn(a1, d);
      a2 = __fadd_rn(a2, __fmul_rn(d, d));
    }
    if (j == 0)
      for (size_t i = full; i < hi; i++) {
        float v = x[i], d = __fsub_rn(v, c0);
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

/* ---- DGC (theory.md §2.6, sparse_source.c FN(dgc)) ------------------------
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

/* One adaptation round of sparse_source.c FN(dgc), same tests in the same
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
 * sparse.c draws, for c = 0..k-1 and j = n-k+c, t_c = below(u_c, j+1) and
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

/* val[c] = x[idx[c]], and NaN/Inf among these k values sets st->bad: like
 * sparse_source.c's check_finite_at, random-K reads and checks only the
 * entries it sends. */
__global__ void __launch_bounds__(BLOCK)
gather_values(const float *x, const uint32_t *idx, size_t k, SelState *st, float *val)
{
  int bad = 0;
  for (size_t c = (size_t) blockIdx.x * BLOCK + threadIdx.x; c < k;
       c += (size_t) gridDim.x * BLOCK) {
    float v = x[idx[c]];
    bad |= nonfinite(v);
    val[c] = v;
  }
  flag_block_nonfinite(bad, &st->bad);
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
  close_zero(s, cv);
  bool sizing;
  GC_TRY(finish_carve(cv, tmp_bytes, "threshold", &sizing));
  if (sizing)
    return GC_SUCCESS;
  GC_TRY(launch_init(s, 0, 1, stream));
  AboveClass cls = {v, false};
  /* the compaction flags NaN/Inf: one read of x */
  GC_TRY((compact<AboveClass, false, true>(s, s.lb, x_source(d_x, n), n, cls, GC_TIES_LOW, n,
                                            d_idx, d_val, nullptr, &s.st->total, stream)));
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
  close_zero(s, cv);
  double *sums = cv.take<double>(2);
  double *part = cv.take<double>(2 * nblk);
  double *spare = cv.take<double>(2 * tree_spare(nblk));
  bool sizing;
  GC_TRY(finish_carve(cv, tmp_bytes, "gaussk", &sizing));
  if (sizing)
    return GC_SUCCESS;
  GC_TRY(launch_init(s, 0, 1, stream));
  /* one thread per (block, lane): nblk * 16 <= 2^26 threads for n < 2^32 */
  unsigned pgrid = (unsigned) ((nblk * GAUSS_LANES + BLOCK - 1) / BLOCK);
  gauss_partials<<<pgrid, BLOCK, 0, stream>>>(d_x, n, nblk, part, s.st);
  GC_CUDA_LAUNCHED();
  GC_TRY(pairwise_total<2>(part, spare, nblk, sums, stream));
  /* |z| exactly as sparse.c computes it: GSL on the host, from the density
   * the caller passes (sparse.c: params.density unless params.k is set) */
  double absz = fabs(gsl_cdf_ugaussian_Pinv(rho / 2));
  gauss_init<<<1, 1, 0, stream>>>(s.st, d_x, sums, n, absz);
  GC_CUDA_LAUNCHED();
  unsigned grid = grid_for(n, BLOCK * 8, HIST_CAP);
  for (unsigned r = 0; r < loops; r++) {
    count_above<<<grid, BLOCK, 0, stream>>>(d_x, n, s.st);
    GC_CUDA_LAUNCHED();
    gauss_adjust<<<1, 1, 0, stream>>>(s.st, (uint32_t) k);
    GC_CUDA_LAUNCHED();
  }
  AboveClass cls = {0.0, true};
  GC_TRY((compact<AboveClass, false>(s, s.lb, x_source(d_x, n), n, cls, GC_TIES_LOW, n, d_idx,
                                      d_val, nullptr, &s.st->total, stream)));
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
  close_zero(s, cv);
  Scratch sample = carve(cv, 0);   /* the radix select over the samples */
  close_zero(sample, cv);
  float *smp = cv.take<float>(ds.m);
  bool sizing;
  GC_TRY(finish_carve(cv, tmp_bytes, "dgc", &sizing));
  if (sizing)
    return GC_SUCCESS;
  dgc_gather<<<grid_for(ds.m, BLOCK, 4096), BLOCK, 0, stream>>>(d_x, ds.start, ds.stride, ds.m,
                                                                 smp);
  GC_CUDA_LAUNCHED();
  GC_TRY(launch_init(sample, (uint32_t) ds.top, 0, stream));
  GC_TRY(radix_passes(sample, smp, ds.m, grid_for(ds.m, BLOCK * 8, HIST_CAP), stream));
  GC_TRY(launch_init(s, 0, 1, stream));
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
    GC_TRY(radix_passes(s, d_x, n, grid_for(n, BLOCK * 8, HIST_CAP), stream));
  }
  GC_TRY((compact<DgcClass, false>(s, s.lb, x_source(d_x, n), n, DgcClass(), ties, k, d_idx,
                                    d_val, nullptr, &s.st->total, stream)));
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
  /* x is read at the k picks only.  The ascending order comes from a bitmap
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
  init_scratch<<<1, BLOCK, 0, stream>>>(reinterpret_cast<uint32_t *>(st),
                                       sizeof(SelState) / 4, 0, 0);
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
  gather_values<<<grid, BLOCK, 0, stream>>>(d_x, d_idx, k, st, d_val);
  GC_CUDA_LAUNCHED();
  finish_count<<<1, 1, 0, stream>>>(st, (uint32_t) k, d_info);
  GC_CUDA_LAUNCHED();
  return GC_SUCCESS;
}
