/* test_data.c -- IDX and CIFAR-10 loaders on small generated files (good,
 * truncated, wrong magic, wrong counts), and the worker partitions. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "gc_data.h"
#include "gc_errno.h"
#include "gc_npy.h"
#include "gc_test.h"

static void be32(uint8_t *b, uint32_t v)
{
  b[0] = (uint8_t) (v >> 24); b[1] = (uint8_t) (v >> 16);
  b[2] = (uint8_t) (v >> 8); b[3] = (uint8_t) v;
}

/* Write an IDX file of n examples (28x28 images when ndim = 3), gzip'd when
 * gz; `cut` bytes are dropped from the end, `magic3` replaces the type. */
static void write_idx(const char *path, size_t ndim, uint32_t n, int gz,
                      size_t cut, uint8_t type, uint32_t extra_first_dim)
{
  size_t per = ndim == 3 ? 784 : 1, len = 4 + 4 * ndim + n * per;
  uint8_t *b = calloc(1, len);
  b[2] = type;
  b[3] = (uint8_t) ndim;
  be32(b + 4, n + extra_first_dim);
  if (ndim == 3) {
    be32(b + 8, 28);
    be32(b + 12, 28);
  }
  for (size_t i = 0; i < n * per; i++)
    b[4 + 4 * ndim + i] = (uint8_t) (ndim == 3 ? (i * 7) % 256 : i % 10);
  len -= cut;
  if (gz) {
    gzFile f = gzopen(path, "wb");
    cr_assert(f != NULL);
    gzwrite(f, b, (unsigned) len);
    gzclose(f);
  } else {
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL);
    fwrite(b, 1, len, f);
    fclose(f);
  }
  free(b);
}

static char img[512], lab[512];

static void paths(void)
{
  snprintf(img, sizeof img, "%s", gc_test_tmp("img.idx"));
  snprintf(lab, sizeof lab, "%s", gc_test_tmp("lab.idx"));
}

TestSuite(data, .init = gc_test_quiet);

Test(data, idx_raw_and_gzip)
{
  paths();
  for (int gz = 0; gz <= 1; gz++) {
    write_idx(img, 3, 5, gz, 0, 8, 0);
    write_idx(lab, 1, 5, gz, 0, 8, 0);
    gc_dataset ds;
    cr_assert_eq(gc_data_load_idx(img, lab, 5, &ds), GC_SUCCESS, "gz=%d", gz);
    cr_assert_eq(ds.n, 5);
    cr_assert_eq(ds.dim, 784);
    cr_assert_eq(ds.y[3], 3);
    /* pixel 1 of example 0 is 7: (7/255 - 0.1307)/0.3081; three float32
     * operations on the loader's side and here, |value| < 1: within
     * 3 u each, 1e-6 keeps a factor 3 */
    cr_assert_float_eq(ds.x[1], (7.0f / 255.0f - 0.1307f) / 0.3081f, 1e-6);
    gc_dataset_free(&ds);
  }
  remove(img);
  remove(lab);
}

Test(data, idx_bad_files)
{
  paths();
  gc_dataset ds;
  write_idx(lab, 1, 5, 0, 0, 8, 0);
  write_idx(img, 3, 5, 0, 100, 8, 0);             /* truncated */
  cr_assert_eq(gc_data_load_idx(img, lab, 0, &ds), GC_EFORMAT);
  cr_assert(strstr(gc_last_error(), img) && strstr(gc_last_error(), "truncated"),
            "%s", gc_last_error());
  write_idx(img, 3, 5, 1, 100, 8, 0);             /* truncated gzip */
  cr_assert_eq(gc_data_load_idx(img, lab, 0, &ds), GC_EFORMAT);
  write_idx(img, 3, 5, 0, 0, 9, 0);               /* wrong magic (type) */
  cr_assert_eq(gc_data_load_idx(img, lab, 0, &ds), GC_EFORMAT);
  cr_assert(strstr(gc_last_error(), "magic"), "%s", gc_last_error());
  write_idx(img, 3, 6, 0, 0, 8, 0);               /* 6 images, 5 labels */
  cr_assert_eq(gc_data_load_idx(img, lab, 0, &ds), GC_EFORMAT);
  cr_assert(strstr(gc_last_error(), "labels"), "%s", gc_last_error());
  write_idx(img, 3, 5, 0, 0, 8, 0);
  cr_assert_eq(gc_data_load_idx(img, lab, 60000, &ds), GC_EFORMAT);   /* count */
  write_idx(img, 3, 4, 0, 0, 8, 1);               /* header says 5, data 4 */
  cr_assert_eq(gc_data_load_idx(img, lab, 0, &ds), GC_EFORMAT);
  write_idx(img, 1, 5, 0, 0, 8, 0);               /* labels file as images */
  cr_assert_eq(gc_data_load_idx(img, lab, 0, &ds), GC_EFORMAT);
  remove(img);
  cr_assert_eq(gc_data_load_idx(img, lab, 0, &ds), GC_EIO);
  cr_assert(strstr(gc_last_error(), img), "%s", gc_last_error());
  /* trailing bytes and an out-of-range label */
  write_idx(img, 3, 5, 0, 0, 8, 0);
  FILE *f = fopen(img, "ab");
  fputc(0, f);
  fclose(f);
  cr_assert_eq(gc_data_load_idx(img, lab, 0, &ds), GC_EFORMAT);
  write_idx(img, 3, 5, 0, 0, 8, 0);
  f = fopen(lab, "r+b");
  fseek(f, 8 + 2, SEEK_SET);
  fputc(10, f);
  fclose(f);
  cr_assert_eq(gc_data_load_idx(img, lab, 0, &ds), GC_EFORMAT);
  /* the label and its record, read before the buffer was freed */
  cr_assert(strstr(gc_last_error(), "label 10 at record 2"), "%s", gc_last_error());
  remove(img);
  remove(lab);
}

