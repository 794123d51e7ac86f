/* data.c -- IDX and CIFAR-10 loaders, partitions over workers. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "gc_data.h"
#include "gc_errno.h"
#include "gc_rng.h"

const char *gc_data_dir(const char *fallback)
{
  const char *e = getenv("GRADCOMP_DATA");
  return (e && *e) ? e : fallback;
}

void gc_dataset_free(gc_dataset *ds)
{
  if (!ds)
    return;
  free(ds->x);
  free(ds->y);
  memset(ds, 0, sizeof *ds);
}

void gc_dataset_truncate(gc_dataset *ds, size_t m)
{
  if (m < ds->n)
    ds->n = m;
}

/* gzread takes unsigned int lengths: read big blocks in pieces. */
static int read_all(gzFile f, uint8_t *buf, size_t len)
{
  while (len > 0) {
    unsigned chunk = len > (1u << 30) ? (1u << 30) : (unsigned) len;
    int got = gzread(f, buf, chunk);
    if (got <= 0)
      return -1;
    buf += got;
    len -= (size_t) got;
  }
  return 0;
}

/* The largest IDX payload accepted: the header's dimensions are only a
 * claim, and MNIST-like sets are tens of MB. */
#define IDX_MAX_BYTES ((size_t) 1 << 31)

/* Read exactly `total` payload bytes.  The buffer grows with the data that
 * actually arrives, so a header that promises more than the file holds
 * costs no more memory than the file itself (a gzip stream has no size to
 * check up front); size_known: the file size was checked, take it at once. */
static int read_payload(gzFile f, const char *path, size_t total, int size_known,
                        uint8_t **out)
{
  size_t cap = size_known || total < ((size_t) 1 << 20) ? total : ((size_t) 1 << 20);
  size_t got = 0;
  uint8_t *buf = malloc(cap);
  if (!buf)
    GC_ERRORF(GC_ENOMEM, "%s: cannot allocate %zu bytes", path, cap);
  while (got < total) {
    if (got == cap) {
      size_t ncap = cap > total / 2 ? total : 2 * cap;
      uint8_t *nb = realloc(buf, ncap);
      if (!nb) {
        free(buf);
        GC_ERRORF(GC_ENOMEM, "%s: cannot allocate %zu bytes", path, ncap);
      }
      buf = nb;
      cap = ncap;
    }
    size_t want = cap - got;
    int n = gzread(f, buf + got, want > (1u << 30) ? (1u << 30) : (unsigned) want);
    if (n <= 0) {
      free(buf);
      GC_ERRORF(GC_EFORMAT, "%s: truncated: the header promises %zu data bytes,"
                " the file holds %zu", path, total, got);
    }
    got += (size_t) n;
  }
  *out = buf;
  return GC_SUCCESS;
}

/* Open an IDX file of unsigned bytes with `ndim` dimensions and read its
 * header: dims [out], *total [out] their product, *size_known [out] 1 when
 * the file size was checked against it (uncompressed files).  On success
 * *out is positioned at the first data byte. */
