/* cli.c -- shared helpers of the front end. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE   /* MAP_ANONYMOUS, MAP_NORESERVE */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "gc_algo_rules.h"
#include "gc_cli.h"
#include "gc_errno.h"
#include "gc_io.h"

static void vreport(const char *cmd, int status, const char *fmt, va_list ap)
{
  fprintf(stderr, "gradcomp %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  if (status != 0 && gc_last_error()[0])
    fprintf(stderr, ": %s", gc_last_error());
  fputc('\n', stderr);
}

int gc_cli_fail(const char *cmd, int status, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vreport(cmd, status, fmt, ap);
  va_end(ap);
  return 1;
}

int gc_cli_usage_error(const char *cmd, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vreport(cmd, 0, fmt, ap);
  va_end(ap);
  return 2;
}

/* OpenBLAS starts its thread pool in a library constructor, before main;
 * under an address-space limit (ulimit -v) a pool thread retries its
 * failed buffer allocation for ever and the program hangs.  One thread
 * needs no pool, but the constructor reads OPENBLAS_NUM_THREADS from the
 * process's initial environment (a setenv here is undone when libc starts),
 * so re-execute once with it set.  The executable's preinit functions run
 * before its libraries' constructors.  Training uses one BLAS thread
 * anyway: results never depend on it. */
static char **saved_argv;   /* the program's own, for gc_cli_exec_sibling */

static void blas_one_thread_under_memory_limit(int argc, char **argv, char **envp)
{
  static char one[] = "OPENBLAS_NUM_THREADS=1";
  static char *env[4096];
  struct rlimit rl;
  (void) argc;
  saved_argv = argv;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return;
  size_t n = 0;
  for (; envp[n]; n++)
    if (!strncmp(envp[n], "OPENBLAS_NUM_THREADS=", 21) || n + 2 >= 4096)
      return;   /* a user's own choice stays (and so does a huge environment) */
  memcpy(env, envp, n * sizeof *env);
  env[n] = one;
  env[n + 1] = NULL;
  execve("/proc/self/exe", argv, env);   /* returns only on failure: go on */
}
__attribute__((section(".preinit_array"), used))
static void (*const gc_cli_preinit)(int, char **, char **) = blas_one_thread_under_memory_limit;

/* This process's running threads (OpenBLAS's pool spins for a while
 * after its constructor starts it). */
static long own_running(void)
{
  DIR *d = opendir("/proc/self/task");
  if (!d)
    return 1;
  long running = 0;
  for (struct dirent *e; (e = readdir(d));) {
    char path[300], state = 0;
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    /* pid (comm) state ...: the state follows the last ')' */
    char line[512];
    if (f && fgets(line, sizeof line, f)) {
      const char *p = strrchr(line, ')');
      if (p && p[1] == ' ')
        state = p[2];
    }
    if (f)
      fclose(f);
    running += state == 'R';
  }
  closedir(d);
  return running > 0 ? running : 1;
}

/* Threads of other processes running on the machine (/proc/stat's
 * procs_running less this process's), the fewest of three looks a
 * millisecond apart (a kernel thread is often caught running for a
 * moment); -1 where unknown. */
static long others_running(void)
{
  long fewest = -1;
  for (int look = 0; look < 3; look++) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
      return -1;
    char line[256];
    long running = -1;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "procs_running %ld", &running) == 1)
        break;
    fclose(f);
    if (running < 1)
      return -1;
    long others = running - own_running();
    if (fewest < 0 || others < fewest)
      fewest = others < 0 ? 0 : others;
    if (fewest == 0)
      break;
    nanosleep(&(struct timespec) { 0, 1000000 }, NULL);
  }
  return fewest;
}

/* libgomp's idle threads spin for GOMP_SPINCOUNT (300000) rounds before
 * they sleep.  A step of a small model opens a parallel region every few
 * hundred microseconds, and on a machine where other processes hold the
 * cores the spinning threads take the time the working ones need: an
 * MNIST-MLP epoch on 2 threads once took 5.3 s against 0.66 s on one
 * thread with two busy processes beside it (0.71 s at 3000 rounds).  On
 * an idle machine, though, 3000 rounds let the threads fall asleep
 * between the regions, and half of the 2-thread MLP epochs then took
 * 0.26-0.28 s instead of 0.24-0.25 (all 9 runs at 30000 or 300000 were
 * fast).  So the rounds are cut to 3000 only where other threads are
 * running when the program starts; libgomp reads the variable in its
 * constructor, so that means re-executing once with it set.  A user's
 * own setting (or wait policy) stays. */
