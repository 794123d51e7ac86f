/* nn_train.c -- data-parallel training of the reference models through the
 * in-process transport (gc_sim): every step, each worker's gradient at
 * gc_sim_point on its own mini-batch, then gc_sim_step.  Worker gradients
 * are independent (one per OpenMP iteration, BLAS single-threaded) and every
 * reduction runs in worker order, so the thread count never changes a bit. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
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
#include "gc_probe.h"
#include "gc_rng.h"

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
  c->bounds_samples = 3;
  c->bounds_hvps = 10;
  c->bounds_batch = 1000;
}

/* --bounds: the measuring apparatus and the running constants. */
typedef struct bounds {
  int on;
  gc_nn **nets;               /* T nets of batch BOUND_CHUNK             */
  void *dev;                  /* or the device's: BOUND_SLICES chunks    */
  float *xb, *g, *pt;         /* inputs, chunk gradients, x +- h v       */
  uint8_t *yb;
  double *slices;             /* BOUND_SLICES * d partial sums           */
  double *grad, *gp, *v;      /* d: a full gradient, g(x + h v), v       */
  uint32_t *lids;             /* the fixed batch for L                   */
  size_t nl;
  double gamma;               /* sqrt(1-K/d) or sqrt(1-K_d/d); 0 for SGD */
  const char *xi_name;        /* "xi", "xi_bi" or "none"                 */
  double f0, L, m2max, m2sum, ximax, xisum, g2sum;
  size_t m2n, xin, g2n;
  FILE *csv;
} bounds;

/* Everything a run holds; freed by run_free. */
typedef struct run {
  const gc_train_config *c;
  gc_dataset train, test;
  uint32_t *idx, *order;      /* partition; per-worker epoch order       */
  size_t *off;
  size_t T;                   /* threads                                 */
  gc_nn **nets, *evalnet;
  void *dev;                  /* c->device's workspace: P batches of B    */
  void *dstep;                /* the device's step, or NULL: gc_sim only  */
  int dcur;                   /* the device's step holds the latest state */
  uint8_t *dbuf;              /* gc_sim_state_bytes: moving the state     */
  float *xb;                  /* T * B * dim gathered inputs (device: P)  */
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
  gc_xi_probe *xip;           /* xi / xi_bi (gc_probe.h), NULL: none     */
  int xi_log;                 /* log.csv's xi column is defined          */
  int contraction;            /* log the uplink contraction              */
  bounds b;                   /* --bounds                                */
  /* scale-out (c->transport): this process's workers and role */
  const gc_transport *tr;     /* NULL: every node here                   */
  size_t lo, hi;              /* local workers [lo, hi)                  */
  int leader;                 /* evaluates and writes the run folder     */
  size_t ntrain;              /* training examples of the whole run      */
  uint8_t *aux;               /* P * auxlen: losses and statistics       */
  size_t auxlen;              /* 8 + 4 ns                                */
  uint64_t stats_bytes;       /* statistics bytes moved, all steps       */
  uint8_t *pbuf;              /* probed steps: the workers' vectors      */
  size_t plen;
  double tmodel;              /* time_model_cum so far (c->net)          */
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
  if (r->c->device) {
    if (r->c->device->step_free)
      r->c->device->step_free(r->dstep);
    free(r->dbuf);
    r->c->device->free(r->dev);
    r->c->device->free(r->b.dev);
  }
  free(r->xb); free(r->yb); free(r->grads); free(r->stats); free(r->wstats);
  free(r->loss); free(r->x0); free(r->aux); free(r->pbuf);
  gc_sim_free(r->sim);
  free(r->segs);
  gc_xi_probe_free(r->xip);
  bounds *b = &r->b;
  if (b->nets)
    for (size_t t = 0; t < r->T; t++)
      gc_nn_free(b->nets[t]);
  free(b->nets); free(b->xb); free(b->g); free(b->pt); free(b->yb);
  free(b->slices); free(b->grad); free(b->gp); free(b->v); free(b->lids);
  if (b->csv)
    fclose(b->csv);
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
           "|%zu|%zu%s%s", c->dataset, model_of(c), c->workers, c->noniid,
           c->batch, c->lr, c->momentum, c->algorithm, c->compressor,
           c->density, density_down(c), c->rank, (unsigned long long) c->seed,
           c->train_subset, c->test_subset, c->transport ? "|mpi" : "",
           c->net ? "|net" : "");
}

