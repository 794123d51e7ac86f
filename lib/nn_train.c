/* nn_train.c -- data-parallel training of the reference models through the
 * in-process transport (gc_sim): every step, each worker's gradient at
 * gc_sim_point on its own mini-batch, then gc_sim_step.  Worker gradients
 * are independent (one per OpenMP iteration, BLAS single-threaded) and every
 * reduction runs in worker order, so the thread count never changes a bit. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "config.h"
#include "gc_algo.h"
#include "gc_errno.h"
#include "gc_internal.h"
#include "gc_io.h"
#include "gc_nn.h"
#include "gc_npy.h"

void gc_train_config_default(gc_train_config *c)
{
  memset(c, 0, sizeof *c);
  c->dataset = "mnist";
  c->data_dir = NULL;
  c->workers = 10;
  c->batch = 10;
  c->epochs = 1;
  c->lr = 0.1;
  c->algorithm = "bi";
  c->compressor = "topk";
  c->density = 0.001;
  c->density_down = 0;        /* 0: same as density */
  c->rank = 2;
  c->out = "runs/train";
}

/* Everything a run holds; freed by run_free. */
typedef struct run {
  const gc_train_config *c;
  gc_dataset train, test;
  uint32_t *idx, *order;      /* partition; per-worker epoch order       */
  size_t *off;
  size_t T;                   /* threads                                 */
  gc_nn **nets, *evalnet;
  float *xb;                  /* T * B * dim gathered inputs             */
  uint8_t *yb;                /* T * B labels                            */
  float *grads, *stats, *wstats;
  double *loss;               /* per worker, last step                   */
  float *x0;
  gc_sim *sim;
  gc_algo_config acfg;
  gc_segment *segs;           /* layer shapes for shaped compressors     */
  size_t nsegs;
  size_t d, ns, K, Kd;
  /* probes, decided in setup */
  double xi_units;            /* model units per accumulator unit (lr for
                                 memories in gradient units); 0: no xi   */
  int contraction;            /* log the uplink contraction              */
  gc_compressor *probe_up, *probe_down;
  float *pa, *pb, *pc, *pd;   /* d-sized scratch                         */
  uint8_t *pbuf;
  size_t pcap;
} run;

static void run_free(run *r)
{
  gc_dataset_free(&r->train);
  gc_dataset_free(&r->test);
  free(r->idx); free(r->order); free(r->off);
  if (r->nets)
    for (size_t t = 0; t < r->T; t++)
      gc_nn_free(r->nets[t]);
  free(r->nets);
  gc_nn_free(r->evalnet);
  free(r->xb); free(r->yb); free(r->grads); free(r->stats); free(r->wstats);
  free(r->loss); free(r->x0);
  gc_sim_free(r->sim);
  free(r->segs);
  gc_compressor_free(r->probe_up);
  gc_compressor_free(r->probe_down);
  free(r->pa); free(r->pb); free(r->pc); free(r->pd); free(r->pbuf);
}

static int path_in(char *buf, size_t cap, const char *dir, const char *name)
{
  if ((size_t) snprintf(buf, cap, "%s/%s", dir, name) >= cap)
    GC_ERRORF(GC_EINVAL, "path too long: %s/%s", dir, name);
  return GC_SUCCESS;
}

/* Write text atomically: temporary file in the same folder, then rename. */
static int write_atomic(const char *path, const char *text)
{
  const void *part = text;
  size_t len = strlen(text);
  return gc__write_atomic(path, &part, &len, 1);
}

static const char *model_of(const gc_train_config *c)
{
  return c->model && *c->model ? c->model : gc_nn_model_default(c->dataset);
}

static double density_down(const gc_train_config *c)
{
  return c->density_down > 0 ? c->density_down : c->density;
}

/* The fields that must agree between a checkpoint and a resumed run. */
static void fingerprint(const gc_train_config *c, char *buf, size_t cap)
{
  snprintf(buf, cap, "%s|%s|%zu|%d|%zu|%.17g|%.17g|%s|%s|%.17g|%.17g|%u|%llu"
           "|%zu|%zu", c->dataset, model_of(c), c->workers, c->noniid,
           c->batch, c->lr, c->momentum, c->algorithm, c->compressor,
           c->density, density_down(c), c->rank, (unsigned long long) c->seed,
           c->train_subset, c->test_subset);
}