void gc_cli_short_omp_spin(void)
{
#if defined(_OPENMP) && !defined(__clang__)
  if (!saved_argv || getenv("GOMP_SPINCOUNT") || getenv("OMP_WAIT_POLICY"))
    return;
  if (others_running() == 0)
    return;   /* an idle machine: libgomp's own spinning */
  if (setenv("GOMP_SPINCOUNT", "3000", 1) == 0)
    execv("/proc/self/exe", saved_argv);   /* returns only on failure: go on */
#endif
}

int gc_cli_exec_sibling(const char *cmd, const char *name)
{
  if (!saved_argv || !saved_argv[0])
    return gc_cli_fail(cmd, 0, "cannot find %s: no argv", name);
  /* beside this program: argv[0]'s folder (a libtool wrapper's too), else
   * the executable's own (/proc/self/exe), else the PATH */
  char path[4096], self[4096];
  const char *slash = strrchr(saved_argv[0], '/');
  if (slash) {
    if ((size_t) snprintf(path, sizeof path, "%.*s/%s", (int) (slash - saved_argv[0]),
                          saved_argv[0], name) < sizeof path)
      execv(path, saved_argv);
  }
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    char *s = strrchr(self, '/');
    if (s) {
      *s = '\0';
      if ((size_t) snprintf(path, sizeof path, "%s/%s", self, name) < sizeof path)
        execv(path, saved_argv);
    }
  }
  execvp(name, saved_argv);
  return gc_cli_fail(cmd, 0, "cannot run %s (beside %s or on the PATH): %s", name,
                     saved_argv[0], strerror(errno));
}

static char interrupt_note[1100] = "gradcomp: interrupted; rows written so far are kept\n";

static void on_interrupt(int sig)
{
  (void) sig;
  /* async-signal-safe: one write of a prepared text, then _exit */
  gc__remove_live_tmp();   /* a .npy or checkpoint half written */
  ssize_t w = write(STDERR_FILENO, interrupt_note, strlen(interrupt_note));
  (void) w;
  _exit(130);
}

/* What OpenBLAS maps for its work buffer at the first level-2/3 call
 * (128 MiB and a page in Debian's build), with some room to spare. */
#define BLAS_BUFFER_BYTES ((size_t) 136 << 20)

static int reserve_blas_buffer(const char *cmd)
{
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return 0;
  void *probe = mmap(NULL, BLAS_BUFFER_BYTES, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (probe == MAP_FAILED)
    return gc_cli_fail(cmd, 0, "the address-space limit (ulimit -v %llu KiB) leaves"
                       " no room for the %zu MiB BLAS work buffer; raise the limit",
                       (unsigned long long) rl.rlim_cur / 1024, BLAS_BUFFER_BYTES >> 20);
  munmap(probe, BLAS_BUFFER_BYTES);
  /* a small product makes OpenBLAS take its buffer now; it keeps it */
  double a[16] = { 1 }, c[16];
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 4, 4, 1.0, a, 4, a, 4,
              0.0, c, 4);
  return 0;
}

