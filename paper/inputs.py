"""Find and read the result files the paper is made from.

The paper never links the library: it only reads the CSV files that the
programs write.  A file's kind is recognised by its header (the schemas are
fixed), not by its name, so the results folder can be laid out freely.
Reading is strict: a malformed row stops the run with FILE:LINE and the
reason, because a table built from a half-read file would be wrong silently.
"""
import csv
import json
import math
import os
import re

# kind -> (columns, {column: type}); the default type is "num" (a float).
# "str" keeps the text; "any" is a number when it parses, text otherwise.
SCHEMAS = {
    "contraction": (
        "compressor,distribution,d,density,k,trials,delta_worst,delta_mean,"
        "delta_topk_theory,gauss_share",
        {"compressor": "str", "distribution": "str"}),
    "trajectory": (
        "step,f_gap,grad_norm2,xi,xi_bi,mem_norm,mem_bound,bytes_up,bytes_down,"
        "support_union", {}),
    "bounds": (
        "problem,algorithm,compressor,density,steps,lr,L,gamma,xi_max,"
        "measured_min_grad2,measured_mean_grad2,bound,bound_name",
        {"problem": "str", "algorithm": "str", "compressor": "str",
         "bound_name": "str"}),
    "toy": ("step,uni,bi,down", {}),
    "toy_sweep": ("seed,uni_mean,bi_mean,down_final,bi_wins", {}),
    "cycle9": ("t,method,x1,x2,f_gap,f_gap_fraction",
               {"method": "str", "f_gap_fraction": "str"}),
    "search": ("P,d,alpha,targets,x0,uni_limit,bi_limit,verdict",
               {"targets": "str", "x0": "str", "uni_limit": "any",
                "bi_limit": "any", "verdict": "str"}),
    "bench_compress": (
        "compressor,d,density,threads,median_s,gbps,ratio_stream,ratio_memcpy",
        {"compressor": "str"}),
    "bench_train": ("model,batch,ms_per_step,torch_ms_per_step,ratio",
                    {"model": "str"}),
    "train_log": (
        "epoch,steps,train_loss,test_acc,bytes_up,bytes_down,"
        "support_union_over_k,xi,delta,time_compute,time_compress,"
        "time_aggregate,time_total", {}),
    # a run's steps.csv (--log-every): drawn by `gradcomp plot` (F7), not
    # read by any table
    "train_steps": ("epoch,step,train_loss,lr,bytes_up_cum,bytes_down_cum",
                    {}),
    "nn_bounds": (
        "epoch,steps,lr,gamma,xi_kind,xi_max,xi_mean,L_epoch,L,M2_max,"
        "M2_mean,f0,term_f0,term_sgd,term_compression,bound,grad2_mean,"
        "grad2_epoch,grad2_samples,ratio", {"xi_kind": "str"}),
}
SCHEMAS = {k: (tuple(c.split(",")), t) for k, (c, t) in SCHEMAS.items()}
_BY_HEADER = {cols: kind for kind, (cols, _) in SCHEMAS.items()}


def kind_of_header(header):
    """The kind whose columns the header holds: exactly, or as a subset, so
    a producer that adds columns (keeping the old ones) is still read; the
    kind with the most columns wins.  None when no kind matches."""
    if header in _BY_HEADER:
        return _BY_HEADER[header]
    have = set(header)
    fits = [(len(cols), kind) for kind, (cols, _) in SCHEMAS.items()
            if set(cols) <= have]
    return max(fits)[1] if fits else None

# The command that writes each kind: captions name it.  A sidecar
# FILE.cmd (one line, written by make-fixture) or a "command" entry of a
# JSON sidecar replaces it with the exact command line.
COMMANDS = {
    "contraction": "gradcomp theory contraction --csv F",
    "trajectory": "gradcomp theory trajectory ... --csv F",
    "bounds": "gradcomp theory bounds --csv F",
    "toy": "counterexamples/zou-toy --csv F",
    "toy_sweep": "counterexamples/zou-toy --sweep N --csv F",
    "cycle9": "counterexamples/cycle9 --csv F",
    "search": "counterexamples/search --csv F",
    "bench_compress": "gradcomp bench compress --csv F",
    "bench_compress_cuda": "gradcomp bench compress --device cuda --csv F",
    "bench_train": "gradcomp bench train --csv F",
    "train_log": "gradcomp train ... --out DIR",
    "nn_bounds": "gradcomp train ... --bounds N --out DIR",
    "train_steps": "gradcomp train ... --out DIR",
}