static int idx_open(const char *path, size_t ndim, size_t *dims, size_t *total_out,
                    int *size_known_out, gzFile *out)
{
  gzFile f = gzopen(path, "rb");
  if (!f)
    GC_ERRORF(GC_EIO, "%s: cannot open: %s", path, strerror(errno));
  uint8_t head[4 + 4 * 4];
  if (ndim < 1 || ndim > 4) {
    gzclose(f);
    GC_ERRORF(GC_EINVAL, "%s: unsupported IDX rank %zu", path, ndim);
  }
  if (read_all(f, head, 4) != 0) {
    gzclose(f);
    GC_ERRORF(GC_EFORMAT, "%s: too short for an IDX header", path);
  }
  if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] != ndim) {
    gzclose(f);
    GC_ERRORF(GC_EFORMAT,
              "%s: bad IDX magic %02x %02x %02x %02x (expected 00 00 08 %02zx:"
              " unsigned bytes, %zu dimensions)", path, head[0], head[1],
              head[2], head[3], ndim, ndim);
  }
  if (read_all(f, head + 4, 4 * ndim) != 0) {
    gzclose(f);
    GC_ERRORF(GC_EFORMAT, "%s: truncated IDX header", path);
  }
  size_t total = 1;
  for (size_t i = 0; i < ndim; i++) {
    const uint8_t *b = head + 4 + 4 * i;
    dims[i] = ((size_t) b[0] << 24) | ((size_t) b[1] << 16) |
              ((size_t) b[2] << 8) | (size_t) b[3];
    if (dims[i] == 0) {
      gzclose(f);
      GC_ERRORF(GC_EFORMAT, "%s: dimension %zu is zero", path, i);
    }
    if (total > IDX_MAX_BYTES / dims[i]) {   /* also keeps the product exact */
      gzclose(f);
      GC_ERRORF(GC_EFORMAT, "%s: implausible IDX size: dimensions multiply to"
                " more than %zu bytes", path, IDX_MAX_BYTES);
    }
    total *= dims[i];
  }
  /* An uncompressed file has a size to compare with before allocating. */
  int size_known = 0;
  struct stat sb;
  if (gzdirect(f) && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
    size_t head_len = 4 + 4 * ndim;
    if ((size_t) sb.st_size != head_len + total) {
      gzclose(f);
      GC_ERRORF(GC_EFORMAT, "%s: %lld bytes, but the header promises %zu data"
                " bytes after a %zu-byte header (%s)", path,
                (long long) sb.st_size, total, head_len,
                (size_t) sb.st_size < head_len + total ? "truncated"
                                                       : "trailing bytes");
    }
    size_known = 1;
  }
  *total_out = total;
  *size_known_out = size_known;
  *out = f;
  return GC_SUCCESS;
}

/* After the payload: a gzip stream's size is only known at its end. */
static int idx_close_at_end(gzFile f, const char *path, size_t total)
{
  uint8_t extra;
  int trailing = gzread(f, &extra, 1) != 0;
  gzclose(f);
  if (trailing)
    GC_ERRORF(GC_EFORMAT, "%s: trailing bytes after %zu data bytes", path, total);
  return GC_SUCCESS;
}

int gc_idx_read(const char *path, size_t ndim, size_t *dims, uint8_t **data)
{
  *data = NULL;
  gzFile f;
  size_t total;
  int size_known;
  GC_TRY(idx_open(path, ndim, dims, &total, &size_known, &f));
  uint8_t *buf;
  int st = read_payload(f, path, total, size_known, &buf);
  if (st) {
    gzclose(f);
    return st;
  }
  if ((st = idx_close_at_end(f, path, total)) != GC_SUCCESS) {
    free(buf);
    return st;
  }
  *data = buf;
  return GC_SUCCESS;
}

/* The per-channel normalisations of the reference experiments: MNIST's
 * (also used for Fashion-MNIST) and CIFAR-10's. */
static const float mnist_mean = 0.1307f, mnist_sd = 0.3081f;
static const float cifar_mean[3] = { 0.4914f, 0.4822f, 0.4465f };
static const float cifar_sd[3] = { 0.2023f, 0.1994f, 0.2010f };

static void normalise(float *x, const uint8_t *px, size_t count, float mean,
                      float sd)
{
  for (size_t i = 0; i < count; i++)
    x[i] = ((float) px[i] * (1.0f / 255.0f) - mean) / sd;
}

/* The labels of an IDX file (expect_n of them unless 0), each checked to
 * be a class 0..9. */
