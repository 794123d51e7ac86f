/* train_options.c -- the options of `gradcomp train` (gc_train_options.h):
 * its help text, the option parser, the tuned learning rates that stand
 * in for --lr, and the --config file reader. */
#define _POSIX_C_SOURCE 200809L   /* strtok_r */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "config.h"
#include "gc_algo_rules.h"
#include "gc_errno.h"
#include "gc_train_options.h"
#ifdef GC_CUDA_NETS
#include "gc_cuda_nn.h"
#endif

static const char usage_head[] =
  "usage: gradcomp train [options]\n"
  "  --dataset mnist|fmnist|cifar10   (mnist)\n"
  "  --model NAME        %s\n"   /* the models' table (gc_nn_model_names) */
  "                      (default: the data set's MLP; VGG for cifar10)\n"
  "  --workers P         (10)            --iid | --noniid   (iid)\n"
  "  --batch B           per worker (10) --epochs E         (1; reference 100)\n"
  "  --lr A              (tuned reference value, else 0.05)\n"
  "  --momentum M        DGC momentum correction (0)\n";
/* The help in pieces: the --algorithm line, the lists of which methods
 * run on the GPU, have --bounds or a dense uplink (their table rows,
 * gc_algo_rules.h) and the --transport lines (the registry) go between
 * them (gc_train_opts_usage). */
static const char usage_device[] =
  "  --seed S (0)  --threads T (all; never changes results)\n"
  "  --device cpu|cuda   where the nets run (cpu).  cuda: the P workers'\n"
  "                      batches in one pass on the GPU (cuBLAS, float32, no\n"
  "                      TF32), and the algorithm's step too (the GPU twins of\n"
  "                      the compressors, bit-identical to the CPU's step) for\n";
static const char usage_device_cpu[] =
  "; the steps\n"
  "                      that log.csv probes (xi, delta), the other methods and\n"
  "                      --bounds step on the CPU.  The nets agree with the\n"
  "                      CPU's to float rounding, not bit for bit\n";
static const char usage_mpi[] =
  "                      Over mpi a run writes the same model.npy and\n"
  "                      log.csv as inproc, bit for bit, but the times: rank\n"
  "                      0 keeps the ledger, evaluates and writes the run\n"
  "                      folder, rank p+1 has worker p's shard and gradient,\n"
  "                      each rank writes its own checkpoint-eN-rR.bin\n"
  "                      (--resume under mpirun); every --algorithm, not\n"
  "                      with --device cuda or --bounds\n"
  "  --mpi-timeout S     (300; --transport mpi only) the watchdog: a rank that\n"
  "                      waits longer than max(S, 50 x the slowest step so\n"
  "                      far, the evaluation between epochs included) seconds\n"
  "                      for another rank's message (twice that for rank\n"
  "                      0's, which may itself be waiting) ends the job,\n"
  "                      naming the silent rank, the epoch and the step, in\n"
  "                      DIR/stopped.txt (rank 0) or DIR/stopped-rR.txt\n"
  "                      (rank R) too; the last finished epoch's checkpoint\n"
  "                      stays for --resume.  0: wait for ever\n"
  "  --net-bandwidth B --net-latency L   the alpha-beta network model (as\n"
  "                      theory trajectory: 10Gbps, 1.5GB/s; 50us, 1ms):\n"
  "                      log.csv gains net_comm_s and time_model_cum\n"
  "  --out DIR (runs/train)  --quiet\n"
  "  --config FILE       options from FILE, one \"option value\" a line, '#'\n"
  "                      comments, names without the dashes; iid, noniid,\n"
  "                      resume and quiet alone or with 1/0 (true/false);\n"
  "                      the command line wins (no config file)\n"
  "  --resume            continue the run in DIR from its last checkpoint\n"
  "                      (the same options; --epochs may grow); a run\n"
  "                      stopped before its first checkpoint starts over\n"
  "  --force             replace the run in DIR: its files are removed\n"
  "                      first.  Without --resume or --force (default:\n"
  "                      neither) a DIR that holds a run is refused, and\n"
  "                      DIR/.lock refuses a second run while one is in it\n"
  "  --max-steps N  --train-subset N  --test-subset N  (default 0: no step\n"
  "                      limit, every example; else N steps, the first N)\n"
  "  --data DIR          the data folder (default: $GRADCOMP_DATA, else the\n"
  "                      data/ of the source tree gradcomp was built from)\n"
  "  --bounds N          every N epochs, the non-convex bound of theory.md 4.3\n"
  "                      evaluated with measured constants (local L by power\n"
  "                      iteration on Hessian-vector products, M^2 = max\n"
  "                      ||gbar||^2, f(x0) with f* >= 0, xi or xi_bi max over\n"
  "                      every step) beside the measured mean ||grad f||^2\n"
  "                      (full-gradient samples): DIR/bounds.csv (plain CSV,\n"
  "                      one header line), bounds.json (what each column\n"
  "                      assumes).  Beside it the ladder of theory.md 4.9,\n"
  "                      one column per rung and ratio_rK = rK / grad2_mean:\n"
  "                      r0_theorem the bound itself; r1_delta with the\n"
  "                      measured contraction gamma_hat for sqrt(1-K/d);\n"
  "                      r2_xi with xi_t per step (the memory recursion run\n"
  "                      along the path) for max xi; r3_memory with the\n"
  "                      measured mean ||E_t||^2 (mem2_mean; E_t = mean_p\n"
  "                      eps^p plus the server's delta) for its bound; r4_m2\n"
  "                      with mean ||gbar_t||^2 for its max; r5_gradient with\n"
  "                      ||grad f(x_t - E_t) - grad f(x_t)||^2 (gdiff2_mean) for\n"
  "                      L^2 ||E_t||^2; r6_inner without the proof's Young step\n"
  "                      (inner_mean); r7_curvature (the curvature along the\n"
  "                      steps for L) is nan: exact on quadratics only.  r5\n"
  "                      and r6 use an extra full gradient at each sample.\n"
  "                      L is a local estimate, not a global\n"
  "                      constant (ReLU nets are not L-smooth): every rung uses\n"
  "                      the worst L seen on the path (column L; L_epoch the\n"
  "                      current one), so the rungs are estimates, not proofs.\n"
  "                      Also logged: gamma_hat, ||E_T||^2 (mem_norm2), mean_p\n"
  "                      ||eps^p||^2 (worker_mem2), the server's ||delta||^2\n"
  "                      (server_mem2), rec2_mean.\n";
