/* netmodel.c -- the alpha-beta network model (gc_netmodel.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gc_algo_rules.h"
#include "gc_errno.h"
#include "gc_netmodel.h"

/* A number followed by one of the units; the unit's factor in *scale. */
static int parse_with_unit(const char *text, const char *const *units,
                           const double *factor, double *out)
{
  char *end;
  double v = strtod(text, &end);
  if (end == text || !isfinite(v))
    return GC_EINVAL;
  for (size_t i = 0; units[i]; i++)
    if (!strcmp(end, units[i])) {
      *out = v * factor[i];
      return GC_SUCCESS;
    }
  return GC_EINVAL;
}

int gc_net_parse_bandwidth(const char *text, double *bytes_per_s)
{
  static const char *const units[] = { "bps", "Kbps", "Mbps", "Gbps",
                                       "B/s", "KB/s", "MB/s", "GB/s", NULL };
  static const double factor[] = { 1.0 / 8, 1e3 / 8, 1e6 / 8, 1e9 / 8,
                                   1, 1e3, 1e6, 1e9 };
  double v;
  if (parse_with_unit(text, units, factor, &v) != GC_SUCCESS || !(v > 0))
    GC_ERRORF(GC_EINVAL, "bandwidth '%s': expected a positive number with "
              "a unit (bps, Kbps, Mbps, Gbps, B/s, KB/s, MB/s, GB/s), e.g. "
              "10Gbps", text);
  *bytes_per_s = v;
  return GC_SUCCESS;
}

int gc_net_parse_latency(const char *text, double *seconds)
{
  static const char *const units[] = { "ns", "us", "ms", "s", NULL };
  static const double factor[] = { 1e-9, 1e-6, 1e-3, 1 };
  double v;
  if (parse_with_unit(text, units, factor, &v) != GC_SUCCESS || !(v >= 0))
    GC_ERRORF(GC_EINVAL, "latency '%s': expected a number >= 0 with a unit "
              "(ns, us, ms, s), e.g. 50us", text);
  *seconds = v;
  return GC_SUCCESS;
}

void gc_net_step_time(const gc_net_model *m, const gc_algo_config *cfg,
                      uint64_t up_bytes, uint64_t down_bytes, double *up_s,
                      double *down_s)
{
  double B = m->bandwidth, a = m->latency, P = (double) cfg->workers;
  switch (gc__algo(cfg->kind)->collective) {
  case GC__COLL_ALLREDUCE:
    *up_s = 2 * (P - 1) * a + ((double) up_bytes / P) / B;
    *down_s = 0;
    return;
  case GC__COLL_ALLGATHER:
    *up_s = (P - 1) * a + ((double) up_bytes / P) / B;
    *down_s = 0;
    return;
  case GC__COLL_NONE:
    break;
  }
  *up_s = a + (double) up_bytes / B;
  *down_s = a + (double) down_bytes / B;
}

double gc_net_ledger_step_time(const gc_net_model *m,
                               const gc_algo_config *cfg,
                               const gc_ledger *l, uint32_t step)
{
  uint64_t up = gc_ledger_step_total(l, step, GC_UP);
  uint64_t down = gc_ledger_step_total(l, step, GC_DOWN);
  if (!up && !down)
    return 0;
  double u, d;
  gc_net_step_time(m, cfg, up, down, &u, &d);
  return u + d;
}
