/* npy.c -- the .npy format: magic "\x93NUMPY", version, header length,
 * then a Python dict literal {'descr': '<f4', 'fortran_order': False,
 * 'shape': (n,), } padded so that the data starts on a 64-byte boundary. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gc_errno.h"
#include "gc_io.h"
#include "gc_npy.h"

static int fail_format(const char *path, const char *what)
{
  gc_errorf(__FILE__, __LINE__, GC_EFORMAT, "%s: not a usable .npy file: %s",
            path, what);
  return GC_EFORMAT;
}

/* A short fread: GC_EIO when the stream had a read error, else the file
 * ended early: GC_EFORMAT for `what`. */
static int short_read(FILE *f, const char *path, const char *what)
{
  if (ferror(f)) {
    gc_errorf(__FILE__, __LINE__, GC_EIO, "%s: read error: %s", path,
              strerror(errno));
    return GC_EIO;
  }
  return fail_format(path, what);
}

/* Parse the shape tuple "(3, 4)" / "(5,)" / "()" starting at s. */
static int parse_shape(const char *s, gc_array *a)
{
  if (*s != '(')
    return -1;
  s++;
  a->ndim = 0;
  for (;;) {
    while (*s == ' ' || *s == ',')
      s++;
    if (*s == ')')
      break;
    if (!isdigit((unsigned char) *s) || a->ndim == GC_NPY_MAXDIM)
      return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || v > SIZE_MAX)
      return -1;
    a->shape[a->ndim++] = (size_t) v;
    s = end;
    if (*s == 'L')   /* written by Python 2 */
      s++;
  }
  return 0;
}