static int write_config_json(const run *r, const char *dir)
{
  const gc_train_config *c = r->c;
  struct utsname u;
  if (uname(&u) != 0)
    memset(&u, 0, sizeof u);
  char fp[512], path[4200], *text = malloc(8192);
  if (!text)
    GC_ERROR("out of memory", GC_ENOMEM);
  fingerprint(c, fp, sizeof fp);
  snprintf(text, 8192,
    "{\n  \"program\": \"gradcomp train\",\n  \"version\": \"%s\",\n"
    "  \"dataset\": \"%s\",\n  \"model\": \"%s\",\n  \"d\": %zu,\n"
    "  \"workers\": %zu,\n  \"partition\": \"%s\",\n  \"batch\": %zu,\n"
    "  \"epochs\": %zu,\n  \"steps_per_epoch\": %zu,\n  \"lr\": %.17g,\n"
    "  \"momentum\": %.17g,\n  \"algorithm\": \"%s\",\n  \"compressor\": \"%s\",\n"
    "  \"density\": %.17g,\n  \"density_down\": %.17g,\n  \"k\": %zu,\n"
    "  \"k_down\": %zu,\n  \"rank\": %u,\n  \"seed\": %llu,\n"
    "  \"threads\": %zu,\n"
    "  \"max_steps\": %zu,\n  \"train_subset\": %zu,\n  \"test_subset\": %zu,\n"
    "  \"train_examples\": %zu,\n  \"test_examples\": %zu,\n"
    "  \"config_file\": \"%s\",\n  \"dtype\": \"float32\",\n"
    "  \"blas_core\": \"%s\",\n  \"openblas_coretype_env\": \"%s\",\n"
    "  \"machine\": \"%s %s %s\",\n  \"fingerprint\": \"%s\"\n}\n",
    PACKAGE_VERSION, c->dataset, model_of(c), r->d, c->workers,
    c->noniid ? "noniid" : "iid", c->batch, c->epochs,
    (r->off[1] - r->off[0]) / c->batch, c->lr, c->momentum, c->algorithm,
    c->compressor, c->density, density_down(c), r->K, r->Kd, c->rank,
    (unsigned long long) c->seed, r->T, c->max_steps,
    c->train_subset, c->test_subset, r->train.n, r->test.n,
    c->config_file ? c->config_file : "", gc_nn_blas_core(),
    getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "",
    u.sysname, u.release, u.machine, fp);
  int st = path_in(path, sizeof path, dir, "config.json");
  if (!st)
    st = write_atomic(path, text);
  free(text);
  return st;
}

/* ---- checkpoint: the BN statistics and the whole simulator state
 * (gc_sim_state_save: x, memories, momentum, EF21 state, warm starts, the
 * step count) in one binary file named by epoch, then a json that commits
 * it.  File: "GCCKPT1\n", u64 payload length, u32 CRC-32 of the payload,
 * payload = stats (ns float32) + simulator state. */

static const char ckpt_magic[8] = { 'G', 'C', 'C', 'K', 'P', 'T', '1', '\n' };
enum { CKPT_HDR = 8 + 8 + 4 };

static int ckpt_save(run *r, size_t epoch, size_t steps, uint64_t up,
                     uint64_t down)
{
  char name[64], path[4200], old[4200], fp[512], text[1400];
  snprintf(name, sizeof name, "checkpoint-e%zu.bin", epoch);
  GC_TRY(path_in(path, sizeof path, r->c->out, name));
  size_t sb = r->ns * sizeof *r->stats, simb = gc_sim_state_bytes(r->sim);
  uint64_t n = sb + simb;
  uint8_t *buf = malloc(n ? n : 1), hdr[CKPT_HDR];
  if (!buf)
    GC_ERROR("cannot allocate the checkpoint", GC_ENOMEM);
  memcpy(buf, r->stats, sb);
  gc_sim_state_save(r->sim, buf + sb);
  uint32_t crc = (uint32_t) crc32_z(0L, buf, n);
  memcpy(hdr, ckpt_magic, 8);
  memcpy(hdr + 8, &n, 8);
  memcpy(hdr + 16, &crc, 4);
  const void *parts[2] = { hdr, buf };
  size_t lens[2] = { CKPT_HDR, n };
  int st = gc__write_atomic(path, parts, lens, 2);
  free(buf);
  GC_TRY(st);
  fingerprint(r->c, fp, sizeof fp);
  snprintf(text, sizeof text,
           "{\n  \"epoch\": %zu,\n  \"steps\": %zu,\n  \"file\": \"%s\",\n"
           "  \"length\": %llu,\n  \"bytes_up\": %llu,\n  \"bytes_down\": %llu,\n"
           "  \"fingerprint\": \"%s\"\n}\n", epoch, steps, name,
           (unsigned long long) n, (unsigned long long) up,
           (unsigned long long) down, fp);
  GC_TRY(path_in(path, sizeof path, r->c->out, "checkpoint.json"));
  GC_TRY(write_atomic(path, text));
  if (epoch > 0) {
    snprintf(name, sizeof name, "checkpoint-e%zu.bin", epoch - 1);
    if (path_in(old, sizeof old, r->c->out, name) == GC_SUCCESS)
      remove(old);
  }
  return GC_SUCCESS;
}

