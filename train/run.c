/* run.c -- the driver of `gradcomp train` (gc_train_run.h): the
 * epoch loop over gc_train_step (train.c), and everything a run
 * leaves behind: the run folder, config.json, log.csv, model.npy, the
 * checkpoints (one file per process under a transport, committed by
 * checkpoint.json once every process wrote), the progress bar and the
 * bounds files of --bounds. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1   /* flock */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "config.h"
#include "gc_algo.h"
#include "gc_algo_rules.h"
#include "gc_checkpoint.h"
#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_clock.h"
#include "gc_io.h"
#include "gc_npy.h"
#include "gc_ladder.h"
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
  int sparse_up;              /* support_union_over_k means something    */
  /* --bounds: what the library does not keep */
  double f0, L, g2sum;
  double gdsum, insum;          /* ||D||^2, <D, grad f(x)>; D = grad f(x) -
                                   grad f(x~) at the samples             */
  size_t g2n;
  FILE *csv;
  /* steps.csv: the window since its last row */
  FILE *steps;
  char steps_path[4200];
  double wloss, wxi, wdelta;
  size_t wn, wxn, wdn;
  uint64_t up_cum, down_cum;  /* bytes so far, taken at every row        */
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


/* config.json: every string goes through gc__json_quote, since the
 * config file's path, the environment and uname may hold any bytes. */
static int write_config_json(const run *r, const char *dir)
{
  const gc_train_config *c = r->c;
  struct utsname u;
  if (uname(&u) != 0)
    memset(&u, 0, sizeof u);
  char fp[GC_CKPT_FP_TEXT], path[4200], net[128], machine[3 * sizeof u.release + 3];
  gc_ckpt_fingerprint(c, fp, sizeof fp);
  if (c->net)
    snprintf(net, sizeof net, "alpha-beta: %.17g bytes/s, %.17g s latency",
             c->net->bandwidth, c->net->latency);
  else
    snprintf(net, sizeof net, "none");
  snprintf(machine, sizeof machine, "%s %s %s", u.sysname, u.release, u.machine);
  const char *env = getenv("OPENBLAS_CORETYPE");
  const char *raw[] = {
    PACKAGE_VERSION, c->dataset, gc_train_config_model(c),
    c->noniid ? "noniid" : "iid", c->algorithm, c->compressor,
    c->device ? c->device->name : "cpu",
    c->transport ? c->transport->type->name : "inproc",
    c->transport ? "xi and delta on 10 steps per epoch, where defined, from"
                   " the workers' vectors gathered to rank 0 (not in the"
                   " ledger)"
                 : "xi and delta on 10 steps per epoch, where defined",
    net, c->config_file ? c->config_file : "", gc_nn_blas_core(),
    env ? env : "", machine, fp };
  enum { NSTR = sizeof raw / sizeof raw[0] };
  char *q[NSTR] = { NULL };
  int st = GC_SUCCESS;
  for (size_t i = 0; i < NSTR && st == GC_SUCCESS; i++)
    if (!(q[i] = gc__json_quote(raw[i])))
      st = GC_ENOMEM;
  char *text = NULL;
  if (st == GC_SUCCESS) {
#define CONFIG_JSON_ARGS \
    q[0], q[1], q[2], r->in.d, c->workers, q[3], c->batch, c->epochs, \
    r->in.steps_per_epoch, c->lr, c->momentum, q[4], q[5], c->density, \
    gc_train_config_density_down(c), r->in.k, r->in.k_down, c->rank, \
    (unsigned long long) c->seed, r->in.threads, q[6], q[7], \
    c->transport ? c->workers + 1 : (size_t) 1, q[8], q[9], c->max_steps, \
    c->train_subset, c->test_subset, r->in.train_examples, \
    r->in.test_examples, q[10], q[11], q[12], q[13], q[14]
    static const char fmt[] =
      "{\n  \"program\": \"gradcomp train\",\n  \"version\": %s,\n"
      "  \"dataset\": %s,\n  \"model\": %s,\n  \"d\": %zu,\n"
      "  \"workers\": %zu,\n  \"partition\": %s,\n  \"batch\": %zu,\n"
      "  \"epochs\": %zu,\n  \"steps_per_epoch\": %zu,\n  \"lr\": %.17g,\n"
      "  \"momentum\": %.17g,\n  \"algorithm\": %s,\n  \"compressor\": %s,\n"
      "  \"density\": %.17g,\n  \"density_down\": %.17g,\n  \"k\": %zu,\n"
      "  \"k_down\": %zu,\n  \"rank\": %u,\n  \"seed\": %llu,\n"
      "  \"threads\": %zu,\n  \"device\": %s,\n"
      "  \"transport\": %s,\n  \"processes\": %zu,\n"
      "  \"probes\": %s,\n  \"net_model\": %s,\n"
      "  \"max_steps\": %zu,\n  \"train_subset\": %zu,\n  \"test_subset\": %zu,\n"
      "  \"train_examples\": %zu,\n  \"test_examples\": %zu,\n"
      "  \"config_file\": %s,\n  \"dtype\": \"float32\",\n"
      "  \"blas_core\": %s,\n  \"openblas_coretype_env\": %s,\n"
      "  \"machine\": %s,\n  \"fingerprint\": %s\n}\n";
    int len = snprintf(NULL, 0, fmt, CONFIG_JSON_ARGS);
    if (len < 0 || !(text = malloc((size_t) len + 1)))
      st = GC_ENOMEM;
    else
      snprintf(text, (size_t) len + 1, fmt, CONFIG_JSON_ARGS);
#undef CONFIG_JSON_ARGS
    if (st == GC_ENOMEM)
      gc_errorf(__FILE__, __LINE__, st, "out of memory for config.json");
  }
  for (size_t i = 0; i < NSTR; i++)
    free(q[i]);
  if (!st)
    st = path_in(path, sizeof path, dir, "config.json");
  if (!st)
    st = write_atomic(path, text);
  free(text);
  return st;
}