int gc_npy_read(const char *path, gc_array *a)
{
  memset(a, 0, sizeof *a);
  FILE *f = fopen(path, "rb");
  if (!f)
    GC_ERRORF(GC_EIO, "%s: cannot open: %s", path, strerror(errno));

  unsigned char pre[8];
  int status = GC_SUCCESS;
  char *header = NULL;
  if (fread(pre, 1, 8, f) != 8 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    status = short_read(f, path, "missing the \\x93NUMPY magic");
    goto done;
  }
  size_t hlen;
  if (pre[6] == 1) {
    unsigned char b[2];
    if (fread(b, 1, 2, f) != 2) {
      status = short_read(f, path, "truncated header");
      goto done;
    }
    hlen = b[0] | (size_t) b[1] << 8;
  } else if (pre[6] == 2 || pre[6] == 3) {
    unsigned char b[4];
    if (fread(b, 1, 4, f) != 4) {
      status = short_read(f, path, "truncated header");
      goto done;
    }
    hlen = b[0] | (size_t) b[1] << 8 | (size_t) b[2] << 16 | (size_t) b[3] << 24;
  } else {
    status = fail_format(path, "unknown format version");
    goto done;
  }
  if (hlen > (1u << 20)) {
    status = fail_format(path, "header longer than 1 MiB");
    goto done;
  }
  header = malloc(hlen + 1);
  if (!header) {
    status = GC_ENOMEM;
    gc_error("out of memory reading .npy header", __FILE__, __LINE__, status);
    goto done;
  }
  if (fread(header, 1, hlen, f) != hlen) {
    status = short_read(f, path, "truncated header");
    goto done;
  }
  header[hlen] = '\0';

  const char *descr = strstr(header, "'descr'");
  const char *fortran = strstr(header, "'fortran_order'");
  const char *shape = strstr(header, "'shape'");
  if (!descr || !fortran || !shape) {
    status = fail_format(path, "header lacks descr, fortran_order or shape");
    goto done;
  }
  descr = strchr(descr + 7, '\'');
  if (!descr) {
    status = fail_format(path, "bad descr");
    goto done;
  }
  descr++;
  if (strncmp(descr, "<f4'", 4) == 0)
    a->dtype = GC_F32;
  else if (strncmp(descr, "<f8'", 4) == 0)
    a->dtype = GC_F64;
  else {
    char d[16] = {0};
    for (int i = 0; i < 15 && descr[i] && descr[i] != '\''; i++)
      d[i] = descr[i];
    gc_errorf(__FILE__, __LINE__, GC_EFORMAT,
              "%s: dtype '%s' is not supported (use float32 '<f4' or float64 '<f8')",
              path, d);
    status = GC_EFORMAT;
    goto done;
  }
  fortran = strchr(fortran + 15, ':');
  while (fortran && (*fortran == ':' || *fortran == ' '))
    fortran++;
  int is_fortran = fortran && strncmp(fortran, "True", 4) == 0;
  shape = strchr(shape + 7, ':');
  while (shape && (*shape == ':' || *shape == ' '))
    shape++;
  if (!shape || parse_shape(shape, a) != 0) {
    status = fail_format(path, "bad shape tuple");
    goto done;
  }
  if (is_fortran && a->ndim > 2) {
    status = fail_format(path, "Fortran order with more than 2 dimensions");
    goto done;
  }
  a->count = 1;
  for (size_t i = 0; i < a->ndim; i++) {
    if (a->shape[i] != 0 && a->count > SIZE_MAX / 16 / a->shape[i]) {
      status = fail_format(path, "shape too large");
      goto done;
    }
    a->count *= a->shape[i];
  }
  size_t bytes = a->count * (size_t) a->dtype;
  /* The header's shape is only a claim: compare it with what the file
   * holds before allocating for it. */
  struct stat sb;
  long at = ftell(f);
  if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && at >= 0 &&
      (uint64_t) (sb.st_size - at) < bytes) {
    char what[160];
    snprintf(what, sizeof what, "truncated data: the header promises %zu "
             "values (%zu bytes), the file holds %lld bytes of data", a->count,
             bytes, (long long) (sb.st_size - at));
    status = fail_format(path, what);
    goto done;
  }
  a->data = malloc(bytes ? bytes : 1);
  if (!a->data) {
    status = GC_ENOMEM;
    gc_errorf(__FILE__, __LINE__, status, "%s: cannot allocate %zu bytes", path, bytes);
    goto done;
  }
  if (fread(a->data, 1, bytes, f) != bytes) {
    char what[96];
    snprintf(what, sizeof what, "truncated data: the header promises %zu "
             "values", a->count);
    status = short_read(f, path, what);
    goto done;
  }
  /* Bytes past the data are a file of another shape or a damaged one, as
   * for the IDX loader: refused rather than ignored. */
  if (fgetc(f) != EOF) {
    char what[200];
    int sized = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && at >= 0;
    if (sized)
      snprintf(what, sizeof what, "trailing bytes: the header promises %zu "
               "values (%zu bytes of data), the file holds %lld bytes of data",
               a->count, bytes, (long long) (sb.st_size - at));
    else
      snprintf(what, sizeof what, "trailing bytes: more than the %zu bytes "
               "of data (%zu values) the header promises", bytes, a->count);
    status = fail_format(path, what);
    goto done;
  }
  /* column-major -> row-major; nothing to move in an empty array, whose
   * other dimension may be huge */
  if (is_fortran && a->ndim == 2 && a->count > 0) {
    size_t r = a->shape[0], c = a->shape[1], es = (size_t) a->dtype;
    unsigned char *t = malloc(bytes ? bytes : 1);
    if (!t) {
      status = GC_ENOMEM;
      gc_error("out of memory transposing .npy", __FILE__, __LINE__, status);
      goto done;
    }
    for (size_t i = 0; i < r; i++)
      for (size_t j = 0; j < c; j++)
        memcpy(t + (i * c + j) * es, (unsigned char *) a->data + (j * r + i) * es, es);
    free(a->data);
    a->data = t;
  }

done:
  free(header);
  fclose(f);
  if (status != GC_SUCCESS)
    gc_array_free(a);
  return status;
}

int gc_npy_write(const char *path, int dtype, size_t ndim, const size_t *shape,
                 const void *data)
{
  if (dtype != GC_F32 && dtype != GC_F64)
    GC_ERRORF(GC_EINVAL, "npy write: dtype must be float32 or float64 (got %d)", dtype);
  if (ndim > GC_NPY_MAXDIM)
    GC_ERRORF(GC_EINVAL, "npy write: %zu dimensions (at most %d)", ndim, GC_NPY_MAXDIM);

  char dict[512], shp[256] = "(";
  size_t count = 1;
  for (size_t i = 0; i < ndim; i++) {
    char one[32];
    snprintf(one, sizeof one, "%zu,%s", shape[i], (i + 1 < ndim) ? " " : "");
    strncat(shp, one, sizeof shp - strlen(shp) - 1);
    count *= shape[i];
  }
  if (ndim > 1)   /* "(3, 4)" rather than "(3, 4,)" */
    shp[strlen(shp) - 1] = '\0';
  strncat(shp, ")", sizeof shp - strlen(shp) - 1);
  int len = snprintf(dict, sizeof dict,
                     "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     dtype == GC_F32 ? "<f4" : "<f8", shp);
  size_t total = 10 + (size_t) len + 1;          /* + '\n' */
  size_t pad = (64 - total % 64) % 64;
  size_t hlen = (size_t) len + pad + 1;

  unsigned char head[10 + sizeof dict + 64] = {
    0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
    (unsigned char) (hlen & 0xff), (unsigned char) (hlen >> 8) };
  memcpy(head + 10, dict, (size_t) len);
  memset(head + 10 + len, ' ', pad);
  head[10 + hlen - 1] = '\n';
  const void *parts[2] = { head, data };
  size_t lens[2] = { 10 + hlen, count * (size_t) dtype };
  return gc__write_atomic(path, parts, lens, 2);
}

/* Remove the temporaries of path itself that a killed writer left. */
static void remove_stale_tmp_of(const char *path)
{
  char dir[4096], prefix[1024];
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if ((size_t) (slash - path) < sizeof dir)
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int) (slash - path), path);
  else
    return;
  if ((size_t) snprintf(prefix, sizeof prefix, "%s.tmp.", base) < sizeof prefix)
    gc__remove_stale_tmp(dir, prefix);
}