static const char usage_bounds_end[] =
  " with topk only;\n"
  "                      the measuring counts in time_total only\n"
  "  --bounds-samples S  full gradients per epoch (3)\n"
  "  --bounds-hvp H      Hessian-vector products per L estimate (10)\n"
  "  --bounds-batch B    examples in the fixed batch for L (1000)\n"
  "  --log-every N       a row of DIR/steps.csv every N steps (default 0: at\n"
  "                      each epoch's end only)\n"
  "Writes DIR/log.csv (one row per epoch), DIR/config.json and a checkpoint\n"
  "every epoch (--resume continues from it bit-identically).  Times in\n"
  "seconds: time_compute = forward + backward; time_compress = the workers'\n"
  "side of the step (error feedback, compression, applying the downlink;\n"
  "with --device cuda also the whole of each step taken on the GPU);\n"
  "time_aggregate = the server's side (decoding, averaging, downlink\n"
  "compression) + averaging the BatchNorm statistics.\n"
  "log.csv columns, one row per epoch (counts and sums over that epoch):\n"
  "  epoch, steps        epoch number; steps so far (a step: every worker\n"
  "                      takes one batch)\n"
  "  train_loss          mean over the steps of the workers' batch loss\n"
  "  test_acc            test accuracy as a fraction (0.9822 = 98.22%)\n"
  "  bytes_up            bytes the workers sent, all workers together (the\n"
  "                      length of every encoded message)\n"
  "  bytes_down          bytes the server sent, counting each worker's copy\n"
  "  support_union_over_k  |S|/K: size of the union of the workers' uplink\n"
  "                      supports over K, mean over the steps (the downlink\n"
  "                      saving of bi over uni); empty where it means\n"
  "                      nothing: dense uplinks (";
