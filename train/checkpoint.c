/* checkpoint.c -- the training checkpoint file and the configuration
 * fingerprint it carries (gc_checkpoint.h): its writer's header, its
 * reader and every check the reader makes.  The driver (run.c) names the
 * files, writes them and commits them with checkpoint.json. */
#define _POSIX_C_SOURCE 200809L   /* strtok_r, fileno */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "gc_checkpoint.h"
#include "gc_cli.h"
#include "gc_compressor.h"
#include "gc_errno.h"

/* ---- the configuration fingerprint ---------------------------------- */

enum { FP_OPTS = 19 };   /* the options of fp_opts */
typedef struct fp_opt {
  const char *name;
  char val[400];
  int optional;   /* written only when not "", and "" where not recorded */
} fp_opt;

/* The shortest %g text that reads back as v (0.1, not 0.10000000000000001). */
static void shortest(char *buf, size_t cap, double v)
{
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, cap, "%.*g", p, v);
    if (strtod(buf, NULL) == v)
      return;
  }
}

/* The fingerprint's options with c's values, in their order. */
static void fp_opts(const gc_train_config *c, fp_opt *o)
{
  static const char *const names[FP_OPTS] = {
    "--dataset", "--model", "--workers", "--iid/--noniid", "--batch", "--lr",
    "--momentum", "--algorithm", "--compressor", "--density",
    "--density-down", "--rank", "--seed", "--train-subset", "--test-subset",
    "--transport", "--net-bandwidth", "--net-latency", "--compressor-options" };
  for (size_t i = 0; i < FP_OPTS; i++) {
    o[i].name = names[i];
    o[i].optional = i == 18;
  }
  snprintf(o[0].val, sizeof o[0].val, "%s", c->dataset);
  snprintf(o[1].val, sizeof o[1].val, "%s", gc_train_config_model(c));
  snprintf(o[2].val, sizeof o[2].val, "%zu", c->workers);
  snprintf(o[3].val, sizeof o[3].val, "%s", c->noniid ? "noniid" : "iid");
  snprintf(o[4].val, sizeof o[4].val, "%zu", c->batch);
  shortest(o[5].val, sizeof o[5].val, c->lr);
  shortest(o[6].val, sizeof o[6].val, c->momentum);
  snprintf(o[7].val, sizeof o[7].val, "%s", c->algorithm);
  snprintf(o[8].val, sizeof o[8].val, "%s", c->compressor);
  shortest(o[9].val, sizeof o[9].val, c->density);
  shortest(o[10].val, sizeof o[10].val, gc_train_config_density_down(c));
  snprintf(o[11].val, sizeof o[11].val, "%u", c->rank);
  snprintf(o[12].val, sizeof o[12].val, "%llu", (unsigned long long) c->seed);
  snprintf(o[13].val, sizeof o[13].val, "%zu", c->train_subset);
  snprintf(o[14].val, sizeof o[14].val, "%zu", c->test_subset);
  snprintf(o[15].val, sizeof o[15].val, "%s",
           c->transport ? c->transport->type->name : "inproc");
  snprintf(o[16].val, sizeof o[16].val, "none");
  snprintf(o[17].val, sizeof o[17].val, "none");
  if (c->net) {
    shortest(o[16].val, sizeof o[16].val, c->net->bandwidth);
    shortest(o[17].val, sizeof o[17].val, c->net->latency);
  }
  /* the compressor parameters beyond the density and rank above, where a
   * run sets them ("levels=4,k-down=3"); none, the entry is left out, so
   * that the runs before it have the same fingerprint */
  gc_compressor_params dflt;
  gc_compressor_params_default(&dflt);
  const gc_compressor_params *up = c->up_params ? c->up_params : &dflt;
  gc_cli_compressor_changes(up, c->down_params ? c->down_params : up,
                            GC_CLI_P_ALL & ~(GC_CLI_P_DENSITY | GC_CLI_P_RANK), o[18].val,
                            sizeof o[18].val);
  /* names are checked by gc_train_alloc; a space would split a pair */
  for (size_t i = 0; i < FP_OPTS; i++)
    for (char *s = o[i].val; *s; s++)
      if (*s == ' ' || *s == '\n' || *s == '"' || *s == '\\')
        *s = '_';
}

void gc_ckpt_fingerprint(const gc_train_config *c, char *buf, size_t cap)
{
  fp_opt o[FP_OPTS];
  fp_opts(c, o);
  size_t len = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < FP_OPTS && len < cap; i++)
    if (!o[i].optional || o[i].val[0])
      len += (size_t) snprintf(buf + len, cap - len, "%s%s %s", i ? " " : "",
                               o[i].name, o[i].val);
}