/* Cap this test process's address space at what it maps now plus `mb`
 * MiB, so that a loader allocating what a header claims fails with
 * GC_ENOMEM instead of passing unnoticed.  (Each Criterion test runs in
 * its own process.) */
static void limit_memory(size_t mb)
{
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (!f || fscanf(f, "%lu", &pages) != 1)
    cr_skip_test("no /proc/self/statm");
  fclose(f);
  rlim_t cap = (rlim_t) pages * (rlim_t) sysconf(_SC_PAGESIZE) + (rlim_t) mb * 1048576;
  struct rlimit rl = { cap, cap };
  cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
}

/* Raw and gzip IDX files whose header claims about 1.6 GB of images (2^21
 * of them) but which hold 5: a format error naming the shortfall, found
 * within the memory of the real data, and dimensions whose product would
 * overflow are refused from the header alone. */
Test(data, idx_header_claims_are_checked_before_allocating)
{
  paths();
  limit_memory(256);
  gc_dataset ds;
  for (int gz = 0; gz <= 1; gz++) {
    write_idx(img, 3, 5, gz, 0, 8, (1u << 21) - 5);
    write_idx(lab, 1, 5, 0, 0, 8, (1u << 21) - 5);
    cr_assert_eq(gc_data_load_idx(img, lab, 0, &ds), GC_EFORMAT, "gz=%d: %s", gz,
                 gc_last_error());
    cr_assert(strstr(gc_last_error(), img) && strstr(gc_last_error(), "truncated"),
              "%s", gc_last_error());
  }
  size_t dims[3];
  uint8_t *data;
  write_idx(img, 3, 5, 0, 0, 8, 0xffffffffu - 5);   /* 2^32 x 28 x 28 */
  cr_assert_eq(gc_idx_read(img, 3, dims, &data), GC_EFORMAT);
  cr_assert(strstr(gc_last_error(), "implausible"), "%s", gc_last_error());
  cr_assert_null(data);
  remove(img);
  remove(lab);
}

static void write_npy_header(const char *path, const char *dict, size_t data_bytes)
{
  FILE *f = fopen(path, "wb");
  cr_assert(f != NULL);
  size_t len = strlen(dict);
  unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                            (unsigned char) (len & 0xff), (unsigned char) (len >> 8) };
  fwrite(pre, 1, 10, f);
  fwrite(dict, 1, len, f);
  for (size_t i = 0; i < data_bytes; i++)
    fputc(0, f);
  fclose(f);
}

/* .npy: a 129-byte file claiming 1.1 GB is a format error before any
 * allocation; an empty Fortran-order array with a huge other dimension
 * loads at once (the transpose used to loop over 10^15 rows); a shape
 * number past 64 bits is refused. */
