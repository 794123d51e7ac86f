/* gc_data.h -- image classification data sets (MNIST, Fashion-MNIST,
 * CIFAR-10) and their partition over P workers (theory.md section 6).
 *
 * Loaders read IDX files (raw or gzip; zlib reads both) and the CIFAR-10
 * binary format (1 label byte + 3072 pixel bytes per record).  They check
 * magic numbers, dimensions, counts and file sizes, and every failure names
 * the file and the problem (GC_EIO: cannot open/read, GC_EFORMAT: malformed).
 * Pixels are scaled to [0,1] and normalised per channel as in the reference
 * code (MNIST/FMNIST mean 0.1307, std 0.3081; CIFAR per-channel). */
#ifndef GC_DATA_H
#define GC_DATA_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)   /* the API libgradcomp.so exports */
#endif

typedef struct gc_dataset {
  size_t n;                 /* examples                                  */
  size_t c, h, w;           /* channels, height, width                   */
  size_t dim;               /* c*h*w                                     */
  size_t classes;           /* 10 for all three sets                     */
  float *x;                 /* n*dim normalised pixels, CHW per example  */
  uint8_t *y;               /* n labels in [0, classes)                  */
} gc_dataset;

/* Read one IDX file of unsigned bytes (type 0x08) with `ndim` dimensions.
 * dims [out] ndim sizes; *data [out] malloc'd product(dims) bytes.
 * Returns GC_SUCCESS, GC_EIO, GC_EFORMAT (magic, type, ndim, short or
 * trailing data) or GC_ENOMEM. */
int gc_idx_read(const char *path, size_t ndim, size_t *dims, uint8_t **data);

/* Images (N x 28 x 28) and labels (N) IDX files as one data set; the counts
 * must agree and labels must be < 10.  expect_n: required N (0 = any). */
int gc_data_load_idx(const char *images, const char *labels, size_t expect_n,
                     gc_dataset *ds);

/* CIFAR-10 binary files concatenated.  per_file: records each file must
 * hold (10000 for the real set; 0 = any positive multiple of 3073 bytes). */
int gc_data_load_cifar10(const char *const *files, size_t nfiles,
                         size_t per_file, gc_dataset *ds);

/* The named set ("mnist", "fmnist", "cifar10"), train or test split, from
 * dir/<name>/ (see gc_data_dir).  Counts are the official ones.
 * Returns the loader's codes, GC_EINVAL for an unknown name. */
int gc_data_load(const char *dir, const char *name, int train, gc_dataset *ds);

/* The labels alone of the named set (every record, checked as by
 * gc_data_load): *y [out] malloc'd, *n [out] their count. */
int gc_data_load_labels(const char *dir, const char *name, int train, uint8_t **y,
                        size_t *n);

/* Only the records ids[0..m) of the named set, in that order, as
 * gc_data_load would give them (a worker process's shard): ds->n = m.  The
 * images of the other records are never held: IDX files are streamed past
 * in blocks, CIFAR-10 records are skipped by seeking; with m = 0 no image
 * file is read.  labels [in]: the split's nlabels labels as
 * gc_data_load_labels gave them (not checked again), or NULL to have
 * every label read and checked here (nlabels is then ignored).  GC_EINVAL for an id outside the set or given twice, or
 * nlabels other than the split's record count. */
int gc_data_load_records(const char *dir, const char *name, int train,
                         const uint8_t *labels, size_t nlabels,
                         const uint32_t *ids, size_t m, gc_dataset *ds);

/* The data folder: $GRADCOMP_DATA if set, else `fallback` ("data"). */
const char *gc_data_dir(const char *fallback);

void gc_dataset_free(gc_dataset *ds);   /* safe on a zeroed struct */

/* Keep only the first m examples (m <= n); no reallocation. */
void gc_dataset_truncate(gc_dataset *ds, size_t m);

/* Partitions: idx [out] n example indices, off [out] P+1 offsets; worker p
 * owns idx[off[p] .. off[p+1]).  Shards have equal size floor(n/P) (IID) or
 * 2*floor(n/(2P)) (non-IID); left-over examples are dropped, as in the
 * reference `mnist_iid`/`mnist_noniid`.  Seeded by gc_rng (stream 0x9a7),
 * so the partition is a pure function of (labels, P, seed).
 * Returns GC_SUCCESS or GC_EINVAL (P == 0 or P > n, or 2P > n). */
int gc_data_partition_iid(size_t n, size_t P, uint64_t seed, uint32_t *idx,
                          size_t *off);
/* Non-IID: sort by label, cut into 2P shards, give each worker 2 random
 * shards (so most workers see only 2 labels). */
int gc_data_partition_noniid(const uint8_t *y, size_t n, size_t P,
                             uint64_t seed, uint32_t *idx, size_t *off);

/* In-place Fisher-Yates shuffle of a[0..m) keyed by (seed, stream, step):
 * the per-epoch order of a worker's shard. */
void gc_data_shuffle(uint32_t *a, size_t m, uint64_t seed, uint32_t stream,
                     uint32_t step);

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_DATA_H */
