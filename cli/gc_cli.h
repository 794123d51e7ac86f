/* gc_cli.h -- small helpers shared by the gradcomp subcommands: strict
 * number parsing with messages that name the option, progress on stderr,
 * and the failure exit.  Programs exit; the library never does. */
#ifndef GC_CLI_H
#define GC_CLI_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gc_algo.h"
#include "gc_compressor.h"

/* Print "gradcomp CMD: message" (plus the library's last reason when
 * status != 0) on stderr; returns 1, the exit status of a failed run. */
int gc_cli_fail(const char *cmd, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The same message for a bad command line (an impossible option value);
 * returns 2, the usage exit status.  The counterexample programs keep 1
 * for "did not reproduce", so their argument checks must use this. */
int gc_cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Parse option values; on error print "gradcomp CMD: --opt: 'text' is not ..."
 * and return non-zero.  Integers are decimal ("010" is ten); gc_cli_size
 * also takes an integral float such as 2.5e7. */
int gc_cli_size(const char *cmd, const char *opt, const char *text, size_t *out);
/* gc_cli_size of a value that must lie in [lo, hi] ("--opt: N is outside
 * [lo, hi]" otherwise). */
int gc_cli_size_in(const char *cmd, const char *opt, const char *text, size_t lo, size_t hi,
                   size_t *out);
int gc_cli_u64(const char *cmd, const char *opt, const char *text, uint64_t *out);
int gc_cli_double(const char *cmd, const char *opt, const char *text, double *out);
/* Comma lists "a,b,c" of at most max entries: numbers, compressor names or
 * algorithm names.  Return the number of entries (>= 1), or 0 after
 * printing "gradcomp CMD: OPT: ..." (an empty entry, too many entries, a
 * bad number or an unknown name). */
size_t gc_cli_doubles(const char *cmd, const char *opt, const char *text,
                      double *out, size_t max);
size_t gc_cli_compressors(const char *cmd, const char *opt, const char *text,
                          const gc_compressor_type **out, size_t max);
size_t gc_cli_algorithms(const char *cmd, const char *opt, const char *text,
                         gc_algo_kind *out, size_t max);
/* The algorithm names the library accepts, joined by sep ("sgd|uni|..."),
 * so help texts never fall behind lib/algo/algo.c.  A static buffer, valid
 * until the next call. */
const char *gc_cli_algorithm_names(const char *sep);
/* The names, in kind order, of the algorithms whose table row
 * (gc_algo_rules.h) keep accepts (keep NULL: every one), joined by sep
 * into buf (truncated to fit cap), for help texts that list which methods
 * do something. */
struct gc__algo_desc;
const char *gc_cli_algorithm_names_where(int (*keep)(const struct gc__algo_desc *row),
                                         const char *sep, char *buf, size_t cap);
/* "low" or "high" to GC_TIES_LOW / GC_TIES_HIGH; else print
 * "gradcomp CMD: --ties: 'text' is not low or high" (the message of the
 * compressor options' --ties) and return 2. */
int gc_cli_ties(const char *cmd, const char *text, int *ties);
/* Progress "label [=====>   ] i/n" on stderr, only when it is a terminal
 * and quiet == 0.  Call with i == n to finish the line. */
void gc_cli_progress(const char *label, size_t i, size_t n, int quiet);
double gc_cli_now(void);   /* monotonic seconds */
/* The first Python interpreter for which `-c code` exits 0: $GRADCOMP_PYTHON,
 * then python3 on the PATH, then /usr/bin/python3 (where Debian's
 * python3-torch lives when python3 is some other install); NULL if none.
 * For the optional PyTorch peers of the benchmarks. */
const char *gc_cli_python_with(const char *code);

/* The option loop of commands whose options all take one value
 * ("--name value"):
 *   gc_cli_args a = GC_CLI_ARGS(CMD, "", usage, argc, argv);
 *   const char *o, *v;
 *   while (gc_cli_next(&a, &o, &v))
 *     if (!strcmp(o, "--steps")) ...; else return gc_cli_unknown(&a, o);
 *   if (a.exit >= 0) return a.exit;
 * gc_cli_next returns 1 with the next pair in *opt, *val, or 0: at the end
 * (exit stays -1), after --help/-h (usage on stdout, exit 0) or when the
 * value is missing ("gradcomp CMD: SUBunknown option or missing value: OPT"
 * and usage on stderr, exit 2).  Options named in a.flags (a NULL-ended
 * list, set after GC_CLI_ARGS) take no value: they come back with *val ==
 * NULL; with a.operands set, an argument that does not start with '-'
 * (or is "-") comes back with *opt == NULL and *val == it.  gc_cli_unknown
 * reports "gradcomp CMD: SUBunknown option 'OPT'" with
 * the usage on stderr and returns 2. */
typedef struct gc_cli_args {
  const char *cmd;            /* "gradcomp CMD: " of the messages           */
  const char *sub;            /* message prefix, e.g. "contraction: ", or "" */
  void (*usage)(FILE *out);
  int argc;
  char **argv;                /* argv[0] is the command itself              */
  int i;                      /* next argument                              */
  int exit;                   /* -1, or the exit status once the loop ends  */
  const char *const *flags;   /* options without a value, or NULL           */
  int operands;               /* 1: an argument not starting with '-' comes
                                 back alone, *opt == NULL, *val == it      */
} gc_cli_args;
#define GC_CLI_ARGS(cmd, sub, usage, argc, argv) \
  ((gc_cli_args) { (cmd), (sub), (usage), (argc), (argv), 1, -1, NULL, 0 })
int gc_cli_next(gc_cli_args *a, const char **opt, const char **val);
int gc_cli_unknown(const gc_cli_args *a, const char *opt);

/* ---- the compressor parameters as options (compopt.c) ---------------------
 * One table row per field of gc_compressor_params a user sets (--k,
 * --density, --levels, --bucket, --threshold, --clip, --ties, --gauss-loops,
 * --sample-ratio, --rank): its option, range check, message and help line,
 * so every command takes a parameter alike; a new one is a GC_CLI_P_ bit
 * below and a row in compopt.c, and every command that takes all the
 * fields (GC_CLI_P_ALL) has it, help line included.  The
 * seed is each command's own --seed (a run's seed seeds its compressors).
 * A command names the fields it takes (take; a sweep axis such as bench's
 * --density list stays the command's) and those with a downlink twin
 * "--NAME-down" (twin), puts its defaults in up, and offers each option:
 *   gc_cli_comp comp = { .take = GC_CLI_P_ALL, .twin = GC_CLI_P_ALL };
 *   gc_compressor_params_default(&comp.up);
 *   while (gc_cli_next(&a, &o, &v)) {
 *     int r = gc_cli_compressor_option(&a, o, v, &comp);
 *     if (r == GC_CLI_TAKEN) continue;
 *     if (r != GC_CLI_NOT_MINE) return r;
 *     ... the command's own options ...
 *   }
 *   if (gc_cli_compressor_finish(&a, &comp)) return 2;
 * gc_cli_compressor_option returns GC_CLI_TAKEN, GC_CLI_NOT_MINE (not one
 * of the fields taken), or 2 after "gradcomp CMD: SUB--opt: VALUE must be
 * RANGE" (or gc_cli_size's / gc_cli_double's message).
 * gc_cli_compressor_finish refuses --k with --density (either direction)
 * and sets down: the uplink's value for every field whose twin was not
 * given (a --k-down or --density-down decides K_d alone); 0, or 2 after a
 * message.  gc_cli_compressor_usage prints one help line per field taken,
 * its default read from up, and the twins' line. */
enum {
  GC_CLI_P_K = 1u << 0, GC_CLI_P_DENSITY = 1u << 1, GC_CLI_P_LEVELS = 1u << 2,
  GC_CLI_P_BUCKET = 1u << 3, GC_CLI_P_THRESHOLD = 1u << 4, GC_CLI_P_CLIP = 1u << 5,
  GC_CLI_P_TIES = 1u << 6, GC_CLI_P_GAUSS_LOOPS = 1u << 7,
  GC_CLI_P_SAMPLE_RATIO = 1u << 8, GC_CLI_P_RANK = 1u << 9,
  GC_CLI_P_ALL = (GC_CLI_P_RANK << 1) - 1   /* every bit up to the last */
};
enum { GC_CLI_TAKEN = 0, GC_CLI_NOT_MINE = -1 };
typedef struct gc_cli_comp {
  unsigned take;                  /* the fields taken (GC_CLI_P_*)          */
  unsigned twin;                  /* those with a "--NAME-down" twin        */
  gc_compressor_params up, down;  /* up: defaults, then the values given;
                                     down: complete after _finish           */
  unsigned given, given_down;     /* the options met, by field              */
} gc_cli_comp;
int gc_cli_compressor_option(const gc_cli_args *a, const char *opt, const char *val,
                             gc_cli_comp *c);
int gc_cli_compressor_finish(const gc_cli_args *a, gc_cli_comp *c);
void gc_cli_compressor_usage(FILE *out, const gc_cli_comp *c);
/* The fields (GC_CLI_P_*) of up that differ from the library's defaults
 * and those of down that differ from up's, as "levels=4,k-down=3" (no
 * spaces; "" when none) at buf; returns its length.  For records that
 * name a run's settings, such as train's configuration fingerprint. */
size_t gc_cli_compressor_changes(const gc_compressor_params *up,
                                 const gc_compressor_params *down, unsigned which,
                                 char *buf, size_t cap);

/* Every program calls this first; non-zero (after a message) means exit
 * with that status.  SIGXFSZ is ignored, so a write past `ulimit -f` fails
 * with EFBIG and the write checks below report it, instead of a silent
 * kill; Ctrl-C (SIGINT) removes the temporary of a snapshot being written
 * (gc__remove_live_tmp), prints the interrupt note and exits 130.  Rows
 * already written are flushed and snapshots are renamed into place whole,
 * so stopping at any moment loses nothing committed and leaves no
 * temporary.  Under an
 * address-space limit (ulimit -v) the BLAS work buffer is taken now, or
 * the program stops naming the limit: OpenBLAS would spin for ever on a
 * failed allocation in the middle of a run. */
int gc_cli_start(const char *cmd);
/* Where other threads are running at start (/proc/stat), re-execute once
 * with libgomp's idle spinning cut short (GOMP_SPINCOUNT 3000) unless the
 * user set it or OMP_WAIT_POLICY: the parallel regions of a training step
 * then cost no more than one thread on a busy machine, while an idle one
 * keeps libgomp's spinning.  Call first in main; returns where there is
 * nothing to do. */
void gc_cli_short_omp_spin(void);
/* Replace this process by the program `name` found beside it (argv[0]'s
 * folder, then the executable's, then the PATH), with the same arguments.
 * `gradcomp train --device cuda` runs gradcomp-cuda so: only that program
 * maps cuBLAS (~600 MB of address space), not every gradcomp command.
 * Returns only on failure, with the exit status after the message. */
int gc_cli_exec_sibling(const char *cmd, const char *name);
/* The note Ctrl-C prints, e.g. where the results are and how to resume
 * (copied; at most 1000 bytes).  Default: "interrupted; rows written so far
 * are kept". */
void gc_cli_set_interrupt_note(const char *cmd, const char *note);
/* After each CSV row: push it to the kernel and check the stream.  On a
 * write error (full disk, file-size limit) print "gradcomp CMD: FILE:
 * write failed: REASON" and return 1; else 0.  gc_cli_csv_close does the
 * same and closes f (also on error).  After a failure the file is cut back
 * to its last complete row and the stream writes nothing more; the message
 * is printed once however often the stream is flushed or closed. */
int gc_cli_csv_flush(const char *cmd, FILE *f, const char *path);
int gc_cli_csv_close(const char *cmd, FILE *f, const char *path);
/* A program's exit status rc, after pushing out what stdout holds: if
 * that fails (gradcomp compress --stats > /dev/full), "PROG: standard
 * output: write failed: REASON" and 1 where rc was 0. */
int gc_cli_exit(const char *prog, int rc);

/* How many processes an MPI launcher (mpirun, mpiexec, srun) started
 * this one among, from its environment: OMPI_COMM_WORLD_SIZE (Open MPI),
 * PMI_SIZE (MPICH, Intel MPI, Slurm's PMI), MV2_COMM_WORLD_SIZE
 * (MVAPICH2); -1 where only a rank is set (PMIX_RANK, PMI_RANK: started
 * by one, size unknown), 0 where none is.  *var (if var) names the
 * variable read. */
int gc_cli_launcher_size(const char **var);
/* A command that is not running over MPI (mpi 0) but was started as one
 * of N > 1 processes by a launcher would run whole N times into the same
 * files: refuse it, saying to pass --transport mpi.  Returns 2 after the
 * message (on every rank), 0 to go on. */
int gc_cli_refuse_launcher(const char *cmd, int mpi);
/* The data folder: opt (--data DIR) when not NULL, else $GRADCOMP_DATA
 * when set and not empty, else the data/ of the source tree this program
 * was built from (fixed at build time), so a run outside the checkout
 * finds it too.  *from [out]: "--data", "GRADCOMP_DATA" or "the source
 * tree", for messages. */
const char *gc_cli_data_dir(const char *opt, const char **from);
/* After a data set failed to load: "gradcomp CMD: data folder DIR (from
 * FROM); choose another with --data DIR or GRADCOMP_DATA=DIR;
 * tools/get-data fetches MNIST and Fashion-MNIST" on stderr. */
void gc_cli_data_hint(const char *cmd, const char *dir, const char *from);

/* Subcommands: each returns the process exit status. */
int gc_cmd_compress(int argc, char **argv);
int gc_cmd_bench(int argc, char **argv);
int gc_cmd_theory(int argc, char **argv);
int gc_cmd_train(int argc, char **argv);
int gc_cmd_data(int argc, char **argv);
int gc_cmd_plot(int argc, char **argv);

#endif /* GC_CLI_H */