void gc_ckpt_fingerprint_hash(const char *text, char out[17])
{
  uint64_t h = 14695981039346656037ull;
  for (const unsigned char *s = (const unsigned char *) text; *s; s++)
    h = (h ^ *s) * 1099511628211ull;
  snprintf(out, 17, "%016llx", (unsigned long long) h);
}

size_t gc_ckpt_fingerprint_diff(const char *stored, const gc_train_config *c,
                                const char *there, char *msg, size_t cap)
{
  fp_opt o[FP_OPTS];
  fp_opts(c, o);
  char copy[GC_CKPT_FP_TEXT], *tok[2 * FP_OPTS + 2], *save = NULL;
  snprintf(copy, sizeof copy, "%s", stored);
  size_t nt = 0, nd = 0, len = 0;
  for (char *t = strtok_r(copy, " ", &save); t && nt < 2 * FP_OPTS + 2;
       t = strtok_r(NULL, " ", &save))
    tok[nt++] = t;
  msg[0] = '\0';
  for (size_t i = 0; i < FP_OPTS; i++) {
    const char *v = NULL;
    for (size_t j = 0; j + 1 < nt; j += 2)
      if (!strcmp(tok[j], o[i].name))
        v = tok[j + 1];
    if (!v && o[i].optional)
      v = "";
    if (v && !strcmp(v, o[i].val))
      continue;
    if (len < cap)
      len += (size_t) snprintf(msg + len, cap - len, "%s%s %s %s, %s in this"
                               " run", nd ? "; " : "", o[i].name,
                               !v ? "(not recorded)" : v[0] ? v : "(none)", there,
                               o[i].val[0] ? o[i].val : "(none)");
    nd++;
  }
  for (size_t j = 0; j + 1 < nt; j += 2) {
    int known = 0;
    for (size_t i = 0; i < FP_OPTS; i++)
      known |= !strcmp(tok[j], o[i].name);
    if (known)
      continue;
    if (len < cap)
      len += (size_t) snprintf(msg + len, cap - len, "%s%s %s %s, unknown to"
                               " this gradcomp", nd ? "; " : "", tok[j],
                               tok[j + 1], there);
    nd++;
  }
  return nd;
}

/* ---- the file ------------------------------------------------------- */

uint32_t gc_ckpt_head(const gc_train_config *c, unsigned long long rank,
                      unsigned long long procs, unsigned long long epoch,
                      unsigned long long steps, const void *payload,
                      uint64_t n, uint8_t *hdr, char *meta, size_t cap)
{
  char fp[GC_CKPT_FP_TEXT], hash[17];
  gc_ckpt_fingerprint(c, fp, sizeof fp);
  gc_ckpt_fingerprint_hash(fp, hash);
  int len = snprintf(meta, cap, "options %s\nfingerprint %s\nrank %llu\n"
                     "processes %llu\nepoch %llu\nsteps %llu\n", fp, hash,
                     rank, procs, epoch, steps);
  uint32_t m = len < 0 ? 0 : (size_t) len < cap ? (uint32_t) len
               : (uint32_t) cap - 1;
  uint32_t crc = (uint32_t) crc32_z(crc32_z(0L, (const Bytef *) meta, m),
                                    payload, n);
  memcpy(hdr, GC_CKPT_MAGIC, 8);
  memcpy(hdr + 8, &m, 4);
  memcpy(hdr + 12, &n, 8);
  memcpy(hdr + 20, &crc, 4);
  return m;
}

/* The value of "key " in a checkpoint's meta lines, or NULL. */
static const char *meta_get(const char *meta, const char *key, char *val,
                            size_t cap)
{
  size_t kl = strlen(key);
  for (const char *l = meta; *l;) {
    const char *end = strchr(l, '\n');
    size_t len = end ? (size_t) (end - l) : strlen(l);
    if (len > kl && !strncmp(l, key, kl) && l[kl] == ' ') {
      snprintf(val, cap, "%.*s", (int) (len - kl - 1), l + kl + 1);
      return val;
    }
    l += len + (end != NULL);
  }
  return NULL;
}

