/* make_corpus.c -- write the seed corpora of the fuzz harnesses, one folder
 * per harness under DIR, from the library's own writers and encoders:
 * valid .npy files, IDX image/label pairs (raw and gzip), CIFAR-10
 * records, one message of every compressor in both precisions, config
 * files naming every option, the checkpoint state of every simulator
 * kind after a few steps, and training checkpoint files (the header
 * gc_ckpt_head writes).  Usage: make_corpus DIR */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "fuzz_checkpoint.h"
#include "fuzz_ckpt_file.h"
#include "fuzz_wire.h"
#include "gc_checkpoint.h"
#include "gc_errno.h"
#include "gc_npy.h"

static const char *root;
static size_t written;

static void make_dir(const char *sub)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, sub);
  if (mkdir(root, 0777) != 0 && errno != EEXIST) {
    perror(root);
    exit(1);
  }
  if (mkdir(path, 0777) != 0 && errno != EEXIST) {
    perror(path);
    exit(1);
  }
}

/* DIR/sub/name <- the concatenation of the parts. */
static void put(const char *sub, const char *name, size_t nparts,
                const void *const *parts, const size_t *lens)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/%s", root, sub, name);
  FILE *f = fopen(path, "wb");
  int ok = f != NULL;
  for (size_t i = 0; ok && i < nparts; i++)
    ok = fwrite(parts[i], 1, lens[i], f) == lens[i];
  if (!f || fclose(f) != 0 || !ok) {
    fprintf(stderr, "make_corpus: cannot write %s\n", path);
    exit(1);
  }
  written++;
}

static void put1(const char *sub, const char *name, const void *d, size_t n)
{
  put(sub, name, 1, &d, &n);
}

static void npy_seeds(void)
{
  make_dir("fuzz_npy");
  float v[12];
  double w[12];
  for (int i = 0; i < 12; i++)
    w[i] = v[i] = 2.385f * (float) i - 3.0f;
  char path[4096];
  const struct { const char *name; int dtype; size_t ndim, shape[3]; } s[] = {
    { "f32-5.npy", GC_F32, 1, { 5 } }, { "f64-3x4.npy", GC_F64, 2, { 3, 4 } },
    { "f32-2x3x2.npy", GC_F32, 3, { 2, 3, 2 } }, { "f64-scalar.npy", GC_F64, 0, { 0 } },
    { "f32-empty.npy", GC_F32, 1, { 0 } },
  };
  for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
    snprintf(path, sizeof path, "%s/fuzz_npy/%s", root, s[i].name);
    if (gc_npy_write(path, s[i].dtype, s[i].ndim, s[i].shape,
                     s[i].dtype == GC_F32 ? (const void *) v : (const void *) w)) {
      fprintf(stderr, "make_corpus: %s: %s\n", path, gc_last_error());
      exit(1);
    }
    written++;
  }
}

static size_t be32(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t) (v >> 24); p[1] = (uint8_t) (v >> 16);
  p[2] = (uint8_t) (v >> 8); p[3] = (uint8_t) v;
  return 4;
}

/* gzip of n bytes into out (cap bytes); returns the length. */
static size_t gzip_bytes(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    exit(1);
  z.next_in = (Bytef *) in;
  z.avail_in = (uInt) n;
  z.next_out = out;
  z.avail_out = (uInt) cap;
  if (deflate(&z, Z_FINISH) != Z_STREAM_END)
    exit(1);
  size_t len = z.total_out;
  deflateEnd(&z);
  return len;
}

/* fuzz_idx input: u16 little-endian image-file length, images, labels. */
static void idx_seeds(void)
{
  make_dir("fuzz_idx");
  enum { N = 2, IMG = 16 + N * 784, LAB = 8 + N };
  static uint8_t img[IMG], lab[LAB], gz[IMG + 256];
  size_t at = be32(img, 0x803);
  at += be32(img + at, N);
  at += be32(img + at, 28);
  at += be32(img + at, 28);
  for (size_t i = 0; i < N * 784; i++)
    img[at + i] = (uint8_t) ((i * 37) % 251 * ((i / 28) % 3 == 0));
  be32(lab, 0x801);
  be32(lab + 4, N);
  lab[8] = 3;
  lab[9] = 9;
  uint8_t len[2] = { IMG & 0xff, IMG >> 8 };
  put("fuzz_idx", "raw", 3, (const void *[]) { len, img, lab },
      (size_t[]) { 2, IMG, LAB });
  size_t g = gzip_bytes(img, IMG, gz, sizeof gz);
  uint8_t glen[2] = { (uint8_t) (g & 0xff), (uint8_t) (g >> 8) };
  put("fuzz_idx", "gzip-images", 3, (const void *[]) { glen, gz, lab },
      (size_t[]) { 2, g, LAB });
}