/* Read a checkpoint file written by ckpt_save into r (stats and sim). */
static int ckpt_read(run *r, const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    GC_ERRORF(GC_EIO, "%s: cannot open: %s", path, strerror(errno));
  uint8_t hdr[CKPT_HDR];
  uint64_t n;
  uint32_t crc;
  size_t sb = r->ns * sizeof *r->stats, simb = gc_sim_state_bytes(r->sim);
  if (fread(hdr, 1, CKPT_HDR, f) != CKPT_HDR || memcmp(hdr, ckpt_magic, 8)) {
    fclose(f);
    GC_ERRORF(GC_EFORMAT, "%s: not a gradcomp checkpoint", path);
  }
  memcpy(&n, hdr + 8, 8);
  memcpy(&crc, hdr + 16, 4);
  if (n != sb + simb) {
    fclose(f);
    GC_ERRORF(GC_EFORMAT, "%s: %llu bytes of state, expected %zu for this"
              " configuration", path, (unsigned long long) n, sb + simb);
  }
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) {
    fclose(f);
    GC_ERROR("cannot allocate the checkpoint", GC_ENOMEM);
  }
  size_t got = fread(buf, 1, n, f);
  int extra = fgetc(f) != EOF;
  fclose(f);
  const char *why = got != n || extra ? "truncated or with trailing bytes"
                    : (uint32_t) crc32_z(0L, buf, n) != crc
                        ? "checksum mismatch (the file is damaged)" : NULL;
  int st = GC_EFORMAT;
  if (why) {
    gc_errorf(__FILE__, __LINE__, st, "%s: %s", path, why);
  } else {
    memcpy(r->stats, buf, sb);
    st = gc_sim_state_load(r->sim, buf + sb, simb);
  }
  free(buf);
  return st;
}

static int json_u64(const char *text, const char *key, unsigned long long *v)
{
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(text, pat);
  if (!p)
    return -1;
  *v = strtoull(p + strlen(pat), NULL, 10);
  return 0;
}

static int ckpt_load(run *r, size_t *epoch, size_t *steps, uint64_t *up,
                     uint64_t *down)
{
  char path[4200], text[2048], fp[512];
  GC_TRY(path_in(path, sizeof path, r->c->out, "checkpoint.json"));
  FILE *f = fopen(path, "r");
  if (!f)
    GC_ERRORF(GC_EIO, "%s: cannot open (nothing to resume): %s", path,
              strerror(errno));
  size_t got = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[got] = '\0';
  unsigned long long e, s, bu, bd;
  if (json_u64(text, "epoch", &e) || json_u64(text, "steps", &s) ||
      json_u64(text, "bytes_up", &bu) || json_u64(text, "bytes_down", &bd))
    GC_ERRORF(GC_EFORMAT, "%s: missing fields", path);
  fingerprint(r->c, fp, sizeof fp);
  const char *q = strstr(text, "\"fingerprint\": \"");
  if (!q || strncmp(q + 16, fp, strlen(fp)) != 0 || q[16 + strlen(fp)] != '"')
    GC_ERRORF(GC_EINVAL, "%s: the checkpoint belongs to another configuration"
              " (resume with the same options)", path);
  char name[64];
  snprintf(name, sizeof name, "checkpoint-e%llu.bin", e);
  GC_TRY(path_in(path, sizeof path, r->c->out, name));
  GC_TRY(ckpt_read(r, path));
  *epoch = e;
  *steps = s;
  *up = bu;
  *down = bd;
  return GC_SUCCESS;
}