class InputError(Exception):
    """A result file that cannot be read; the message names file and line."""


class Table:
    """One result file: its kind, rows (dicts), and where it came from."""

    def __init__(self, kind, path, rel, rows, meta, command):
        self.kind, self.path, self.rel = kind, path, rel
        self.rows, self.meta, self.command = rows, meta, command

    def col(self, name):
        return [r[name] for r in self.rows]


def _parse(value, typ, path, line, column):
    v = value.strip()
    if typ == "str":
        return v
    if v == "":
        return None          # an empty cell: a value the program did not log
    try:
        x = float(v)
    except ValueError:
        if typ == "any":
            return v
        raise InputError("%s:%d: column '%s': '%s' is not a number"
                         % (path, line, column, value))
    return x


def _sniff_header(path):
    """First non-comment line split on commas, or None for an empty file."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            for raw in f:
                s = raw.strip()
                if s and not s.startswith("#"):
                    return tuple(c.strip() for c in next(csv.reader([s])))
    except (OSError, UnicodeDecodeError) as e:
        raise InputError("%s: cannot read: %s" % (path, e))
    return None


def read_csv(path, kind, rel=None, schema=None):
    """Read a result CSV of a known kind (or of `schema`, a (columns, types)
    pair like SCHEMAS' entries, for a file that is no result kind); every row
    is checked."""
    cols, types = schema or SCHEMAS[kind]
    rows, meta = [], []
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise InputError("%s: cannot open: %s" % (path, e))
    with f:
        reader = csv.reader(f)
        header = None
        try:
            for rec in reader:
                line = reader.line_num
                if not rec or all(not c.strip() for c in rec):
                    continue
                if rec[0].lstrip().startswith("#"):
                    meta.append(",".join(rec).lstrip("# ").rstrip())
                    continue
                if header is None:
                    header = tuple(c.strip() for c in rec)
                    # extra columns are kept (as numbers or text); a
                    # missing one is an error
                    if not set(cols) <= set(header) or (
                            schema and header != cols):
                        raise InputError(
                            "%s:%d: header is '%s', expected '%s'"
                            % (path, line, ",".join(header), ",".join(cols)))
                    continue
                if len(rec) != len(header):
                    raise InputError("%s:%d: %d fields, expected %d (%s)"
                                     % (path, line, len(rec), len(header),
                                        ",".join(header)))
                rows.append({c: _parse(v, types.get(
                    c, "num" if c in cols else "any"), path, line, c)
                    for c, v in zip(header, rec)})
        except csv.Error as e:
            raise InputError("%s:%d: %s" % (path, reader.line_num, e))
        except UnicodeDecodeError as e:
            raise InputError("%s: not UTF-8 text: %s" % (path, e))
    if header is None:
        raise InputError("%s:1: empty file, expected header '%s'"
                         % (path, ",".join(cols)))
    return Table(kind, path, rel or path, rows, meta, None)


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise InputError("%s: cannot open: %s" % (path, e))
    except (ValueError, UnicodeDecodeError) as e:
        line = getattr(e, "lineno", 1)
        raise InputError("%s:%d: malformed JSON: %s" % (path, line, e))


def _sidecar(path):
    """Configuration written beside a CSV: FILE.json or STEM.json, FILE.cmd."""
    meta, cmd = {}, None
    stem = os.path.splitext(path)[0]
    for cand in (path + ".json", stem + ".json"):
        if os.path.isfile(cand):
            meta = read_json(cand)
            if not isinstance(meta, dict):
                raise InputError("%s:1: expected a JSON object" % cand)
            break
    if os.path.isfile(path + ".cmd"):
        with open(path + ".cmd", encoding="utf-8") as f:
            cmd = f.read().strip()
    elif isinstance(meta.get("command"), str):
        cmd = meta["command"]
    return meta, cmd


class Results:
    """Everything found under the input folders, grouped by kind."""

    def __init__(self):
        self.files = {k: [] for k in SCHEMAS if k != "train_log"}
        self.runs = []          # training runs (see TrainRun)
        self.ignored = []       # CSVs with a header we do not know
        self.roots = []


class TrainRun:
    """One `gradcomp train --out DIR`: its log and its configuration."""

    def __init__(self, log, config, rel):
        self.log, self.config, self.rel = log, config, rel
        self.dir = os.path.dirname(log.path)   # the run folder itself
        self.dataset, self.model, self.P, self.algo = _describe_run(config, rel)


_DATASETS = {"mnist": "mnist", "fmnist": "fmnist", "fashionmnist": "fmnist",
             "cifar": "cifar10", "cifar10": "cifar10"}
_ALGOS = {"uni": "uni", "psuni": "uni", "unidirectional": "uni",
          "bi": "bi", "psbi": "bi", "bidirectional": "bi",
          "sgd": "sgd", "dense": "sgd", "psdense": "sgd"}


def _norm(s):
    return re.sub(r"[^a-z0-9]", "", str(s).lower())


def _describe_run(config, rel):
    """(dataset, model, P, algo) from config.json, falling back on the
    folder name <dataset>-<model>-P<P>-<algo> of the reproduction script."""
    m = re.match(r"(?:.*/)?([A-Za-z0-9_]+)-([A-Za-z0-9_]+)-P(\d+)-([A-Za-z0-9_-]+)$",
                 rel)
    fallback = m.groups() if m else (None, None, None, None)
    ds = config.get("dataset", fallback[0])
    model = config.get("model", fallback[1])
    P = config.get("workers", config.get("P", fallback[2]))
    algo = config.get("algorithm", config.get("algo", fallback[3]))
    comp = _norm(config.get("compressor", ""))
    ds = _DATASETS.get(_norm(ds), _norm(ds) if ds else "?")
    # model names may carry the data set ("mnist-mlp"): keep the family
    nm = _norm(model) if model else ""
    fam = [v for k, v in (("vgg", "vgg19"), ("cnn", "cnn"), ("mlp", "mlp"))
           if k in nm]
    model = fam[0] if fam else (nm or "?")
    algo_n = _ALGOS.get(_norm(algo), _norm(algo) if algo else "?")
    if comp in ("identity", "none", "dense") and algo_n == "uni":
        algo_n = "sgd"   # uni with an identity compressor is plain SGD
    try:
        P = int(P)
    except (TypeError, ValueError):
        P = None
    return ds, model, P, algo_n


def _walk(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            yield dirpath, fn


def discover(roots, warn):
    """Scan the input folders (missing ones are skipped with a warning)."""
    res = Results()
    seen = set()
    for root in roots:
        real = os.path.realpath(root)
        if real in seen:
            continue
        seen.add(real)
        if not os.path.isdir(root):
            warn("paper: no results folder %s (its rows will say 'not run')"
                 % root)
            continue
        res.roots.append(root)
        for dirpath, fn in _walk(root):
            if not fn.endswith(".csv"):
                continue
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, root)
            header = _sniff_header(path)
            kind = kind_of_header(header) if header else None
            if kind is None:
                res.ignored.append(rel)
                continue
            t = read_csv(path, kind, rel)
            t.meta_json, t.command = _sidecar(path)
            if kind == "train_log":
                cfg_path = os.path.join(dirpath, "config.json")
                cfg = read_json(cfg_path) if os.path.isfile(cfg_path) else {}
                if not isinstance(cfg, dict):
                    raise InputError("%s:1: expected a JSON object" % cfg_path)
                rdir = os.path.relpath(dirpath, root)
                if cfg.get("command"):
                    t.command = cfg["command"]
                res.runs.append(TrainRun(t, cfg, rdir))
                continue
            if kind == "bench_compress" and _is_cuda(rel, t.meta_json):
                t.device = "cuda"
            else:
                t.device = "cpu"
            res.files[kind].append(t)
    return res


def _is_cuda(rel, meta):
    dev = str(meta.get("device", "")).lower()
    if dev:
        return dev in ("cuda", "gpu")
    return bool(re.search(r"cuda|gpu", rel.lower()))


def generic_command(t):
    if t.kind == "bench_compress" and getattr(t, "device", "cpu") == "cuda":
        return COMMANDS["bench_compress_cuda"]
    return COMMANDS[t.kind]


def command_of(t):
    return t.command or generic_command(t)


def commands_of(tables, most=4):
    """Exact command lines when there are few; else the generic command of
    each kind (the exact ones stay in the sidecars), to keep captions short."""
    exact = sorted({command_of(t) for t in tables})
    if len(exact) <= most:
        return exact
    return sorted({generic_command(t) for t in tables})


def finite(xs):
    return [x for x in xs if isinstance(x, float) and math.isfinite(x)]