static const char usage_log[] =
  ")\n"
  "                      and compressors that are not sparse (powersgd,\n"
  "                      qsgd, sign, ...); with one worker, the count the\n"
  "                      uplink sent over K.  For gaussk and dgc, whose\n"
  "                      count depends on the data, each epoch line on stderr\n"
  "                      gives the workers' mean count over K, and one warning\n"
  "                      per run says when a worker's count left [2K/3, 4K/3]\n"
  "  xi                  mean of xi_t = |TopK(mean acc) - mean TopK(acc)| /\n"
  "                      |lr * mean gradient| (docs/theory.md 4.2); for bi,\n"
  "                      xi_bi with the server memory (4.4); nan where\n"
  "                      undefined (mean gradient 0, or SGD)\n"
  "  delta               mean uplink contraction 1 - |acc - C(acc)|^2/|acc|^2\n"
  "                      over the workers (docs/theory.md 4.1); nan without\n"
  "                      error feedback\n"
  "  xi and delta are probed on 10 steps per epoch (every step if fewer).\n"
  "  time_compute, time_compress, time_aggregate, time_total  (above)\n"
  "  bytes_stats         BatchNorm running-statistics bytes: every step each\n"
  "                      worker sends its statistics (float32) to the server,\n"
  "                      which sends their mean back to each worker (0\n"
  "                      without BatchNorm)\n"
  "  net_comm_s          (--net-*) the epoch's modelled communication seconds:\n"
  "                      per step alpha + up/B and alpha + down/B, from the\n"
  "                      ledger's bytes (gc_netmodel.h)\n"
  "  time_model_cum      (--net-*) modelled time so far: the sum over epochs\n"
  "                      of time_compute + time_compress + time_aggregate +\n"
  "                      net_comm_s (evaluation left out)\n"
  "steps.csv: the curve, a row every --log-every steps and at each epoch's\n"
  "end: epoch, step (steps so far), train_loss (mean over the steps since\n"
  "the last row), lr, bytes_up_cum, bytes_down_cum (bytes so far, as\n"
  "log.csv counts them), xi, delta (mean of the probed steps since the last\n"
  "row; empty where none), test_loss, test_acc (at an epoch's end; empty\n"
  "elsewhere).  model.npy is one float32 vector; model.json names each\n"
  "tensor in it (layers.I.weight, .bias, .running_mean, .running_var) with\n"
  "its shape, offset and size.\n";

/* train's compressor options: every field, each with its downlink twin
 * but the rank (one --compressor serves both directions; PowerSGD's rank
 * is gc_train_config's rank). */
static gc_cli_comp train_comp(const gc_train_config *c)
{
  gc_cli_comp comp = { .take = GC_CLI_P_ALL, .twin = GC_CLI_P_ALL & ~GC_CLI_P_RANK };
  gc_compressor_params_default(&comp.up);
  comp.up.density = c->density;
  comp.up.rank = c->rank;
  return comp;
}

static int dense_uplink(const gc__algo_desc *row)
{
  return row->up == GC__UP_DENSE;
}

void gc_train_opts_usage(FILE *out)
{
  gc_train_config c;
  gc_train_config_default(&c);
  gc_cli_comp comp = train_comp(&c);
  char models[256] = "";
  for (const char *const *m = gc_nn_model_names(); *m; m++) {
    size_t at = strlen(models);
    snprintf(models + at, sizeof models - at, "%s%s", at ? " " : "", *m);
  }
  fprintf(out, usage_head, models);
  fprintf(out, "  --algorithm NAME    (bi), one of\n    %s\n"
          "  --compressor NAME   (topk); --compressor powersgd sends each weight\n"
          "                      matrix as a rank-R factor pair, biases raw\n",
          gc_cli_algorithm_names("|"));
  gc_cli_compressor_usage(out, &comp);
  char names[512];
  fprintf(out, "%s%22s%s%s", usage_device, "",
          gc__algo_names(GC__ALGO_GPU, ", ", names, sizeof names), usage_device_cpu);
  gc_transport_usage(out, "  ");
  fprintf(out, "%s%22s%s", usage_mpi, "",
          gc__algo_names(GC__ALGO_TRAIN_BOUNDS, ", ", names, sizeof names));
  fprintf(out, "%s%s%s", usage_bounds_end,
          gc_cli_algorithm_names_where(dense_uplink, ", ", names, sizeof names), usage_log);
}

/* Tuned learning rates (theory.md section 6) per model and P, indexed by
 * the algorithm (an index outside gc_algo_kind does not compile); 0 where
 * the reference runs tuned none. */