int gc_cli_start(const char *cmd)
{
  signal(SIGXFSZ, SIG_IGN);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  struct sigaction old;
  /* a shell starts background jobs with SIGINT ignored: keep it so */
  if (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
    sigaction(SIGINT, &sa, NULL);
  return reserve_blas_buffer(cmd);
}

void gc_cli_set_interrupt_note(const char *cmd, const char *note)
{
  /* build the whole text now: the handler may not format */
  char text[sizeof interrupt_note];
  snprintf(text, sizeof text, "\ngradcomp %s: interrupted; %.1000s\n", cmd, note);
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigprocmask(SIG_BLOCK, &block, &old);
  memcpy(interrupt_note, text, sizeof text);
  sigprocmask(SIG_SETMASK, &old, NULL);
}

/* The streams whose failed write gc_cli_csv_flush reported (and cut):
 * later calls on them return 1 without a second message.  A slot whose
 * stream shows no error is stale (closed, its address reused): free. */
enum { CSV_SLOTS = 16 };
static FILE *csv_failed[CSV_SLOTS];

static int csv_reported(FILE *f, int forget)
{
  for (size_t i = 0; i < CSV_SLOTS; i++)
    if (csv_failed[i] == f) {
      int live = ferror(f) != 0;
      if (forget || !live)
        csv_failed[i] = NULL;
      return live;
    }
  return 0;
}

static void csv_mark(FILE *f)
{
  for (size_t i = 0; i < CSV_SLOTS; i++)
    if (!csv_failed[i]) {
      csv_failed[i] = f;
      return;
    }
}

int gc_cli_csv_flush(const char *cmd, FILE *f, const char *path)
{
  if (csv_reported(f, 0))
    return 1;
  if (fflush(f) != 0 || ferror(f)) {
    int e = errno;
    gc__cut_to_last_line(f, path);
    fprintf(stderr, "gradcomp %s: %s: write failed: %s\n", cmd, path, strerror(e));
    csv_mark(f);
    return 1;
  }
  return 0;
}

int gc_cli_csv_close(const char *cmd, FILE *f, const char *path)
{
  int bad = gc_cli_csv_flush(cmd, f, path);
  csv_reported(f, 1);
  if (fclose(f) != 0 && !bad) {
    fprintf(stderr, "gradcomp %s: %s: write failed: %s\n", cmd, path, strerror(errno));
    bad = 1;
  }
  return bad;
}

int gc_cli_exit(const char *prog, int rc)
{
  /* what stdout still holds goes out now, where a failure can be told */
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "%s: standard output: write failed: %s\n", prog, strerror(errno));
    return rc ? rc : 1;
  }
  return rc;
}

int gc_cli_next(gc_cli_args *a, const char **opt, const char **val)
{
  if (a->i >= a->argc)
    return 0;
  const char *o = a->argv[a->i];
  if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
    a->usage(stdout);
    a->exit = 0;
    return 0;
  }
  if (a->operands && (o[0] != '-' || !o[1])) {
    *opt = NULL;
    *val = o;
    a->i++;
    return 1;
  }
  for (const char *const *f = a->flags; f && *f; f++)
    if (!strcmp(o, *f)) {
      *opt = o;
      *val = NULL;
      a->i++;
      return 1;
    }
  if (a->i + 1 >= a->argc) {
    a->exit = gc_cli_usage_error(a->cmd, "%sunknown option or missing value: %s", a->sub, o);
    a->usage(stderr);
    return 0;
  }
  *opt = o;
  *val = a->argv[a->i + 1];
  a->i += 2;
  return 1;
}

int gc_cli_unknown(const gc_cli_args *a, const char *opt)
{
  gc_cli_usage_error(a->cmd, "%sunknown option '%s'", a->sub, opt);
  a->usage(stderr);
  return 2;
}

int gc_cli_size(const char *cmd, const char *opt, const char *text, size_t *out)
{
  /* strtod, so lengths may be written 2.5e7; it reads "010" as ten, and
   * hex floats are refused so that every integer option is decimal. */
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || end == text || *end || strpbrk(text, "xX") || !(v >= 0 && v <= 1e18) ||
      v != floor(v)) {
    fprintf(stderr, "gradcomp %s: %s: '%s' is not a non-negative integer\n", cmd, opt, text);
    return 1;
  }
  *out = (size_t) v;
  return 0;
}

int gc_cli_size_in(const char *cmd, const char *opt, const char *text, size_t lo, size_t hi,
                   size_t *out)
{
  if (gc_cli_size(cmd, opt, text, out))
    return 1;
  if (*out < lo || *out > hi) {
    gc_cli_usage_error(cmd, "%s: %zu is outside [%zu, %zu]", opt, *out, lo, hi);
    return 1;
  }
  return 0;
}

int gc_cli_u64(const char *cmd, const char *opt, const char *text, uint64_t *out)
{
  char *end;
  errno = 0;
  /* base 10: a seed written 010 is ten, not octal eight */
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || end == text || *end || text[0] == '-') {
    fprintf(stderr, "gradcomp %s: %s: '%s' is not a non-negative integer\n", cmd, opt, text);
    return 1;
  }
  *out = v;
  return 0;
}

int gc_cli_double(const char *cmd, const char *opt, const char *text, double *out)
{
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  /* ERANGE: overflow (v = +-HUGE_VAL, not finite) or underflow.  A
   * subnormal result (1e-310) is the nearest double and is taken; a
   * nonzero value that rounds to 0 (1e-400) would silently change the
   * option's meaning and is refused. */
  int under = errno == ERANGE && isfinite(v);
  if ((errno && !under) || end == text || *end || !isfinite(v)) {
    fprintf(stderr, "gradcomp %s: %s: '%s' is not a finite number\n", cmd, opt, text);
    return 1;
  }
  if (under && v == 0) {
    fprintf(stderr, "gradcomp %s: %s: '%s' is below the smallest double (%g) and"
            " would be read as 0\n", cmd, opt, text, 0x1p-1074);
    return 1;
  }
  *out = v;
  return 0;
}