/* ---- checkpoint: the BN statistics and the whole simulator state
 * (gc_sim_state_save: x, memories, momentum, EF21 state, warm starts, the
 * step count) in one file named by epoch (its format: gc_checkpoint.h),
 * then checkpoint.json, which commits it. */

/* Epoch of a checkpoint file's name (checkpoint-eN.bin, or a rank's
 * checkpoint-eN-rR.bin); 0 if name is not one. */
static int ckpt_file_epoch(const char *name, unsigned long long *ep)
{
  unsigned rk;
  int end = 0, rend = 0;
  if (sscanf(name, "checkpoint-e%llu.bin%n", ep, &end) == 1 && end > 0 &&
      name[end] == '\0')
    return 1;
  return sscanf(name, "checkpoint-e%llu-r%u.bin%n", ep, &rk, &rend) == 2 &&
         rend > 0 && name[rend] == '\0';
}

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
    if (ckpt_file_epoch(e->d_name, &ep) && ep != keep &&
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
  char name[64], path[4200], fp[GC_CKPT_FP_TEXT], hash[17],
       meta[GC_CKPT_META_MAX], text[GC_CKPT_FP_TEXT + 600];
  ckpt_name(r, epoch, name, sizeof name);
  GC_TRY(path_in(path, sizeof path, r->c->out, name));
  uint64_t n = gc_train_state_bytes(r->t);
  uint8_t *buf = malloc(n ? n : 1), hdr[GC_CKPT_HDR];
  if (!buf)
    GC_ERROR("cannot allocate the checkpoint", GC_ENOMEM);
  int st = gc_train_state_save(r->t, buf);
  if (st != GC_SUCCESS) {
    free(buf);
    return st;
  }
  uint32_t m = gc_ckpt_head(r->c, r->tr ? (unsigned long long) r->c->proc
                            : 0, r->tr ? r->c->workers + 1 : 1, epoch, steps,
                            buf, n, hdr, meta, sizeof meta);
  const void *parts[3] = { hdr, meta, buf };
  size_t lens[3] = { GC_CKPT_HDR, m, n };
  st = gc__write_atomic(path, parts, lens, 3);
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
  gc_ckpt_fingerprint(r->c, fp, sizeof fp);
  gc_ckpt_fingerprint_hash(fp, hash);
  snprintf(text, sizeof text,
           "{\n  \"epoch\": %zu,\n  \"steps\": %zu,\n  \"file\": \"%s\",\n"
           "  \"length\": %llu,\n  \"bytes_up\": %llu,\n  \"bytes_down\": %llu,\n"
           "  \"bytes_stats\": %llu,\n  \"time_model_cum\": %.17g,\n"
           "  \"processes\": %zu,\n  \"options\": \"%s\",\n"
           "  \"fingerprint\": \"%s\"\n}\n", epoch, steps, name,
           (unsigned long long) n, (unsigned long long) up,
           (unsigned long long) down, (unsigned long long) r->stats_total,
           r->tmodel, r->tr ? r->c->workers + 1 : (size_t) 1, fp, hash);
  GC_TRY(path_in(path, sizeof path, r->c->out, "checkpoint.json"));
  GC_TRY(write_atomic(path, text));
  remove_other_checkpoints(r->c->out, epoch);
  return GC_SUCCESS;
}


/* Read this process's checkpoint file of epoch `epoch` (`steps` steps, as
 * checkpoint.json says) into r's run. */
static int ckpt_read(run *r, const char *path, unsigned long long epoch,
                     unsigned long long steps)
{
  uint8_t *buf;
  size_t want = gc_train_state_bytes(r->t);
  GC_TRY(gc_ckpt_file_read(path, r->c, r->tr ? (unsigned long long)
                            r->c->proc : 0, r->tr ? r->c->workers + 1 : 1,
                            epoch, steps, want, &buf));
  int st = gc_train_state_load(r->t, buf, want);
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

/* The string value of "key" in a json text of ours (no escapes), or NULL. */
static const char *json_str(const char *text, const char *key, char *val,
                            size_t cap)
{
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": \"", key);
  const char *p = strstr(text, pat);
  if (!p)
    return NULL;
  p += strlen(pat);
  const char *q = strchr(p, '"');
  if (!q)
    return NULL;
  snprintf(val, cap, "%.*s", (int) (q - p), p);
  return val;
}

static int ckpt_load(run *r, size_t *epoch, size_t *steps, uint64_t *up,
                     uint64_t *down)
{
  char path[4200], text[4096], opts[GC_CKPT_FP_TEXT], diff[2000];
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
  if (!json_str(text, "options", opts, sizeof opts)) {
    if (strstr(text, "\"fingerprint\":"))
      GC_ERRORF(GC_EFORMAT, "%s: a checkpoint of an older gradcomp, without"
                " the options that --resume checks; finish that run with the"
                " gradcomp that wrote it, or start over with --force", path);
    GC_ERRORF(GC_EFORMAT, "%s: missing fields", path);
  }
  int mpi_ckpt = strstr(opts, "--transport mpi") != NULL;
  if (mpi_ckpt != (r->tr != NULL))
    GC_ERRORF(GC_EINVAL, "%s: the checkpoint was written %s; resume it %s",
              path, mpi_ckpt ? "by a run under --transport mpi (one file per"
              " rank)" : "in one process", mpi_ckpt ? "with --transport mpi"
              " and the same number of ranks" : "without --transport mpi");
  if (gc_ckpt_fingerprint_diff(opts, r->c, "there", diff, sizeof diff))
    GC_ERRORF(GC_EINVAL, "%s: the checkpoint belongs to another configuration"
              ": %s (resume with the same options, or start over with"
              " --force)", path, diff);
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
  GC_TRY(ckpt_read(r, path, e, s));
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

/* ---- steps.csv: the curve at --log-every steps ---------------------- */

static const char steps_header[] =
  "epoch,step,train_loss,lr,bytes_up_cum,bytes_down_cum,xi,delta,test_loss,"
  "test_acc\n";

/* Keep the header and the rows of the first `steps` steps (a resumed run
 * redoes the steps after its checkpoint). */
static int steps_truncate(const char *path, size_t steps)
{
  FILE *f = fopen(path, "r");
  if (!f)
    return GC_SUCCESS;   /* a run from before steps.csv: a new one starts */
  char line[1024];
  size_t cap = 1 << 16, len = 0, row = 0;
  char *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    return GC_ENOMEM;
  }
  while (fgets(line, sizeof line, f)) {
    unsigned long long e, st;
    size_t l = strlen(line);
    /* a row cut by a kill (no newline) ends the kept part too */
    if (l == 0 || line[l - 1] != '\n' ||
        (row++ > 0 && (sscanf(line, "%llu,%llu", &e, &st) != 2 || st > steps)))
      break;
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
  }
  fclose(f);
  buf[len] = '\0';
  int st = write_atomic(path, len ? buf : steps_header);
  free(buf);
  return st;
}

