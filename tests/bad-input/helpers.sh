# tests/bad-input/helpers.sh -- sourced by each case of the catalogue
# (tests/bad-input/run) before its command: makers of malformed inputs.

# be32 N: four big-endian bytes
be32() {
  printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) \
    $(($1 >> 8 & 255)) $(($1 & 255)))"
}
# idx FILE NDIM DIM... PAYLOAD_BYTES: an IDX header (magic 00 00 08 NDIM:
# unsigned bytes) and PAYLOAD_BYTES zero bytes
idx() {
  f=$1 nd=$2
  shift 2
  { printf '\000\000\010'; printf "$(printf '\\%03o' "$nd")"
    i=0
    while [ "$i" -lt "$nd" ]; do be32 "$1"; shift; i=$((i + 1)); done
    head -c "$1" /dev/zero; } > "$f"
}
# npy FILE DICT DATA_BYTES: a version-1 .npy with that header dict
npy() {
  len=$(printf '%s\n' "$2" | wc -c)
  { printf '\223NUMPY\001\000'; printf "$(printf '\\%03o\\%03o' $((len & 255)) $((len >> 8)))"
    printf '%s\n' "$2"; head -c "$3" /dev/zero; } > "$1"
}
# fixture_run: a tiny finished training run (one epoch) in ./run, copied
# from $WORK/fixture/run, which the first case that asks for it makes
fixture_run() {
  if [ ! -f "$WORK/fixture/run/checkpoint.json" ]; then
    "$G" train $TRAIN_SMALL --epochs 1 --out "$WORK/fixture/run" >/dev/null 2>&1 ||
      { echo "fixture run failed"; return 1; }
  fi
  cp -r "$WORK/fixture/run" run
}
needs_data() { :; }   # a marker: the runner skips the case without MNIST
needs_mpirun() { :; } # and this one without an MPI build or mpirun

# fixture_run2: the same with two epochs, in ./run2
fixture_run2() {
  if [ ! -f "$WORK/fixture/run2/checkpoint.json" ]; then
    "$G" train $TRAIN_SMALL --epochs 2 --out "$WORK/fixture/run2" >/dev/null 2>&1 ||
      { echo "fixture run failed"; return 1; }
  fi
  cp -r "$WORK/fixture/run2" run2
}
# keeps DIR CMD...: run CMD, which must leave every file of DIR as it was
# (its .lock aside); if it changed one, say so and return 0 so that the case
# fails, else return CMD's status
keeps() {
  d=$1
  shift
  cp -r "$d" "$d.before"
  "$@"
  rc=$?
  if ! diff -r -x .lock "$d.before" "$d" >/dev/null 2>&1; then
    echo "keeps: $d changed"
    rc=0
  fi
  rm -rf "$d.before"
  return $rc
}
# ckpt_edit FILE KEY VALUE: set a line of a checkpoint file's header
# ("rank", "epoch", ...) or, for KEY --option, that option's value, and
# make its CRC-32 agree again (format GCCKPT2: magic, u32 header length,
# u64 payload length, u32 CRC of header and payload, header, payload)
ckpt_edit() {
  python3 - "$@" <<'PY'
import re, struct, sys, zlib
p, key, val = sys.argv[1:4]
b = bytearray(open(p, 'rb').read())
m = struct.unpack('<I', b[8:12])[0]
meta = bytes(b[24:24 + m]).decode()
if key.startswith('--'):
    meta = re.sub('(?<= )' + re.escape(key) + ' [^ \n]*', key + ' ' + val, meta)
else:
    meta = re.sub('(?m)^' + re.escape(key) + ' .*$', key + ' ' + val, meta)
meta = meta.encode()
b[8:12] = struct.pack('<I', len(meta))
b[24:24 + m] = meta
b[20:24] = struct.pack('<I', zlib.crc32(bytes(b[24:])))
open(p, 'wb').write(b)
PY
}
# vec FILE f4|f8 N EXPR: a 1-D little-endian .npy of N values EXPR(i)
# (a Python expression in i with math's names -- nan, inf, ldexp, ... --
# and q, the standard normal quantile function)
vec() {
  python3 -c "
import math, struct, sys
from statistics import NormalDist
q = NormalDist().inv_cdf
f, t, n, e = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
v = [eval(e, dict(vars(math), i=i, q=q)) for i in range(n)]
h = \"{'descr': '<%s', 'fortran_order': False, 'shape': (%d,), }\" % (t, n)
h += ' ' * ((64 - (10 + len(h) + 1) % 64) % 64) + '\n'
open(f, 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode()
                   + struct.pack('<%d%s' % (n, 'f' if t == 'f4' else 'd'), *v))
" "$1" "$2" "$3" "$4"
}
