/* compressor.c -- the registry and the generic instance wrapper.  The
 * per-type code lives in the family files (sparse_*.c, quant.c, ...). */
#include <stdlib.h>
#include <string.h>

#include "gc_compressor.h"
#include "gc_errno.h"
#include "gc_compressor_internal.h"
#include "gc_dtype.h"

struct gc_compressor {
  const gc_compressor_type *type;
  size_t n;
  gc_compressor_params params;
  gc_segment *segments;   /* the instance's copy of params.segments */
  void *state;
};

void gc_compressor_params_default(gc_compressor_params *p)
{
  memset(p, 0, sizeof *p);
  p->density = 0.01;
  p->levels = 1;
  p->clip = 0.0;
  p->ties = GC_TIES_LOW;
  p->gauss_loops = 3;
  p->sample_ratio = 0.01;
  p->rank = 2;
}

size_t gc_compressor_params_size(void) { return sizeof(gc_compressor_params); }

const gc_compressor_type *const *gc_compressor_types(void)
{
  enum { MAX_TYPES = 64 };
  static const gc_compressor_type *all[MAX_TYPES + 1];
  static int built;
  if (!built) {   /* families are static arrays: build the list once */
    const gc_compressor_type *const *families[] = {
      gc__sparse_types, gc__quant_types, gc__lowrank_types };
    size_t m = 0;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
      for (size_t i = 0; families[f][i] && m < MAX_TYPES; i++)
        all[m++] = families[f][i];
    all[m] = NULL;
    built = 1;
  }
  return all;
}

const gc_compressor_type *gc_compressor_type_by_name(const char *name)
{
  for (const gc_compressor_type *const *t = gc_compressor_types(); *t; t++)
    if (strcmp((*t)->name, name) == 0)
      return *t;
  return NULL;
}

gc_compressor *gc_compressor_alloc(const gc_compressor_type *T, size_t n,
                                   const gc_compressor_params *p)
{
  if (n == 0)
    GC_ERROR_NULL("cannot compress an empty vector (n = 0)", GC_EBADLEN);
  if (n >= ((size_t) 1 << 32))
    GC_ERROR_NULL("vector length must be below 2^32", GC_EINVAL);
  gc_compressor *c = calloc(1, sizeof *c);
  if (!c)
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  c->type = T;
  c->n = n;
  if (p)
    c->params = *p;
  else
    gc_compressor_params_default(&c->params);
  /* The caller's segment array need not outlive this call. */
  if (c->params.segments && c->params.nsegments) {
    size_t bytes = c->params.nsegments * sizeof *c->segments;
    if (bytes / sizeof *c->segments != c->params.nsegments ||
        !(c->segments = malloc(bytes))) {
      free(c);
      GC_ERROR_NULL("out of memory for the segment list", GC_ENOMEM);
    }
    memcpy(c->segments, c->params.segments, bytes);
    c->params.segments = c->segments;
  }
  c->state = calloc(1, T->state_size ? T->state_size : 1);
  if (!c->state) {
    free(c->segments);
    free(c);
    GC_ERROR_NULL("out of memory", GC_ENOMEM);
  }
  if (T->init(c->state, n, &c->params) != GC_SUCCESS) {
    free(c->state);   /* init frees what it took before failing */
    free(c->segments);
    free(c);
    return NULL;
  }
  return c;
}

void gc_compressor_free(gc_compressor *c)
{
  if (!c)
    return;
  if (c->type->release)
    c->type->release(c->state);
  free(c->state);
  free(c->segments);
  free(c);
}

const gc_compressor_type *gc_compressor_type_of(const gc_compressor *c) { return c->type; }
size_t gc_compressor_n(const gc_compressor *c) { return c->n; }
const gc_compressor_params *gc_compressor_get_params(const gc_compressor *c) { return &c->params; }
size_t gc_compressor_max_bytes(const gc_compressor *c) { return c->type->max_bytes(c->state); }

size_t gc_compressor_k(const gc_compressor *c)
{
  if (!(c->type->flags & GC_COMP_KEEPS_K))
    return 0;
  return gc__resolve_k(c->n, &c->params);
}

size_t gc_compressor_state_bytes(const gc_compressor *c)
{
  return c->type->state_bytes ? c->type->state_bytes(c->state) : 0;
}

void gc_compressor_state_save(const gc_compressor *c, void *buf)
{
  if (c->type->state_save)
    c->type->state_save(c->state, buf);
}

void gc_compressor_state_load(gc_compressor *c, const void *buf)
{
  if (c->type->state_load)
    c->type->state_load(c->state, buf);
}

int gc_compress_f32(gc_compressor *c, const float *x, uint32_t step,
                    uint8_t *buf, size_t cap, size_t *len, gc_compress_info *info)
{
  gc_compress_info dummy;
  return c->type->encode_f32(c->state, x, step, buf, cap, len, info ? info : &dummy);
}

int gc_compress_f64(gc_compressor *c, const double *x, uint32_t step,
                    uint8_t *buf, size_t cap, size_t *len, gc_compress_info *info)
{
  gc_compress_info dummy;
  return c->type->encode_f64(c->state, x, step, buf, cap, len, info ? info : &dummy);
}

int gc_decompress_add_f32(const gc_compressor *c, const uint8_t *buf, size_t len,
                          uint32_t step, float scale, float *y)
{
  return c->type->decode_f32(c->state, buf, len, step, scale, y);
}

int gc_decompress_add_f64(const gc_compressor *c, const uint8_t *buf, size_t len,
                          uint32_t step, double scale, double *y)
{
  return c->type->decode_f64(c->state, buf, len, step, scale, y);
}

int gc__encode(int dt, gc_compressor *c, const void *x, uint32_t step,
               uint8_t *buf, size_t cap, size_t *len, gc_compress_info *info)
{
  if (dt == GC_F64)
    return gc_compress_f64(c, x, step, buf, cap, len, info);
  return gc_compress_f32(c, x, step, buf, cap, len, info);
}

int gc__decode(int dt, const gc_compressor *c, const uint8_t *buf, size_t len,
               uint32_t step, double scale, void *y)
{
  if (dt == GC_F64)
    return gc_decompress_add_f64(c, buf, len, step, scale, y);
  return gc_decompress_add_f32(c, buf, len, step, (float) scale, y);
}

size_t gc__resolve_k(size_t n, const gc_compressor_params *p)
{
  if (p->k)
    return p->k;
  double k = p->density * (double) n;   /* floor, at least 1 */
  size_t kk = (size_t) k;
  return kk ? kk : 1;
}

int gc__check_msg(const uint8_t *buf, size_t len, size_t hdr, unsigned tag,
                  unsigned prec, const char *who)
{
  if (len < hdr)
    GC_ERRORF(GC_ECORRUPT, "%s: message of %zu bytes is shorter than its "
              "header", who, len);
  if (buf[0] != tag)
    GC_ERRORF(GC_ECORRUPT, "%s: message tag 0x%02x is not this compressor's "
              "(0x%02x)", who, (unsigned) buf[0], tag);
  if (buf[1] != prec)
    GC_ERRORF(GC_ECORRUPT, "%s: message precision byte %u, expected %u "
              "(float%u)", who, (unsigned) buf[1], prec, prec);
  return GC_SUCCESS;
}

int gc__check_msg_len(size_t len, size_t want, const char *who)
{
  if (len != want)
    GC_ERRORF(GC_ECORRUPT, "%s: message of %zu bytes, expected %zu (%s)",
              who, len, want, len < want ? "truncated" : "trailing bytes");
  return GC_SUCCESS;
}