int gc_ckpt_file_read(const char *path, const gc_train_config *c,
                      unsigned long long rank, unsigned long long procs,
                      unsigned long long epoch, unsigned long long steps,
                      size_t want, uint8_t **payload)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    GC_ERRORF(GC_EIO, "%s: cannot open: %s", path, strerror(errno));
  uint8_t hdr[GC_CKPT_HDR];
  uint32_t m, crc;
  uint64_t n;
  struct stat sb;
  size_t hgot = fread(hdr, 1, GC_CKPT_HDR, f);
  if (hgot >= 8 && !memcmp(hdr, GC_CKPT_MAGIC_V1, 8)) {
    fclose(f);
    GC_ERRORF(GC_EFORMAT, "%s: a checkpoint of an older gradcomp (format"
              " GCCKPT1), without the configuration fingerprint and rank"
              " that --resume checks; finish that run with the gradcomp that"
              " wrote it, or start over with --force", path);
  }
  if (hgot != GC_CKPT_HDR || memcmp(hdr, GC_CKPT_MAGIC, 8)) {
    fclose(f);
    GC_ERRORF(GC_EFORMAT, "%s: not a gradcomp checkpoint", path);
  }
  memcpy(&m, hdr + 8, 4);
  memcpy(&n, hdr + 12, 8);
  memcpy(&crc, hdr + 20, 4);
  if (m >= GC_CKPT_META_MAX) {
    fclose(f);
    GC_ERRORF(GC_EFORMAT, "%s: not a gradcomp checkpoint (a header of %u"
              " bytes)", path, (unsigned) m);
  }
  if (fstat(fileno(f), &sb) != 0 || (uint64_t) sb.st_size < GC_CKPT_HDR + m ||
      (uint64_t) sb.st_size - GC_CKPT_HDR - m != n) {
    fclose(f);
    GC_ERRORF(GC_EFORMAT, "%s: truncated or with trailing bytes", path);
  }
  /* the payload is kept only if its length is this run's; otherwise it is
   * only read through for the checksum, and the meta says whose it is */
  char meta[GC_CKPT_META_MAX];
  uint8_t *buf = malloc(n == want && n ? n : 65536);
  if (!buf) {
    fclose(f);
    GC_ERROR("cannot allocate the checkpoint", GC_ENOMEM);
  }
  int short_read = fread(meta, 1, m, f) != m;
  uLong crc_got = crc32_z(0L, (const Bytef *) meta, m);
  meta[m] = '\0';
  for (uint64_t left = n; left && !short_read;) {
    size_t chunk = n == want ? (size_t) left
                   : left < 65536 ? (size_t) left : 65536;
    uint8_t *to = n == want ? buf + (n - left) : buf;
    short_read = fread(to, 1, chunk, f) != chunk;
    crc_got = crc32_z(crc_got, to, chunk);
    left -= chunk;
  }
  fclose(f);
  const char *why = short_read ? "truncated or with trailing bytes"
                    : (uint32_t) crc_got != crc
                        ? "checksum mismatch (the file is damaged)" : NULL;
  if (why) {
    free(buf);
    GC_ERRORF(GC_EFORMAT, "%s: %s", path, why);
  }
  char opts[GC_CKPT_FP_TEXT], val[64], diff[2000];
  unsigned long long rk, np, e, s;
  if (!meta_get(meta, "options", opts, sizeof opts) ||
      !meta_get(meta, "rank", val, sizeof val) ||
      sscanf(val, "%llu", &rk) != 1 ||
      !meta_get(meta, "processes", val, sizeof val) ||
      sscanf(val, "%llu", &np) != 1 ||
      !meta_get(meta, "epoch", val, sizeof val) ||
      sscanf(val, "%llu", &e) != 1 ||
      !meta_get(meta, "steps", val, sizeof val) ||
      sscanf(val, "%llu", &s) != 1) {
    free(buf);
    GC_ERRORF(GC_EFORMAT, "%s: not a gradcomp checkpoint (its header lacks"
              " options, rank, processes, epoch or steps)", path);
  }
  const char *bad = NULL;
  if (gc_ckpt_fingerprint_diff(opts, c, "in the file", diff, sizeof diff))
    bad = "written by a run of another configuration: ";
  else if (np != procs)
    snprintf(diff, sizeof diff, "written by a run of %llu processes, this one"
             " has %llu", np, procs);
  else if (rk != rank)
    snprintf(diff, sizeof diff, "holds rank %llu's state (it was written as"
             " checkpoint-e%llu-r%llu.bin), not rank %llu's", rk, e, rk, rank);
  else if (e != epoch || s != steps)
    snprintf(diff, sizeof diff, "the state after epoch %llu (%llu steps), but"
             " checkpoint.json commits epoch %llu (%llu steps)", e, s, epoch,
             steps);
  else if (n != want)
    snprintf(diff, sizeof diff, "%llu bytes of state, expected %zu for this"
             " configuration", (unsigned long long) n, want);
  else
    diff[0] = '\0';
  if (bad || diff[0]) {
    free(buf);
    GC_ERRORF(GC_EFORMAT, "%s: %s%s", path, bad ? bad : "", diff);
  }
  *payload = buf;
  return GC_SUCCESS;
}