Test(data, npy_header_claims, .timeout = 20)
{
  limit_memory(256);
  char p[512];
  snprintf(p, sizeof p, "%s", gc_test_tmp("claim.npy"));
  gc_array a;
  write_npy_header(p, "{'descr': '<f8', 'fortran_order': False, 'shape': (140000000,), }\n", 48);
  cr_assert_eq(gc_npy_read(p, &a), GC_EFORMAT, "%s", gc_last_error());
  cr_assert(strstr(gc_last_error(), "truncated") && strstr(gc_last_error(), "140000000"),
            "%s", gc_last_error());
  write_npy_header(p, "{'descr': '<f4', 'fortran_order': True, 'shape': (1000000000000000, 0), }\n", 0);
  cr_assert_eq(gc_npy_read(p, &a), GC_SUCCESS, "%s", gc_last_error());
  cr_assert_eq(a.count, 0);
  gc_array_free(&a);
  write_npy_header(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }\n", 0);
  cr_assert_eq(gc_npy_read(p, &a), GC_EFORMAT);
  cr_assert(strstr(gc_last_error(), "shape"), "%s", gc_last_error());
  /* a good one still loads, data and all */
  write_npy_header(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", 12);
  cr_assert_eq(gc_npy_read(p, &a), GC_SUCCESS, "%s", gc_last_error());
  cr_assert_eq(a.count, 3);
  gc_array_free(&a);
  remove(p);
}

static void write_cifar(const char *path, size_t n, size_t cut, int badlabel)
{
  FILE *f = fopen(path, "wb");
  cr_assert(f != NULL);
  for (size_t r = 0; r < n; r++) {
    fputc(badlabel && r == n - 1 ? 11 : (int) (r % 10), f);
    for (size_t i = 0; i < 3072; i++)
      fputc((int) ((r + i) % 256), f);
  }
  fclose(f);
  if (cut) {
    FILE *g = fopen(path, "r+b");
    fseek(g, 0, SEEK_END);
    long sz = ftell(g);
    fclose(g);
    cr_assert_eq(truncate(path, sz - (long) cut), 0);
  }
}

Test(data, cifar10)
{
  char a[512], b[512];
  snprintf(a, sizeof a, "%s", gc_test_tmp("c1.bin"));
  snprintf(b, sizeof b, "%s", gc_test_tmp("c2.bin"));
  write_cifar(a, 3, 0, 0);
  write_cifar(b, 2, 0, 0);
  const char *files[2] = { a, b };
  gc_dataset ds;
  cr_assert_eq(gc_data_load_cifar10(files, 2, 0, &ds), GC_SUCCESS);
  cr_assert_eq(ds.n, 5);
  cr_assert_eq(ds.dim, 3072);
  cr_assert_eq(ds.y[4], 1);
  /* record 1, green channel (offset 1024), pixel 0: byte (1+1024)%256 = 1;
   * three float32 operations each side, |value| < 3: 1e-6 as above */
  cr_assert_float_eq(ds.x[3072 + 1024], (1.0f / 255.0f - 0.4822f) / 0.1994f, 1e-6);
  gc_dataset_free(&ds);
  cr_assert_eq(gc_data_load_cifar10(files, 2, 3, &ds), GC_EFORMAT);   /* counts */
  write_cifar(b, 2, 5, 0);
  cr_assert_eq(gc_data_load_cifar10(files, 2, 0, &ds), GC_EFORMAT);   /* truncated */
  cr_assert(strstr(gc_last_error(), b), "%s", gc_last_error());
  write_cifar(b, 2, 0, 1);
  cr_assert_eq(gc_data_load_cifar10(files, 2, 0, &ds), GC_EFORMAT);   /* label */
  remove(b);
  cr_assert_eq(gc_data_load_cifar10(files, 2, 0, &ds), GC_EIO);
  remove(a);
}

/* A worker process's shard: gc_data_load_records gives the rows of a full
 * load, in the order asked, from raw and gzip IDX and from CIFAR-10, and
 * refuses ids outside the set or repeated. */
Test(data, records_are_the_full_load_rows, .timeout = 60)
{
  char dir[512], sub[600], im[700], la[700];
  snprintf(dir, sizeof dir, "%s", gc_test_tmp("records"));
  snprintf(sub, sizeof sub, "%s/mnist", dir);
  mkdir(dir, 0755);
  mkdir(sub, 0755);
  const uint32_t ids[5] = { 9999, 0, 4242, 17, 5000 };
  for (int gz = 0; gz <= 1; gz++) {
    snprintf(im, sizeof im, "%s/t10k-images-idx3-ubyte%s", sub, gz ? ".gz" : "");
    snprintf(la, sizeof la, "%s/t10k-labels-idx1-ubyte%s", sub, gz ? ".gz" : "");
    write_idx(im, 3, 10000, gz, 0, 8, 0);
    write_idx(la, 1, 10000, gz, 0, 8, 0);
    gc_dataset full, part;
    cr_assert_eq(gc_data_load(dir, "mnist", 0, &full), GC_SUCCESS, "%s", gc_last_error());
    cr_assert_eq(gc_data_load_records(dir, "mnist", 0, NULL, 0, ids, 5, &part), GC_SUCCESS,
                 "gz=%d: %s", gz, gc_last_error());
    cr_assert_eq(part.n, 5);
    cr_assert_eq(part.dim, full.dim);
    for (size_t j = 0; j < 5; j++) {
      cr_assert_eq(part.y[j], full.y[ids[j]]);
      cr_assert(!memcmp(part.x + j * 784, full.x + (size_t) ids[j] * 784, 784 * sizeof *part.x),
                "gz=%d: row %zu (record %u)", gz, j, ids[j]);
    }
    uint8_t *y;
    size_t n;
    cr_assert_eq(gc_data_load_labels(dir, "mnist", 0, &y, &n), GC_SUCCESS);
    cr_assert(n == 10000 && !memcmp(y, full.y, n));
    /* the labels handed over: the same rows; a count not the split's: refused */
    gc_dataset given;
    cr_assert_eq(gc_data_load_records(dir, "mnist", 0, y, n, ids, 5, &given), GC_SUCCESS,
                 "%s", gc_last_error());
    cr_assert(given.n == 5 && !memcmp(given.y, part.y, 5) &&
              !memcmp(given.x, part.x, 5 * 784 * sizeof *part.x));
    gc_dataset_free(&given);
    cr_assert_eq(gc_data_load_records(dir, "mnist", 0, y, n - 1, ids, 5, &given), GC_EINVAL);
    cr_assert(strstr(gc_last_error(), "9999 labels given"), "%s", gc_last_error());
    free(y);
    gc_dataset_free(&part);
    gc_dataset_free(&full);
    const uint32_t twice[2] = { 3, 3 }, outside[1] = { 10000 };
    cr_assert_eq(gc_data_load_records(dir, "mnist", 0, NULL, 0, twice, 2, &part), GC_EINVAL);
    cr_assert(strstr(gc_last_error(), "record 3 is asked for twice"), "%s", gc_last_error());
    cr_assert_eq(gc_data_load_records(dir, "mnist", 0, NULL, 0, outside, 1, &part), GC_EINVAL);
    cr_assert(strstr(gc_last_error(), "outside"), "%s", gc_last_error());
    /* no records: the labels only (a process without workers) */
    cr_assert_eq(gc_data_load_records(dir, "mnist", 0, NULL, 0, ids, 0, &part), GC_SUCCESS);
    cr_assert(part.n == 0 && part.dim == 784);
    gc_dataset_free(&part);
    /* images cut short past the last kept record: still an error */
    write_idx(im, 3, 10000, gz, 784, 8, 0);
    cr_assert_eq(gc_data_load_records(dir, "mnist", 0, NULL, 0, ids + 1, 1, &part), GC_EFORMAT);
    cr_assert(strstr(gc_last_error(), im), "%s", gc_last_error());
    remove(im);
    remove(la);
  }
  rmdir(sub);
  snprintf(sub, sizeof sub, "%s/cifar10", dir);
  mkdir(sub, 0755);
  snprintf(im, sizeof im, "%s/test_batch.bin", sub);
  write_cifar(im, 10000, 0, 0);
  gc_dataset full, part;
  cr_assert_eq(gc_data_load(dir, "cifar10", 0, &full), GC_SUCCESS, "%s", gc_last_error());
  cr_assert_eq(gc_data_load_records(dir, "cifar10", 0, NULL, 0, ids, 5, &part), GC_SUCCESS,
               "%s", gc_last_error());
  cr_assert(part.n == 5 && part.dim == 3072 && part.c == 3);
  for (size_t j = 0; j < 5; j++) {
    cr_assert_eq(part.y[j], full.y[ids[j]]);
    cr_assert(!memcmp(part.x + j * 3072, full.x + (size_t) ids[j] * 3072,
                      3072 * sizeof *part.x), "cifar row %zu", j);
  }
  gc_dataset_free(&part);
  gc_dataset_free(&full);
  write_cifar(im, 10000, 0, 1);   /* the last label is 11: found though not kept */
  cr_assert_eq(gc_data_load_records(dir, "cifar10", 0, NULL, 0, ids + 1, 1, &part), GC_EFORMAT);
  cr_assert(strstr(gc_last_error(), "label 11"), "%s", gc_last_error());
  remove(im);
  rmdir(sub);
  rmdir(dir);
}

Test(data, partition_iid)
{
  size_t n = 1003, P = 7, off[8];
  uint32_t *idx = malloc(n * sizeof *idx), *idx2 = malloc(n * sizeof *idx2);
  cr_assert_eq(gc_data_partition_iid(n, P, 42, idx, off), GC_SUCCESS);
  cr_assert_eq(gc_data_partition_iid(n, P, 42, idx2, off), GC_SUCCESS);
  cr_assert_eq(memcmp(idx, idx2, n * sizeof *idx), 0, "seeded: same partition");
  char *seen = calloc(n, 1);
  for (size_t p = 0; p < P; p++) {
    cr_assert_eq(off[p + 1] - off[p], n / P);
    for (size_t i = off[p]; i < off[p + 1]; i++) {
      cr_assert(idx[i] < n && !seen[idx[i]], "disjoint");
      seen[idx[i]] = 1;
    }
  }
  cr_assert_eq(gc_data_partition_iid(n, P, 43, idx2, off), GC_SUCCESS);
  cr_assert_neq(memcmp(idx, idx2, n * sizeof *idx), 0, "another seed");
  cr_assert_eq(gc_data_partition_iid(3, 4, 0, idx2, off), GC_EINVAL);
  free(idx); free(idx2); free(seen);
}

Test(data, partition_noniid_two_labels)
{
  size_t n = 1000, P = 5, off[6];
  uint8_t *y = malloc(n);
  for (size_t i = 0; i < n; i++)
    y[i] = (uint8_t) ((i * 7) % 10);   /* 100 of each label, interleaved */
  uint32_t *idx = malloc(n * sizeof *idx);
  cr_assert_eq(gc_data_partition_noniid(y, n, P, 1, idx, off), GC_SUCCESS);
  char *seen = calloc(n, 1);
  for (size_t p = 0; p < P; p++) {
    int labels[10] = {0}, distinct = 0;
    cr_assert_eq(off[p + 1] - off[p], 200);
    for (size_t i = off[p]; i < off[p + 1]; i++) {
      cr_assert(!seen[idx[i]]);
      seen[idx[i]] = 1;
      distinct += !labels[y[idx[i]]]++;
    }
    cr_assert_leq(distinct, 2, "worker %zu sees %d labels", p, distinct);
  }
  free(y); free(idx); free(seen);
}

Test(data, shuffle_is_a_permutation)
{
  uint32_t a[100];
  for (uint32_t i = 0; i < 100; i++)
    a[i] = i;
  gc_data_shuffle(a, 100, 9, 1, 2);
  int seen[100] = {0}, moved = 0;
  for (uint32_t i = 0; i < 100; i++) {
    cr_assert(!seen[a[i]]++);
    moved += a[i] != i;
  }
  cr_assert_gt(moved, 50);
}

/* An atomic write removes the temporaries of the same file that a killed
 * writer left ("v.npy.tmp.PID", PID gone), and only those: a live
 * process's temporary and another file's stay. */
Test(data, atomic_write_removes_stale_temporaries)
{
  char v[512], dead[600], live[600], other[600];
  snprintf(v, sizeof v, "%s", gc_test_tmp("stale-v.npy"));
  pid_t child = fork();
  if (child == 0)
    _exit(0);
  cr_assert(child > 0);
  waitpid(child, NULL, 0);   /* its pid now names no process */
  snprintf(dead, sizeof dead, "%s.tmp.%ld", v, (long) child);
  /* the runner that started this test is alive (our own pid would be the
   * name of the writer's own temporary) */
  snprintf(live, sizeof live, "%s.tmp.%ld", v, (long) getppid());
  snprintf(other, sizeof other, "%s.tmp.%ld", gc_test_tmp("stale-w.npy"), (long) child);
  const char *made[3] = { dead, live, other };
  for (int i = 0; i < 3; i++) {
    FILE *f = fopen(made[i], "w");
    cr_assert(f != NULL);
    fclose(f);
  }
  float x[2] = { 1, 2 };
  size_t n = 2;
  cr_assert_eq(gc_npy_write(v, GC_F32, 1, &n, x), GC_SUCCESS);
  cr_assert(access(dead, F_OK) != 0, "%s left behind", dead);
  cr_assert(access(live, F_OK) == 0, "%s (a live writer's) removed", live);
  cr_assert(access(other, F_OK) == 0, "%s (another file's) removed", other);
  remove(v); remove(live); remove(other);
}
