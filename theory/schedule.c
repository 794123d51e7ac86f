/* schedule.c -- step-size schedules of the theory runs: a constant step, or
 * lr_t = c/(a+t), whose c = 8/mu form is the Mem-SGD schedule of Stich,
 * Cordonnier and Jaggi (2018, Theorem 2.4; docs/theory.md 4.6). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_errno.h"
#include "gc_theory.h"

void gc_lr_schedule_constant(double lr, gc_lr_schedule *s)
{
  memset(s, 0, sizeof *s);
  s->kind = GC_LR_CONSTANT;
  s->lr = lr;
}

int gc_lr_schedule_parse(const char *text, double lr, double mu,
                         gc_lr_schedule *s)
{
  gc_lr_schedule_constant(lr, s);
  if (!strcmp(text, "constant"))
    return GC_SUCCESS;
  int mem = !strncmp(text, "mem-sgd:", 8), inv = !strncmp(text, "inverse:", 8);
  if (!mem && !inv)
    GC_ERRORF(GC_EINVAL, "lr schedule '%s': use constant, inverse:c=C,a=A or "
              "mem-sgd:a=A", text);
  double a = NAN, c = NAN;
  char spec[256];
  snprintf(spec, sizeof spec, "%s", text + 8);
  for (char *tok = strtok(spec, ","); tok; tok = strtok(NULL, ",")) {
    char *eq = strchr(tok, '='), *end;
    if (!eq)
      GC_ERRORF(GC_EINVAL, "lr schedule: '%s' is not key=value", tok);
    *eq = '\0';
    double v = strtod(eq + 1, &end);
    if (end == eq + 1 || *end || !isfinite(v))
      GC_ERRORF(GC_EINVAL, "lr schedule: %s='%s' is not a number", tok, eq + 1);
    if (!strcmp(tok, "a"))
      a = v;
    else if (!strcmp(tok, "c") && inv)
      c = v;
    else
      GC_ERRORF(GC_EINVAL, "lr schedule: unknown key '%s' (%s)", tok,
                inv ? "c, a" : "a; c is 8/mu");
  }
  if (mem)
    c = 8.0 / mu;
  if (!(a > 0) || !(c > 0) || !isfinite(c))
    GC_ERRORF(GC_EINVAL, "lr schedule '%s': needs a > 0 and c > 0 (c = %g, a = %g)",
              text, c, a);
  s->kind = GC_LR_INVERSE;
  s->c = c;
  s->a = a;
  s->mem_sgd = mem;
  return GC_SUCCESS;
}

double gc_lr_schedule_at(const gc_lr_schedule *s, size_t t)
{
  return s->kind == GC_LR_INVERSE ? s->c / (s->a + (double) t) : s->lr;
}

void gc_lr_schedule_name(const gc_lr_schedule *s, char *buf, size_t cap)
{
  if (s->kind != GC_LR_INVERSE)
    snprintf(buf, cap, "constant:lr=%.6g", s->lr);
  else if (s->mem_sgd)
    snprintf(buf, cap, "mem-sgd:a=%.6g;c=%.6g", s->a, s->c);
  else
    snprintf(buf, cap, "inverse:c=%.6g;a=%.6g", s->c, s->a);
}
