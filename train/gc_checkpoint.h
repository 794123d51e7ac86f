/* gc_checkpoint.h -- a training checkpoint file (checkpoint.c): one
 * process's state after a whole epoch, as `gradcomp train` writes it
 * every epoch and --resume reads it back (run.c names the files and
 * commits them with checkpoint.json), and the configuration fingerprint
 * that both the file and checkpoint.json carry.
 *
 * Byte layout (integers in the writing host's byte order):
 *   offset  0  8 bytes  GC_CKPT_MAGIC, "GCCKPT2\n"
 *   offset  8  u32      m, the meta's length (below GC_CKPT_META_MAX)
 *   offset 12  u64      n, the payload's length
 *   offset 20  u32      CRC-32 (zlib) of the meta, then the payload
 *   offset 24  m bytes  meta: text lines "options <fingerprint text>",
 *                       "fingerprint <its hash>", "rank R", "processes N",
 *                       "epoch E", "steps S"
 *   then       n bytes  payload: the BatchNorm statistics (float32), then
 *                       the simulator state (gc_train_state_save)
 * The meta says whose state it is, so that a file of another
 * configuration, rank or epoch is refused by name.  Files of the first
 * format (GC_CKPT_MAGIC_V1, no meta) are refused: nothing in them says
 * whose they are. */
#ifndef GC_CHECKPOINT_H
#define GC_CHECKPOINT_H
#include <stddef.h>
#include <stdint.h>
#include "gc_train.h"
#ifdef __cplusplus
extern "C" {
#endif

#define GC_CKPT_MAGIC "GCCKPT2\n"      /* 8 bytes, without the '\0'     */
#define GC_CKPT_MAGIC_V1 "GCCKPT1\n"   /* the first format: refused     */

enum {
  GC_CKPT_HDR = 8 + 4 + 8 + 4,   /* magic, meta length, payload length, CRC */
  GC_CKPT_META_MAX = 4096,       /* a meta is shorter than this             */
  GC_CKPT_FP_TEXT = 1600         /* room for a fingerprint's text           */
};

/* The configuration fingerprint: every option that determines the run's
 * trajectory, as "--name value" pairs ("--dataset mnist --model mnist-mlp
 * ..."), the text a checkpoint must agree with to be resumed.  Left out:
 * --epochs (a resume raises it), --max-steps (where the run stops),
 * --threads (never changes a bit), --device (the nets agree to float
 * rounding and resuming on another device is supported), --data (a path,
 * not the data), --quiet and --bounds (which refuses --resume).  Written
 * into buf (cap bytes; GC_CKPT_FP_TEXT holds any). */
void gc_ckpt_fingerprint(const gc_train_config *c, char *buf, size_t cap);

/* A fingerprint text's hash (FNV-1a, 64 bits) as 16 hex digits: a short
 * name for the configuration. */
void gc_ckpt_fingerprint_hash(const char *text, char out[17]);

/* The options of `stored` (a fingerprint text) that differ from c's, as
 * "--seed 0 <there>, 7 in this run; ..." in msg (cap bytes), options that
 * this gradcomp does not know included.  Returns how many; 0: the same
 * configuration. */
size_t gc_ckpt_fingerprint_diff(const char *stored, const gc_train_config *c,
                                const char *there, char *msg, size_t cap);

/* The header and meta of the file of configuration c written by process
 * `rank` of `procs` after `epoch` epochs (`steps` steps) around a payload
 * of n bytes: hdr [out] GC_CKPT_HDR bytes, meta [out] (cap bytes, at most
 * GC_CKPT_META_MAX); returns the meta's length.  The file is hdr, meta,
 * payload. */
uint32_t gc_ckpt_head(const gc_train_config *c, unsigned long long rank,
                      unsigned long long procs, unsigned long long epoch,
                      unsigned long long steps, const void *payload,
                      uint64_t n, uint8_t *hdr, char *meta, size_t cap);

/* Read the file at path and check, in this order, that it is of this
 * format (not the first), whole (its length and CRC), with every meta
 * line, and of configuration c (the fingerprint, option by option),
 * `procs` processes, process `rank`, `epoch` epochs and `steps` steps, with
 * a payload of `want` bytes: *payload [out] those bytes (malloc'ed).
 * Returns GC_SUCCESS, GC_EIO, GC_ENOMEM, or GC_EFORMAT naming the file and
 * what differs. */
int gc_ckpt_file_read(const char *path, const gc_train_config *c,
                      unsigned long long rank, unsigned long long procs,
                      unsigned long long epoch, unsigned long long steps,
                      size_t want, uint8_t **payload);

#ifdef __cplusplus
}
#endif
#endif /* GC_CHECKPOINT_H */
