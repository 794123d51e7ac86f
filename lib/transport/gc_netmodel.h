/* gc_netmodel.h -- the alpha-beta network model: what one step's messages
 * would cost on a network of a given bandwidth and latency, from the
 * ledger's real message sizes, so the regimes where compression wins or
 * loses can be explored on one machine.
 *
 * Links are full duplex, bandwidth B (bytes/s) and latency alpha (s) per
 * direction.  Parameter-server methods share the server's link: every
 * uplink arrives through it and the downlink leaves through it once per
 * worker, so with U the step's uplink bytes and D its downlink bytes (P
 * copies of the message)
 *     t_up = alpha + U / B,   t_down = alpha + D / B.
 * Collectives have no server; each rank sends over its own link in
 * parallel, in r rounds (ring allreduce, dense or random-K: 2(P-1);
 * allgather: P-1), the mean rank sending U / P bytes:
 *     t_up = r alpha + (U / P) / B,   t_down = 0. */
#ifndef GC_NETMODEL_H
#define GC_NETMODEL_H
#include <stdint.h>
#include "gc_algo.h"
#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)   /* the API libgradcomp.so exports */
#endif

typedef struct gc_net_model {
  double bandwidth;   /* bytes per second, per direction, > 0 */
  double latency;     /* seconds per message round, >= 0       */
} gc_net_model;

/* "10Gbps", "100Mbps", "1e9bps", "1.5GB/s", "800MB/s": bits (bps, Kbps,
 * Mbps, Gbps) or bytes (B/s, KB/s, MB/s, GB/s) per second, decimal
 * prefixes.  GC_EINVAL naming the text for anything else or <= 0. */
int gc_net_parse_bandwidth(const char *text, double *bytes_per_s);
/* "50us", "1.5ms", "2s", "100ns": GC_EINVAL unless finite and >= 0. */
int gc_net_parse_latency(const char *text, double *seconds);
/* Modelled seconds of one step from the message sizes: uplink bytes U of
 * all workers, downlink bytes D delivered to all workers (both as in the
 * ledger's GC_UP and GC_DOWN step totals). */
void gc_net_step_time(const gc_net_model *m, const gc_algo_config *cfg,
                      uint64_t up_bytes, uint64_t down_bytes, double *up_s,
                      double *down_s);
/* The same for step `step` of a ledger (0 for a step it does not hold). */
double gc_net_ledger_step_time(const gc_net_model *m,
                               const gc_algo_config *cfg,
                               const gc_ledger *l, uint32_t step);

#ifdef __cplusplus
}
#endif
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif
#endif /* GC_NETMODEL_H */