int gc_cli_ties(const char *cmd, const char *text, int *ties)
{
  if (!strcmp(text, "low"))
    *ties = GC_TIES_LOW;
  else if (!strcmp(text, "high"))
    *ties = GC_TIES_HIGH;
  else
    return gc_cli_usage_error(cmd, "--ties: '%s' is not low or high", text);
  return 0;
}

/* Copy the next entry of the comma list at *p into tok and step past it;
 * 0 at the end of the list.  An empty or over-long entry comes back as "". */
static int next_item(const char **p, char *tok, size_t cap)
{
  if (!*p)
    return 0;
  size_t m = strcspn(*p, ",");
  if (m < cap) {
    memcpy(tok, *p, m);
    tok[m] = '\0';
  } else {
    tok[0] = '\0';
  }
  *p = (*p)[m] ? *p + m + 1 : NULL;
  return 1;
}

/* The loop of the three list parsers: each entry goes through parse(),
 * which prints its own message and returns non-zero on a bad entry. */
static size_t parse_list(const char *cmd, const char *opt, const char *text, size_t max,
                         int (*parse)(const char *cmd, const char *opt, const char *tok,
                                      void *out, size_t j),
                         void *out)
{
  char tok[128];
  size_t m = 0;
  for (const char *p = text; next_item(&p, tok, sizeof tok);) {
    if (!tok[0]) {
      gc_cli_usage_error(cmd, "%s: empty or over-long entry in '%s'", opt, text);
      return 0;
    }
    if (m == max) {
      gc_cli_usage_error(cmd, "%s: at most %zu entries", opt, max);
      return 0;
    }
    if (parse(cmd, opt, tok, out, m))
      return 0;
    m++;
  }
  return m;
}

static int parse_double(const char *cmd, const char *opt, const char *tok, void *out, size_t j)
{
  return gc_cli_double(cmd, opt, tok, (double *) out + j);
}

static int parse_compressor(const char *cmd, const char *opt, const char *tok, void *out,
                            size_t j)
{
  const gc_compressor_type **t = (const gc_compressor_type **) out + j;
  if ((*t = gc_compressor_type_by_name(tok)))
    return 0;
  return gc_cli_usage_error(cmd, "%s: unknown compressor '%s' (gradcomp compress --list)",
                            opt, tok);
}

static int parse_algorithm(const char *cmd, const char *opt, const char *tok, void *out,
                           size_t j)
{
  if (gc_algo_by_name(tok, (gc_algo_kind *) out + j) == GC_SUCCESS)
    return 0;
  return gc_cli_usage_error(cmd, "%s: unknown algorithm '%s' (%s)", opt, tok,
                            gc_cli_algorithm_names(", "));
}

size_t gc_cli_doubles(const char *cmd, const char *opt, const char *text,
                      double *out, size_t max)
{
  return parse_list(cmd, opt, text, max, parse_double, out);
}

size_t gc_cli_compressors(const char *cmd, const char *opt, const char *text,
                          const gc_compressor_type **out, size_t max)
{
  return parse_list(cmd, opt, text, max, parse_compressor, (void *) out);
}

size_t gc_cli_algorithms(const char *cmd, const char *opt, const char *text,
                         gc_algo_kind *out, size_t max)
{
  return parse_list(cmd, opt, text, max, parse_algorithm, out);
}

const char *gc_cli_algorithm_names(const char *sep)
{
  static char buf[512];
  return gc_cli_algorithm_names_where(NULL, sep, buf, sizeof buf);
}

const char *gc_cli_algorithm_names_where(int (*keep)(const struct gc__algo_desc *row),
                                         const char *sep, char *buf, size_t cap)
{
  size_t len = 0;
  if (cap)
    buf[0] = '\0';
  for (int k = 0; k < GC_ALGO_COUNT && len < cap; k++)
    if (!keep || keep(gc__algo((gc_algo_kind) k))) {
      int w = snprintf(buf + len, cap - len, "%s%s", len ? sep : "",
                       gc_algo_name((gc_algo_kind) k));
      len = w < 0 ? cap : len + (size_t) w;
    }
  return buf;
}