static int steps_open(run *r)
{
  const gc_train_config *c = r->c;
  GC_TRY(path_in(r->steps_path, sizeof r->steps_path, c->out, "steps.csv"));
  if (c->resume)
    GC_TRY(steps_truncate(r->steps_path, gc_train_steps_done(r->t)));
  FILE *f = fopen(r->steps_path, c->resume ? "a" : "w");
  if (!f)
    GC_ERRORF(GC_EIO, "%s: cannot write: %s", r->steps_path, strerror(errno));
  r->steps = f;
  if (!c->resume || ftell(f) == 0)
    fputs(steps_header, f);
  return gc__flush_checked(f, r->steps_path);
}

/* A number or an empty field (nothing measured in the window). */
static void num_or_empty(char *buf, size_t cap, const char *fmt, double v, int have)
{
  if (have)
    snprintf(buf, cap, fmt, v);
  else
    buf[0] = '\0';
}

/* One row of steps.csv after `steps` steps: the window's mean loss and
 * probes, the bytes so far; test loss and accuracy at an epoch's end. */
static int steps_row(run *r, size_t epoch, size_t steps, int end, double tl,
                     double acc)
{
  char loss[32], xi[32], delta[32], tls[32], accs[32];
  num_or_empty(loss, sizeof loss, "%.6f", r->wloss / (double) r->wn, r->wn > 0);
  num_or_empty(xi, sizeof xi, "%.4f", r->wxi / (double) r->wxn, r->wxn > 0);
  num_or_empty(delta, sizeof delta, "%.6f", r->wdelta / (double) r->wdn, r->wdn > 0);
  num_or_empty(tls, sizeof tls, "%.6f", tl, end);
  num_or_empty(accs, sizeof accs, "%.4f", acc, end);
  fprintf(r->steps, "%zu,%zu,%s,%.17g,%llu,%llu,%s,%s,%s,%s\n", epoch + 1, steps,
          loss, r->c->lr, (unsigned long long) r->up_cum,
          (unsigned long long) r->down_cum, xi, delta, tls, accs);
  r->wloss = r->wxi = r->wdelta = 0;
  r->wn = r->wxn = r->wdn = 0;
  return gc__flush_checked(r->steps, r->steps_path);
}

static const char log_header[] =
  "epoch,steps,train_loss,test_acc,bytes_up,bytes_down,support_union_over_k,"
  "xi,delta,time_compute,time_compress,time_aggregate,time_total,"
  "bytes_stats";
static const char log_header_net[] = ",net_comm_s,time_model_cum";

