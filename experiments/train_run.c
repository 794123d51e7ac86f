/* train_run.c -- the driver of `gradcomp train` (gc_train_run.h): the
 * epoch loop over the library's gc_train_step, and everything a run
 * leaves behind: the run folder, config.json, log.csv, model.npy, the
 * checkpoints (one file per process under a transport, committed by
 * checkpoint.json once every process wrote), the progress bar and the
 * bounds files of --bounds. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>

#include "config.h"
#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_internal.h"
#include "gc_io.h"
#include "gc_npy.h"
#include "gc_probe.h"
#include "gc_train_run.h"

/* Everything the driver holds beside the library's run. */
typedef struct run {
  const gc_train_config *c;
  gc_train *t;
  gc_train_info in;
  const gc_transport *tr;
  size_t lo, hi;              /* this process's workers                  */
  uint8_t *ok;                /* [P]: every process wrote its checkpoint  */
  uint64_t stats_total;       /* bytes_stats, all epochs                 */
  double tmodel;              /* time_model_cum so far (c->net)          */
  /* --bounds: what the library does not keep */
  double f0, L, g2sum;
  size_t g2n;
  FILE *csv;
} run;

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

/* The fields that must agree between a checkpoint and a resumed run. */
static void fingerprint(const gc_train_config *c, char *buf, size_t cap)
{
  snprintf(buf, cap, "%s|%s|%zu|%d|%zu|%.17g|%.17g|%s|%s|%.17g|%.17g|%u|%llu"
           "|%zu|%zu%s%s", c->dataset, gc_train_config_model(c), c->workers,
           c->noniid, c->batch, c->lr, c->momentum, c->algorithm, c->compressor,
           c->density, gc_train_config_density_down(c), c->rank,
           (unsigned long long) c->seed,
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
    PACKAGE_VERSION, c->dataset, gc_train_config_model(c), r->in.d, c->workers,
    c->noniid ? "noniid" : "iid", c->batch, c->epochs,
    r->in.steps_per_epoch, c->lr, c->momentum, c->algorithm,
    c->compressor, c->density, gc_train_config_density_down(c), r->in.k,
    r->in.k_down, c->rank,
    (unsigned long long) c->seed, r->in.threads,
    c->device ? c->device->name : "cpu",
    c->transport ? c->transport->type->name : "inproc",
    c->transport ? c->workers + 1 : (size_t) 1,
    c->transport ? "xi and delta on 10 steps per epoch, where defined, from"
                   " the workers' vectors gathered to rank 0 (not in the"
                   " ledger)"
                 : "xi and delta on 10 steps per epoch, where defined",
    net, c->max_steps,
    c->train_subset, c->test_subset, r->in.train_examples, r->in.test_examples,
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
  uint64_t n = gc_train_state_bytes(r->t);
  uint8_t *buf = malloc(n ? n : 1), hdr[CKPT_HDR];
  if (!buf)
    GC_ERROR("cannot allocate the checkpoint", GC_ENOMEM);
  int st = gc_train_state_save(r->t, buf);
  if (st != GC_SUCCESS) {
    free(buf);
    return st;
  }
  uint32_t crc = (uint32_t) crc32_z(0L, buf, n);
  memcpy(hdr, ckpt_magic, 8);
  memcpy(hdr + 8, &n, 8);
  memcpy(hdr + 16, &crc, 4);
  const void *parts[2] = { hdr, buf };
  size_t lens[2] = { CKPT_HDR, n };
  st = gc__write_atomic(path, parts, lens, 2);
  free(buf);
  if (r->tr) {
    /* every rank's file is written before rank 0 commits the epoch */
    uint8_t *ok = r->ok;
    for (size_t p = r->lo; p < r->hi; p++)
      ok[p - r->lo] = st == GC_SUCCESS;
    GC_TRY(st);
    GC_TRY(r->tr->type->gather_aux(r->tr->state, (uint32_t) steps, ok, 1));
    if (!r->in.leader)
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
           (unsigned long long) down, (unsigned long long) r->stats_total,
           r->tmodel, r->tr ? r->c->workers + 1 : (size_t) 1, fp);
  GC_TRY(path_in(path, sizeof path, r->c->out, "checkpoint.json"));
  GC_TRY(write_atomic(path, text));
  remove_other_checkpoints(r->c->out, epoch);
  return GC_SUCCESS;
}

/* Read a checkpoint file written by ckpt_save into r's run. */
static int ckpt_read(run *r, const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    GC_ERRORF(GC_EIO, "%s: cannot open: %s", path, strerror(errno));
  uint8_t hdr[CKPT_HDR];
  uint64_t n;
  uint32_t crc;
  size_t want = gc_train_state_bytes(r->t);
  if (fread(hdr, 1, CKPT_HDR, f) != CKPT_HDR || memcmp(hdr, ckpt_magic, 8)) {
    fclose(f);
    GC_ERRORF(GC_EFORMAT, "%s: not a gradcomp checkpoint", path);
  }
  memcpy(&n, hdr + 8, 8);
  memcpy(&crc, hdr + 16, 4);
  if (n != want) {
    fclose(f);
    GC_ERRORF(GC_EFORMAT, "%s: %llu bytes of state, expected %zu for this"
              " configuration", path, (unsigned long long) n, want);
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
    st = gc_train_state_load(r->t, buf, n);
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
  size_t spe = r->in.steps_per_epoch;
  if (e == 0 || spe == 0 || s % spe != 0 || s / spe != e)
    GC_ERRORF(GC_EFORMAT, "%s: epoch %llu and steps %llu disagree (%zu steps"
              " per epoch)", path, e, s, spe);
  char name[64];
  ckpt_name(r, e, name, sizeof name);
  GC_TRY(path_in(path, sizeof path, r->c->out, name));
  GC_TRY(ckpt_read(r, path));
  unsigned long long sb;
  if (!json_u64(text, "bytes_stats", &sb))
    r->stats_total = sb;
  const char *tm = strstr(text, "\"time_model_cum\":");
  if (tm)
    r->tmodel = strtod(tm + strlen("\"time_model_cum\":"), NULL);
  if (gc_train_steps_done(r->t) != s)
    GC_ERRORF(GC_EFORMAT, "%s: step counter %zu, but checkpoint.json says %llu"
              " steps", path, gc_train_steps_done(r->t), s);
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


/* Gaussian-k's count is whatever its threshold rule gives (docs/theory.md
 * 2.5): on real gradients it can miss k by far (0.013 k on MNIST-MLP).
 * Say so on stderr at the first step where a worker's count leaves
 * [2k/3, 4k/3], once per run (per process under MPI, each for its own
 * workers); the epoch line carries the mean count. */
static void count_warning(const gc_train_config *c, const run *r, size_t e, size_t s,
                          const gc_train_step_info *si, int *warned)
{
  size_t k = r->in.k;
  if (*warned || (3 * si->selected_min >= 2 * k && 3 * si->selected_max <= 4 * k))
    return;
  *warned = 1;
  size_t m = 3 * si->selected_min < 2 * k ? si->selected_min : si->selected_max;
  fprintf(stderr, "gradcomp train: warning: %s sent %zu entries (%.3g k, k = %zu) at "
          "epoch %zu step %zu, outside [2k/3, 4k/3]; warned once per run, the epoch "
          "lines give the mean count\n", c->compressor, m, (double) m / (double) k, k,
          e + 1, s + 1);
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

/* ---- --bounds: bounds.csv and bounds.json --------------------------------- */

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
    c->algorithm, c->compressor, c->lr, r->in.bounds_gamma, r->in.bounds_xi,
    c->bounds_samples, c->bounds_hvps, r->in.bounds_batch, r->in.bounds_fd_step,
    c->bounds_samples, c->bounds_every);
  GC_TRY(path_in(path, sizeof path, c->out, "bounds.json"));
  GC_TRY(write_atomic(path, text));
  GC_TRY(path_in(path, sizeof path, c->out, "bounds.csv"));
  if (!(r->csv = fopen(path, "w")))
    GC_ERRORF(GC_EIO, "%s: cannot write: %s", path, strerror(errno));
  fputs(bounds_header, r->csv);
  fflush(r->csv);
  return GC_SUCCESS;
}

/* One row after epoch e, with L re-estimated at the current model. */
static int bounds_row(run *r, size_t e, size_t steps, double g2_epoch,
                      size_t n_epoch)
{
  const gc_train_config *c = r->c;
  const gc_train_info *in = &r->in;
  gc_train_bound_consts k;
  double Le;
  GC_TRY(gc_train_smoothness(r->t, &Le));
  r->L = fmax(r->L, Le);
  gc_train_bound_constants(r->t, &k);
  double xi = strcmp(in->bounds_xi, "none") ? k.xi_max : 0.0;
  if (!k.xi_samples && strcmp(in->bounds_xi, "none"))
    xi = 0;   /* no sample yet: the running max starts at 0 */
  double m2 = k.m2_max, t[3];
  double bound = gc_bound_nonconvex_terms(r->f0, c->lr, steps, r->L, m2,
                                          in->bounds_gamma, xi, t);
  double g2 = r->g2n ? r->g2sum / (double) r->g2n : NAN;
  fprintf(r->csv, "%zu,%zu,%.17g,%.17g,%s,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,"
          "%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%zu,%.9g\n", e + 1, steps, c->lr,
          in->bounds_gamma, in->bounds_xi, k.xi_max, k.xi_mean, Le, r->L, m2,
          k.m2_mean, r->f0, t[0], t[1], t[2],
          bound, g2, n_epoch ? g2_epoch / (double) n_epoch : NAN, r->g2n,
          bound / g2);
  fflush(r->csv);
  if (!c->quiet)
    fprintf(stderr, "epoch %zu: bound %.4g (L %.3g, M2 %.3g, %s %.3g) vs"
            " measured mean ||grad f||^2 %.4g: ratio %.3g\n", e + 1, bound,
            r->L, m2, in->bounds_xi, xi, g2, bound / g2);
  return GC_SUCCESS;
}

/* out/model.npy: the model every process holds, then the statistics. */
static int write_model(run *r)
{
  char path[4200];
  size_t d = r->in.d, n = d + r->in.ns;
  const float *w = gc_train_weights(r->t);
  if (!w)
    return gc_last_error_code();
  float *m = malloc(n * sizeof *m);
  if (!m)
    GC_ERROR("out of memory for model.npy", GC_ENOMEM);
  memcpy(m, w, d * sizeof *m);
  memcpy(m + d, gc_train_stats(r->t), r->in.ns * sizeof *m);
  int st = path_in(path, sizeof path, r->c->out, "model.npy");
  if (!st)
    st = gc_npy_write(path, GC_F32, 1, &n, m);
  free(m);
  return st;
}

/* The folder at the start: a fresh run's (no checkpoint of another run
 * left), or a resumed one's (its checkpoint loaded, the log cut to it). */
static int start(run *r, size_t *epoch0, size_t *steps, uint64_t *up,
                 uint64_t *down, FILE **log, char *path, size_t cap)
{
  const gc_train_config *c = r->c;
  int leader = r->in.leader;
  if (leader)   /* under a transport the other ranks may be writing */
    gc__remove_stale_tmp(c->out, NULL);
  if (c->resume) {
    GC_TRY(ckpt_load(r, epoch0, steps, up, down));
    if (leader) {
      GC_TRY(path_in(path, cap, c->out, "log.csv"));
      GC_TRY(log_truncate(path, *epoch0));
      remove_other_checkpoints(c->out, *epoch0);
    }
  } else if (leader) {
    /* a fresh log: an old checkpoint no longer describes this folder */
    GC_TRY(path_in(path, cap, c->out, "checkpoint.json"));
    remove(path);
    remove_other_checkpoints(c->out, 0);
  }
  if (!leader)
    return GC_SUCCESS;
  GC_TRY(write_config_json(r, c->out));
  GC_TRY(path_in(path, cap, c->out, "log.csv"));
  if (!(*log = fopen(path, c->resume ? "a" : "w")))
    GC_ERRORF(GC_EIO, "%s: cannot write: %s", path, strerror(errno));
  if (!c->resume) {
    fprintf(*log, "%s%s\n", log_header,
            c->net ? ",net_comm_s,time_model_cum" : "");
    GC_TRY(gc__flush_checked(*log, path));
  }
  return GC_SUCCESS;
}

int gc_train_run(const gc_train_config *c, gc_train_result *res)
{
  run R;
  memset(&R, 0, sizeof R);
  R.c = c;
  R.tr = c->transport;
  if (res)
    memset(res, 0, sizeof *res);
  int st = GC_SUCCESS;
  FILE *log = NULL;
  char path[4200];
  /* the folder only once the options and data are known to be good */
  if (!(R.t = gc_train_alloc(c)))
    return gc_last_error_code();
  gc_train_describe(R.t, &R.in);
  R.lo = R.tr ? R.tr->worker_lo : 0;
  R.hi = R.tr ? R.tr->worker_hi : c->workers;
  if (!(R.ok = calloc(c->workers, 1))) {
    gc_train_free(R.t);
    GC_ERROR("out of memory", GC_ENOMEM);
  }
  size_t spe = R.in.steps_per_epoch, epoch0 = 0, steps = 0;
  uint64_t up_total = 0, down_total = 0;
  if ((st = gc__mkdir_p(c->out)) ||
      (st = start(&R, &epoch0, &steps, &up_total, &down_total, &log, path,
                  sizeof path)))
    goto done;
  if (c->max_steps && steps >= c->max_steps)
    goto done;
  if (c->bounds_every) {
    if ((st = bounds_open(&R)) || (st = gc_train_smoothness(R.t, &R.L)))
      goto done;
  }
  size_t probe_every = spe >= 10 ? spe / 10 : 1;
  double tsum = 0;
  size_t tn = 0;
  /* the uplink's count against k where it depends on the data */
  const gc_compressor_type *CT = gc_compressor_type_by_name(c->compressor);
  int judge_count = CT && (CT->flags & GC_COMP_COUNT_VARIES) && R.in.k > 0;
  int count_warned = 0;

  for (size_t e = epoch0; e < c->epochs && st == GC_SUCCESS; e++) {
    double t0 = gc__now(), tcomp = 0, tstats = 0, w0, s0, w1, s1;
    gc_train_times(R.t, &w0, &s0);
    double lsum = 0, usum = 0, xsum = 0, csum = 0, g2e = 0, selsum = 0;
    size_t xn = 0, cn = 0, done_here = 0, g2en = 0, seln = 0;
    if ((st = gc_train_epoch(R.t, e)))
      break;
    for (size_t s = 0; s < spe; s++) {
      if (c->max_steps && steps >= c->max_steps)
        break;
      if (c->where) {
        c->where[0] = (sig_atomic_t) (e + 1);
        c->where[1] = (sig_atomic_t) steps;
      }
      if (c->bounds_every) {
        /* full gradients at evenly spaced steps (in time_total only) */
        size_t S = c->bounds_samples < spe ? c->bounds_samples : spe;
        for (size_t j = 0; j < S && st == GC_SUCCESS; j++) {
          double g2, f;
          if (j * spe / S != s)
            continue;
          if ((st = gc_train_full_grad2(R.t, &g2, &f)))
            break;
          if (steps == 0)
            R.f0 = f;
          R.g2sum += g2;
          R.g2n++;
          g2e += g2;
          g2en++;
        }
        if (st != GC_SUCCESS)
          break;
      }
      /* log.csv's probes at sampled steps (--bounds reads xi every step) */
      int probe = (s + 1) % probe_every == 0;
      gc_train_step_info si;
      if ((st = gc_train_step(R.t, e, s, probe, &si)))
        break;
      lsum += si.loss;
      usum += (double) si.support;
      if (judge_count && si.selected_workers) {
        selsum += si.selected_sum;
        seln += si.selected_workers;
        count_warning(c, &R, e, s, &si, &count_warned);
      }
      if (isfinite(si.xi)) {
        xsum += si.xi;
        xn++;
      }
      if (isfinite(si.delta)) {
        csum += si.delta;
        cn++;
      }
      tcomp += si.compute_s;
      tstats += si.stats_s;
      steps++;
      done_here++;
      if (R.in.leader)
        progress(c, e, s + 1, spe, done_here, gc__now() - t0);
    }
    if (st != GC_SUCCESS || done_here == 0)
      break;
    /* Evaluation where the folder is written: every process holds the
     * same model and, after the step's exchange, the same statistics. */
    double acc, tl, net_s;
    uint64_t upe, downe, statse;
    if ((st = gc_train_eval(R.t, &acc, &tl)))
      break;
    gc_train_take_bytes(R.t, c->net, &upe, &downe, &statse, &net_s);
    up_total += upe;
    down_total += downe;
    R.stats_total += statse;
    double ttot = gc__now() - t0;
    gc_train_times(R.t, &w1, &s1);
    double tcomp_e = w1 - w0, tagg_e = s1 - s0 + tstats;
    if (c->net)
      R.tmodel += tcomp + tcomp_e + tagg_e + net_s;
    if (R.in.leader) {
      fprintf(log, "%zu,%zu,%.6f,%.4f,%llu,%llu,%.4f,%.4f,%.6f,%.3f,%.3f,%.3f,%.3f,"
              "%llu", e + 1, steps, lsum / (double) done_here, acc,
              (unsigned long long) upe, (unsigned long long) downe,
              usum / (double) done_here / (double) R.in.k,
              xn ? xsum / (double) xn : NAN, cn ? csum / (double) cn : NAN,
              tcomp, tcomp_e, tagg_e, ttot, (unsigned long long) statse);
      if (c->net)
        fprintf(log, ",%.17g,%.6f", net_s, R.tmodel);
      fputc('\n', log);
      if ((st = gc__flush_checked(log, path)) || (st = write_model(&R)))
        break;
      if (!c->quiet && seln)   /* Gaussian-k's, DGC's achieved count */
        fprintf(stderr, "epoch %zu: loss %.4f, test accuracy %.4f, %.1f s, "
                "%s count %.3g k\n", e + 1, lsum / (double) done_here, acc, ttot,
                c->compressor, selsum / (double) seln / (double) R.in.k);
      else if (!c->quiet)
        fprintf(stderr, "epoch %zu: loss %.4f, test accuracy %.4f, %.1f s\n",
                e + 1, lsum / (double) done_here, acc, ttot);
    }
    if (c->bounds_every && ((e + 1) % c->bounds_every == 0 || e + 1 == c->epochs ||
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
done:
  if (log && fclose(log) != 0 && st == GC_SUCCESS) {
    gc_errorf(__FILE__, __LINE__, GC_EIO, "%s: write failed: %s", path,
              strerror(errno));
    st = GC_EIO;
  }
  if (R.csv)
    fclose(R.csv);
  free(R.ok);
  gc_train_free(R.t);
  return st;
}