/* The temporary gc__write_atomic is writing: named before the file is
 * made, unnamed once it is renamed or removed (see gc__remove_live_tmp). */
static char live_tmp[4200];
static volatile sig_atomic_t live_tmp_set;

void gc__remove_live_tmp(void)
{
  if (live_tmp_set)
    unlink(live_tmp);
}

int gc__write_atomic(const char *path, const void *const *parts,
                     const size_t *lens, size_t nparts)
{
  /* A device or pipe (/dev/null, /dev/stdout) is written in place: a
   * rename over it would replace the device node with a regular file. */
  struct stat sb;
  if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
    FILE *d = fopen(path, "wb");
    if (!d)
      GC_ERRORF(GC_EIO, "%s: cannot open for writing: %s", path, strerror(errno));
    int good = 1;
    for (size_t i = 0; good && i < nparts; i++)
      good = fwrite(parts[i], 1, lens[i], d) == lens[i];
    good = (fflush(d) == 0) && good;
    int e = errno;
    good = (fclose(d) == 0) && good;
    if (!good)
      GC_ERRORF(GC_EIO, "%s: write failed: %s", path, strerror(e));
    return GC_SUCCESS;
  }
  remove_stale_tmp_of(path);
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 32);
  if (!tmp)
    GC_ERROR("out of memory", GC_ENOMEM);
  snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long) getpid());
  int named = plen + 32 <= sizeof live_tmp;
  if (named) {
    live_tmp_set = 0;
    memcpy(live_tmp, tmp, strlen(tmp) + 1);
    live_tmp_set = 1;
  }
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    live_tmp_set = 0;
    gc_errorf(__FILE__, __LINE__, GC_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    free(tmp);
    return GC_EIO;
  }
  int ok = 1;
  for (size_t i = 0; ok && i < nparts; i++)
    ok = fwrite(parts[i], 1, lens[i], f) == lens[i];
  ok = (fflush(f) == 0) && ok;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    gc_errorf(__FILE__, __LINE__, GC_EIO, "%s: write failed: %s", path, strerror(errno));
    remove(tmp);
    live_tmp_set = 0;
    free(tmp);
    return GC_EIO;
  }
  live_tmp_set = 0;
  free(tmp);
  return GC_SUCCESS;
}

/* The stream is write-only: the file is read through a second
 * descriptor, checked to be the same file. */
void gc__cut_to_last_line(FILE *f, const char *path)
{
  int fd = fileno(f), rd = open(path, O_RDONLY);
  struct stat sw, sr;
  if (rd >= 0 && fstat(fd, &sw) == 0 && fstat(rd, &sr) == 0 && S_ISREG(sw.st_mode) &&
      sw.st_dev == sr.st_dev && sw.st_ino == sr.st_ino) {
    char buf[4096];
    off_t end = sw.st_size, keep = 0;
    while (end > 0) {
      off_t at = end > (off_t) sizeof buf ? end - (off_t) sizeof buf : 0;
      ssize_t got = pread(rd, buf, (size_t) (end - at), at);
      if (got != end - at) {
        keep = sw.st_size;   /* unreadable: leave the file as it is */
        break;
      }
      while (got > 0 && buf[got - 1] != '\n')
        got--;
      if (got > 0) {
        keep = at + got;
        break;
      }
      end = at;
    }
    if (keep < sw.st_size && ftruncate(fd, keep) != 0)
      keep = sw.st_size;   /* the message says the write failed anyway */
  }
  if (rd >= 0)
    close(rd);
  int null = open("/dev/null", O_WRONLY);
  if (null >= 0) {
    dup2(null, fd);
    close(null);
  }
}

int gc__flush_checked(FILE *f, const char *path)
{
  if (fflush(f) != 0 || ferror(f)) {
    int e = errno;
    gc__cut_to_last_line(f, path);
    GC_ERRORF(GC_EIO, "%s: write failed: %s", path, strerror(e));
  }
  return GC_SUCCESS;
}