static int write_config_json(const run *r, const char *dir)
{
  const gc_train_config *c = r->c;
  struct utsname u;
  if (uname(&u) != 0)
    memset(&u, 0, sizeof u);
  char fp[512], path[4200], net[128], *text = malloc(8192);
  if (!text)
    GC_ERROR("out of memory", GC_ENOMEM);
  fingerprint(c, fp, sizeof fp);
  if (c->net)
    snprintf(net, sizeof net, "alpha-beta: %.17g bytes/s, %.17g s latency",
             c->net->bandwidth, c->net->latency);
  else
    snprintf(net, sizeof net, "none");
  snprintf(text, 8192,
    "{\n  \"program\": \"gradcomp train\",\n  \"version\": \"%s\",\n"
    "  \"dataset\": \"%s\",\n  \"model\": \"%s\",\n  \"d\": %zu,\n"
    "  \"workers\": %zu,\n  \"partition\": \"%s\",\n  \"batch\": %zu,\n"
    "  \"epochs\": %zu,\n  \"steps_per_epoch\": %zu,\n  \"lr\": %.17g,\n"
    "  \"momentum\": %.17g,\n  \"algorithm\": \"%s\",\n  \"compressor\": \"%s\",\n"
    "  \"density\": %.17g,\n  \"density_down\": %.17g,\n  \"k\": %zu,\n"
    "  \"k_down\": %zu,\n  \"rank\": %u,\n  \"seed\": %llu,\n"
    "  \"threads\": %zu,\n  \"device\": \"%s\",\n"
    "  \"transport\": \"%s\",\n  \"processes\": %zu,\n"
    "  \"probes\": \"%s\",\n  \"net_model\": \"%s\",\n"
    "  \"max_steps\": %zu,\n  \"train_subset\": %zu,\n  \"test_subset\": %zu,\n"
    "  \"train_examples\": %zu,\n  \"test_examples\": %zu,\n"
    "  \"config_file\": \"%s\",\n  \"dtype\": \"float32\",\n"
    "  \"blas_core\": \"%s\",\n  \"openblas_coretype_env\": \"%s\",\n"
    "  \"machine\": \"%s %s %s\",\n  \"fingerprint\": \"%s\"\n}\n",
    PACKAGE_VERSION, c->dataset, model_of(c), r->d, c->workers,
    c->noniid ? "noniid" : "iid", c->batch, c->epochs,
    (r->off[1] - r->off[0]) / c->batch, c->lr, c->momentum, c->algorithm,
    c->compressor, c->density, density_down(c), r->K, r->Kd, c->rank,
    (unsigned long long) c->seed, r->T, c->device ? c->device->name : "cpu",
    c->transport ? c->transport->type->name : "inproc",
    c->transport ? c->workers + 1 : (size_t) 1,
    c->transport ? "xi and delta on 10 steps per epoch, where defined, from"
                   " the workers' vectors gathered to rank 0 (not in the"
                   " ledger)"
                 : "xi and delta on 10 steps per epoch, where defined",
    net, c->max_steps,
    c->train_subset, c->test_subset, r->ntrain, r->test.n,
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

/* Remove every checkpoint-eN.bin (and every rank's checkpoint-eN-rR.bin)
 * of dir but epoch `keep` (0: all): a kill between writing a new one and
 * committing it, or between committing and removing the old one, leaves
 * an orphan that nothing else would delete. */
static void remove_other_checkpoints(const char *dir, size_t keep)
{
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  char path[4200];
  while ((e = readdir(d))) {
    unsigned long long ep;
    unsigned rk;
    int end = 0, rend = 0;
    int ours = sscanf(e->d_name, "checkpoint-e%llu.bin%n", &ep, &end) == 1 &&
               e->d_name[end] == '\0';
    if (!ours)
      ours = sscanf(e->d_name, "checkpoint-e%llu-r%u.bin%n", &ep, &rk, &rend)
             == 2 && rend > 0 && e->d_name[rend] == '\0';
    if (ours && ep != keep &&
        path_in(path, sizeof path, dir, e->d_name) == GC_SUCCESS)
      remove(path);
  }
  closedir(d);
}

/* Epoch e's file of this process: in-process one file, under a transport
 * one per rank (each holds its own nodes' state). */
static void ckpt_name(const run *r, unsigned long long e, char *name,
                      size_t cap)
{
  if (r->tr)
    snprintf(name, cap, "checkpoint-e%llu-r%d.bin", e, r->c->proc);
  else
    snprintf(name, cap, "checkpoint-e%llu.bin", e);
}

static int ckpt_save(run *r, size_t epoch, size_t steps, uint64_t up,
                     uint64_t down)
{
  char name[64], path[4200], fp[512], text[1400];
  ckpt_name(r, epoch, name, sizeof name);
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
  if (r->tr) {
    /* every rank's file is written before rank 0 commits the epoch */
    uint8_t *ok = r->aux;
    for (size_t p = r->lo; p < r->hi; p++)
      ok[p - r->lo] = st == GC_SUCCESS;
    GC_TRY(st);
    GC_TRY(r->tr->type->gather_aux(r->tr->state, (uint32_t) steps, ok, 1));
    if (!r->leader)
      return GC_SUCCESS;
    for (size_t p = 0; p < r->c->workers; p++)
      if (!ok[p])
        GC_ERRORF(GC_EIO, "rank %zu could not write its checkpoint of epoch"
                  " %zu", p + 1, epoch);
    snprintf(name, sizeof name, "checkpoint-e%zu-r*.bin", epoch);
  }
  GC_TRY(st);
  fingerprint(r->c, fp, sizeof fp);
  snprintf(text, sizeof text,
           "{\n  \"epoch\": %zu,\n  \"steps\": %zu,\n  \"file\": \"%s\",\n"
           "  \"length\": %llu,\n  \"bytes_up\": %llu,\n  \"bytes_down\": %llu,\n"
           "  \"bytes_stats\": %llu,\n  \"time_model_cum\": %.17g,\n"
           "  \"processes\": %zu,\n"
           "  \"fingerprint\": \"%s\"\n}\n", epoch, steps, name,
           (unsigned long long) n, (unsigned long long) up,
           (unsigned long long) down, (unsigned long long) r->stats_bytes,
           r->tmodel, r->tr ? r->c->workers + 1 : (size_t) 1, fp);
  GC_TRY(path_in(path, sizeof path, r->c->out, "checkpoint.json"));
  GC_TRY(write_atomic(path, text));
  remove_other_checkpoints(r->c->out, epoch);
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
  int mpi_ckpt = q && strstr(q, "|mpi\"") != NULL;
  if (q && mpi_ckpt != (r->tr != NULL))
    GC_ERRORF(GC_EINVAL, "%s: the checkpoint was written %s; resume it %s",
              path, mpi_ckpt ? "by a run under --transport mpi (one file per"
              " rank)" : "in one process", mpi_ckpt ? "with --transport mpi"
              " and the same number of ranks" : "without --transport mpi");
  if (!q || strncmp(q + 16, fp, strlen(fp)) != 0 || q[16 + strlen(fp)] != '"')
    GC_ERRORF(GC_EINVAL, "%s: the checkpoint belongs to another configuration"
              " (resume with the same options)", path);
  /* Only whole epochs are checkpointed, so steps = epoch x steps per
   * epoch; and the simulator's own counter (it indexes the byte ledger)
   * must say the same, or a crafted file could make the ledger huge. */
  size_t spe = (r->off[1] - r->off[0]) / r->c->batch;
  if (e == 0 || spe == 0 || s % spe != 0 || s / spe != e)
    GC_ERRORF(GC_EFORMAT, "%s: epoch %llu and steps %llu disagree (%zu steps"
              " per epoch)", path, e, s, spe);
  char name[64];
  ckpt_name(r, e, name, sizeof name);
  GC_TRY(path_in(path, sizeof path, r->c->out, name));
  GC_TRY(ckpt_read(r, path));
  unsigned long long sb;
  if (!json_u64(text, "bytes_stats", &sb))
    r->stats_bytes = sb;
  const char *tm = strstr(text, "\"time_model_cum\":");
  if (tm)
    r->tmodel = strtod(tm + strlen("\"time_model_cum\":"), NULL);
  if (gc_sim_steps_done(r->sim) != s)
    GC_ERRORF(GC_EFORMAT, "%s: step counter %lu, but checkpoint.json says %llu"
              " steps", path, (unsigned long) gc_sim_steps_done(r->sim), s);
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
    GC_ERRORF(GC_EIO, "%s: cannot open the log to resume: %s", path,
              strerror(errno));
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
  "xi,delta,time_compute,time_compress,time_aggregate,time_total,"
  "bytes_stats";

/* ---- probes: the uplink contraction (4.1); xi is gc_probe.h's ---------- */

/* The workers' mean uplink contraction 1 - ||acc - m||^2/||acc||^2 after a
 * step; NaN where undefined. */
static double probe_contraction(run *r)
{
  size_t P = r->c->workers, d = r->d;
  double csum = 0;
  int cn = 0;
  for (size_t p = 0; p < P; p++) {
    const float *acc = gc_worker_accumulator(gc_sim_worker(r->sim, p));
    const float *m = gc_worker_sent(gc_sim_worker(r->sim, p));
    double e2 = 0, a2 = 0;
    for (size_t i = 0; i < d; i++) {
      e2 += (double) (acc[i] - m[i]) * (acc[i] - m[i]);
      a2 += (double) acc[i] * acc[i];
    }
    if (a2 > 0) {
      csum += 1 - e2 / a2;
      cn++;
    }
  }
  return cn ? csum / cn : NAN;
}

/* The method's own assumption: xi (4.2) with worker memories only, xi_bi
 * (4.4) with a server memory (bi, DoubleSqueeze; downlink-only: 0). */
static double method_xi(const run *r, const gc_xi_sample *s)
{
  return gc_xi_probe_has_server_memory(r->xip) ? s->xi_bi : s->xi;
}

/* ---- progress (stderr, terminals only) ------------------------------- */

/* "1h02m", "3m05s", "12s": short enough to keep the bar on one line. */
static void duration_text(double sec, char *out, size_t cap)
{
  if (!(sec >= 0) || sec > 1e7) {
    snprintf(out, cap, "?");
    return;
  }
  unsigned long s = (unsigned long) (sec + 0.5);
  if (s >= 3600)
    snprintf(out, cap, "%luh%02lum", s / 3600, s / 60 % 60);
  else if (s >= 60)
    snprintf(out, cap, "%lum%02lus", s / 60, s % 60);
  else
    snprintf(out, cap, "%lus", s);
}

/* Step i of n in this epoch; `done` steps took `elapsed` seconds in this
 * process (a resumed epoch starts part-way).  The rate covers the
 * training steps only, so the run's ETA leaves out the per-epoch test
 * evaluation. */
static void progress(const gc_train_config *c, size_t epoch, size_t i, size_t n,
                     size_t done, double elapsed)
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
  if (done > 0 && elapsed > 0) {
    double rate = (double) done / elapsed;
    size_t left_run = (n - i) + (c->epochs - epoch - 1) * n;
    char eta_e[32], eta_r[32];
    duration_text((double) (n - i) / rate, eta_e, sizeof eta_e);
    duration_text((double) left_run / rate, eta_r, sizeof eta_r);
    fprintf(stderr, " %.1f steps/s, epoch ETA %s, run ETA %s\033[K", rate, eta_e,
            eta_r);
  }
  if (i == n)
    fputs("\r\033[K", stderr);
  fflush(stderr);
}

/* ---- setup -------------------------------------------------------------- */

/* The model's layer shapes for shaped compressors (PowerSGD): each linear
 * weight out x in and conv weight out x (in k k) as a matrix, each bias and
 * BatchNorm gamma/beta as a 1 x len vector. */
static int build_segments(const gc_nn *nn, gc_segment **segs, size_t *nsegs)
{
  size_t L = gc_nn_nlayers(nn), m = 0;
  gc_segment *sg = malloc((2 * L + 1) * sizeof *sg);
  if (!(*segs = sg))
    GC_ERROR("out of memory for the layer shapes", GC_ENOMEM);
  for (size_t i = 0; i < L; i++) {
    const gc_nn_layer *y = gc_nn_layer_at(nn, i);
    if (y->nw) {
      int mat = (y->kind == GC_NN_LINEAR || y->kind == GC_NN_CONV) && y->out_c;
      size_t rows = mat ? y->out_c : 1;
      sg[m++] = (gc_segment){ y->woff, rows, y->nw / rows };
    }
    if (y->nb)
      sg[m++] = (gc_segment){ y->boff, 1, y->nb };
  }
  *nsegs = m;
  return GC_SUCCESS;
}

/* The algorithm's configuration for c on the net nn (its shapes). */
static int algo_config(const gc_train_config *c, const gc_nn *nn,
                       gc_algo_config *a, gc_segment **segs, size_t *nsegs)
{
  *segs = NULL;
  *nsegs = 0;
  gc_algo_config_default(a);
  GC_TRY(gc_algo_by_name(c->algorithm, &a->kind));
  a->workers = c->workers;
  a->n = gc_nn_nparams(nn);
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
    GC_TRY(build_segments(nn, segs, nsegs));
    a->up_params.segments = a->down_params.segments = *segs;
    a->up_params.nsegments = a->down_params.nsegments = *nsegs;
  }
  a->up_params.density = c->density;
  a->up_params.seed = a->down_params.seed = c->seed;
  a->down_params.density = density_down(c);
  return GC_SUCCESS;
}

int gc_train_algo_config(const gc_train_config *c, gc_algo_config *a,
                         gc_segment **segs)
{
  gc_nn *nn = gc_nn_alloc_model(model_of(c), 1);
  if (!nn)
    return gc_last_error_code();
  size_t nsegs;
  int st = algo_config(c, nn, a, segs, &nsegs);
  gc_nn_free(nn);
  if (st != GC_SUCCESS) {
    free(*segs);
    *segs = NULL;
  }
  return st;
}

/* Under a transport: keep only the examples of the local workers' shards
 * (idx[off[lo] .. off[hi])), renumbered 0.. in that order, so that the
 * epoch shuffles of the shard positions pick the same examples as in one
 * process. */
static int keep_local_shards(run *r)
{
  size_t a = r->off[r->lo], b = r->off[r->hi], dim = r->train.dim;
  gc_dataset k = r->train;
  k.n = b - a;
  k.x = malloc((k.n ? k.n : 1) * dim * sizeof *k.x);
  k.y = malloc(k.n ? k.n : 1);
  if (!k.x || !k.y) {
    free(k.x);
    free(k.y);
    GC_ERROR("out of memory for the shard", GC_ENOMEM);
  }
  for (size_t j = 0; j < k.n; j++) {
    uint32_t i = r->idx[a + j];
    memcpy(k.x + j * dim, r->train.x + (size_t) i * dim, dim * sizeof *k.x);
    k.y[j] = r->train.y[i];
    r->idx[a + j] = (uint32_t) j;
  }
  gc_dataset_free(&r->train);
  r->train = k;
  return GC_SUCCESS;
}

/* ---- --bounds: theory.md 4.3 evaluated with measured constants --------- */

enum { BOUND_SLICES = 8, BOUND_CHUNK = 100 };
static const double bound_fd_step = 1e-3;   /* h of the Hessian-vector FD */

/* The bound covers plain SGD steps of the methods of 4.3 / 4.4 with
 * top-K, whose contraction gamma = sqrt(1-K/d) it uses; refuse the rest
 * and name the assumption that fails. */
static int bounds_check(run *r)
{
  const gc_train_config *c = r->c;
  bounds *b = &r->b;
  gc_algo_kind k = r->acfg.kind;
  if (k != GC_ALGO_SGD && k != GC_ALGO_UNI && k != GC_ALGO_BI &&
      k != GC_ALGO_DOWNLINK && k != GC_ALGO_DOUBLESQUEEZE)
    GC_ERRORF(GC_EINVAL, "--bounds: the bound of theory.md 4.3 covers sgd, uni,"
              " bi, downlink and doublesqueeze, not %s", c->algorithm);
  if (k != GC_ALGO_SGD && strcmp(c->compressor, "topk") != 0)
    GC_ERRORF(GC_EINVAL, "--bounds: the bound needs top-K's contraction gamma ="
              " sqrt(1-K/d); compressor %s has no such constant", c->compressor);
  if (c->momentum != 0)
    GC_ERROR("--bounds: the bound is for plain SGD steps (momentum 0)", GC_EINVAL);
  if (c->resume)
    GC_ERROR("--bounds cannot resume: the running constants (M^2, xi, f(x0),"
             " gradient samples) are not in the checkpoint", GC_EINVAL);
  if (!c->bounds_samples || !c->bounds_hvps || !c->bounds_batch)
    GC_ERROR("--bounds: samples per epoch, Hessian-vector products and the L"
             " batch must be at least 1", GC_EINVAL);
  double d = (double) r->d;
  b->xi_name = "none";
  b->gamma = 0;
  if (k == GC_ALGO_UNI) {
    b->xi_name = "xi";
    b->gamma = sqrt(1.0 - (double) r->K / d);
  } else if (k != GC_ALGO_SGD) {
    b->xi_name = "xi_bi";
    b->gamma = sqrt(1.0 - (double) r->Kd / d);
  }
  return GC_SUCCESS;
}

static int bounds_alloc(run *r)
{
  bounds *b = &r->b;
  size_t d = r->d, dim = r->train.dim, N = r->off[r->c->workers];
  size_t T = r->T, rows = r->c->device ? BOUND_SLICES : T;
  b->on = 1;
  b->nl = r->c->bounds_batch < N ? r->c->bounds_batch : N;
  b->nets = calloc(T, sizeof *b->nets);
  b->xb = malloc(rows * BOUND_CHUNK * dim * sizeof *b->xb);
  b->yb = malloc(rows * BOUND_CHUNK);
  b->g = malloc(rows * d * sizeof *b->g);
  b->pt = malloc(d * sizeof *b->pt);
  b->slices = malloc(BOUND_SLICES * d * sizeof *b->slices);
  b->grad = malloc(d * sizeof *b->grad);
  b->gp = malloc(d * sizeof *b->gp);
  b->v = malloc(d * sizeof *b->v);
  b->lids = malloc(b->nl * sizeof *b->lids);
  if (!b->nets || !b->xb || !b->yb || !b->g || !b->pt || !b->slices ||
      !b->grad || !b->gp || !b->v || !b->lids)
    GC_ERROR("out of memory for --bounds", GC_ENOMEM);
  if (r->c->device) {
    if (!(b->dev = r->c->device->alloc(model_of(r->c), BOUND_SLICES, BOUND_CHUNK)))
      return gc_last_error_code();
  } else {
    for (size_t t = 0; t < T; t++)
      if (!(b->nets[t] = gc_nn_alloc_model(model_of(r->c), BOUND_CHUNK)))
        return GC_ENOMEM;
  }
  /* L's batch: every (N/nl)-th example of the partition, so that it spans
   * every worker's shard (non-IID shards are sorted by label). */
  for (size_t j = 0; j < b->nl; j++)
    b->lids[j] = r->idx[j * N / b->nl];
  double v2 = 0;
  for (size_t i = 0; i < d; i++) {
    b->v[i] = gc_rng_normal(r->c->seed, 0xb0d5u, 0, i);
    v2 += b->v[i] * b->v[i];
  }
  for (size_t i = 0; i < d; i++)
    b->v[i] /= sqrt(v2);
  return GC_SUCCESS;
}

/* eval_grad on the device: chunks of BOUND_CHUNK examples, up to
 * BOUND_SLICES of them per call (a short last chunk alone), each chunk's
 * mean gradient weighted by its size and added in chunk order. */
static int eval_grad_device(run *r, const float *w, const uint32_t *ids,
                            size_t n, double *grad, double *loss)
{
  bounds *b = &r->b;
  size_t d = r->d, dim = r->train.dim;
  double l = 0, gl[BOUND_SLICES];
  memset(grad, 0, d * sizeof *grad);
  for (size_t at = 0; at < n;) {
    size_t B = n - at < BOUND_CHUNK ? n - at : BOUND_CHUNK;
    size_t G = B < BOUND_CHUNK ? 1 : (n - at) / BOUND_CHUNK;
    if (G > BOUND_SLICES)
      G = BOUND_SLICES;
    for (size_t k = 0; k < G * B; k++) {
      memcpy(b->xb + k * dim, r->train.x + (size_t) ids[at + k] * dim,
             dim * sizeof *b->xb);
      b->yb[k] = r->train.y[ids[at + k]];
    }
    GC_TRY(r->c->device->grads(b->dev, w, r->stats, b->xb, b->yb, G, B, 0, 0,
                               0, 0, gl, b->g));
    for (size_t g = 0; g < G; g++) {
      const float *gg = b->g + g * d;
      l += gl[g] * (double) B;
      for (size_t i = 0; i < d; i++)
        grad[i] += (double) gg[i] * (double) B;
    }
    at += G * B;
  }
  for (size_t i = 0; i < d; i++)
    grad[i] /= (double) n;
  if (loss)
    *loss = l / (double) n;
  return GC_SUCCESS;
}

/* Mean loss and gradient over the examples ids[0..n) at w, in evaluation
 * mode (no dropout, BatchNorm running statistics): the deterministic f the
 * bound speaks of.  Fixed slices, each summed in order by one thread, then
 * added in slice order: the thread count changes no bit. */
static int eval_grad(run *r, const float *w, const uint32_t *ids, size_t n,
                     double *grad, double *loss)
{
  if (r->c->device)
    return eval_grad_device(r, w, ids, n, grad, loss);
  bounds *b = &r->b;
  size_t d = r->d, dim = r->train.dim;
  double sl[BOUND_SLICES];
  int bad = 0;
  #pragma omp parallel for schedule(static) num_threads((int) r->T) reduction(|:bad)
  for (size_t j = 0; j < BOUND_SLICES; j++) {
    size_t t = 0;
#ifdef _OPENMP
    t = (size_t) omp_get_thread_num();
#endif
    float *xb = b->xb + t * BOUND_CHUNK * dim, *g = b->g + t * d;
    uint8_t *yb = b->yb + t * BOUND_CHUNK;
    double *acc = b->slices + j * d;
    memset(acc, 0, d * sizeof *acc);
    sl[j] = 0;
    for (size_t at = j * n / BOUND_SLICES, hi = (j + 1) * n / BOUND_SLICES;
         at < hi && !bad; at += BOUND_CHUNK) {
      size_t B = hi - at < BOUND_CHUNK ? hi - at : BOUND_CHUNK;
      for (size_t k = 0; k < B; k++) {
        memcpy(xb + k * dim, r->train.x + (size_t) ids[at + k] * dim,
               dim * sizeof *xb);
        yb[k] = r->train.y[ids[at + k]];
      }
      if (!gc_nn_forward(b->nets[t], w, r->stats, xb, B, 0, 0, 0, 0)) {
        bad = 1;
        break;
      }
      sl[j] += gc_nn_loss(b->nets[t], yb) * (double) B;
      gc_nn_backward(b->nets[t], w, NULL, g, NULL);
      for (size_t i = 0; i < d; i++)
        acc[i] += (double) g[i] * (double) B;
    }
  }
  if (bad)
    return GC_EINVAL;   /* reported by gc_nn_forward */
  double l = 0;
  for (size_t j = 0; j < BOUND_SLICES; j++)
    l += sl[j];
  for (size_t i = 0; i < d; i++) {
    double s = 0;
    for (size_t j = 0; j < BOUND_SLICES; j++)
      s += b->slices[j * d + i];
    grad[i] = s / (double) n;
  }
  if (loss)
    *loss = l / (double) n;
  return GC_SUCCESS;
}

/* Local smoothness at x: power iteration on H v ~ (g(x+hv) - g(x-hv))/2h
 * over the fixed batch, warm-started from the last direction; the largest
 * ||H v|| seen (each is <= ||H||: an estimate from below of the local
 * constant; ReLU nets are not globally L-smooth). */
static int estimate_L(run *r, const float *x, double *L)
{
  bounds *b = &r->b;
  size_t d = r->d;
  double h = bound_fd_step, best = 0;
  for (size_t k = 0; k < r->c->bounds_hvps; k++) {
    for (size_t i = 0; i < d; i++)
      b->pt[i] = (float) (x[i] + h * b->v[i]);
    GC_TRY(eval_grad(r, b->pt, b->lids, b->nl, b->gp, NULL));
    for (size_t i = 0; i < d; i++)
      b->pt[i] = (float) (x[i] - h * b->v[i]);
    GC_TRY(eval_grad(r, b->pt, b->lids, b->nl, b->grad, NULL));
    double n2 = 0;
    for (size_t i = 0; i < d; i++) {
      double hv = (b->gp[i] - b->grad[i]) / (2 * h);
      b->gp[i] = hv;
      n2 += hv * hv;
    }
    double nrm = sqrt(n2);
    if (!(nrm > 0) || !isfinite(nrm))
      break;   /* flat (or broken) here: keep the last direction */
    best = fmax(best, nrm);
    for (size_t i = 0; i < d; i++)
      b->v[i] = b->gp[i] / nrm;
  }
  *L = best;
  return GC_SUCCESS;
}

/* ||grad f(x)||^2 over the whole training partition; *loss = f(x). */
static int full_grad2(run *r, const float *x, double *g2, double *loss)
{
  bounds *b = &r->b;
  GC_TRY(eval_grad(r, x, r->idx, r->off[r->c->workers], b->grad, loss));
  double s = 0;
  for (size_t i = 0; i < r->d; i++)
    s += b->grad[i] * b->grad[i];
  *g2 = s;
  return GC_SUCCESS;
}

static const char bounds_header[] =
  "# bound evaluated with measured constants (theory.md 4.3): L is a local"
  " estimate (ReLU nets are not globally L-smooth), M2 the max ||gbar_t||^2"
  " seen, f* >= 0, xi the max measured; assumptions in bounds.json\n"
  "epoch,steps,lr,gamma,xi_kind,xi_max,xi_mean,L_epoch,L,M2_max,M2_mean,f0,"
  "term_f0,term_sgd,term_compression,bound,grad2_mean,grad2_epoch,"
  "grad2_samples,ratio\n";

/* bounds.csv (header) and bounds.json: what the numbers are and assume. */
static int bounds_open(run *r)
{
  const gc_train_config *c = r->c;
  char path[4200], text[3000];
  snprintf(text, sizeof text,
    "{\n  \"label\": \"bound evaluated with measured constants (theory.md 4.3)\",\n"
    "  \"bound\": \"(1/T) sum_{t<T} E||grad f(x_t)||^2 <= 2 (f(x0)-f*)/(lr T)"
    " + L lr M2 + L^2 lr^2 M2 (gamma+xi)^2/(1-gamma)^2\",\n"
    "  \"algorithm\": \"%s\",\n  \"compressor\": \"%s\",\n  \"lr\": %.17g,\n"
    "  \"gamma\": %.17g,\n  \"xi_kind\": \"%s\",\n"
    "  \"assumptions\": [\n"
    "    \"f is L-smooth: L is a local estimate (max over the run of power"
    " iterations on finite-difference Hessian-vector products over a fixed"
    " batch); ReLU nets are not globally L-smooth\",\n"
    "    \"E||gbar_t||^2 <= M2 at every step: M2 is the max of the observed"
    " ||gbar_t||^2 over every step so far (M2_mean is their mean)\",\n"
    "    \"f* >= 0 for the cross-entropy, so f(x0) - f* <= f(x0)\",\n"
    "    \"the assumption of 4.2 (uni) or 4.4 (server memory) with xi = the"
    " max over every step so far of the measured xi_t (xi_bi,t)\",\n"
    "    \"f, grad f and L in evaluation mode (no dropout, BatchNorm running"
    " statistics) over the training partition; the measured mean uses"
    " full-gradient samples at %zu evenly spaced steps per epoch\"\n  ],\n"
    "  \"hvps\": %zu,\n  \"hvp_batch\": %zu,\n  \"fd_step\": %g,\n"
    "  \"samples_per_epoch\": %zu,\n  \"every_epochs\": %zu\n}\n",
    c->algorithm, c->compressor, c->lr, r->b.gamma, r->b.xi_name,
    c->bounds_samples, c->bounds_hvps, r->b.nl, bound_fd_step,
    c->bounds_samples, c->bounds_every);
  GC_TRY(path_in(path, sizeof path, c->out, "bounds.json"));
  GC_TRY(write_atomic(path, text));
  GC_TRY(path_in(path, sizeof path, c->out, "bounds.csv"));
  if (!(r->b.csv = fopen(path, "w")))
    GC_ERRORF(GC_EIO, "%s: cannot write: %s", path, strerror(errno));
  fputs(bounds_header, r->b.csv);
  fflush(r->b.csv);
  return GC_SUCCESS;
}

/* One row after epoch e, with L re-estimated at the current model. */
static int bounds_row(run *r, size_t e, size_t steps, double g2_epoch,
                      size_t n_epoch)
{
  bounds *b = &r->b;
  const gc_train_config *c = r->c;
  double Le;
  GC_TRY(estimate_L(r, gc_sim_model(r->sim), &Le));
  b->L = fmax(b->L, Le);
  double xi = strcmp(b->xi_name, "none") ? b->ximax : 0.0;
  double m2 = b->m2max, t[3];
  double bound = gc_bound_nonconvex_terms(b->f0, c->lr, steps, b->L, m2,
                                          b->gamma, xi, t);
  double g2 = b->g2n ? b->g2sum / (double) b->g2n : NAN;
  fprintf(b->csv, "%zu,%zu,%.17g,%.17g,%s,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,"
          "%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%zu,%.9g\n", e + 1, steps, c->lr,
          b->gamma, b->xi_name, b->xin ? b->ximax : NAN,
          b->xin ? b->xisum / (double) b->xin : NAN, Le, b->L, m2,
          b->m2n ? b->m2sum / (double) b->m2n : NAN, b->f0, t[0], t[1], t[2],
          bound, g2, n_epoch ? g2_epoch / (double) n_epoch : NAN, b->g2n,
          bound / g2);
  fflush(b->csv);
  if (!c->quiet)
    fprintf(stderr, "epoch %zu: bound %.4g (L %.3g, M2 %.3g, %s %.3g) vs"
            " measured mean ||grad f||^2 %.4g: ratio %.3g\n", e + 1, bound,
            b->L, m2, b->xi_name, xi, g2, bound / g2);
  return GC_SUCCESS;
}

/* The algorithm's step on the device when it has one for this method and
 * compressor; --bounds reads the CPU's memories at every step, so it keeps
 * the step there. */
static int device_step_alloc(run *r)
{
  const gc_nn_device_type *D = r->c->device;
  if (!D || !D->step_alloc || r->c->bounds_every)
    return GC_SUCCESS;
  if (!(r->dstep = D->step_alloc(r->dev, &r->acfg, r->x0))) {
    if (gc_last_error_code() != GC_EUNSUP)
      return gc_last_error_code();
    if (!r->c->quiet)
      fprintf(stderr, "gradcomp train: the algorithm steps on the CPU (%s)\n",
              gc_last_error());
    return GC_SUCCESS;
  }
  size_t n = gc_sim_state_bytes(r->sim);
  if (D->step_state_bytes(r->dstep) != n)
    GC_ERRORF(GC_EBADLEN, "the %s step's state is %zu bytes, gc_sim's %zu",
              D->name, D->step_state_bytes(r->dstep), n);
  if (!(r->dbuf = malloc(n)))
    GC_ERROR("out of memory for the state", GC_ENOMEM);
  r->dcur = 1;   /* both start from x0 */
  return GC_SUCCESS;
}

/* Under a transport no process holds every worker: at a probed step each
 * worker sends process 0 its gradient, accumulator and sent message
 * (float32, the probe's dtype) and its own uplink contraction, and process
 * 0 forms the same sums in the same worker order as gc_xi_probe_after and
 * probe_contraction do in one process, so xi and delta are the same bits.
 * Measurement traffic: not in the ledger. */
enum { PROBE_HDR = 2 * sizeof(double) };

static int probe_remote_setup(run *r)
{
  const gc_transport *tr = r->tr;
  uint8_t f[2] = { 0, 0 };   /* xi_log, contraction */
  if (r->leader && !(r->acfg.up->flags & GC_COMP_RANDOM)) {
    gc_worker *w = gc_worker_alloc(&r->acfg, 0);   /* asked, then freed */
    if (!w)
      return gc_last_error_code();
    f[1] = gc_worker_accumulator(w) != NULL;
    gc_worker_free(w);
    r->xip = gc_xi_probe_alloc(&r->acfg);
    f[0] = r->xip && gc_xi_probe_defined(r->xip);
    if (!f[0]) {   /* a diagnostic: the run goes on without xi */
      gc_xi_probe_free(r->xip);
      r->xip = NULL;
    }
  }
  GC_TRY(tr->type->bcast_aux(tr->state, 0, f, sizeof f));
  r->xi_log = f[0];
  r->contraction = f[1];
  if (!r->xi_log && !r->contraction)
    return GC_SUCCESS;
  r->plen = PROBE_HDR + 3 * r->d * sizeof(float);
  size_t msgs = r->leader ? r->c->workers : r->hi - r->lo;
  if (!(r->pbuf = malloc((msgs ? msgs : 1) * r->plen)))
    GC_ERROR("out of memory for the probes' messages", GC_ENOMEM);
  return GC_SUCCESS;
}

/* After a probed step under a transport (every process): process 0 gets
 * *xs (when xi is logged) and *ct, the workers' mean contraction. */
static int probe_remote(run *r, double lr, gc_xi_sample *xs, double *ct)
{
  size_t d = r->d, len = r->plen, vb = d * sizeof(float);
  for (size_t p = r->lo; p < r->hi; p++) {
    uint8_t *m = r->pbuf + (p - r->lo) * len;
    gc_worker *wk = gc_sim_worker(r->sim, p);
    const float *g = r->grads + p * d, *acc = gc_worker_accumulator(wk);
    const float *sent = gc_worker_sent(wk);
    double c[2] = { 0, 0 };   /* 1 - ||acc - m||^2/||acc||^2, defined */
    if (r->contraction) {
      double e2 = 0, a2 = 0;
      for (size_t i = 0; i < d; i++) {
        e2 += (double) (acc[i] - sent[i]) * (acc[i] - sent[i]);
        a2 += (double) acc[i] * acc[i];
      }
      if (a2 > 0) {
        c[0] = 1 - e2 / a2;
        c[1] = 1;
      }
    }
    if (!acc)
      acc = g;   /* dense uplink, as gc_xi_probe_sums_add */
    if (!sent)
      sent = acc;
    memcpy(m, c, PROBE_HDR);
    memcpy(m + PROBE_HDR, g, vb);
    memcpy(m + PROBE_HDR + vb, acc, vb);
    memcpy(m + PROBE_HDR + 2 * vb, sent, vb);
  }
  uint32_t t = gc_sim_steps_done(r->sim) - 1;
  GC_TRY(r->tr->type->gather_aux(r->tr->state, t, r->pbuf, len));
  if (!r->leader)
    return GC_SUCCESS;
  double csum = 0;
  int cn = 0;
  for (size_t p = 0; p < r->c->workers; p++) {
    double c[2];
    memcpy(c, r->pbuf + p * len, PROBE_HDR);
    if (c[1] != 0) {
      csum += c[0];
      cn++;
    }
  }
  *ct = cn ? csum / cn : NAN;
  if (!r->xip)
    return GC_SUCCESS;
  gc_xi_probe_sums_begin(r->xip);
  for (size_t p = 0; p < r->c->workers; p++) {
    const uint8_t *m = r->pbuf + p * len + PROBE_HDR;
    gc_xi_probe_sums_add(r->xip, m, m + vb, m + 2 * vb);
  }
  return gc_xi_probe_sums_end(r->xip, lr, xs);
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
  r->tr = c->transport;
  r->lo = 0;
  r->hi = c->workers;
  r->leader = 1;
  if (r->tr) {
    const gc_transport *tr = r->tr;
    if (c->device)
      GC_ERROR("--transport: the nets run on the CPU under a transport "
               "(--device cuda is not supported with it)", GC_EINVAL);
    if (c->bounds_every)
      GC_ERROR("--bounds needs full gradients over every shard in one "
               "process: not supported with --transport", GC_EINVAL);
    if (!tr->type->gather_aux || !tr->type->bcast_aux)
      GC_ERRORF(GC_EINVAL, "transport %s cannot carry the BatchNorm "
                "statistics and losses (no gather_aux/bcast_aux)",
                tr->type->name);
    if (tr->worker_lo > tr->worker_hi || tr->worker_hi > c->workers)
      GC_ERROR("transport: local workers outside [0, P)", GC_EINVAL);
    if (c->proc == 0 && !tr->server)
      GC_ERROR("transport: process 0 must run the server", GC_EINVAL);
    r->lo = tr->worker_lo;
    r->hi = tr->worker_hi;
    r->leader = c->proc == 0;
  }
  const char *dir = c->data_dir ? c->data_dir : gc_data_dir("data");
  GC_TRY(gc_data_load(dir, c->dataset, 1, &r->train));
  if (r->leader)   /* evaluation happens where the folder is written */
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
  r->ntrain = n;
  if (r->tr)
    GC_TRY(keep_local_shards(r));

  size_t T = c->threads;
#ifdef _OPENMP
  if (T == 0)
    T = (size_t) omp_get_max_threads();
#else
  T = 1;
#endif
  if (T > r->hi - r->lo)
    T = r->hi - r->lo;
  if (T == 0)
    T = 1;
  r->T = T;
  gc_nn_blas_single_thread();
  r->nets = calloc(T, sizeof *r->nets);
  if (!r->nets)
    GC_ERROR("out of memory", GC_ENOMEM);
  /* On a device the CPU keeps one net of batch 1: the shapes and the
   * initial weights (gc_nn_init) come from it, nothing else. */
  size_t cpu_nets = c->device ? 1 : T, xrows = c->device ? P : T;
  for (size_t t = 0; t < cpu_nets; t++)
    if (!(r->nets[t] = gc_nn_alloc_model(model, c->device ? 1 : c->batch)))
      return GC_ENOMEM;
  if (c->device) {
    if (!(r->dev = c->device->alloc(model, P, c->batch)))
      return gc_last_error_code();
  } else if (r->leader && !(r->evalnet = gc_nn_alloc_model(model, 100))) {
    return GC_ENOMEM;
  }
  r->d = gc_nn_nparams(r->nets[0]);
  r->ns = gc_nn_nstats(r->nets[0]);
  size_t dim = r->train.dim, d = r->d, ns = r->ns;
  r->xb = malloc(xrows * c->batch * dim * sizeof *r->xb);
  r->yb = malloc(xrows * c->batch);
  r->grads = malloc(P * d * sizeof *r->grads);
  r->stats = calloc(ns + 1, sizeof *r->stats);
  r->wstats = calloc(P * ns + 1, sizeof *r->wstats);
  r->loss = calloc(P, sizeof *r->loss);
  r->x0 = malloc(d * sizeof *r->x0);
  r->auxlen = sizeof(double) + ns * sizeof(float);
  r->aux = malloc(P * r->auxlen);
  if (!r->xb || !r->yb || !r->grads || !r->stats || !r->wstats || !r->loss ||
      !r->x0 || !r->aux)
    GC_ERROR("out of memory for the model state", GC_ENOMEM);
  gc_nn_init(r->nets[0], r->x0, r->stats, c->seed);

  gc_algo_config *a = &r->acfg;
  GC_TRY(algo_config(c, r->nets[0], a, &r->segs, &r->nsegs));
  const gc_compressor_type *T_up = a->up;
  r->K = gc__resolve_k(d, &a->up_params);
  r->Kd = gc__resolve_k(d, &a->down_params);
  /* a bad setting is named by the compressor that rejects it */
  if (!(r->sim = r->tr ? gc_sim_alloc_transport(a, r->x0, r->tr)
                       : gc_sim_alloc(a, r->x0)))
    return gc_last_error_code();
  gc_sim_set_threads(r->sim, r->T);   /* workers' compression in parallel */
  GC_TRY(device_step_alloc(r));
  if (c->bounds_every)
    GC_TRY(bounds_check(r));
  /* Probes (deterministic compressors only): xi through the library's one
   * definition (gc_probe.h, as theory/probe.c), undefined without memories
   * (SGD, allreduce) and for EF21 / EF21-BC; the contraction needs the
   * workers' accumulators.  --bounds reads the probe at every step.  Under
   * a transport process 0 decides and tells the others, who send it their
   * vectors at the probed steps (probe_remote). */
  if (r->tr)
    return probe_remote_setup(r);
  if (!(T_up->flags & GC_COMP_RANDOM)) {
    r->contraction = gc_worker_accumulator(gc_sim_worker(r->sim, 0)) != NULL;
    r->xi_log = 1;
  }
  if (r->xi_log || c->bounds_every) {
    r->xip = gc_xi_probe_alloc(a);
    if (!r->xip) {
      if (c->bounds_every)
        return gc_last_error_code();
      r->xi_log = 0;   /* a diagnostic: the run goes on without xi */
      return GC_SUCCESS;
    }
    r->xi_log = r->xi_log && gc_xi_probe_defined(r->xip);
    if (!r->xi_log && !c->bounds_every) {   /* nothing to read: free d-sized scratch */
      gc_xi_probe_free(r->xip);
      r->xip = NULL;
    }
  }
  if (c->bounds_every)
    GC_TRY(bounds_alloc(r));
  return GC_SUCCESS;
}

/* ---- the loop ------------------------------------------------------------- */

/* The step's messages beside the algorithm's.  The BatchNorm running
 * statistics are averaged densely across the workers, outside
 * compression: each worker sends its loss (8 bytes, for the log: not
 * counted, like a message length) and its statistics (ns float32) to the
 * server, which averages both in worker order and sends the mean loss and
 * statistics back to every worker (P copies of ns float32).  The
 * statistics' bytes both ways are counted (log.csv's bytes_stats).  In one
 * process the same messages are written and read back, so a transport
 * changes no bit.  On return every process holds the mean statistics in
 * r->stats and the mean loss in *loss. */
static int exchange_stats(run *r, uint32_t t, double *loss)
{
  size_t P = r->c->workers, ns = r->ns, len = r->auxlen;
  const size_t h = sizeof(double);
  for (size_t p = r->lo; p < r->hi; p++) {
    uint8_t *m = r->aux + (p - r->lo) * len;   /* gather_aux's layout */
    memcpy(m, &r->loss[p], h);
    memcpy(m + h, r->wstats + p * ns, ns * sizeof(float));
  }
  if (r->tr)
    GC_TRY(r->tr->type->gather_aux(r->tr->state, t, r->aux, len));
  if (r->leader) {   /* the server's process: decode, average, encode */
    double l = 0;
    for (size_t p = 0; p < P; p++) {
      double lp;
      memcpy(&lp, r->aux + p * len, h);
      l += lp;
    }
    l /= (double) P;
    for (size_t i = 0; i < ns; i++) {
      double a = 0;
      for (size_t p = 0; p < P; p++) {
        float v;
        memcpy(&v, r->aux + p * len + h + i * sizeof v, sizeof v);
        a += v;
      }
      r->stats[i] = (float) (a / (double) P);
    }
    memcpy(r->aux, &l, h);   /* the downlink replaces worker 0's message */
    memcpy(r->aux + h, r->stats, ns * sizeof(float));
  }
  if (r->tr)
    GC_TRY(r->tr->type->bcast_aux(r->tr->state, t, r->aux, len));
  memcpy(loss, r->aux, h);
  memcpy(r->stats, r->aux + h, ns * sizeof(float));
  r->stats_bytes += 2 * (uint64_t) P * ns * sizeof(float);
  return GC_SUCCESS;
}

/* out/model.npy: the model every process holds, then the statistics. */
static int write_model(const run *r)
{
  char path[4200];
  size_t n = r->d + r->ns;
  float *m = malloc(n * sizeof *m);
  if (!m)
    GC_ERROR("out of memory for model.npy", GC_ENOMEM);
  memcpy(m, gc_sim_model(r->sim), r->d * sizeof *m);
  memcpy(m + r->d, r->stats, r->ns * sizeof *m);
  int st = path_in(path, sizeof path, r->c->out, "model.npy");
  if (!st)
    st = gc_npy_write(path, GC_F32, 1, &n, m);
  free(m);
  return st;
}

/* For a device: step s's batches of the P workers gathered in worker
 * order, and each worker's copy of the running statistics. */
static void gather_batches(run *r, size_t s)
{
  size_t P = r->c->workers, B = r->c->batch, dim = r->train.dim, ns = r->ns;
  #pragma omp parallel for schedule(static) num_threads((int) r->T)
  for (size_t p = 0; p < P; p++) {
    const uint32_t *ord = r->order + r->off[p] + s * B;
    for (size_t b = 0; b < B; b++) {
      memcpy(r->xb + (p * B + b) * dim, r->train.x + (size_t) ord[b] * dim,
             dim * sizeof *r->xb);
      r->yb[p * B + b] = r->train.y[ord[b]];
    }
    memcpy(r->wstats + p * ns, r->stats, ns * sizeof *r->wstats);
  }
}

/* The state moves to where the next step runs: the device's step for the
 * plain steps, the CPU's gc_sim for probed steps, checkpoints and the
 * evaluation.  The two step bit-identically, so the trajectory does not
 * depend on where each step ran. */
static int device_step_sync(run *r, int to_device)
{
  if (!r->dstep || r->dcur == to_device)
    return GC_SUCCESS;
  const gc_nn_device_type *D = r->c->device;
  size_t n = gc_sim_state_bytes(r->sim);
  if (to_device) {
    gc_sim_state_save(r->sim, r->dbuf);
    GC_TRY(D->step_state_load(r->dstep, r->dbuf, n));
  } else {
    GC_TRY(D->step_state_save(r->dstep, r->dbuf));
    GC_TRY(gc_sim_state_load(r->sim, r->dbuf, n));
  }
  r->dcur = to_device;
  return GC_SUCCESS;
}

/* Step s's gradients on the device's step, at its own point, kept there. */
static int device_step_grads(run *r, size_t s, size_t steps)
{
  const gc_train_config *c = r->c;
  gather_batches(r, s);
  return c->device->step_grads(r->dstep, r->wstats, r->xb, r->yb, c->batch, c->seed,
                               (uint32_t) steps, r->loss);
}

/* Step s on the device: one call for every worker's loss and gradient
 * (worker p keyed as on the CPU), into the host's grads. */
static int device_grads(run *r, const float *x, size_t s, size_t steps)
{
  const gc_train_config *c = r->c;
  gather_batches(r, s);
  return c->device->grads(r->dev, x, r->wstats, r->xb, r->yb, c->workers, c->batch,
                          1, c->seed, 0, (uint32_t) steps, r->loss, r->grads);
}

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
  /* the folder only once the options and data are known to be good */
  if ((st = setup(&R)) != GC_SUCCESS || (st = gc__mkdir_p(c->out)) != GC_SUCCESS)
    goto done;
  if (R.leader)   /* under a transport the other ranks may be writing */
    gc__remove_stale_tmp(c->out, NULL);

  size_t P = c->workers, B = c->batch, d = R.d, ns = R.ns, dim = R.train.dim;
  size_t shard = R.off[1] - R.off[0], spe = shard / B;
  size_t epoch0 = 0, steps = 0;
  uint64_t up_total = 0, down_total = 0;
  if (c->resume) {
    if ((st = ckpt_load(&R, &epoch0, &steps, &up_total, &down_total)))
      goto done;
    R.dcur = 0;   /* the checkpoint is in the CPU's gc_sim */
    if (R.leader &&
        ((st = path_in(path, sizeof path, c->out, "log.csv")) ||
         (st = log_truncate(path, epoch0))))
      goto done;
    if (R.leader)
      remove_other_checkpoints(c->out, epoch0);
  } else if (R.leader) {
    /* a fresh log: an old checkpoint no longer describes this folder */
    if ((st = path_in(path, sizeof path, c->out, "checkpoint.json")))
      goto done;
    remove(path);
    remove_other_checkpoints(c->out, 0);
  }
  if (R.leader) {
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
      fprintf(log, "%s%s\n", log_header,
              c->net ? ",net_comm_s,time_model_cum" : "");
      if ((st = gc__flush_checked(log, path)))
        goto done;
    }
  }
  if (c->max_steps && steps >= c->max_steps)
    goto done;
  if (R.b.on) {
    if ((st = bounds_open(&R)))
      goto done;
    double L0;
    if ((st = estimate_L(&R, gc_sim_model(R.sim), &L0)))
      goto done;
    R.b.L = L0;
  }
  const void **gp = malloc(P * sizeof *gp);
  if (!gp) {
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
    double lsum = 0, usum = 0, xsum = 0, csum = 0, g2e = 0;
    size_t xn = 0, cn = 0, done_here = 0, g2en = 0;
    size_t steps0 = steps;
    uint64_t sb0 = R.stats_bytes;
    memcpy(R.order, R.idx, R.ntrain * sizeof *R.order);
    for (size_t p = R.lo; p < R.hi; p++)
      gc_data_shuffle(R.order + R.off[p], shard, c->seed, (uint32_t) (p + 1),
                      (uint32_t) e);
    const gc_ledger *lg = gc_sim_ledger(R.sim);
    uint64_t up0 = gc_ledger_total(lg, GC_UP), down0 = gc_ledger_total(lg, GC_DOWN);
    const gc_ledger *dlg = R.dstep ? c->device->step_ledger(R.dstep) : NULL;
    uint64_t dup0 = dlg ? gc_ledger_total(dlg, GC_UP) : 0;
    uint64_t ddown0 = dlg ? gc_ledger_total(dlg, GC_DOWN) : 0;
    double tdev = 0;   /* the steps taken on the device, whole */
    for (size_t s = 0; s < spe; s++) {
      if (c->max_steps && steps >= c->max_steps)
        break;
      if (c->where) {
        c->where[0] = (sig_atomic_t) (e + 1);
        c->where[1] = (sig_atomic_t) steps;
      }
      /* log.csv's probes at sampled steps; --bounds reads xi every step */
      int probe = (s + 1) % probe_every == 0;
      int on_dev = R.dstep && !(probe && (R.xi_log || R.contraction));
      if ((st = device_step_sync(&R, on_dev)))
        break;
      const float *x = gc_sim_point(R.sim);
      if (R.b.on) {
        /* full gradients at evenly spaced steps (in time_total only) */
        size_t S = c->bounds_samples < spe ? c->bounds_samples : spe;
        for (size_t j = 0; j < S && st == GC_SUCCESS; j++) {
          double g2, f;
          if (j * spe / S != s)
            continue;
          if ((st = full_grad2(&R, gc_sim_model(R.sim), &g2, &f)))
            break;
          if (steps == 0)
            R.b.f0 = f;
          R.b.g2sum += g2;
          R.b.g2n++;
          g2e += g2;
          g2en++;
        }
        if (st != GC_SUCCESS)
          break;
      }
      double ta = gc__now();
      if (on_dev) {
        if ((st = device_step_grads(&R, s, steps)))
          break;
      } else if (c->device) {
        if ((st = device_grads(&R, x, s, steps)))
          break;
      } else {
      #pragma omp parallel for schedule(static) num_threads((int) R.T)
      for (size_t p = R.lo; p < R.hi; p++) {
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
      }
      double tb = gc__now();
      double l;
      if ((st = exchange_stats(&R, (uint32_t) steps, &l)))
        break;
      if (!isfinite(l)) {
        gc_errorf(__FILE__, __LINE__, GC_EDIVERGE,
                  "training diverged: loss is %g at epoch %zu, step %zu (lr %g"
                  " too large?)", l, e + 1, steps, c->lr);
        st = GC_EDIVERGE;
        break;
      }
      lsum += l;
      int probe_xi = R.xip && (R.b.on || (probe && R.xi_log));
      if (probe_xi)
        gc_xi_probe_before(R.xip, R.sim);
      double tc = gc__now();
      size_t support = 0;
      if (on_dev) {
        st = c->device->step_run(R.dstep, c->lr, &support);
        tdev += gc__now() - tc;
      } else {
        st = gc_sim_step(R.sim, gp, c->lr);
        if (gc_sim_server(R.sim))   /* NULL where the server runs elsewhere */
          support = gc_server_support_union(gc_sim_server(R.sim));
      }
      if (st != GC_SUCCESS) {
        if (st == GC_EDIVERGE || st == GC_EDOM) {
          gc_errorf(__FILE__, __LINE__, GC_EDIVERGE,
                    "training diverged at epoch %zu, step %zu (non-finite"
                    " gradient or iterate; lr %g too large?)", e + 1, steps, c->lr);
          st = GC_EDIVERGE;
        }
        break;
      }
      usum += (double) support;
      gc_xi_sample xs;
      double ct = NAN;
      if (R.tr && probe && (R.xi_log || R.contraction) &&
          (st = probe_remote(&R, c->lr, &xs, &ct)))
        break;
      if (probe_xi && !R.tr &&
          (st = gc_xi_probe_after(R.xip, R.sim, gp, c->lr, &xs)))
        break;
      if (probe_xi) {
        double xi = method_xi(&R, &xs);
        if (probe && R.xi_log && isfinite(xi)) {
          xsum += xi;
          xn++;
        }
        if (R.b.on) {
          R.b.m2max = fmax(R.b.m2max, xs.gbar_norm2);
          R.b.m2sum += xs.gbar_norm2;
          R.b.m2n++;
          if (!isnan(xi)) {   /* +Inf (gbar = 0, memories not) is kept */
            R.b.ximax = fmax(R.b.ximax, xi);
            R.b.xisum += xi;
            R.b.xin++;
          }
        }
      }
      if (probe && R.contraction) {
        if (!R.tr)
          ct = probe_contraction(&R);
        if (isfinite(ct)) {
          csum += ct;
          cn++;
        }
      }
      tcomp += tb - ta;
      tstats += tc - tb;
      steps++;
      done_here++;
      if (R.leader)
        progress(c, e, s + 1, spe, done_here, gc__now() - t0);
    }
    if (st != GC_SUCCESS || done_here == 0 || (st = device_step_sync(&R, 0)))
      break;
    /* Evaluation where the folder is written: every process holds the
     * same model and, after the step's exchange, the same statistics. */
    double acc = NAN, tl;
    if (R.leader &&
        (st = c->device ? c->device->evaluate(R.dev, gc_sim_model(R.sim), R.stats,
                                              &R.test, &acc, &tl)
              : gc_nn_evaluate(R.evalnet, gc_sim_model(R.sim), R.stats, &R.test,
                               &acc, &tl)))
      break;
    uint64_t upe = gc_ledger_total(lg, GC_UP) - up0;
    uint64_t downe = gc_ledger_total(lg, GC_DOWN) - down0;
    /* the network model per step, before the ledgers are cleared (a step
     * is in one of them: the CPU's or the device's) */
    double net_s = 0;
    for (size_t t = steps0; c->net && t < steps; t++)
      net_s += gc_net_ledger_step_time(c->net, &R.acfg, lg, (uint32_t) t) +
               (dlg ? gc_net_ledger_step_time(c->net, &R.acfg, dlg, (uint32_t) t)
                    : 0);
    if (dlg) {   /* the steps taken on the device */
      upe += gc_ledger_total(dlg, GC_UP) - dup0;
      downe += gc_ledger_total(dlg, GC_DOWN) - ddown0;
      gc_ledger_clear((gc_ledger *) dlg);
    }
    up_total += upe;
    down_total += downe;
    gc_ledger_clear((gc_ledger *) lg);   /* keep memory flat over long runs */
    double ttot = gc__now() - t0;
    gc_sim_times(R.sim, &w1, &s1);
    double tcomp_e = w1 - w0 + tdev, tagg_e = s1 - s0 + tstats;
    if (c->net)
      R.tmodel += tcomp + tcomp_e + tagg_e + net_s;
    if (R.leader) {
      fprintf(log, "%zu,%zu,%.6f,%.4f,%llu,%llu,%.4f,%.4f,%.6f,%.3f,%.3f,%.3f,%.3f,"
              "%llu", e + 1, steps, lsum / (double) done_here, acc,
              (unsigned long long) upe, (unsigned long long) downe,
              usum / (double) done_here / (double) R.K,
              xn ? xsum / (double) xn : NAN, cn ? csum / (double) cn : NAN,
              tcomp, tcomp_e, tagg_e, ttot,
              (unsigned long long) (R.stats_bytes - sb0));
      if (c->net)
        fprintf(log, ",%.17g,%.6f", net_s, R.tmodel);
      fputc('\n', log);
      if ((st = gc__flush_checked(log, path)))
        break;
      if ((st = write_model(&R)))
        break;
    }
    if (!c->quiet && R.leader)
      fprintf(stderr, "epoch %zu: loss %.4f, test accuracy %.4f, %.1f s\n",
              e + 1, lsum / (double) done_here, acc, ttot);
    if (R.b.on && ((e + 1) % c->bounds_every == 0 || e + 1 == c->epochs ||
                   (c->max_steps && steps >= c->max_steps)) &&
        (st = bounds_row(&R, e, steps, g2e, g2en)))
      break;
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
done:
  if (log && fclose(log) != 0 && st == GC_SUCCESS) {
    gc_errorf(__FILE__, __LINE__, GC_EIO, "%s: write failed: %s", path,
              strerror(errno));
    st = GC_EIO;
  }
  run_free(&R);
  return st;
}