/* Keep the header and the first `rows` rows of log.csv (rows written after
 * the last checkpoint are redone). */
static int log_truncate(const char *path, size_t rows)
{
  FILE *f = fopen(path, "r");
  if (!f)
    return GC_EIO;
  char line[4096];
  size_t cap = 1 << 16, len = 0, kept = 0;
  char *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    return GC_ENOMEM;
  }
  while (kept <= rows && fgets(line, sizeof line, f)) {
    size_t l = strlen(line);
    if (len + l + 1 > cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        fclose(f);
        return GC_ENOMEM;
      }
      buf = nb;
    }
    memcpy(buf + len, line, l);
    len += l;
    kept++;
  }
  fclose(f);
  buf[len] = '\0';
  int st = write_atomic(path, buf);
  free(buf);
  return st;
}

static const char log_header[] =
  "epoch,steps,train_loss,test_acc,bytes_up,bytes_down,support_union_over_k,"
  "xi,delta,time_compute,time_compress,time_aggregate,time_total\n";

/* ---- probes: xi (theory.md 4.2 / 4.4) and the uplink contraction ------- */

static void topk_dense(gc_compressor *c, const float *x, float *out,
                       uint8_t *buf, size_t cap, size_t n)
{
  size_t len;
  memset(out, 0, n * sizeof *out);
  if (gc_compress_f32(c, x, 0, buf, cap, &len, NULL) == GC_SUCCESS)
    gc_decompress_add_f32(c, buf, len, 0, 1.0f, out);
}

/* After a step, with the definitions of theory/probe.c: xi (theory.md
 * 4.2) of the workers' mean accumulator and mean decoded message, or for
 * bi xi_bi (4.4) with delta_prev the server memory before the step; a
 * dense uplink counts its gradient as both.  The mean gradient times lr
 * is in r->pd.  *contraction: the mean uplink contraction.  NaN where
 * undefined. */
static double probe_xi(run *r, const float *delta_prev, double *contraction)
{
  size_t P = r->c->workers, d = r->d;
  double csum = 0;
  int cn = 0;
  memset(r->pa, 0, d * sizeof *r->pa);   /* mean acc   */
  memset(r->pb, 0, d * sizeof *r->pb);   /* mean m^p   */
  for (size_t p = 0; p < P; p++) {
    const float *acc = gc_worker_accumulator(gc_sim_worker(r->sim, p));
    const float *m = gc_worker_sent(gc_sim_worker(r->sim, p));
    if (!acc)
      acc = m;
    double e2 = 0, a2 = 0;
    for (size_t i = 0; i < d; i++) {
      r->pa[i] += acc[i] / (float) P;
      r->pb[i] += m[i] / (float) P;
      e2 += (double) (acc[i] - m[i]) * (acc[i] - m[i]);
      a2 += (double) acc[i] * acc[i];
    }
    if (r->contraction && a2 > 0) {
      csum += 1 - e2 / a2;
      cn++;
    }
  }
  *contraction = cn ? csum / cn : NAN;
  if (!(r->xi_units > 0))
    return NAN;
  gc_compressor *tk = r->probe_up;
  if (delta_prev) {
    tk = r->probe_down;
    for (size_t i = 0; i < d; i++) {
      r->pa[i] += delta_prev[i];
      r->pb[i] += delta_prev[i];
    }
    topk_dense(tk, r->pb, r->pc, r->pbuf, r->pcap, d);
    memcpy(r->pb, r->pc, d * sizeof *r->pb);
  }
  topk_dense(tk, r->pa, r->pc, r->pbuf, r->pcap, d);
  double num = 0, den = 0;
  for (size_t i = 0; i < d; i++) {
    num += (double) (r->pc[i] - r->pb[i]) * (r->pc[i] - r->pb[i]);
    den += (double) r->pd[i] * r->pd[i];
  }
  return den > 0 ? r->xi_units * sqrt(num / den) : NAN;
}