#define TUNED(uni, bi, sgd) { [GC_ALGO_UNI] = uni, [GC_ALGO_BI] = bi, [GC_ALGO_SGD] = sgd }
static const struct { const char *model; size_t P; double lr[GC_ALGO_COUNT]; } tuned[] = {
  { "fmnist-mlp", 20, TUNED(.08, .08, .06) }, { "fmnist-mlp", 50, TUNED(.13, .12, .07) },
  { "fmnist-mlp", 100, TUNED(.22, .22, .08) },
  { "fmnist-cnn", 20, TUNED(.09, .08, .06) }, { "fmnist-cnn", 50, TUNED(.12, .11, .07) },
  { "fmnist-cnn", 100, TUNED(.14, .20, .08) },
  { "mnist-mlp", 10, TUNED(.04, .10, .03) }, { "mnist-mlp", 20, TUNED(.06, .09, .03) },
  { "mnist-mlp", 50, TUNED(.17, .18, .10) }, { "mnist-mlp", 100, TUNED(.17, .24, .10) },
  { "mnist-cnn", 10, TUNED(.06, .07, .05) }, { "mnist-cnn", 20, TUNED(.08, .09, .05) },
  { "mnist-cnn", 50, TUNED(.14, .16, .07) }, { "mnist-cnn", 100, TUNED(.09, .16, .07) },
  { "cifar-vgg19", 20, TUNED(.05, .05, .1) },
};
#undef TUNED

double gc_train_opts_tuned_lr(const char *model, size_t P, const char *algo)
{
  gc_algo_kind k;
  if (gc_algo_by_name(algo, &k) == GC_SUCCESS)
    for (size_t i = 0; i < sizeof tuned / sizeof tuned[0]; i++)
      if (!strcmp(tuned[i].model, model) && tuned[i].P == P && tuned[i].lr[k] > 0)
        return tuned[i].lr[k];
  return 0.05;
}

void gc_train_opts_init(gc_train_opts *o)
{
  memset(o, 0, sizeof *o);
  gc_train_config_default(&o->c);
  o->comp = train_comp(&o->c);
  o->transport = gc_transport_kind_default();
}