void gc_cli_progress(const char *label, size_t i, size_t n, int quiet)
{
  if (quiet || n == 0 || !isatty(STDERR_FILENO))
    return;
  /* The rate and ETA need the start of this bar: a new label or a restart
   * from step <= 1 begins a new one (one bar at a time per program). */
  static const char *bar_label;
  static double bar_start;
  static size_t bar_first;
  double now = gc_cli_now();
  if (label != bar_label || i <= 1 || i < bar_first) {
    bar_label = label;
    bar_start = now;
    bar_first = i;
  }
  enum { WIDTH = 30 };
  size_t filled = i * WIDTH / n;
  char bar[WIDTH + 1];
  for (size_t j = 0; j < WIDTH; j++)
    bar[j] = j < filled ? '=' : (j == filled ? '>' : ' ');
  bar[WIDTH] = '\0';
  fprintf(stderr, "\r%s [%s] %zu/%zu", label, bar, i, n);
  double elapsed = now - bar_start;
  if (i > bar_first && elapsed > 0) {
    double rate = (double) (i - bar_first) / elapsed;
    double left = (double) (n - i) / rate;
    fprintf(stderr, rate >= 100 ? " %.0f/s, ETA " : " %.3g/s, ETA ", rate);
    if (left >= 3600)
      fprintf(stderr, "%.0fh%02.0fm", floor(left / 3600), floor(fmod(left, 3600) / 60));
    else if (left >= 60)
      fprintf(stderr, "%.0fm%02.0fs", floor(left / 60), floor(fmod(left, 60)));
    else
      fprintf(stderr, "%.0fs", left);
    fputs("\033[K", stderr);
  }
  if (i >= n)
    fputc('\n', stderr);
  fflush(stderr);
}

double gc_cli_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

const char *gc_cli_python_with(const char *code)
{
  const char *env = getenv("GRADCOMP_PYTHON");
  const char *cand[3] = { env, "python3", "/usr/bin/python3" };
  for (int i = 0; i < 3; i++) {
    char cmd[1024];
    if (!cand[i] || !*cand[i] || strchr(cand[i], '\''))
      continue;
    snprintf(cmd, sizeof cmd, "'%s' -c \"%s\" >/dev/null 2>&1", cand[i], code);
    if (system(cmd) == 0)
      return cand[i];
  }
  return NULL;
}

int gc_cli_launcher_size(const char **var)
{
  static const char *const sizes[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                       "MV2_COMM_WORLD_SIZE" };
  static const char *const ranks[] = { "PMIX_RANK", "PMI_RANK" };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const char *v = getenv(sizes[i]);
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (v && end != v && n > 0) {
      if (var)
        *var = sizes[i];
      return n > INT_MAX ? INT_MAX : (int) n;
    }
  }
  for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++)
    if (getenv(ranks[i])) {
      if (var)
        *var = ranks[i];
      return -1;
    }
  return 0;
}

int gc_cli_refuse_launcher(const char *cmd, int mpi)
{
  const char *var = NULL;
  int n = gc_cli_launcher_size(&var);
  if (mpi || n <= 1)
    return 0;
  /* every rank says it: the launcher may end the job as the first one
   * exits, before another's line is out */
  gc_cli_usage_error(cmd, "started as one of %d processes by an MPI launcher"
                     " (%s=%d), but not over MPI: each process would run the"
                     " whole job alone, into the same files; pass --transport"
                     " mpi (train, theory trajectory; mpirun -n P+1), or run"
                     " it without mpirun (if a parent process passed %s on,"
                     " unset it)", n, var, n, var);
  return 2;
}

const char *gc_cli_data_dir(const char *opt, const char **from)
{
  const char *env = getenv("GRADCOMP_DATA");
  if (opt) {
    *from = "--data";
    return opt;
  }
  if (env && *env) {
    *from = "GRADCOMP_DATA";
    return env;
  }
  *from = "the source tree";
  return GC_SOURCE_DATA;
}

void gc_cli_data_hint(const char *cmd, const char *dir, const char *from)
{
  fprintf(stderr, "gradcomp %s: data folder %s (from %s; the order is --data"
          " DIR, then GRADCOMP_DATA, then the source tree's data/); choose"
          " another with --data DIR or GRADCOMP_DATA=DIR; tools/get-data"
          " fetches MNIST and Fashion-MNIST\n", cmd, dir, from);
}