/* ---- progress (stderr, terminals only) ------------------------------- */
static void progress(const gc_train_config *c, size_t epoch, size_t i, size_t n)
{
  if (c->quiet || !isatty(STDERR_FILENO) || n == 0)
    return;
  if (i != n && i % 16 != 0)
    return;
  enum { W = 30 };
  char bar[W + 1];
  size_t fill = i * W / n;
  for (size_t j = 0; j < W; j++)
    bar[j] = j < fill ? '=' : (j == fill ? '>' : ' ');
  bar[W] = '\0';
  fprintf(stderr, "\repoch %zu/%zu [%s] %zu/%zu", epoch + 1, c->epochs, bar, i, n);
  if (i == n)
    fputs("\r\033[K", stderr);
  fflush(stderr);
}

/* ---- setup -------------------------------------------------------------- */

/* The model's layer shapes for shaped compressors (PowerSGD): each linear
 * weight out x in and conv weight out x (in k k) as a matrix, each bias and
 * BatchNorm gamma/beta as a 1 x len vector. */
static int build_segments(run *r)
{
  const gc_nn *nn = r->nets[0];
  size_t L = gc_nn_nlayers(nn), m = 0;
  if (!(r->segs = malloc((2 * L + 1) * sizeof *r->segs)))
    GC_ERROR("out of memory for the layer shapes", GC_ENOMEM);
  for (size_t i = 0; i < L; i++) {
    const gc_nn_layer *y = gc_nn_layer_at(nn, i);
    if (y->nw) {
      int mat = (y->kind == GC_NN_LINEAR || y->kind == GC_NN_CONV) && y->out_c;
      size_t rows = mat ? y->out_c : 1;
      r->segs[m++] = (gc_segment){ y->woff, rows, y->nw / rows };
    }
    if (y->nb)
      r->segs[m++] = (gc_segment){ y->boff, 1, y->nb };
  }
  r->nsegs = m;
  return GC_SUCCESS;
}