/* The whole of a file (NUL-terminated, *len bytes), or NULL with errno. */
static char *slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap)
      break;
    char *nb = realloc(buf, (cap *= 2) + 1);
    if (!nb)
      free(buf);
    buf = nb;
  }
  int bad = ferror(f);
  fclose(f);
  if (!buf || bad) {
    free(buf);
    errno = buf ? EIO : ENOMEM;
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

/* Whether s[0..len) is a number (strtod's syntax: nan and inf too). */
static int is_number(const char *s, size_t len)
{
  char tmp[64], *end;
  if (len == 0 || len >= sizeof tmp)
    return 0;
  memcpy(tmp, s, len);
  tmp[len] = '\0';
  strtod(tmp, &end);
  return *end == '\0';
}

/* On --resume, before anything is written: log.csv must be this run's log
 * up to the checkpoint, that is the header, then one whole row per epoch
 * 1..rows (epoch i after i x spe steps, every field a number), or the
 * rows appended would not pair with those before them.  Rows past the
 * checkpoint (epochs the resumed run redoes, a row cut by a kill) are
 * dropped. */
static int log_resume(const gc_train_config *c, const char *path, size_t rows,
                      size_t spe)
{
  size_t len;
  char *text = slurp(path, &len);
  if (!text)
    GC_ERRORF(GC_EIO, "%s: cannot open the log to resume: %s", path,
              strerror(errno));
  char header[512];
  snprintf(header, sizeof header, "%s%s", log_header,
           c->net ? log_header_net : "");
  size_t ncols = 1;
  for (const char *h = header; *h; h++)
    ncols += *h == ',';
  const char *fix = "; start over with --force, or restore the run's log";
  char why[300] = "";
  size_t line = 1;
  const char *p = text, *nl = strchr(p, '\n');
  if (!nl || (size_t) (nl - p) != strlen(header) ||
      strncmp(p, header, strlen(header)))
    snprintf(why, sizeof why, "not the header of this run's log (%s)",
             nl ? "another text" : "no whole line");
  for (size_t i = 1; !why[0] && i <= rows; i++) {
    p = nl + 1;
    line++;
    nl = strchr(p, '\n');
    if (!*p || !nl) {
      snprintf(why, sizeof why, "%s the row of epoch %zu (the checkpoint is"
               " at epoch %zu)", *p ? "cut short in" : "missing", i, rows);
      break;
    }
    size_t nf = 0;
    unsigned long long f0 = 0, f1 = 0;
    for (const char *fs = p; fs <= nl; nf++) {
      const char *fe = fs;
      while (fe < nl && *fe != ',')
        fe++;
      /* empty: a column that means nothing for this method (|S|/K of a
       * dense uplink), or a probe not taken; epoch and step never are */
      if ((fe > fs || nf < 2) && !is_number(fs, (size_t) (fe - fs))) {
        snprintf(why, sizeof why, "field %zu ('%.*s') of the row of epoch %zu"
                 " is not a number", nf + 1, (int) (fe - fs > 40 ? 40 : fe - fs),
                 fs, i);
        break;
      }
      if (nf == 0)
        f0 = strtoull(fs, NULL, 10);
      if (nf == 1)
        f1 = strtoull(fs, NULL, 10);
      fs = fe + 1;
    }
    if (why[0])
      break;
    if (nf != ncols)
      snprintf(why, sizeof why, "%zu fields in the row of epoch %zu, the"
               " header has %zu", nf, i, ncols);
    else if (f0 != i || f1 != i * spe)
      snprintf(why, sizeof why, "the row of epoch %llu at step %llu where the"
               " row of epoch %zu at step %zu belongs (the checkpoint is at"
               " epoch %zu)", f0, f1, i, i * spe, rows);
  }
  if (why[0]) {
    free(text);
    GC_ERRORF(GC_EFORMAT, "%s line %zu: %s%s", path, line, why, fix);
  }
  size_t keep = (size_t) (nl + 1 - text);
  int st = GC_SUCCESS;
  if (keep != len) {
    text[keep] = '\0';
    st = write_atomic(path, text);
  }
  free(text);
  return st;
}

/* ---- the run folder: one run at a time, never replaced silently ---------- */

/* The files a run leaves in its folder besides its checkpoints (the lock
 * and the *.tmp.* files of gc__write_atomic are not a run's). */
static const char *const run_files[] = {
  "checkpoint.json", "model.npy", "model.json", "bounds.csv", "bounds.json",
  "stopped.txt", "stopped.txt.tmp", "steps.csv", "log.csv", "config.json" };
enum { RUN_FILES = sizeof run_files / sizeof run_files[0] };

/* Lines of a file less its header line (0 if it cannot be read). */
static size_t data_rows(const char *path)
{
  size_t len, rows = 0;
  char *text = slurp(path, &len);
  if (!text)
    return 0;
  for (size_t i = 0; i < len; i++)
    rows += text[i] == '\n';
  if (len && text[len - 1] != '\n')
    rows++;
  free(text);
  return rows ? rows - 1 : 0;
}

/* What of a run dir holds ("log.csv (2 rows), model.npy, ..." in desc);
 * *rows [out]: log.csv's rows.  Returns whether it holds any. */
static int run_in(const char *dir, char *desc, size_t cap, size_t *rows)
{
  char path[4200];
  size_t len = 0, n = 0;
  desc[0] = '\0';
  *rows = 0;
  for (size_t i = 0; i < RUN_FILES; i++) {
    if (path_in(path, sizeof path, dir, run_files[i]) || access(path, F_OK))
      continue;
    char extra[64] = "";
    if (!strcmp(run_files[i], "log.csv")) {
      *rows = data_rows(path);
      snprintf(extra, sizeof extra, " (%zu epoch row%s)", *rows,
               *rows == 1 ? "" : "s");
    }
    if (len < cap)
      len += (size_t) snprintf(desc + len, cap - len, "%s%s%s", n++ ? ", " : "",
                               run_files[i], extra);
  }
  DIR *d = opendir(dir);
  struct dirent *e;
  size_t nck = 0;
  while (d && (e = readdir(d))) {
    unsigned long long ep;
    if (ckpt_file_epoch(e->d_name, &ep) && nck++ == 0 && len < cap)
      len += (size_t) snprintf(desc + len, cap - len, "%s%s", n++ ? ", " : "",
                               e->d_name);
  }
  if (d)
    closedir(d);
  if (nck > 1 && len < cap)
    snprintf(desc + len, cap - len, " and %zu more checkpoint files", nck - 1);
  return n > 0;
}

/* Remove a run's files from dir: the commit (checkpoint.json) first, so
 * that a kill half-way leaves nothing to resume, and the model before the
 * log, so that no log.csv is ever left beside another run's model. */
static int clear_run(const char *dir)
{
  char path[4200];
  GC_TRY(path_in(path, sizeof path, dir, "checkpoint.json"));
  if (remove(path) != 0 && errno != ENOENT)
    GC_ERRORF(GC_EIO, "%s: cannot remove: %s", path, strerror(errno));
  remove_other_checkpoints(dir, 0);
  /* the worker ranks' stop records (stopped-rR.txt) of an MPI run: each
   * rank removes only its own at a finished run, and an in-process run
   * none */
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    unsigned rk;
    int end = 0;
    if (sscanf(e->d_name, "stopped-r%u.txt%n", &rk, &end) == 1 && end > 0 &&
        e->d_name[end] == '\0' && path_in(path, sizeof path, dir, e->d_name) == GC_SUCCESS)
      remove(path);
  }
  if (d)
    closedir(d);
  for (size_t i = 1; i < RUN_FILES; i++) {
    GC_TRY(path_in(path, sizeof path, dir, run_files[i]));
    if (remove(path) != 0 && errno != ENOENT)
      GC_ERRORF(GC_EIO, "%s: cannot remove: %s", path, strerror(errno));
  }
  return GC_SUCCESS;
}

/* Hold dir/.lock (flock, so that it goes with the process, however it
 * ends: a dead run's lock never blocks) for the whole run; *fd [out].  It
 * holds "pid P on HOST" to name the holder to a run that is refused,
 * emptied when the run ends (unlock_run). */