static void cifar_seeds(void)
{
  make_dir("fuzz_cifar");
  static uint8_t rec[2 * 3073];
  for (size_t i = 0; i < sizeof rec; i++)
    rec[i] = (uint8_t) (i * 131 % 256);
  rec[0] = 7;
  rec[3073] = 0;
  put1("fuzz_cifar", "one", rec, 3073);
  put1("fuzz_cifar", "two", rec, sizeof rec);
}

/* One message per compressor, precision and setting. */
static void wire_seeds(void)
{
  make_dir("fuzz_wire");
  static const uint8_t settings[][4] = {   /* h[1..4] */
    { 0, 5, 0, 3 }, { 1, 40, 0, 7 }, { 2, 200, 1, 40 }, { 5, 9, 0, 2 },
    { 4, 100, 0, 20 },
  };
  size_t m = fuzz_wire_ntypes();
  for (size_t t = 0; t <= m; t++)
    for (size_t s = 0; s < sizeof settings / sizeof settings[0]; s++) {
      uint8_t h[FUZZ_WIRE_HDR] = { (uint8_t) t, settings[s][0], settings[s][1],
                                   settings[s][2], settings[s][3], (uint8_t) (s + 1) };
      fuzz_wire w;
      if (fuzz_wire_setup(&w, h) != 0)
        continue;
      double *x = malloc(w.n * sizeof *x);
      float *xf = malloc(w.n * sizeof *xf);
      size_t cap = w.c ? gc_compressor_max_bytes(w.c)
                       : gc_sparse_max_bytes(w.n, w.n, w.f64 ? GC_F64 : GC_F32);
      uint8_t *buf = malloc(cap);
      if (!x || !xf || !buf)
        exit(1);
      for (size_t i = 0; i < w.n; i++)   /* some exact zeros for "sparse" */
        xf[i] = (float) (x[i] = i % 3 == 1 ? 0.0 : 2.385 * (double) (i % 17) - 11.0);
      size_t len = 0, nnz;
      int st = !w.c ? (w.f64 ? gc_sparse_encode_dense_f64(x, w.n, buf, cap, &len, &nnz)
                             : gc_sparse_encode_dense_f32(xf, w.n, buf, cap, &len, &nnz))
               : w.f64 ? gc_compress_f64(w.c, x, w.step, buf, cap, &len, NULL)
                       : gc_compress_f32(w.c, xf, w.step, buf, cap, &len, NULL);
      if (st == GC_SUCCESS) {
        char name[128];
        snprintf(name, sizeof name, "%s-%s-%zu", w.T ? w.T->name : "sparse",
                 w.f64 ? "f64" : "f32", s);
        put("fuzz_wire", name, 2, (const void *[]) { h, buf },
            (size_t[]) { FUZZ_WIRE_HDR, len });
      }
      free(x);
      free(xf);
      free(buf);
      gc_compressor_free(w.c);
    }
}

static void config_seeds(void)
{
  make_dir("fuzz_config");
  static const char *const texts[] = {
    "# the reference run\ndataset mnist\nmodel mnist-mlp\nworkers 10\niid\n"
    "batch 10\nepochs 100\nlr 0.10\nalgorithm bi\ncompressor topk\n"
    "density 0.001\ndensity-down 0.001\nseed 0\nout runs/x\n",
    "dataset=fmnist\r\nmodel=fmnist-cnn\r\nworkers=20\r\nnoniid\r\n"
    "momentum 0.9\t# heavy ball\ncompressor powersgd\nrank 4\nthreads 2\n",
    "--dataset cifar10\n--max-steps 5\n--train-subset 100\n--test-subset 50\n"
    "--quiet\n--resume\n--data /nonexistent\n",
    "seed 18446744073709551615\nbatch 2.5e1\nepochs 010\n",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "conf-%zu", i);
    put1("fuzz_config", name, texts[i], strlen(texts[i]));
  }
}