static int idx_labels(const char *path, size_t expect_n, uint8_t **y, size_t *n)
{
  size_t dl[1];
  GC_TRY(gc_idx_read(path, 1, dl, y));
  if (expect_n && dl[0] != expect_n) {
    free(*y);
    *y = NULL;
    GC_ERRORF(GC_EFORMAT, "%s: %zu labels, expected %zu", path, dl[0], expect_n);
  }
  for (size_t i = 0; i < dl[0]; i++)
    if ((*y)[i] >= 10) {
      unsigned bad = (*y)[i];
      free(*y);
      *y = NULL;
      GC_ERRORF(GC_EFORMAT, "%s: label %u at record %zu is not in 0..9", path, bad, i);
    }
  *n = dl[0];
  return GC_SUCCESS;
}

int gc_data_load_idx(const char *images, const char *labels, size_t expect_n,
                     gc_dataset *ds)
{
  memset(ds, 0, sizeof *ds);
  size_t di[3], dl[1];
  uint8_t *px = NULL, *lab = NULL;
  GC_TRY(gc_idx_read(images, 3, di, &px));
  int st = idx_labels(labels, 0, &lab, &dl[0]);
  if (st) {
    free(px);
    return st;
  }
  if (di[1] != 28 || di[2] != 28) {
    free(px); free(lab);
    GC_ERRORF(GC_EFORMAT, "%s: images are %zux%zu, expected 28x28", images,
              di[1], di[2]);
  }
  if (di[0] != dl[0]) {
    free(px); free(lab);
    GC_ERRORF(GC_EFORMAT, "%s holds %zu images but %s holds %zu labels",
              images, di[0], labels, dl[0]);
  }
  if (expect_n && di[0] != expect_n) {
    free(px); free(lab);
    GC_ERRORF(GC_EFORMAT, "%s: %zu images, expected %zu", images, di[0],
              expect_n);
  }
  size_t n = di[0], dim = 28 * 28;
  ds->x = malloc(n * dim * sizeof *ds->x);
  if (!ds->x) {
    free(px); free(lab);
    GC_ERROR("cannot allocate the images", GC_ENOMEM);
  }
  normalise(ds->x, px, n * dim, mnist_mean, mnist_sd);
  free(px);
  ds->y = lab;
  ds->n = n;
  ds->c = 1; ds->h = 28; ds->w = 28; ds->dim = dim; ds->classes = 10;
  return GC_SUCCESS;
}

enum { CIFAR_REC = 1 + 3072 };

/* The record counts of CIFAR-10 files from their sizes. */
static int cifar_counts(const char *const *files, size_t nfiles, size_t per_file,
                        size_t *counts, size_t *n)
{
  *n = 0;
  if (nfiles == 0 || nfiles > 64)
    GC_ERROR("CIFAR-10: between 1 and 64 files", GC_EINVAL);
  for (size_t f = 0; f < nfiles; f++) {
    FILE *fp = fopen(files[f], "rb");
    if (!fp)
      GC_ERRORF(GC_EIO, "%s: cannot open: %s", files[f], strerror(errno));
    if (fseek(fp, 0, SEEK_END) != 0) {
      fclose(fp);
      GC_ERRORF(GC_EIO, "%s: cannot seek", files[f]);
    }
    long sz = ftell(fp);
    fclose(fp);
    if (sz <= 0 || sz % CIFAR_REC != 0)
      GC_ERRORF(GC_EFORMAT, "%s: %ld bytes is not a positive multiple of the"
                " %d-byte CIFAR-10 record (truncated?)", files[f], sz, CIFAR_REC);
    counts[f] = (size_t) sz / CIFAR_REC;
    if (per_file && counts[f] != per_file)
      GC_ERRORF(GC_EFORMAT, "%s: %zu records, expected %zu", files[f],
                counts[f], per_file);
    *n += counts[f];
  }
  return GC_SUCCESS;
}

