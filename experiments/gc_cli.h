/* gc_cli.h -- small helpers shared by the gradcomp subcommands: strict
 * number parsing with messages that name the option, progress on stderr,
 * and the failure exit.  Programs exit; the library never does. */
#ifndef GC_CLI_H
#define GC_CLI_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Print "gradcomp CMD: message" (plus the library's last reason when
 * status != 0) on stderr; returns the exit status to use (1, or 2 for usage). */
int gc_cli_fail(const char *cmd, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Parse option values; on error print "gradcomp CMD: --opt: 'text' is not ..."
 * and return non-zero. */
int gc_cli_size(const char *cmd, const char *opt, const char *text, size_t *out);
int gc_cli_u64(const char *cmd, const char *opt, const char *text, uint64_t *out);
int gc_cli_double(const char *cmd, const char *opt, const char *text, double *out);
/* Progress "label [=====>   ] i/n" on stderr, only when it is a terminal
 * and quiet == 0.  Call with i == n to finish the line. */
void gc_cli_progress(const char *label, size_t i, size_t n, int quiet);
double gc_cli_now(void);   /* monotonic seconds */

/* Subcommands: each returns the process exit status. */
int gc_cmd_compress(int argc, char **argv);
int gc_cmd_bench(int argc, char **argv);
int gc_cmd_theory(int argc, char **argv);
int gc_cmd_train(int argc, char **argv);
int gc_cmd_data(int argc, char **argv);
/* bench targets */
int gc_bench_compress(int argc, char **argv);        /* CPU (bench_compress.c) */
int gc_bench_compress_cuda(int argc, char **argv);   /* GPU (bench_cuda.c)     */
int gc_bench_train(int argc, char **argv);           /* bench_train.c          */

#endif /* GC_CLI_H */
