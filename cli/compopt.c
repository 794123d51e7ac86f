/* compopt.c -- the compressor parameters as command-line options: one
 * table row per field of gc_compressor_params that a user sets, with its
 * option name, value check and help line, shared by every command that
 * builds a compressor (gc_cli.h).  A new parameter is one row here. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_cli.h"

enum { V_SIZE, V_UNSIGNED, V_DOUBLE, V_TIES };

/* A value is accepted when lo <= v <= hi, or lo < v where lo_open. */
typedef struct field {
  unsigned bit;          /* GC_CLI_P_*                                  */
  const char *name;      /* the option without its dashes              */
  const char *meta;      /* the value's name in the help               */
  int kind;
  size_t off;            /* offsetof(gc_compressor_params, field)      */
  double lo, hi;
  int lo_open;
  const char *range;     /* the accepted values, as the messages say   */
  const char *help;      /* at most 45 characters, the range in it     */
} field;

#define OFF(f) offsetof(gc_compressor_params, f)
static const field fields[] = {
  { GC_CLI_P_K, "k", "K", V_SIZE, OFF(k), 1, 1e18, 0, ">= 1",
    "entries the sparsifiers keep, >= 1" },
  { GC_CLI_P_DENSITY, "density", "R", V_DOUBLE, OFF(density), 0, 1, 1, "in (0, 1]",
    "K = max(1, floor(R d)) without --k, in (0, 1]" },
  { GC_CLI_P_LEVELS, "levels", "S", V_UNSIGNED, OFF(levels), 1, 4294967295.0, 0,
    "in [1, 2^32)", "qsgd's levels s, in [1, 2^32)" },
  { GC_CLI_P_BUCKET, "bucket", "B", V_SIZE, OFF(bucket), 0, 1e18, 0, ">= 0",
    "qsgd's bucket length, 0: one bucket of d" },
  { GC_CLI_P_THRESHOLD, "threshold", "V", V_DOUBLE, OFF(threshold), 0, HUGE_VAL, 0, ">= 0",
    "threshold keeps |x_i| > V, V >= 0" },
  { GC_CLI_P_CLIP, "clip", "C", V_DOUBLE, OFF(clip), 0, HUGE_VAL, 0, ">= 0",
    "terngrad's clip factor c, 0: none, >= 0" },
  { GC_CLI_P_TIES, "ties", "low|high", V_TIES, OFF(ties), 0, 0, 0, "low or high",
    "which index wins equal |x_i| (topk, dgc)" },
  { GC_CLI_P_GAUSS_LOOPS, "gauss-loops", "N", V_UNSIGNED, OFF(gauss_loops), 1, 4294967295.0,
    0, "in [1, 2^32)", "gaussk's threshold adjustments, in [1, 2^32)" },
  { GC_CLI_P_SAMPLE_RATIO, "sample-ratio", "R", V_DOUBLE, OFF(sample_ratio), 0, 1, 1,
    "in (0, 1]", "dgc's sampling ratio, in (0, 1]" },
  { GC_CLI_P_RANK, "rank", "R", V_UNSIGNED, OFF(rank), 1, 4294967295.0, 0,
    "in [1, 2^32)", "powersgd's rank r, in [1, 2^32)" },
};
enum { NFIELDS = sizeof fields / sizeof fields[0] };
static const char DOWN[] = "-down";

/* The row whose option opt is ("--NAME", or "--NAME-down" where *down is
 * then set), or NULL. */
static const field *find(const char *opt, int *down)
{
  if (strncmp(opt, "--", 2) != 0)
    return NULL;
  opt += 2;
  size_t len = strlen(opt);
  for (size_t i = 0; i < NFIELDS; i++) {
    size_t m = strlen(fields[i].name);
    if (strncmp(opt, fields[i].name, m) != 0)
      continue;
    if (len == m) {
      *down = 0;
      return &fields[i];
    }
    if (!strcmp(opt + m, DOWN)) {
      *down = 1;
      return &fields[i];
    }
  }
  return NULL;
}