static int lock_run(const char *dir, int *fd)
{
  char path[4200], who[300];
  GC_TRY(path_in(path, sizeof path, dir, ".lock"));
  int k = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (k < 0)
    GC_ERRORF(GC_EIO, "%s: cannot create the run folder's lock: %s", path,
              strerror(errno));
  if (flock(k, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    ssize_t got = pread(k, who, sizeof who - 1, 0);
    who[got > 0 ? got : 0] = '\0';
    who[strcspn(who, "\n")] = '\0';
    close(k);
    if (e == EWOULDBLOCK)   /* the --out chosen is busy: a usage error */
      GC_ERRORF(GC_EINVAL, "%s is in use by another run (%s%s holds %s): wait"
                " for it to end, or choose another --out", dir,
                who[0] ? who : "a process", who[0] ? "," : "", path);
    GC_ERRORF(GC_EIO, "%s: cannot lock: %s", path, strerror(e));
  }
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0)
    snprintf(host, sizeof host, "?");
  int n = snprintf(who, sizeof who, "pid %ld on %s\n", (long) getpid(), host);
  if (ftruncate(k, 0) != 0 || pwrite(k, who, (size_t) n, 0) != n) {
    int e = errno;
    close(k);
    GC_ERRORF(GC_EIO, "%s: cannot write: %s", path, strerror(e));
  }
  *fd = k;
  return GC_SUCCESS;
}

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

/* One header line and numbers only: bounds.csv loads with any CSV reader
 * without options; what the numbers mean and assume is in bounds.json. */
static const char bounds_header[] =
  "epoch,steps,lr,gamma,xi_kind,xi_max,xi_mean,L_epoch,L,M2_max,M2_mean,f0,"
  "term_f0,term_sgd,term_compression,bound,grad2_mean,grad2_epoch,"
  "grad2_samples,ratio,gamma_hat,mem_norm2,worker_mem2,server_mem2,mem2_mean,"
  "rec2_mean,gdiff2_mean,inner_mean,r0_theorem,r1_delta,r2_xi,"
  "r3_memory,r4_m2,r5_gradient,r6_inner,r7_curvature,ratio_r0,ratio_r1,"
  "ratio_r2,ratio_r3,ratio_r4,ratio_r5,ratio_r6,ratio_r7\n";

/* bounds.csv (header) and bounds.json: what the numbers are and assume. */
static int bounds_open(run *r)
{
  const gc_train_config *c = r->c;
  char path[4200], text[6000];
  char *qa = gc__json_quote(c->algorithm), *qc = gc__json_quote(c->compressor);
  char *qx = gc__json_quote(r->in.bounds_xi);
  if (!qa || !qc || !qx) {
    free(qa);
    free(qc);
    free(qx);
    return GC_ENOMEM;
  }
  snprintf(text, sizeof text,
    "{\n  \"label\": \"bound evaluated with measured constants (theory.md 4.3)\",\n"
    "  \"note\": \"L is a local estimate (ReLU nets are not globally L-smooth);"
    " every bound and rung uses the worst L seen on the path (column L; L_epoch"
    " is the current estimate); M2_max the max ||gbar_t||^2 seen; f* >= 0; xi"
    " the max measured\",\n"
    "  \"rungs\": {\n"
    "    \"r0_theorem\": \"the bound of theory.md 4.3 (= bound): gamma ="
    " sqrt(1-K/d), xi max, M2 max\",\n"
    "    \"r1_delta\": \"r0 with the measured contraction gamma_hat (max over"
    " steps of ||a_t - TopK(a_t)||/||a_t||, a_t = E_t + lr gbar_t) for"
    " gamma\",\n"
    "    \"r2_xi\": \"r1 with xi_t per step: the memory recursion run along the"
    " path (running maxima), mean_t e_t^2 (rec2_mean) for the unrolled"
    " bound\",\n"
    "    \"r3_memory\": \"r2 with the measured mean_t ||E_t||^2 (mem2_mean; E_t ="
    " mean_p eps^p plus the server's delta, model units)\",\n"
    "    \"r4_m2\": \"r3 with mean_t ||gbar_t||^2 (M2_mean) for M2_max\",\n"
    "    \"r5_gradient\": \"r4 with the mean of ||grad f(x_t - E_t) - grad f(x_t)||^2"
    " at the full-gradient samples (gdiff2_mean) for L^2 mean_t ||E_t||^2: the"
    " Young step of the proof without the Lipschitz bound\",\n"
    "    \"r6_inner\": \"no Young step: half of r4's first two terms plus the mean"
    " of <grad f(x_t) - grad f(x_t - E_t), grad f(x_t)> at the samples"
    " (inner_mean)\",\n"
    "    \"r7_curvature\": \"nan here: exact on quadratics only (theory bounds);"
    " a Hessian-vector estimate of the curvature along the steps put it below"
    " the measured mean on MNIST-MLP (theory.md 4.9)\",\n"
    "    \"ratio_rK\": \"rK / grad2_mean (the measured mean ||grad f||^2)\",\n"
    "    \"nan\": \"a rung whose memory bound the measured memories do not"
    " meet\",\n"
    "    \"derivations\": \"docs/theory.md 4.9\"\n  },\n"
    "  \"memories\": \"mem_norm2 ||E_T||^2, worker_mem2 mean_p ||eps^p||^2,"
    " server_mem2 ||delta||^2 after the row's last step (model units: times lr"
    " for downlink and doublesqueeze)\",\n"
    "  \"bound\": \"(1/T) sum_{t<T} E||grad f(x_t)||^2 <= 2 (f(x0)-f*)/(lr T)"
    " + L lr M2 + L^2 lr^2 M2 (gamma+xi)^2/(1-gamma)^2\",\n"
    "  \"algorithm\": %s,\n  \"compressor\": %s,\n  \"lr\": %.17g,\n"
    "  \"gamma\": %.17g,\n  \"xi_kind\": %s,\n"
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
    qa, qc, c->lr, r->in.bounds_gamma, qx,
    c->bounds_samples, c->bounds_hvps, r->in.bounds_batch, r->in.bounds_fd_step,
    c->bounds_samples, c->bounds_every);
  free(qa);
  free(qc);
  free(qx);
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
  /* the ladder of theory.md 4.9, every rung with the worst L seen */
  gc_ladder_in li = {
    .f0_gap = r->f0, .lr = c->lr, .L = r->L, .T = steps,
    .gamma = in->bounds_gamma, .xi = xi, .m2 = m2, .m2_mem = m2, .m2_path = m2,
    .gamma_hat = k.gamma_hat_max, .mem_norm_max = k.mem_norm_max,
    .rec2_mean = k.rec2_mean, .rec_excess = k.rec_excess, .mem2_mean = k.mem2_mean,
    .m2_mean = k.m2_mean,
    /* sampled where grad2_mean is: the same steps stand for the mean */
    .gdiff2_mean = r->g2n ? r->gdsum / (double) r->g2n : NAN,
    .inner_mean = r->g2n ? r->insum / (double) r->g2n : NAN,
    /* r7 is not estimated on nets (theory.md 4.9): the curvature at one
     * point underestimates the change of f along a step */
    .curv_mean = NAN,
  };
  double rung[GC_LADDER_RUNGS];
  gc_bound_ladder(&li, rung);
  fprintf(r->csv, "%zu,%zu,%.17g,%.17g,%s,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,"
          "%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%zu,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,"
          "%.9g",
          e + 1, steps, c->lr,
          in->bounds_gamma, in->bounds_xi, k.xi_max, k.xi_mean, Le, r->L, m2,
          k.m2_mean, r->f0, t[0], t[1], t[2],
          bound, g2, n_epoch ? g2_epoch / (double) n_epoch : NAN, r->g2n,
          bound / g2, k.gamma_hat_max, k.mem_norm2, k.worker_mem2, k.server_mem2,
          k.mem2_mean, k.rec2_mean, li.gdiff2_mean, li.inner_mean);
  for (int j = 0; j < GC_LADDER_RUNGS; j++)
    fprintf(r->csv, ",%.9g", rung[j]);
  for (int j = 0; j < GC_LADDER_RUNGS; j++)
    fprintf(r->csv, ",%.9g", rung[j] / g2);
  fputc('\n', r->csv);
  fflush(r->csv);
  if (!c->quiet) {
    double best = INFINITY;
    for (int j = 0; j < GC_LADDER_RUNGS; j++)
      if (isfinite(rung[j]))
        best = fmin(best, rung[j]);
    fprintf(stderr, "epoch %zu: bound %.4g (L %.3g, M2 %.3g, %s %.3g), tightest"
            " rung %.4g, vs measured mean ||grad f||^2 %.4g: ratios %.3g, %.3g\n",
            e + 1, bound, r->L, m2, in->bounds_xi, xi, best, g2, bound / g2,
            best / g2);
  }
  return GC_SUCCESS;
}