static int setup(run *r)
{
  const gc_train_config *c = r->c;
  const char *model = model_of(c);
  const char *want = gc_nn_model_dataset(model);
  if (!want)
    GC_ERRORF(GC_EINVAL, "unknown model '%s'", model);
  if (strcmp(want, c->dataset) != 0)
    GC_ERRORF(GC_EINVAL, "model %s takes %s, not %s", model, want, c->dataset);
  if (c->workers == 0 || c->batch == 0)
    GC_ERROR("workers and batch must be positive", GC_EINVAL);
  const char *dir = c->data_dir ? c->data_dir : gc_data_dir("data");
  GC_TRY(gc_data_load(dir, c->dataset, 1, &r->train));
  GC_TRY(gc_data_load(dir, c->dataset, 0, &r->test));
  if (c->train_subset)
    gc_dataset_truncate(&r->train, c->train_subset);
  if (c->test_subset)
    gc_dataset_truncate(&r->test, c->test_subset);
  size_t n = r->train.n, P = c->workers;
  r->idx = malloc(n * sizeof *r->idx);
  r->order = malloc(n * sizeof *r->order);
  r->off = malloc((P + 1) * sizeof *r->off);
  if (!r->idx || !r->order || !r->off)
    GC_ERROR("out of memory", GC_ENOMEM);
  if (c->noniid)
    GC_TRY(gc_data_partition_noniid(r->train.y, n, P, c->seed, r->idx, r->off));
  else
    GC_TRY(gc_data_partition_iid(n, P, c->seed, r->idx, r->off));
  if (r->off[1] - r->off[0] < c->batch)
    GC_ERRORF(GC_EINVAL, "each worker holds %zu examples, fewer than the batch %zu",
              r->off[1] - r->off[0], c->batch);

  size_t T = c->threads;
#ifdef _OPENMP
  if (T == 0)
    T = (size_t) omp_get_max_threads();
#else
  T = 1;
#endif
  if (T > P)
    T = P;
  if (T == 0)
    T = 1;
  r->T = T;
  gc_nn_blas_single_thread();
  r->nets = calloc(T, sizeof *r->nets);
  if (!r->nets)
    GC_ERROR("out of memory", GC_ENOMEM);
  for (size_t t = 0; t < T; t++)
    if (!(r->nets[t] = gc_nn_alloc_model(model, c->batch)))
      return GC_ENOMEM;
  if (!(r->evalnet = gc_nn_alloc_model(model, 100)))
    return GC_ENOMEM;
  r->d = gc_nn_nparams(r->nets[0]);
  r->ns = gc_nn_nstats(r->nets[0]);
  size_t dim = r->train.dim, d = r->d, ns = r->ns;
  r->xb = malloc(T * c->batch * dim * sizeof *r->xb);
  r->yb = malloc(T * c->batch);
  r->grads = malloc(P * d * sizeof *r->grads);
  r->stats = calloc(ns + 1, sizeof *r->stats);
  r->wstats = calloc(P * ns + 1, sizeof *r->wstats);
  r->loss = calloc(P, sizeof *r->loss);
  r->x0 = malloc(d * sizeof *r->x0);
  r->pa = malloc(d * sizeof *r->pa);
  r->pb = malloc(d * sizeof *r->pb);
  r->pc = malloc(d * sizeof *r->pc);
  r->pd = malloc(d * sizeof *r->pd);
  if (!r->xb || !r->yb || !r->grads || !r->stats || !r->wstats || !r->loss ||
      !r->x0 || !r->pa || !r->pb || !r->pc || !r->pd)
    GC_ERROR("out of memory for the model state", GC_ENOMEM);
  gc_nn_init(r->nets[0], r->x0, r->stats, c->seed);

  gc_algo_config *a = &r->acfg;
  gc_algo_config_default(a);
  GC_TRY(gc_algo_by_name(c->algorithm, &a->kind));
  a->workers = P;
  a->n = d;
  a->dtype = GC_F32;
  a->momentum = c->momentum;
  const gc_compressor_type *T_up = gc_compressor_type_by_name(c->compressor);
  if (!T_up)
    GC_ERRORF(GC_EINVAL, "unknown compressor '%s' (see gradcomp compress --list)",
              c->compressor);
  a->up = a->down = T_up;
  gc_compressor_params_default(&a->up_params);
  gc_compressor_params_default(&a->down_params);
  a->up_params.rank = a->down_params.rank = c->rank;
  if (T_up->flags & GC_COMP_NEEDS_SHAPE) {
    GC_TRY(build_segments(r));
    a->up_params.segments = a->down_params.segments = r->segs;
    a->up_params.nsegments = a->down_params.nsegments = r->nsegs;
  }
  a->up_params.density = c->density;
  a->up_params.seed = a->down_params.seed = c->seed;
  a->down_params.density = density_down(c);
  r->K = gc__resolve_k(d, &a->up_params);
  r->Kd = gc__resolve_k(d, &a->down_params);
  /* a bad setting is named by the compressor that rejects it */
  if (!(r->sim = gc_sim_alloc(a, r->x0)))
    return gc_last_error_code();
  gc_sim_set_threads(r->sim, r->T);   /* workers' compression in parallel */
  /* Probes, with the method's own compressor (deterministic types only):
   * xi in model units, as theory/probe.c defines it, so memories in
   * gradient units (downlink-only, DoubleSqueeze) are scaled by lr; it is
   * undefined without memories (SGD, allreduce) and for EF21 / EF21-BC.
   * The contraction needs the workers' accumulators. */
  if (!(T_up->flags & GC_COMP_RANDOM)) {
    switch (a->kind) {
    case GC_ALGO_UNI: case GC_ALGO_BI: case GC_ALGO_ALLGATHER:
    case GC_ALGO_ALLREDUCE_RANDK:
      r->xi_units = 1.0;
      break;
    case GC_ALGO_DOWNLINK: case GC_ALGO_DOUBLESQUEEZE:
      r->xi_units = c->lr;
      break;
    default:
      break;
    }
    r->contraction = gc_worker_accumulator(gc_sim_worker(r->sim, 0)) != NULL;
  }
  if (r->xi_units > 0) {
    r->probe_up = gc_compressor_alloc(T_up, d, &a->up_params);
    if (a->kind == GC_ALGO_BI)
      r->probe_down = gc_compressor_alloc(T_up, d, &a->down_params);
    if (!r->probe_up || (a->kind == GC_ALGO_BI && !r->probe_down)) {
      r->xi_units = 0;   /* a diagnostic: the run goes on without xi */
      return GC_SUCCESS;
    }
    size_t m1 = gc_compressor_max_bytes(r->probe_up);
    size_t m2 = r->probe_down ? gc_compressor_max_bytes(r->probe_down) : 0;
    r->pcap = m1 > m2 ? m1 : m2;
    if (!(r->pbuf = malloc(r->pcap)))
      GC_ERROR("out of memory for the probes", GC_ENOMEM);
  }
  return GC_SUCCESS;
}

/* ---- the loop ------------------------------------------------------------- */