/* fuzz_checkpoint input: the kind byte, then the state after some steps. */
static void checkpoint_seeds(void)
{
  make_dir("fuzz_checkpoint");
  for (unsigned k = 0; k < FUZZ_CKPT_KINDS; k++) {
    gc_sim *s = fuzz_ckpt_sim(k);
    if (!s) {
      fprintf(stderr, "make_corpus: simulator %u: %s\n", k, gc_last_error());
      exit(1);
    }
    double g64[FUZZ_CKPT_P * FUZZ_CKPT_N];
    float g32[FUZZ_CKPT_P * FUZZ_CKPT_N];
    const void *g[FUZZ_CKPT_P];
    for (unsigned t = 0; t < 3; t++) {
      fuzz_ckpt_grads(s, fuzz_ckpt_dtype(k), t, g64, g32, g);
      if (gc_sim_step(s, g, 0.05) != GC_SUCCESS) {
        fprintf(stderr, "make_corpus: simulator %u step %u: %s\n", k, t,
                gc_last_error());
        exit(1);
      }
    }
    size_t len = gc_sim_state_bytes(s);
    uint8_t *buf = malloc(len ? len : 1), kind = (uint8_t) k;
    if (!buf)
      exit(1);
    gc_sim_state_save(s, buf);
    char name[32];
    snprintf(name, sizeof name, "sim-%u", k);
    put("fuzz_checkpoint", name, 2, (const void *[]) { &kind, buf },
        (size_t[]) { 1, len });
    free(buf);
    gc_sim_free(s);
  }
}

/* fuzz_ckpt_file input: checkpoint files of its run, whole, then each with
 * one thing of another run (rank, processes, epoch, seed), and one of the
 * first format, so that every check starts with a seed. */
static void ckpt_file_seeds(void)
{
  static const struct {
    const char *name;
    unsigned long long rank, procs, epoch;
    uint64_t seed;
  } v[] = { { "ckpt-ok", 0, 1, 1, 0 }, { "ckpt-rank", 2, 1, 1, 0 },
            { "ckpt-procs", 0, 3, 1, 0 }, { "ckpt-epoch", 0, 1, 2, 0 },
            { "ckpt-seed", 0, 1, 1, 7 } };
  make_dir("fuzz_ckpt_file");
  gc_train_config c;
  gc_train_config_default(&c);
  uint8_t payload[FUZZ_CKPT_FILE_STATE], hdr[GC_CKPT_HDR];
  for (size_t i = 0; i < sizeof payload; i++)
    payload[i] = (uint8_t) (i * 37);
  char meta[GC_CKPT_META_MAX];
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    c.seed = v[i].seed;
    uint32_t m = gc_ckpt_head(&c, v[i].rank, v[i].procs, v[i].epoch,
                              v[i].epoch * FUZZ_CKPT_FILE_STEPS, payload,
                              sizeof payload, hdr, meta, sizeof meta);
    put("fuzz_ckpt_file", v[i].name, 3,
        (const void *[]) { hdr, meta, payload },
        (size_t[]) { GC_CKPT_HDR, m, sizeof payload });
  }
  /* the first format: magic, u64 payload length, u32 CRC, payload */
  uint64_t n = sizeof payload;
  uint32_t crc = (uint32_t) crc32_z(0L, payload, n);
  put("fuzz_ckpt_file", "ckpt-v1", 4,
      (const void *[]) { GC_CKPT_MAGIC_V1, &n, &crc, payload },
      (size_t[]) { 8, 8, 4, sizeof payload });
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: make_corpus DIR\n");
    return 2;
  }
  root = argv[1];
  npy_seeds();
  idx_seeds();
  cifar_seeds();
  wire_seeds();
  config_seeds();
  checkpoint_seeds();
  ckpt_file_seeds();
  printf("make_corpus: %zu seed files in %s/\n", written, root);
  return 0;
}