typedef struct tensor {
  const char *name;
  size_t off, n;
  int rank;
  size_t dims[4];
} tensor;

/* out/model.json: where each tensor of model.npy lies (written once at
 * the start: the layout depends on the model alone).  Names follow the
 * layer index as PyTorch's do: layers.I.weight and .bias (BatchNorm: gamma
 * and beta), layers.I.running_mean and .running_var after the d
 * parameters. */
static int write_model_json(const run *r)
{
  const gc_train_config *c = r->c;
  gc_nn *nn = gc_nn_alloc_model(gc_train_config_model(c), 1);
  if (!nn)
    return gc_last_error_code();
  size_t d = r->in.d, cap = 1 << 16, o = 0;
  char *text = malloc(cap), path[4200];
  if (!text) {
    gc_nn_free(nn);
    GC_ERROR("out of memory for model.json", GC_ENOMEM);
  }
  o += (size_t) snprintf(text + o, cap - o,
    "{\n  \"file\": \"model.npy\",\n  \"model\": \"%s\",\n"
    "  \"dtype\": \"float32\",\n  \"length\": %zu,\n  \"d\": %zu,\n"
    "  \"stats\": %zu,\n"
    "  \"layout\": \"one flat float32 vector: the d trained parameters (each"
    " layer's weight then bias, PyTorch order and row-major shapes), then the"
    " BatchNorm running statistics (each layer's mean then var); offset and"
    " size count float32 entries\",\n  \"tensors\": [",
    gc_train_config_model(c), d + r->in.ns, d, r->in.ns);
  int first = 1;
  for (size_t i = 0; i < gc_nn_nlayers(nn) && o < cap; i++) {
    const gc_nn_layer *y = gc_nn_layer_at(nn, i);
    int bn = y->kind == GC_NN_BATCHNORM, conv = y->kind == GC_NN_CONV;
    size_t ch = y->nb ? y->nb : y->nw;   /* BatchNorm channels */
    tensor t[4];
    size_t nt = 0;
    if (y->nw && conv)
      t[nt++] = (tensor){ "weight", y->woff, y->nw, 4,
                          { y->out_c, y->in_c, y->ksize, y->ksize } };
    else if (y->nw && !bn && y->out_c)
      t[nt++] = (tensor){ "weight", y->woff, y->nw, 2,
                          { y->out_c, y->nw / y->out_c, 0, 0 } };
    else if (y->nw)
      t[nt++] = (tensor){ "weight", y->woff, y->nw, 1, { y->nw, 0, 0, 0 } };
    if (y->nb)
      t[nt++] = (tensor){ "bias", y->boff, y->nb, 1, { y->nb, 0, 0, 0 } };
    if (bn) {
      t[nt++] = (tensor){ "running_mean", d + y->soff, ch, 1, { ch, 0, 0, 0 } };
      t[nt++] = (tensor){ "running_var", d + y->soff + ch, ch, 1, { ch, 0, 0, 0 } };
    }
    for (size_t j = 0; j < nt && o < cap; j++) {
      o += (size_t) snprintf(text + o, cap - o, "%s\n    {\"name\": \"layers.%zu.%s\","
                             " \"kind\": \"%s\", \"shape\": [", first ? "" : ",",
                             i, t[j].name, bn ? "batchnorm" : conv ? "conv" : "linear");
      first = 0;
      for (int k = 0; k < t[j].rank && o < cap; k++)
        o += (size_t) snprintf(text + o, cap - o, "%s%zu", k ? ", " : "",
                               t[j].dims[k]);
      if (o < cap)
        o += (size_t) snprintf(text + o, cap - o, "], \"offset\": %zu, \"size\": %zu}",
                               t[j].off, t[j].n);
    }
  }
  gc_nn_free(nn);
  if (o < cap)
    o += (size_t) snprintf(text + o, cap - o, "\n  ]\n}\n");
  int st = o < cap ? path_in(path, sizeof path, c->out, "model.json") : GC_ENOMEM;
  if (o >= cap)
    gc_errorf(__FILE__, __LINE__, st, "model.json: the model has too many layers");
  else if (!st)
    st = write_atomic(path, text);
  free(text);
  return st;
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

static void unlock_run(int fd)
{
  if (fd < 0)
    return;
  if (ftruncate(fd, 0) != 0) {
    /* the pid stays: it names a process that no longer holds the lock */
  }
  close(fd);   /* the lock goes with it */
}

/* |S|/K, the union of the workers' uplink supports over K, means
 * something only where the workers send sparse messages: not for dense
 * uplinks (sgd, downlink, allreduce) nor for dense or low-rank compressors
 * (qsgd, sign, powersgd, ...), where it would be d/K.  There log.csv
 * leaves the field empty. */
static int sparse_uplink(const gc_train_config *c)
{
  gc_algo_kind k;
  const gc_compressor_type *T = gc_compressor_type_by_name(c->compressor);
  if (gc_algo_by_name(c->algorithm, &k) != GC_SUCCESS || !T)
    return 0;
  return gc__algo(k)->up == GC__UP_COMP && (T->flags & GC_COMP_SPARSE);
}

/* The folder at the start: a fresh run's (refused where another run's
 * files are, unless --force clears them), or a resumed one's (its
 * checkpoint loaded, the log checked and cut to it).  `restart`: --resume
 * found no checkpoint.json, so the run starts over in place of one that
 * stopped before its first checkpoint.  Nothing is changed in the folder
 * before every check passed. */
static int start(run *r, int restart, size_t *epoch0, size_t *steps,
                 uint64_t *up, uint64_t *down, FILE **log, char *path,
                 size_t cap)
{
  const gc_train_config *c = r->c;
  int leader = r->in.leader;
  if (c->resume) {
    GC_TRY(ckpt_load(r, epoch0, steps, up, down));
    if (*epoch0 > c->epochs)
      GC_ERRORF(GC_EINVAL, "%s: the checkpoint is at epoch %zu, past --epochs"
                " %zu: resume with --epochs %zu or more (the run ends at"
                " --epochs)", c->out, *epoch0, c->epochs, *epoch0);
    if (leader) {
      GC_TRY(path_in(path, cap, c->out, "log.csv"));
      GC_TRY(log_resume(c, path, *epoch0, r->in.steps_per_epoch));
      remove_other_checkpoints(c->out, *epoch0);
    }
  } else if (leader) {
    char desc[1500];
    size_t rows;
    if (run_in(c->out, desc, sizeof desc, &rows)) {
      if (restart && rows > 1)
        GC_ERRORF(GC_EINVAL, "--resume: %s has no checkpoint.json to resume"
                  " from, yet holds a run that logged %zu epochs (%s): its"
                  " checkpoint is missing; pass --force instead of --resume to"
                  " start over", c->out, rows, desc);
      if (!restart && !c->force)
        GC_ERRORF(GC_EINVAL, "%s already holds a run (%s): pass --resume to"
                  " continue it (the same options, a larger --epochs), --force"
                  " to replace it, or another --out", c->out, desc);
    }
    GC_TRY(clear_run(c->out));
  }
  if (!leader)
    return GC_SUCCESS;
  /* under a transport the other ranks may be writing */
  gc__remove_stale_tmp(c->out, NULL);
  GC_TRY(write_config_json(r, c->out));
  GC_TRY(write_model_json(r));
  GC_TRY(steps_open(r));
  GC_TRY(path_in(path, cap, c->out, "log.csv"));
  if (!(*log = fopen(path, c->resume ? "a" : "w")))
    GC_ERRORF(GC_EIO, "%s: cannot write: %s", path, strerror(errno));
  if (!c->resume) {
    fprintf(*log, "%s%s\n", log_header, c->net ? log_header_net : "");
    GC_TRY(gc__flush_checked(*log, path));
  }
  return GC_SUCCESS;
}

int gc_train_run(const gc_train_config *c0, gc_train_result *res)
{
  run R;
  memset(&R, 0, sizeof R);
  gc_train_config cc = *c0;
  const gc_train_config *c = &cc;
  R.c = c;
  R.tr = c->transport;
  if (res)
    memset(res, 0, sizeof *res);
  int st = GC_SUCCESS, restart = 0, lock = -1;
  FILE *log = NULL;
  char path[4200];
  if (c->force && c->resume)
    GC_ERROR("--force starts the run over and --resume continues it: pass one"
             " of them", GC_EINVAL);
  /* the folder only once the options and data are known to be good */
  if (!(R.t = gc_train_alloc(c)))
    return gc_last_error_code();
  if (c->resume) {
    /* a run stopped before its first checkpoint: nothing to resume, so it
     * starts over (every rank sees the same folder: only a finished epoch
     * writes checkpoint.json) */
    if ((st = path_in(path, sizeof path, c->out, "checkpoint.json"))) {
      gc_train_free(R.t);
      return st;
    }
    if (access(path, F_OK) != 0 && errno == ENOENT) {
      if (!c->transport || c->proc == 0)
        fprintf(stderr, "gradcomp train: --resume: no checkpoint in %s yet;"
                " starting from the beginning\n", c->out);
      cc.resume = 0;
      restart = 1;
    }
  }
  gc_train_describe(R.t, &R.in);
  if (R.in.device_step_refused && !c->quiet)
    fprintf(stderr, "gradcomp train: the algorithm steps on the CPU (%s)\n",
            R.in.device_step_refused);
  R.sparse_up = sparse_uplink(c);
  R.lo = R.tr ? R.tr->worker_lo : 0;
  R.hi = R.tr ? R.tr->worker_hi : c->workers;
  if (!(R.ok = calloc(c->workers, 1))) {
    gc_train_free(R.t);
    GC_ERROR("out of memory", GC_ENOMEM);
  }
  size_t spe = R.in.steps_per_epoch, epoch0 = 0, steps = 0;
  uint64_t up_total = 0, down_total = 0;
  if (((st = gc__mkdir_p(c->out)) ||
       (R.in.leader && (st = lock_run(c->out, &lock))) ||
       (st = start(&R, restart, &epoch0, &steps, &up_total, &down_total, &log,
                   path, sizeof path))) && !R.tr)
    goto done;
  if (R.tr) {
    /* Rank 0 alone checks and prepares the folder: the others go on only
     * if it did (every rank takes part, whatever its own start gave).  If
     * it refused, the others end without a run and without an error of
     * their own (their own file, if bad too, is named once rank 0's
     * problem is mended): rank 0 reports, and its exit status is the
     * job's.  A rank that failed as well would end the job under mpirun
     * before rank 0 has ended, and rank 0's stop record would land in a
     * folder that may be another run's. */
    uint8_t code = (uint8_t) st;
    int bst = R.tr->type->bcast_aux(R.tr->state, 0, &code, 1);
    if (bst)
      st = bst;
    else if (code && !R.in.leader)
      st = GC_SUCCESS;
    if (st || code)
      goto done;
  }
  R.up_cum = up_total;
  R.down_cum = down_total;
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
    double lsum = 0, usum = 0, xsum = 0, csum = 0, g2e = 0, netw = 0, selsum = 0;
    size_t xn = 0, cn = 0, done_here = 0, g2en = 0, seln = 0;
    uint64_t upw = 0, downw = 0, statsw = 0;   /* taken at --log-every rows */
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
          double gd, ip;
          if ((st = gc_train_full_grad2(R.t, &g2, &f)) ||
              (st = gc_train_memory_gdiff2(R.t, &gd, &ip)))
            break;
          R.gdsum += gd;
          R.insum += ip;
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
      R.wloss += si.loss;
      R.wn++;
      if (judge_count && si.selected_workers) {
        selsum += si.selected_sum;
        seln += si.selected_workers;
        count_warning(c, &R, e, s, &si, &count_warned);
      }
      if (isfinite(si.xi)) {
        xsum += si.xi;
        xn++;
        R.wxi += si.xi;
        R.wxn++;
      }
      if (isfinite(si.delta)) {
        csum += si.delta;
        cn++;
        R.wdelta += si.delta;
        R.wdn++;
      }
      tcomp += si.compute_s;
      tstats += si.stats_s;
      steps++;
      done_here++;
      /* a steps.csv row inside the epoch (the epoch's last step and the
       * last of --max-steps get theirs after the evaluation) */
      if (c->log_every && steps % c->log_every == 0 && s + 1 < spe &&
          !(c->max_steps && steps >= c->max_steps)) {
        uint64_t u, dn, sb;
        double ns;
        gc_train_take_bytes(R.t, c->net, &u, &dn, &sb, &ns);
        upw += u;
        downw += dn;
        statsw += sb;
        netw += ns;
        R.up_cum += u;
        R.down_cum += dn;
        if (R.in.leader && (st = steps_row(&R, e, steps, 0, 0, 0)))
          break;
      }
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
    R.up_cum += upe;
    R.down_cum += downe;
    upe += upw;
    downe += downw;
    statse += statsw;
    net_s += netw;
    up_total += upe;
    down_total += downe;
    R.stats_total += statse;
    double ttot = gc__now() - t0;
    gc_train_times(R.t, &w1, &s1);
    double tcomp_e = w1 - w0, tagg_e = s1 - s0 + tstats;
    if (c->net)
      R.tmodel += tcomp + tcomp_e + tagg_e + net_s;
    if (R.in.leader) {
      char su[32] = "";
      if (R.sparse_up)
        snprintf(su, sizeof su, "%.4f", usum / (double) done_here / (double) R.in.k);
      fprintf(log, "%zu,%zu,%.6f,%.4f,%llu,%llu,%s,%.4f,%.6f,%.3f,%.3f,%.3f,%.3f,"
              "%llu", e + 1, steps, lsum / (double) done_here, acc,
              (unsigned long long) upe, (unsigned long long) downe, su,
              xn ? xsum / (double) xn : NAN, cn ? csum / (double) cn : NAN,
              tcomp, tcomp_e, tagg_e, ttot, (unsigned long long) statse);
      if (c->net)
        fprintf(log, ",%.17g,%.6f", net_s, R.tmodel);
      fputc('\n', log);
      if ((st = gc__flush_checked(log, path)) ||
          (st = steps_row(&R, e, steps, 1, tl, acc)) || (st = write_model(&R)))
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
  unlock_run(lock);
  if (R.steps && fclose(R.steps) != 0 && st == GC_SUCCESS) {
    gc_errorf(__FILE__, __LINE__, GC_EIO, "%s: write failed: %s", R.steps_path,
              strerror(errno));
    st = GC_EIO;
  }
  free(R.ok);
  gc_train_free(R.t);
  return st;
}
