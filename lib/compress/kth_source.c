/* kth_source.c -- the k-th largest (k in 1..m) of a[0..m), which is
 * reordered: 3-way quickselect with a median-of-3 pivot, so ties cost
 * nothing extra.  Included with KEY (the element type) and KTH (the
 * function's name) defined, for sparse_kernels.c's float32 magnitude keys
 * and sparse_kernels_source.c's REAL magnitudes; both are undefined at
 * the end. */
static KEY KTH(KEY *a, size_t m, size_t k)
{
  size_t lo = 0, hi = m, target = k - 1;
  for (;;) {
    if (hi - lo <= 16) {
      for (size_t i = lo + 1; i < hi; i++) {
        KEY v = a[i];
        size_t j = i;
        for (; j > lo && a[j - 1] < v; j--)
          a[j] = a[j - 1];
        a[j] = v;
      }
      return a[target];
    }
    KEY p0 = a[lo], p1 = a[lo + (hi - lo) / 2], p2 = a[hi - 1], p;
    if (p0 < p1) { KEY t = p0; p0 = p1; p1 = t; }
    if (p1 < p2) { KEY t = p1; p1 = p2; p2 = t; }
    if (p0 < p1) { KEY t = p0; p0 = p1; p1 = t; }
    p = p1;
    size_t lt = lo, i = lo, gt = hi;
    while (i < gt) {
      KEY v = a[i];
      if (v > p) {
        a[i++] = a[lt];
        a[lt++] = v;
      } else if (v < p) {
        a[i] = a[--gt];
        a[gt] = v;
      } else {
        i++;
      }
    }
    if (target < lt)
      hi = lt;
    else if (target >= gt)
      lo = gt;
    else
      return p;
  }
}

#undef KEY
#undef KTH