int gc_train_run(const gc_train_config *c, gc_train_result *res)
{
  run R;
  memset(&R, 0, sizeof R);
  R.c = c;
  if (res)
    memset(res, 0, sizeof *res);
  int st = GC_SUCCESS;
  FILE *log = NULL;
  char path[4200];
  if ((st = gc__mkdir_p(c->out)) != GC_SUCCESS)
    return st;
  if ((st = setup(&R)) != GC_SUCCESS)
    goto done;

  size_t P = c->workers, B = c->batch, d = R.d, ns = R.ns, dim = R.train.dim;
  size_t shard = R.off[1] - R.off[0], spe = shard / B;
  size_t epoch0 = 0, steps = 0;
  uint64_t up_total = 0, down_total = 0;
  if (c->resume) {
    if ((st = ckpt_load(&R, &epoch0, &steps, &up_total, &down_total)))
      goto done;
    if ((st = path_in(path, sizeof path, c->out, "log.csv")) ||
        (st = log_truncate(path, epoch0)))
      goto done;
  }
  if ((st = write_config_json(&R, c->out)))
    goto done;
  if ((st = path_in(path, sizeof path, c->out, "log.csv")))
    goto done;
  log = fopen(path, c->resume ? "a" : "w");
  if (!log) {
    gc_errorf(__FILE__, __LINE__, GC_EIO, "%s: cannot write: %s", path,
              strerror(errno));
    st = GC_EIO;
    goto done;
  }
  if (!c->resume) {
    fputs(log_header, log);
    fflush(log);
  }
  if (c->max_steps && steps >= c->max_steps)
    goto done;
  const void **gp = malloc(P * sizeof *gp);
  int xi_bi = R.acfg.kind == GC_ALGO_BI && R.xi_units > 0;
  float *dprev = xi_bi ? malloc(d * sizeof *dprev) : NULL;
  if (!gp || (xi_bi && !dprev)) {
    free(gp); free(dprev);
    st = GC_ENOMEM;
    goto done;
  }
  for (size_t p = 0; p < P; p++)
    gp[p] = R.grads + p * d;
  size_t probe_every = spe >= 10 ? spe / 10 : 1;
  double tsum = 0;
  size_t tn = 0;

  for (size_t e = epoch0; e < c->epochs && st == GC_SUCCESS; e++) {
    double t0 = gc__now(), tcomp = 0, tstats = 0, w0, s0, w1, s1;
    gc_sim_times(R.sim, &w0, &s0);
    double lsum = 0, usum = 0, xsum = 0, csum = 0;
    size_t xn = 0, cn = 0, done_here = 0;
    memcpy(R.order, R.idx, R.train.n * sizeof *R.order);
    for (size_t p = 0; p < P; p++)
      gc_data_shuffle(R.order + R.off[p], shard, c->seed, (uint32_t) (p + 1),
                      (uint32_t) e);
    const gc_ledger *lg = gc_sim_ledger(R.sim);
    uint64_t up0 = gc_ledger_total(lg, GC_UP), down0 = gc_ledger_total(lg, GC_DOWN);
    for (size_t s = 0; s < spe; s++) {
      if (c->max_steps && steps >= c->max_steps)
        break;
      const float *x = gc_sim_point(R.sim);
      double ta = gc__now();
      #pragma omp parallel for schedule(static) num_threads((int) R.T)
      for (size_t p = 0; p < P; p++) {
        size_t t = 0;
#ifdef _OPENMP
        t = (size_t) omp_get_thread_num();
#endif
        gc_nn *net = R.nets[t];
        float *xb = R.xb + t * B * dim;
        uint8_t *yb = R.yb + t * B;
        const uint32_t *ord = R.order + R.off[p] + s * B;
        for (size_t b = 0; b < B; b++) {
          memcpy(xb + b * dim, R.train.x + (size_t) ord[b] * dim, dim * sizeof *xb);
          yb[b] = R.train.y[ord[b]];
        }
        float *ws = R.wstats + p * ns;
        memcpy(ws, R.stats, ns * sizeof *ws);
        gc_nn_forward(net, x, ws, xb, B, 1, c->seed, (uint32_t) p, (uint32_t) steps);
        R.loss[p] = gc_nn_loss(net, yb);
        gc_nn_backward(net, x, NULL, R.grads + p * d, NULL);
      }
      double tb = gc__now();
      double l = 0;
      for (size_t p = 0; p < P; p++)
        l += R.loss[p];
      l /= (double) P;
      if (!isfinite(l)) {
        gc_errorf(__FILE__, __LINE__, GC_EDIVERGE,
                  "training diverged: loss is %g at epoch %zu, step %zu (lr %g"
                  " too large?)", l, e + 1, steps, c->lr);
        st = GC_EDIVERGE;
        break;
      }
      lsum += l;
      /* Running statistics: averaged densely across workers, in order. */
      for (size_t i = 0; i < ns; i++) {
        double a = 0;
        for (size_t p = 0; p < P; p++)
          a += R.wstats[p * ns + i];
        R.stats[i] = (float) (a / (double) P);
      }
      int probe = (R.xi_units > 0 || R.contraction) &&
                  (s + 1) % probe_every == 0;
      if (probe && R.xi_units > 0) {
        for (size_t i = 0; i < d; i++) {
          double a = 0;
          for (size_t p = 0; p < P; p++)
            a += R.grads[p * d + i];
          R.pd[i] = (float) (c->lr * a / (double) P);
        }
        if (dprev) {
          const float *m = gc_server_memory(gc_sim_server(R.sim));
          memcpy(dprev, m, d * sizeof *dprev);
        }
      }
      double tc = gc__now();
      st = gc_sim_step(R.sim, gp, c->lr);
      if (st != GC_SUCCESS) {
        if (st == GC_EDIVERGE || st == GC_EDOM) {
          gc_errorf(__FILE__, __LINE__, GC_EDIVERGE,
                    "training diverged at epoch %zu, step %zu (non-finite"
                    " gradient or iterate; lr %g too large?)", e + 1, steps, c->lr);
          st = GC_EDIVERGE;
        }
        break;
      }
      usum += (double) gc_server_support_union(gc_sim_server(R.sim));
      if (probe) {
        double ct, xi = probe_xi(&R, dprev, &ct);
        if (isfinite(xi)) {
          xsum += xi;
          xn++;
        }
        if (isfinite(ct)) {
          csum += ct;
          cn++;
        }
      }
      tcomp += tb - ta;
      tstats += tc - tb;
      steps++;
      done_here++;
      progress(c, e, s + 1, spe);
    }
    if (st != GC_SUCCESS || done_here == 0)
      break;
    double acc, tl;
    if ((st = gc_nn_evaluate(R.evalnet, gc_sim_model(R.sim), R.stats, &R.test,
                             &acc, &tl)))
      break;
    uint64_t upe = gc_ledger_total(lg, GC_UP) - up0;
    uint64_t downe = gc_ledger_total(lg, GC_DOWN) - down0;
    up_total += upe;
    down_total += downe;
    gc_ledger_clear((gc_ledger *) lg);   /* keep memory flat over long runs */
    double ttot = gc__now() - t0;
    gc_sim_times(R.sim, &w1, &s1);
    fprintf(log, "%zu,%zu,%.6f,%.4f,%llu,%llu,%.4f,%.4f,%.6f,%.3f,%.3f,%.3f,%.3f\n",
            e + 1, steps, lsum / (double) done_here, acc,
            (unsigned long long) upe, (unsigned long long) downe,
            usum / (double) done_here / (double) R.K,
            xn ? xsum / (double) xn : NAN, cn ? csum / (double) cn : NAN,
            tcomp, w1 - w0, s1 - s0 + tstats, ttot);
    fflush(log);
    if (!c->quiet)
      fprintf(stderr, "epoch %zu: loss %.4f, test accuracy %.4f, %.1f s\n",
              e + 1, lsum / (double) done_here, acc, ttot);
    tsum += ttot;
    tn++;
    if (res) {
      res->epochs_done = e + 1;
      res->steps_done = steps;
      res->train_loss = lsum / (double) done_here;
      res->test_acc = acc;
    }
    /* A partial epoch (--max-steps) is logged but not checkpointed as done. */
    if (done_here == spe && (st = ckpt_save(&R, e + 1, steps, up_total, down_total)))
      break;
    if (c->max_steps && steps >= c->max_steps)
      break;
  }
  if (res)
    res->epoch_seconds = tn ? tsum / (double) tn : 0;
  free(gp);
  free(dprev);
done:
  if (log)
    fclose(log);
  run_free(&R);
  return st;
}