int gc_data_load_cifar10(const char *const *files, size_t nfiles,
                         size_t per_file, gc_dataset *ds)
{
  memset(ds, 0, sizeof *ds);
  size_t counts[64], n;
  GC_TRY(cifar_counts(files, nfiles, per_file, counts, &n));   /* one allocation then */
  ds->x = malloc(n * 3072 * sizeof *ds->x);
  ds->y = malloc(n);
  uint8_t *rec = malloc(CIFAR_REC);
  if (!ds->x || !ds->y || !rec) {
    free(rec);
    gc_dataset_free(ds);
    GC_ERROR("cannot allocate CIFAR-10", GC_ENOMEM);
  }
  size_t at = 0;
  for (size_t f = 0; f < nfiles; f++) {
    FILE *fp = fopen(files[f], "rb");
    if (!fp) {
      free(rec);
      gc_dataset_free(ds);
      GC_ERRORF(GC_EIO, "%s: cannot open: %s", files[f], strerror(errno));
    }
    for (size_t r = 0; r < counts[f]; r++, at++) {
      int short_read = fread(rec, 1, CIFAR_REC, fp) != CIFAR_REC;
      if (short_read || rec[0] >= 10) {
        unsigned lab = rec[0];
        fclose(fp);
        free(rec);
        gc_dataset_free(ds);
        if (short_read)
          GC_ERRORF(GC_EIO, "%s: read failed at record %zu", files[f], r);
        GC_ERRORF(GC_EFORMAT, "%s: label %u at record %zu is not in 0..9",
                  files[f], lab, r);
      }
      ds->y[at] = rec[0];
      for (int ch = 0; ch < 3; ch++)
        normalise(ds->x + at * 3072 + ch * 1024, rec + 1 + ch * 1024, 1024,
                  cifar_mean[ch], cifar_sd[ch]);
    }
    fclose(fp);
  }
  free(rec);
  ds->n = n;
  ds->c = 3; ds->h = 32; ds->w = 32; ds->dim = 3072; ds->classes = 10;
  return GC_SUCCESS;
}

/* path of dir/sub/name, trying the gzip variant when the raw file is absent */
static void find_file(char *out, size_t cap, const char *dir, const char *sub,
                      const char *name)
{
  snprintf(out, cap, "%s/%s/%s", dir, sub, name);
  FILE *f = fopen(out, "rb");
  if (f) {
    fclose(f);
    return;
  }
  snprintf(out, cap, "%s/%s/%s.gz", dir, sub, name);
  f = fopen(out, "rb");
  if (f) {
    fclose(f);
    return;
  }
  snprintf(out, cap, "%s/%s/%s", dir, sub, name);   /* name the raw one */
}

/* The files of a named set and what they must hold. */
typedef struct set_files {
  int cifar;
  size_t count;             /* records of the split (IDX) or of each file */
  size_t records;           /* records of the split                       */
  size_t nfiles;            /* IDX: images, labels; CIFAR-10: 5 or 1      */
  char path[5][4096];
  const char *p[5];
} set_files;