size_t gc__remove_stale_tmp(const char *dir, const char *prefix)
{
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  size_t removed = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *t = strstr(e->d_name, ".tmp.");
    if (!t || t == e->d_name || (prefix && strncmp(e->d_name, prefix, strlen(prefix))))
      continue;
    char *end;
    long pid = strtol(t + 5, &end, 10);
    /* only names gc__write_atomic makes, and only a writer that is gone */
    if (*end || end == t + 5 || pid <= 0 || kill((pid_t) pid, 0) == 0 || errno != ESRCH)
      continue;
    char path[4200];
    if ((size_t) snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path &&
        remove(path) == 0)
      removed++;
  }
  closedir(d);
  return removed;
}

/* Length of the valid UTF-8 sequence at s (1-4), 0 if s starts none
 * (a stray continuation byte, a truncated, overlong or surrogate form,
 * or above U+10FFFF). */
static size_t utf8_len(const unsigned char *s)
{
  unsigned c = s[0];
  size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
           : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (n <= 1)
    return n;
  unsigned long cp = c & (0x7fu >> n);
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3fu);
  }
  static const unsigned long least[5] = { 0, 0, 0x80, 0x800, 0x10000 };
  if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

char *gc__json_quote(const char *s)
{
  const unsigned char *p = (const unsigned char *) (s ? s : "");
  size_t len = strlen((const char *) p);
  /* at most 6 bytes per input byte (\u00XX; U+FFFD is 3 for 1) */
  char *out = malloc(6 * len + 3), *o = out;
  if (!out) {
    gc_errorf(__FILE__, __LINE__, GC_ENOMEM, "out of memory for a JSON string");
    return NULL;
  }
  *o++ = '"';
  while (*p) {
    unsigned c = *p;
    size_t n = utf8_len(p);
    if (c == '"' || c == '\\') {
      *o++ = '\\';
      *o++ = (char) c;
    } else if (c < 0x20) {
      static const char short_form[] = "btn\0fr";   /* \b \t \n, \f \r */
      if (c >= 8 && c <= 13 && short_form[c - 8]) {
        *o++ = '\\';
        *o++ = short_form[c - 8];
      } else {
        o += sprintf(o, "\\u%04x", c);
      }
    } else if (n == 0) {
      memcpy(o, "\xef\xbf\xbd", 3);   /* U+FFFD */
      o += 3;
      n = 1;
    } else {
      memcpy(o, p, n);
      o += n;
    }
    p += n ? n : 1;
  }
  *o++ = '"';
  *o = '\0';
  return out;
}

int gc_array_convert(gc_array *a, int dtype)
{
  if (a->dtype == dtype)
    return GC_SUCCESS;
  if (dtype != GC_F32 && dtype != GC_F64)
    GC_ERRORF(GC_EINVAL, "cannot convert to dtype %d", dtype);
  void *t = malloc(a->count * (size_t) dtype + 1);
  if (!t)
    GC_ERROR("out of memory converting array", GC_ENOMEM);
  if (dtype == GC_F64) {
    const float *s = a->data;
    double *d = t;
    for (size_t i = 0; i < a->count; i++)
      d[i] = s[i];
  } else {
    const double *s = a->data;
    float *d = t;
    for (size_t i = 0; i < a->count; i++)
      d[i] = (float) s[i];
  }
  free(a->data);
  a->data = t;
  a->dtype = dtype;
  return GC_SUCCESS;
}

void gc_array_free(gc_array *a)
{
  if (!a)
    return;
  free(a->data);
  a->data = NULL;
  a->count = 0;
}

int gc__mkdir_p(const char *dir)
{
  size_t len = strlen(dir);
  char *p = malloc(len + 1);
  if (!p)
    GC_ERROR("out of memory", GC_ENOMEM);
  memcpy(p, dir, len + 1);
  /* each prefix ending before a '/', then the whole path */
  for (size_t i = 1; i <= len; i++) {
    if (i < len && p[i] != '/')
      continue;
    char c = p[i];
    p[i] = '\0';
    struct stat sb;
    int ok = mkdir(p, 0777) == 0 ||
             (errno == EEXIST && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode));
    if (!ok) {
      int e = errno == EEXIST ? ENOTDIR : errno;
      gc_errorf(__FILE__, __LINE__, GC_EIO, "%s: cannot create: %s", p,
                strerror(e));
      free(p);
      return GC_EIO;
    }
    p[i] = c;
  }
  free(p);
  return GC_SUCCESS;
}