static void copy_field(const field *f, gc_compressor_params *to, const gc_compressor_params *from)
{
  size_t sz = f->kind == V_SIZE ? sizeof(size_t) : f->kind == V_UNSIGNED ? sizeof(unsigned)
              : f->kind == V_DOUBLE ? sizeof(double) : sizeof(int);
  memcpy((char *) to + f->off, (const char *) from + f->off, sz);
}

int gc_cli_compressor_option(const gc_cli_args *a, const char *opt, const char *val,
                             gc_cli_comp *c)
{
  int down;
  const field *f = find(opt, &down);
  if (!f || !(c->take & f->bit) || (down && !(c->twin & f->bit)))
    return GC_CLI_NOT_MINE;
  gc_compressor_params *p = down ? &c->down : &c->up;
  char *at = (char *) p + f->off;
  double v = 0;
  size_t s = 0;
  if (f->kind == V_TIES) {
    if (strcmp(val, "low") && strcmp(val, "high"))
      return gc_cli_usage_error(a->cmd, "%s%s: '%s' is not %s", a->sub, opt, val, f->range);
    *(int *) at = !strcmp(val, "low") ? GC_TIES_LOW : GC_TIES_HIGH;
  } else if (f->kind == V_DOUBLE) {
    if (gc_cli_double(a->cmd, opt, val, &v))
      return 2;
  } else {
    if (gc_cli_size(a->cmd, opt, val, &s))
      return 2;
    v = (double) s;   /* for the range check only: the value stored is s */
  }
  if (f->kind != V_TIES) {
    if (!(f->lo_open ? v > f->lo : v >= f->lo) || !(v <= f->hi))
      return gc_cli_usage_error(a->cmd, "%s%s: %s must be %s", a->sub, opt, val, f->range);
    if (f->kind == V_DOUBLE)
      *(double *) at = v;
    else if (f->kind == V_SIZE)
      *(size_t *) at = s;
    else
      *(unsigned *) at = (unsigned) s;
  }
  *(down ? &c->given_down : &c->given) |= f->bit;
  return GC_CLI_TAKEN;
}

/* In one direction, --k and --density both given: which is meant? */
static int both(const gc_cli_args *a, unsigned given, const char *suffix)
{
  if ((given & GC_CLI_P_K) && (given & GC_CLI_P_DENSITY))
    return gc_cli_usage_error(a->cmd, "%sgive either --k%s or --density%s, not both",
                              a->sub, suffix, suffix);
  return 0;
}

int gc_cli_compressor_finish(const gc_cli_args *a, gc_cli_comp *c)
{
  if (both(a, c->given, "") || both(a, c->given_down, DOWN))
    return 2;
  /* the downlink takes the uplink's value of every field not given for
   * it; a --k-down wins over an uplink --density (K wins over the
   * density) and a --density-down drops an uplink --k, as K_d is then
   * what the user named */
  gc_compressor_params d = c->up;
  for (size_t i = 0; i < NFIELDS; i++)
    if (c->given_down & fields[i].bit)
      copy_field(&fields[i], &d, &c->down);
  if (c->given_down & GC_CLI_P_DENSITY)
    d.k = 0;   /* not given with --k-down: refused above */
  c->down = d;
  return 0;
}