static int set_files_of(const char *dir, const char *name, int train, set_files *sf)
{
  memset(sf, 0, sizeof *sf);
  if (!strcmp(name, "mnist") || !strcmp(name, "fmnist")) {
    find_file(sf->path[0], sizeof sf->path[0], dir, name,
              train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte");
    find_file(sf->path[1], sizeof sf->path[1], dir, name,
              train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte");
    sf->nfiles = 2;
    sf->count = train ? 60000 : 10000;
  } else if (!strcmp(name, "cifar10")) {
    sf->cifar = 1;
    sf->nfiles = train ? 5 : 1;
    sf->count = 10000;
    for (size_t i = 0; i < sf->nfiles; i++) {
      char base[64];
      if (train)
        snprintf(base, sizeof base, "data_batch_%zu.bin", i + 1);
      else
        snprintf(base, sizeof base, "test_batch.bin");
      snprintf(sf->path[i], sizeof sf->path[i], "%s/cifar10/cifar-10-batches-bin/%s",
               dir, base);
      FILE *f = fopen(sf->path[i], "rb");
      if (f)
        fclose(f);
      else
        snprintf(sf->path[i], sizeof sf->path[i], "%s/cifar10/%s", dir, base);
    }
  } else {
    GC_ERRORF(GC_EINVAL, "unknown data set '%s' (mnist, fmnist, cifar10)", name);
  }
  for (size_t i = 0; i < sf->nfiles; i++)
    sf->p[i] = sf->path[i];
  sf->records = sf->cifar ? sf->nfiles * sf->count : sf->count;
  return GC_SUCCESS;
}

int gc_data_load(const char *dir, const char *name, int train, gc_dataset *ds)
{
  memset(ds, 0, sizeof *ds);
  set_files sf;
  GC_TRY(set_files_of(dir, name, train, &sf));
  if (sf.cifar)
    return gc_data_load_cifar10(sf.p, sf.nfiles, sf.count, ds);
  return gc_data_load_idx(sf.p[0], sf.p[1], sf.count, ds);
}

/* ---- one process's records (a worker rank's shard) -----------------------
 * The labels of every record are read and checked (they are small, and a
 * non-IID partition needs them), unless the caller, who read them for the
 * partition, hands them over; of the images only the kept records are
 * held: IDX images are streamed past in blocks, CIFAR-10 records that are
 * not kept are skipped by seeking. */

/* Each record's label byte, read by seeking past the pixels. */
static int cifar_labels(const set_files *sf, uint8_t **y, size_t *n)
{
  size_t counts[5];
  GC_TRY(cifar_counts(sf->p, sf->nfiles, sf->count, counts, n));
  if (!(*y = malloc(*n)))
    GC_ERROR("cannot allocate the CIFAR-10 labels", GC_ENOMEM);
  size_t at = 0;
  for (size_t f = 0; f < sf->nfiles; f++) {
    FILE *fp = fopen(sf->p[f], "rb");
    if (!fp) {
      free(*y);
      *y = NULL;
      GC_ERRORF(GC_EIO, "%s: cannot open: %s", sf->p[f], strerror(errno));
    }
    for (size_t r = 0; r < counts[f]; r++, at++) {
      int c = fseek(fp, (long) (r * CIFAR_REC), SEEK_SET) == 0 ? fgetc(fp) : EOF;
      if (c == EOF || c >= 10) {
        fclose(fp);
        free(*y);
        *y = NULL;
        if (c == EOF)
          GC_ERRORF(GC_EIO, "%s: read failed at record %zu", sf->p[f], r);
        GC_ERRORF(GC_EFORMAT, "%s: label %d at record %zu is not in 0..9",
                  sf->p[f], c, r);
      }
      (*y)[at] = (uint8_t) c;
    }
    fclose(fp);
  }
  return GC_SUCCESS;
}

int gc_data_load_labels(const char *dir, const char *name, int train, uint8_t **y,
                        size_t *n)
{
  *y = NULL;
  *n = 0;
  set_files sf;
  GC_TRY(set_files_of(dir, name, train, &sf));
  if (sf.cifar)
    return cifar_labels(&sf, y, n);
  return idx_labels(sf.p[1], sf.count, y, n);
}

enum { NO_SLOT = UINT32_MAX, IDX_BLOCK = 256 };

/* slot[i]: the position of record i among ids[0..m), or NO_SLOT. */
static int slots_of(const uint32_t *ids, size_t m, size_t n, uint32_t **slot)
{
  if (!(*slot = malloc((n ? n : 1) * sizeof **slot)))
    GC_ERROR("cannot allocate the record map", GC_ENOMEM);
  for (size_t i = 0; i < n; i++)
    (*slot)[i] = NO_SLOT;
  for (size_t j = 0; j < m; j++) {
    if (ids[j] >= n || (*slot)[ids[j]] != NO_SLOT) {
      uint32_t bad = ids[j];
      free(*slot);
      *slot = NULL;
      GC_ERRORF(GC_EINVAL, "record %u %s", bad,
                bad >= n ? "is outside the set" : "is asked for twice");
    }
    (*slot)[ids[j]] = (uint32_t) j;
  }
  return GC_SUCCESS;
}

/* The kept 28x28 images of an IDX file of n records. */
static int idx_images_kept(const char *path, size_t n, const uint32_t *slot,
                           gc_dataset *ds)
{
  size_t di[3], total, dim = 28 * 28;
  int size_known;
  gzFile f;
  GC_TRY(idx_open(path, 3, di, &total, &size_known, &f));
  if (di[1] != 28 || di[2] != 28 || di[0] != n) {
    gzclose(f);
    if (di[0] != n)
      GC_ERRORF(GC_EFORMAT, "%s holds %zu images but the labels are %zu", path,
                di[0], n);
    GC_ERRORF(GC_EFORMAT, "%s: images are %zux%zu, expected 28x28", path, di[1], di[2]);
  }
  uint8_t *block = malloc(IDX_BLOCK * dim);
  if (!block) {
    gzclose(f);
    GC_ERROR("cannot allocate the image block", GC_ENOMEM);
  }
  for (size_t at = 0; at < n; at += IDX_BLOCK) {
    size_t b = n - at < IDX_BLOCK ? n - at : IDX_BLOCK;
    if (read_all(f, block, b * dim) != 0) {
      free(block);
      gzclose(f);
      GC_ERRORF(GC_EFORMAT, "%s: truncated at image %zu of %zu", path, at, n);
    }
    for (size_t k = 0; k < b; k++)
      if (slot[at + k] != NO_SLOT)
        normalise(ds->x + (size_t) slot[at + k] * dim, block + k * dim, dim,
                  mnist_mean, mnist_sd);
  }
  free(block);
  return idx_close_at_end(f, path, total);
}

/* The kept records of CIFAR-10 files (the labels were read and checked). */
static int cifar_records_kept(const set_files *sf, const uint32_t *slot,
                              gc_dataset *ds)
{
  uint8_t *rec = malloc(CIFAR_REC);
  if (!rec)
    GC_ERROR("cannot allocate a CIFAR-10 record", GC_ENOMEM);
  size_t at = 0;
  for (size_t f = 0; f < sf->nfiles; f++) {
    FILE *fp = fopen(sf->p[f], "rb");
    if (!fp) {
      free(rec);
      GC_ERRORF(GC_EIO, "%s: cannot open: %s", sf->p[f], strerror(errno));
    }
    for (size_t r = 0; r < sf->count; r++, at++) {
      if (slot[at] == NO_SLOT)
        continue;
      if (fseek(fp, (long) (r * CIFAR_REC), SEEK_SET) != 0 ||
          fread(rec, 1, CIFAR_REC, fp) != CIFAR_REC) {
        fclose(fp);
        free(rec);
        GC_ERRORF(GC_EIO, "%s: read failed at record %zu", sf->p[f], r);
      }
      for (int ch = 0; ch < 3; ch++)
        normalise(ds->x + (size_t) slot[at] * 3072 + ch * 1024, rec + 1 + ch * 1024,
                  1024, cifar_mean[ch], cifar_sd[ch]);
    }
    fclose(fp);
  }
  free(rec);
  return GC_SUCCESS;
}

int gc_data_load_records(const char *dir, const char *name, int train,
                         const uint8_t *labels, size_t nlabels,
                         const uint32_t *ids, size_t m, gc_dataset *ds)
{
  memset(ds, 0, sizeof *ds);
  uint8_t *read = NULL;   /* the labels, when the caller has none */
  size_t n = nlabels;
  if (!labels) {
    GC_TRY(gc_data_load_labels(dir, name, train, &read, &n));
    labels = read;
  }
  set_files sf;
  uint32_t *slot = NULL;
  int st = set_files_of(dir, name, train, &sf);
  if (st == GC_SUCCESS && n != sf.records) {
    free(read);
    GC_ERRORF(GC_EINVAL, "%zu labels given, but the %s split holds %zu records", n,
              name, sf.records);
  }
  if (st == GC_SUCCESS)
    st = slots_of(ids, m, n, &slot);
  if (st != GC_SUCCESS) {
    free(read);
    return st;
  }
  ds->n = m;
  ds->classes = 10;
  if (sf.cifar) {
    ds->c = 3; ds->h = 32; ds->w = 32;
  } else {
    ds->c = 1; ds->h = 28; ds->w = 28;
  }
  ds->dim = ds->c * ds->h * ds->w;
  ds->x = malloc((m ? m : 1) * ds->dim * sizeof *ds->x);
  ds->y = malloc(m ? m : 1);
  if (!ds->x || !ds->y) {
    free(read);
    free(slot);
    gc_dataset_free(ds);
    GC_ERROR("cannot allocate the records", GC_ENOMEM);
  }
  for (size_t j = 0; j < m; j++)
    ds->y[j] = labels[ids[j]];
  free(read);
  /* no records (a process without workers): no image is read at all */
  st = m == 0 ? GC_SUCCESS
       : sf.cifar ? cifar_records_kept(&sf, slot, ds)
                  : idx_images_kept(sf.p[0], n, slot, ds);
  free(slot);
  if (st != GC_SUCCESS)
    gc_dataset_free(ds);
  return st;
}

void gc_data_shuffle(uint32_t *a, size_t m, uint64_t seed, uint32_t stream,
                     uint32_t step)
{
  for (size_t i = m; i > 1; i--) {
    uint32_t j = gc_rng_below(gc_rng_u32(seed, stream, step, i), (uint32_t) i);
    uint32_t t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

int gc_data_partition_iid(size_t n, size_t P, uint64_t seed, uint32_t *idx,
                          size_t *off)
{
  if (P == 0 || P > n)
    GC_ERRORF(GC_EINVAL, "cannot split %zu examples over %zu workers", n, P);
  for (size_t i = 0; i < n; i++)
    idx[i] = (uint32_t) i;
  gc_data_shuffle(idx, n, seed, 0x9a7, 0);
  size_t per = n / P;
  for (size_t p = 0; p <= P; p++)
    off[p] = p * per;
  return GC_SUCCESS;
}

int gc_data_partition_noniid(const uint8_t *y, size_t n, size_t P,
                             uint64_t seed, uint32_t *idx, size_t *off)
{
  if (P == 0 || 2 * P > n)
    GC_ERRORF(GC_EINVAL, "cannot cut %zu examples into 2x%zu shards", n, P);
  size_t shards = 2 * P, size = n / shards;
  uint32_t *sorted = malloc(n * sizeof *sorted), *perm = malloc(shards * sizeof *perm);
  if (!sorted || !perm) {
    free(sorted); free(perm);
    GC_ERROR("cannot allocate the partition", GC_ENOMEM);
  }
  /* Stable counting sort by label, as argsort of the labels. */
  size_t cnt[257] = {0};
  for (size_t i = 0; i < n; i++)
    cnt[y[i] + 1]++;
  for (int c = 0; c < 256; c++)
    cnt[c + 1] += cnt[c];
  for (size_t i = 0; i < n; i++)
    sorted[cnt[y[i]]++] = (uint32_t) i;
  for (size_t s = 0; s < shards; s++)
    perm[s] = (uint32_t) s;
  gc_data_shuffle(perm, shards, seed, 0x9a8, 0);
  size_t at = 0;
  for (size_t p = 0; p < P; p++) {
    off[p] = at;
    for (int j = 0; j < 2; j++) {
      memcpy(idx + at, sorted + (size_t) perm[2 * p + j] * size, size * sizeof *idx);
      at += size;
    }
  }
  off[P] = at;
  free(sorted);
  free(perm);
  return GC_SUCCESS;
}