int gc_train_opts_parse(gc_train_opts *o, int argc, char **argv,
                        const char *from_file)
{
  gc_train_config *c = &o->c;
  const char *cmd = "train";
  char sub[1100] = "";
  if (from_file)
    snprintf(sub, sizeof sub, "--config %.1000s: ", from_file);
  static const char *const flags[] = { "--iid", "--noniid", "--resume", "--force", "--quiet",
                                       NULL };
  gc_cli_args args = GC_CLI_ARGS(cmd, sub, gc_train_opts_usage, argc, argv);
  args.i = 0;
  args.flags = flags;
  const char *a, *v;
  while (gc_cli_next(&args, &a, &v)) {
    int r = gc_cli_compressor_option(&args, a, v, &o->comp);
    if (r == GC_CLI_TAKEN)
      continue;
    if (r != GC_CLI_NOT_MINE)
      return r;
    if (!strcmp(a, "--dataset")) c->dataset = v;
    else if (!strcmp(a, "--model")) c->model = v;
    else if (!strcmp(a, "--data")) c->data_dir = v;
    else if (!strcmp(a, "--workers")) { if (gc_cli_size(cmd, a, v, &c->workers)) return 2; }
    else if (!strcmp(a, "--iid")) c->noniid = 0;
    else if (!strcmp(a, "--noniid")) c->noniid = 1;
    else if (!strcmp(a, "--batch")) { if (gc_cli_size(cmd, a, v, &c->batch)) return 2; }
    else if (!strcmp(a, "--epochs")) { if (gc_cli_size(cmd, a, v, &c->epochs)) return 2; }
    else if (!strcmp(a, "--lr")) { if (gc_cli_double(cmd, a, v, &c->lr)) return 2; o->lr_set = 1; }
    else if (!strcmp(a, "--momentum")) { if (gc_cli_double(cmd, a, v, &c->momentum)) return 2; }
    else if (!strcmp(a, "--algorithm")) c->algorithm = v;
    else if (!strcmp(a, "--compressor")) c->compressor = v;
    else if (!strcmp(a, "--seed")) { if (gc_cli_u64(cmd, a, v, &c->seed)) return 2; }
    else if (!strcmp(a, "--threads")) { if (gc_cli_size(cmd, a, v, &c->threads)) return 2; }
    else if (!strcmp(a, "--device")) {
      if (!strcmp(v, "cpu")) {
        c->device = NULL;
      } else if (!strcmp(v, "cuda")) {
#if defined(GC_CUDA_NETS)
        c->device = &gc_cuda_nn_device;
#elif defined(HAVE_CUBLAS)
        return gc_cli_exec_sibling(cmd, "gradcomp-cuda");
#else
        return gc_cli_usage_error(cmd, "--device cuda: this build has no CUDA nets"
                                  " (configure found no CUDA with cuBLAS)");
#endif
      } else {
        return gc_cli_usage_error(cmd, "--device: '%s' is not cpu or cuda", v);
      }
    }
    else if (!strcmp(a, "--transport")) {
      if (gc_transport_choose(cmd, v, &o->transport))
        return 2;
    }
    else if (!strcmp(a, "--mpi-timeout")) {
      if (gc_mpi_timeout_option(cmd, a, v, &o->mpi_timeout))
        return 2;
      o->mpi_timeout_set = 1;
    }
    else if (!strcmp(a, "--net-bandwidth")) {
      if (gc_net_parse_bandwidth(v, &o->net.bandwidth) != GC_SUCCESS)
        return gc_cli_usage_error(cmd, "%s: %s", a, gc_last_error());
      o->net_bw = v;
    }
    else if (!strcmp(a, "--net-latency")) {
      if (gc_net_parse_latency(v, &o->net.latency) != GC_SUCCESS)
        return gc_cli_usage_error(cmd, "%s: %s", a, gc_last_error());
      o->net_lat = v;
    }
    else if (!strcmp(a, "--out")) c->out = v;
    else if (!strcmp(a, "--config") && !from_file) o->config = (char *) v;
    else if (!strcmp(a, "--resume")) c->resume = 1;
    else if (!strcmp(a, "--force")) c->force = 1;
    else if (!strcmp(a, "--quiet")) c->quiet = 1;
    else if (!strcmp(a, "--max-steps")) { if (gc_cli_size(cmd, a, v, &c->max_steps)) return 2; }
    else if (!strcmp(a, "--log-every")) { if (gc_cli_size(cmd, a, v, &c->log_every)) return 2; }
    else if (!strcmp(a, "--train-subset")) { if (gc_cli_size(cmd, a, v, &c->train_subset)) return 2; }
    else if (!strcmp(a, "--test-subset")) { if (gc_cli_size(cmd, a, v, &c->test_subset)) return 2; }
    else if (!strcmp(a, "--bounds") || !strcmp(a, "--bounds-samples") ||
             !strcmp(a, "--bounds-hvp") || !strcmp(a, "--bounds-batch")) {
      size_t *dst = !strcmp(a, "--bounds") ? &c->bounds_every
                    : !strcmp(a, "--bounds-samples") ? &c->bounds_samples
                    : !strcmp(a, "--bounds-hvp") ? &c->bounds_hvps
                    : &c->bounds_batch;
      if (gc_cli_size(cmd, a, v, dst))
        return 2;
      if (*dst == 0) {
        fprintf(stderr, "gradcomp train: %s: %s must be at least 1\n", a, v);
        return 2;
      }
    }
    else
      return gc_cli_unknown(&args, a);
  }
  return args.exit == 0 ? -1 : args.exit > 0 ? args.exit : 0;
}

/* ---- --config FILE ------------------------------------------------------ */

void gc_train_opts_free_config(char **av, int n)
{
  for (int i = 0; i < n; i++)
    free(av[i]);
  free(av);
}

/* The options that take no value: in a config file they may carry one of
 * 0/1/false/true (no/yes, off/on); "iid 0" and "noniid 0" name the other
 * partition, "quiet 0" and "resume 0" leave the default. */
static const struct { const char *key, *on, *off; } config_flags[] = {
  { "iid", "--iid", "--noniid" }, { "noniid", "--noniid", "--iid" },
  { "resume", "--resume", NULL }, { "quiet", "--quiet", NULL } };

/* 1 or 0 for a boolean word, -1 for anything else. */
static int config_bool(const char *v)
{
  static const char *const yes[] = { "1", "true", "yes", "on" };
  static const char *const no[] = { "0", "false", "no", "off" };
  for (size_t i = 0; i < 4; i++) {
    if (!strcasecmp(v, yes[i]))
      return 1;
    if (!strcasecmp(v, no[i]))
      return 0;
  }
  return -1;
}