void gc_cli_compressor_usage(FILE *out, const gc_cli_comp *c)
{
  unsigned twins = c->twin & c->take;
  size_t ntwins = 0;
  const field *twin = NULL;
  for (size_t i = 0; i < NFIELDS; i++) {
    const field *f = &fields[i];
    if (twins & f->bit) {
      ntwins++;
      twin = f;
    }
    if (!(c->take & f->bit))
      continue;
    char flag[48], dflt[64];
    snprintf(flag, sizeof flag, "--%s %s", f->name, f->meta);
    const char *at = (const char *) &c->up + f->off;
    if (f->kind == V_TIES)
      snprintf(dflt, sizeof dflt, "%s", *(const int *) at == GC_TIES_HIGH ? "high" : "low");
    else if (f->kind == V_DOUBLE)
      snprintf(dflt, sizeof dflt, "%g", *(const double *) at);
    else if (f->kind == V_UNSIGNED)
      snprintf(dflt, sizeof dflt, "%u", *(const unsigned *) at);
    else if (f->bit == GC_CLI_P_K && *(const size_t *) at == 0)
      snprintf(dflt, sizeof dflt, "none: --density");
    else
      snprintf(dflt, sizeof dflt, "%zu", *(const size_t *) at);
    fprintf(out, "  %-19s %s (%s)\n", flag, f->help, dflt);
  }
  if (ntwins == 1) {
    char flag[48];
    snprintf(flag, sizeof flag, "--%s%s %s", twin->name, DOWN, twin->meta);
    fprintf(out, "  %-19s the downlink's (default: the uplink's)\n", flag);
  } else if (ntwins > 1) {
    fprintf(out, "  %-19s the downlink's value of --NAME (default: the uplink's)\n",
            "--NAME-down VALUE");
    if (twins == c->take) {
      fprintf(out, "  %-19s for NAME any of the above\n", "");
    } else {
      fprintf(out, "  %-19s for NAME one of", "");
      for (size_t i = 0, col = 35; i < NFIELDS; i++)
        if (twins & fields[i].bit) {
          if ((col += strlen(fields[i].name) + 1) > 78) {
            fprintf(out, "\n  %-19s", "");
            col = 22 + strlen(fields[i].name);
          }
          fprintf(out, " %s", fields[i].name);
        }
      fputc('\n', out);
    }
  }
}

/* v as the shortest %g text that reads back as v. */
static void shortest(char *buf, size_t cap, double v)
{
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, cap, "%.*g", prec, v);
    if (strtod(buf, NULL) == v)
      return;
  }
}

static int same_field(const field *f, const gc_compressor_params *a, const gc_compressor_params *b)
{
  const char *x = (const char *) a + f->off, *y = (const char *) b + f->off;
  switch (f->kind) {
  case V_SIZE: return *(const size_t *) x == *(const size_t *) y;
  case V_UNSIGNED: return *(const unsigned *) x == *(const unsigned *) y;
  case V_DOUBLE: return *(const double *) x == *(const double *) y;
  default: return *(const int *) x == *(const int *) y;
  }
}

static void field_text(const field *f, const gc_compressor_params *p, char *buf, size_t cap)
{
  const char *at = (const char *) p + f->off;
  switch (f->kind) {
  case V_SIZE: snprintf(buf, cap, "%zu", *(const size_t *) at); break;
  case V_UNSIGNED: snprintf(buf, cap, "%u", *(const unsigned *) at); break;
  case V_DOUBLE: shortest(buf, cap, *(const double *) at); break;
  default: snprintf(buf, cap, "%s", *(const int *) at == GC_TIES_HIGH ? "high" : "low");
  }
}

size_t gc_cli_compressor_changes(const gc_compressor_params *up,
                                 const gc_compressor_params *down, unsigned which,
                                 char *buf, size_t cap)
{
  gc_compressor_params d;
  gc_compressor_params_default(&d);
  size_t len = 0;
  if (cap)
    buf[0] = '\0';
  for (int dir = 0; dir < 2; dir++)
    for (size_t i = 0; i < NFIELDS; i++) {
      const field *f = &fields[i];
      const gc_compressor_params *p = dir ? down : up, *ref = dir ? up : &d;
      if (!(which & f->bit) || same_field(f, p, ref))
        continue;
      char v[64];
      field_text(f, p, v, sizeof v);
      if (len < cap)
        len += (size_t) snprintf(buf + len, cap - len, "%s%s%s=%s", len ? "," : "", f->name,
                                 dir ? DOWN : "", v);
    }
  return len;
}