/* Append a copy of s to *av (grown as needed); 0, or -1 out of memory. */
static int config_push(char ***av, int *n, size_t *cap, const char *prefix,
                       const char *s)
{
  if ((size_t) *n + 1 >= *cap) {
    size_t c = *cap ? 2 * *cap : 64;
    char **t = realloc(*av, c * sizeof *t);
    if (!t)
      return -1;
    *av = t;
    *cap = c;
  }
  char *k = malloc(strlen(prefix) + strlen(s) + 1);
  if (!k)
    return -1;
  sprintf(k, "%s%s", prefix, s);
  (*av)[(*n)++] = k;
  (*av)[*n] = NULL;
  return 0;
}

/* A line is one option: a second value, a missing value, a value on an
 * option that takes none (other than a boolean word) or "help" is refused
 * naming the line, rather than dropped or read as the next option. */
int gc_train_opts_read_config(const char *path, char ***argv_out,
                              int *argc_out)
{
  enum { MAXTEXT = 1 << 16 };
  FILE *f = fopen(path, "r");
  if (!f)
    return gc_cli_usage_error("train", "--config %s: cannot open: %s", path,
                              strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(f);
    return gc_cli_usage_error("train", "--config %s: not a regular file", path);
  }
  char *text = calloc(1, MAXTEXT + 1);
  if (!text) {
    fclose(f);
    return gc_cli_fail("train", 0, "out of memory");
  }
  size_t len = fread(text, 1, MAXTEXT + 1, f);
  int read_error = ferror(f);
  fclose(f);
  /* a text of "option value" lines: refuse what cannot be one rather
   * than guess at options in it */
  const char *why = read_error ? "read error"
                    : len > MAXTEXT ? "longer than 64 KiB" : NULL;
  for (size_t i = 0; !why && i < len; i++) {
    unsigned char ch = (unsigned char) text[i];
    if (ch < 0x20 && ch != '\n' && ch != '\t' && ch != '\r')
      why = "binary data (control bytes), not a text of \"option value\" lines";
  }
  if (why) {
    free(text);
    return gc_cli_usage_error("train", "--config %s: %s", path, why);
  }
  text[len] = '\0';
  char **av = NULL;
  int n = 0, oom = 0, bad = 0;
  size_t cap = 0, lineno = 0;
  for (char *line = text, *next; line && !oom && !bad; line = next) {
    lineno++;
    next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    char *hash = strchr(line, '#');
    if (hash)
      *hash = '\0';
    char *s2 = NULL, *key = strtok_r(line, " \t=\r", &s2);
    if (!key)
      continue;
    char *val = strtok_r(NULL, " \t=\r", &s2);
    char *extra = strtok_r(NULL, " \t=\r", &s2);
    const char *bare = strncmp(key, "--", 2) ? key : key + 2;
    if (extra) {
      bad = gc_cli_usage_error("train", "--config %s line %zu: '%s' takes one"
                               " value, not '%s %s'", path, lineno, bare, val,
                               extra);
      break;
    }
    if (!strcmp(bare, "help") || !strcmp(key, "-h") || !strcmp(bare, "config")) {
      bad = gc_cli_usage_error("train", "--config %s line %zu: '%s' is not an"
                               " option of a config file", path, lineno, bare);
      break;
    }
    size_t fi = 0;
    while (fi < sizeof config_flags / sizeof config_flags[0] &&
           strcmp(bare, config_flags[fi].key))
      fi++;
    if (fi < sizeof config_flags / sizeof config_flags[0]) {
      int on = val ? config_bool(val) : 1;
      if (on < 0) {
        bad = gc_cli_usage_error("train", "--config %s line %zu: '%s' is on or"
                                 " off (1/0, true/false), not '%s'", path,
                                 lineno, bare, val);
        break;
      }
      const char *opt = on ? config_flags[fi].on : config_flags[fi].off;
      if (opt && config_push(&av, &n, &cap, "", opt))
        oom = 1;
      continue;
    }
    if (!val) {
      bad = gc_cli_usage_error("train", "--config %s line %zu: '%s' has no"
                               " value", path, lineno, bare);
      break;
    }
    if (config_push(&av, &n, &cap, strncmp(key, "--", 2) ? "--" : "", key) ||
        (val && config_push(&av, &n, &cap, "", val)))
      oom = 1;
  }
  free(text);
  if (oom || bad) {
    gc_train_opts_free_config(av, n);
    return bad ? bad : gc_cli_fail("train", 0, "out of memory");
  }
  *argv_out = av;
  *argc_out = n;
  return 0;
}
