"""The claims table: each published claim, our measurement, a verdict.

One block per source work (SOURCES): the bidirectional top-K thesis, Shi
et al.'s Gaussian-k, the Top-k/DGC/QSGD survey restated on our models and
data, and the compressors' and methods' own papers.  Verdicts are holds /
partly / fails / not run, decided only by the numbers in
thresholds.THRESHOLDS.  A claim whose data are missing says "not run" and
names the command that makes them; nothing is inferred from absent data,
and a claim whose threshold names a check that did not run never holds.
"""
import json
import math

from render import Block, Doc, fmt, fixed, signed, NOT_RUN
from tables import (gauss_share, is_topk, is_gaussk, is_gaussian_dist, mean,
                    run_setting, final_accuracy_pct, epochs_of, _ncomp)
from thresholds import THRESHOLDS as TH

HOLDS, PARTLY, FAILS = "holds", "partly", "fails"


def combine(parts):
    """All pieces hold -> holds; none -> fails; some -> partly."""
    parts = [p for p in parts if p != NOT_RUN]
    if not parts:
        return NOT_RUN
    if all(p == HOLDS for p in parts):
        return HOLDS
    if all(p == FAILS for p in parts):
        return FAILS
    return PARTLY


def judged(required, extra=()):
    """The verdict of a claim whose threshold names several checks
    (`required`, each a verdict) plus evidence that may only add
    (`extra`): not run when nothing ran; never holds while a named check
    did not run (then at most partly)."""
    ran = [v for v in list(required) + list(extra) if v != NOT_RUN]
    if not ran:
        return NOT_RUN
    v = combine(ran)
    return PARTLY if v == HOLDS and NOT_RUN in required else v


def claim_accuracy(pairs):
    if not pairs:
        return ("no experiment with both uni and bi runs", NOT_RUN)
    pieces, verdicts = [], []
    full = [p for p in pairs if p["epochs"] and
            min(p["epochs"]) >= TH["acc_min_epochs"]]
    for p in sorted(pairs, key=lambda p: p["exp"]):
        short = p["uni"] - p["bi"]        # > 0: bi below uni
        pieces.append("%s: uni %s, bi %s (bi − uni %s pp, %s epochs)"
                      % (p["exp"], fixed(p["uni"], 2), fixed(p["bi"], 2),
                         fixed(-short, 2), ",".join(map(str, p["epochs"]))))
        if p not in full:
            continue
        if short <= TH["acc_gap_holds_pp"]:
            verdicts.append(HOLDS)
        elif short <= TH["acc_gap_partly_pp"]:
            verdicts.append(PARTLY)
        else:
            verdicts.append(FAILS)
    txt = "; ".join(pieces)
    if len(full) < len(pairs):
        txt += ("; runs under %d epochs are shown but not judged"
                % TH["acc_min_epochs"])
    return (txt, combine(verdicts))


def claim_support(fits):
    ours = [f for f in fits if f["who"] == "ours"]
    refs = [f for f in fits if f["who"] == "reference"]
    ref_txt = ", ".join("%s %s" % (f["model"], fmt(f["slope"], 3))
                        for f in refs)
    if not ours:
        return ("no training runs with |S|/K (reference slopes: %s)"
                % (ref_txt or "none"), NOT_RUN)
    pieces, verdicts = [], []
    for f in ours:
        if f["slope"] is None:
            pieces.append("%s: only P=%s (a slope needs %d P values)"
                          % (f["model"], ",".join(map(str, f["Ps"])),
                             TH["support_min_points"]))
            continue
        pieces.append("%s: slope %s, R² %s over P=%s"
                      % (f["model"], fmt(f["slope"], 3), fmt(f["r2"], 4),
                         ",".join(map(str, f["Ps"]))))
        if f["slope"] >= TH["support_slope_holds"] and \
                f["r2"] >= TH["support_r2_holds"]:
            verdicts.append(HOLDS)
        elif f["slope"] >= TH["support_slope_partly"]:
            verdicts.append(PARTLY)
        else:
            verdicts.append(FAILS)
    txt = "; ".join(pieces) + " (reference slopes: %s)" % (ref_txt or "none")
    return (txt, combine(verdicts))


def claim_counterexamples(facts):
    """The threshold names three checks (cycle9, the toy's plateau, the
    seed sweep); the search only adds evidence.  A check whose program did
    not run keeps the verdict from "holds"."""
    pieces, verdicts = [], []
    checks = {}
    cyc = facts["cycle9"]
    if cyc:
        u, b = cyc.get("uni"), cyc.get("bi")
        ok = (u is not None and b is not None
              and u["period"] == TH["cycle9_period"]
              and u["mean"] == TH["cycle9_uni_mean"]
              and u["max"] == TH["cycle9_uni_max"]
              and b["period"] == 1 and b["final"] == TH["cycle9_bi_final"])
        pieces.append("cycle9: uni period %s, mean F−F* %s; bi final %s"
                      % (u and u["period"], u and u["mean"],
                         b and b["final"]))
        checks["cycle9"] = [HOLDS if ok else FAILS]
    for toy in facts["toy"]:
        if toy["uni"] is None or toy["bi"] is None:
            continue
        ratio = toy["bi"] / toy["uni"] if toy["uni"] else math.inf
        pieces.append("toy plateau t∈[%d,%d): bi/uni = %s"
                      % (TH["toy_window"] + (fmt(ratio, 3),)))
        checks.setdefault("toy", []).append(
            HOLDS if ratio <= TH["toy_bi_ratio_holds"] else
            PARTLY if ratio < 1 else FAILS)
    for sw in facts["sweep"]:
        if not sw["n"]:
            continue
        share = sw["wins"] / sw["n"]
        pieces.append("seed sweep: bi lower in %d/%d" % (sw["wins"], sw["n"]))
        checks.setdefault("sweep", []).append(
            HOLDS if share >= TH["sweep_win_share_holds"] else
            PARTLY if share >= TH["sweep_win_share_partly"] else FAILS)
    if facts["search"]:
        c = facts["search"]
        n = sum(c.values())
        # a search CSV without tie counts (older versions) cannot say
        # which verdicts a tie decided
        tf = "tie-free " if facts.get("search_ties_known") else ""
        pieces.append("search: bi strictly better in %d {0}exact "
                      "(%d {0}float) of %d instances, worse in %d "
                      "{0}exact (%d {0}float)".format(tf)
                      % (c.get("bi_better", 0), c.get("bi_better_float", 0),
                         n, c.get("bi_worse", 0), c.get("bi_worse_float", 0)))
        # "can converge better" needs one exact instance; none found is no
        # evidence against it, so only a find counts
        if c.get("bi_better", 0) > 0:
            verdicts.append(HOLDS)
    if not pieces:
        return ("no counterexample output", NOT_RUN)
    required = [combine(checks.get(c, [])) for c in COUNTER_CHECKS]
    missing = [c for c, v in zip(COUNTER_CHECKS, required) if v == NOT_RUN]
    if missing:
        pieces.append("not run: %s" % ", ".join(
            "%s (`%s`)" % (c, COUNTER_COMMANDS[c]) for c in missing))
    return ("; ".join(pieces), judged(required, verdicts))


# The checks claim 3's threshold names, and the command that makes each.
COUNTER_CHECKS = ("cycle9", "toy", "sweep")
COUNTER_COMMANDS = {"cycle9": "counterexamples/cycle9 --csv F",
                    "toy": "counterexamples/zou-toy --csv F",
                    "sweep": "counterexamples/zou-toy --sweep 10 --csv F"}


def _k_over_d(k, d):
    return k / d if isinstance(k, (int, float)) and isinstance(
        d, (int, float)) and k > 0 and d > 0 else None


def topk_cases(contraction_rows, runs):
    """Top-K error measurements, each a dict: label; kd = K/d of that case
    (its own k and d, not the nominal density); share = 1 − mean δ̂;
    worst = the error share that bounds every input seen, or None;
    real = measured on a network's gradients (a `gradcomp train` run,
    known from the file kind, not from a name); epoch_means = only epoch
    means of δ̂ were logged (their minimum is no worst case)."""
    out = []
    for r in contraction_rows:
        kd = _k_over_d(r["k"], r["d"])
        if not is_topk(r["compressor"]) or r["delta_mean"] is None or not kd:
            continue
        out.append({"label": "%s ρ=%s" % (r["distribution"],
                                          fmt(r["density"])),
                    "kd": kd, "share": 1 - r["delta_mean"],
                    "worst": None if r["delta_worst"] is None
                    else 1 - r["delta_worst"],
                    "real": False, "dist": r["distribution"], "gaussian":
                    is_gaussian_dist(r["distribution"]),
                    "epoch_means": False})
    for run in runs:
        comp = str(run.config.get("compressor", ""))
        kd = _k_over_d(run.config.get("k"), run.config.get("d"))
        deltas = [x for x in run.log.col("delta")
                  if x is not None and math.isfinite(x)]
        if not is_topk(comp) or run.algo not in ("uni", "bi") or not deltas \
                or not kd:
            continue
        out.append({"label": "%s-%s P=%s %s (%s)" % (
            run.dataset, run.model, run.P, run.algo, run.rel),
            "kd": kd, "share": 1 - mean(deltas), "worst": 1 - min(deltas),
            "real": True, "dist": "gradients", "gaussian": False,
            "epoch_means": True})
    return out


def claim_topk_bound(cases):
    """Every top-K δ̂ ≥ K/d.  One case below the bound is a failure of a
    theorem (a bug); epoch means can show such a failure (a mean below K/d
    has a step below it) but cannot show that it holds."""
    cases = [c for c in cases if c["worst"] is not None]
    if not cases:
        return ("no top-K contraction data", NOT_RUN)
    slack = TH["topk_bound_rel_slack"]
    bad = [c for c in cases
           if c["worst"] > (1 - c["kd"]) + slack * (1 - c["kd"])]
    worst_case = [c for c in cases if not c["epoch_means"]]
    tight = min(cases, key=lambda c: ((1 - c["kd"]) - c["worst"],
                                      c["label"]))
    txt = ("%d worst-case and %d epoch-mean case(s); tightest: %s, "
           "%s error share %s vs 1−K/d = %s"
           % (len(worst_case), len(cases) - len(worst_case), tight["label"],
              "highest epoch-mean" if tight["epoch_means"] else "worst",
              fmt(tight["worst"], 6), fmt(1 - tight["kd"], 6)))
    if bad:
        txt += "; above the bound: " + ", ".join(c["label"] for c in bad)
        return (txt, FAILS if len(bad) == len(cases) else PARTLY)
    if not worst_case:
        return (txt + "; epoch means alone cannot show the bound holds "
                "(needs `gradcomp theory contraction`)", NOT_RUN)
    return (txt, HOLDS)


def claim_topk_gauss(cases):
    real = [c for c in cases if c["real"]]
    synth = [c for c in cases if not c["real"] and c["gaussian"]]
    use = real or synth
    if not use:
        return ("no top-K error share on real or Gaussian data", NOT_RUN)
    found, verdicts = [], []
    for c in use:
        g = gauss_share(c["kd"])
        diff = c["share"] - g
        found.append((abs(diff), c["label"], c["share"], g, diff))
        verdicts.append(HOLDS if abs(diff) <= TH["gauss_share_holds_abs"] else
                        PARTLY if abs(diff) <= TH["gauss_share_partly_abs"]
                        else FAILS)
    # the farthest case speaks for all (the full list is in T1 and the logs)
    found.sort(key=lambda c: (-c[0], c[1]))
    far = found[0]
    pieces = ["%d %s case(s), %d within %s; farthest: %s, error share %s "
              "vs Gaussian %s (Δ %s)"
              % (len(found), "training-run" if real else "synthetic",
                 verdicts.count(HOLDS), fmt(TH["gauss_share_holds_abs"]),
                 far[1], fmt(far[2], 5), fmt(far[3], 5), fmt(far[4], 3))]
    v = combine(verdicts)
    if not real:
        # the claim is about real gradients: synthetic data alone cannot
        # make it hold
        pieces.insert(0, "no training run with top-K; synthetic Gaussian only")
        v = PARTLY if v == HOLDS else v
    return ("; ".join(pieces), v)


# Contraction CSV columns that hold the count Gaussian-k selected (mean over
# the trials); the first present is read.
COUNT_COLUMNS = ("selected_mean", "selected")


def _count_verdict(ratio):
    return HOLDS if TH["gaussk_count_low"] <= ratio <= \
        TH["gaussk_count_high"] else FAILS


def claim_gaussk_count(contraction_rows, runs=()):
    """5a: Gaussian-k keeps about k entries (its own window [2k/3, 4k/3],
    docs/theory.md 2.5), judged on two named checks: Gaussian data (the
    count a contraction CSV logs, selected_mean; never inferred from the
    error share) and real gradients (a Gaussian-k training run: with one
    worker support_union_over_k is its message's count over k; with P
    workers every worker's count is at most the union |S|, so a mean |S|/k
    below the window shows the counts below it too, while a larger one
    bounds nothing from below and is shown, not judged)."""
    pieces, gauss, real = [], [], []
    for r in contraction_rows:
        if not (is_gaussk(r["compressor"]) and r["k"]
                and is_gaussian_dist(r["distribution"])):
            continue
        n = next((r[c] for c in COUNT_COLUMNS
                  if isinstance(r.get(c), float)), None)
        if n is None:
            continue
        ratio = n / r["k"]
        pieces.append("Gaussian ρ=%s: %s of k = %s (%s)"
                      % (fmt(r["density"]), fmt(n), fmt(r["k"]),
                         fmt(ratio, 3)))
        gauss.append(_count_verdict(ratio))
    if not gauss:
        pieces.append("Gaussian data: no logged count (`gradcomp theory "
                      "contraction --csv F` writes `selected_mean`; the count "
                      "is not inferred from the error share)")
    for run in sorted(runs, key=lambda r: r.rel):
        counts = [x for x in run.log.col("support_union_over_k")
                  if x is not None and math.isfinite(x)]
        if not (is_gaussk(str(run.config.get("compressor", ""))) and counts
                and run.P):
            continue
        u = mean(counts)
        what = "%s-%s P=%s (%s)" % (run.dataset, run.model, run.P, run.rel)
        if run.P == 1:
            pieces.append("real gradients, %s: count/k %s" % (what, fmt(u, 3)))
            real.append(_count_verdict(u))
        elif u < TH["gaussk_count_low"]:
            pieces.append("real gradients, %s: count/k ≤ |S|/k = %s"
                          % (what, fmt(u, 3)))
            real.append(FAILS)
        else:
            pieces.append("not judged, %s: |S|/k = %s bounds the count only "
                          "from above" % (what, fmt(u, 3)))
    if not real:
        pieces.append("real gradients: not run (`gradcomp train --workers 1 "
                      "--compressor gaussk --out DIR`)")
    return ("; ".join(pieces), judged([combine(gauss), combine(real)]))


def claim_gaussk_speed(bench_rows, timing):
    if not timing:
        return ("timings are left out of the byte-compared tables", NOT_RUN)
    pieces, verdicts = [], []
    for dev in sorted(bench_rows):
        rows = bench_rows[dev]
        topk = {(r["d"], r["density"], r["threads"]): r for r in rows
                if is_topk(r["compressor"])}
        for r in rows:
            if not is_gaussk(r["compressor"]):
                continue
            key = (r["d"], r["density"], r["threads"])
            t = topk.get(key)
            if not t or not t["median_s"] or r["median_s"] is None:
                continue
            ratio = r["median_s"] / t["median_s"]
            pieces.append((key, "%s d=%s ρ=%s threads=%s: %s"
                           % (dev, fmt(key[0]), fmt(key[1]), fmt(key[2]),
                              fmt(ratio, 3))))
            verdicts.append(HOLDS if ratio < TH["gaussk_time_ratio_holds"]
                            else FAILS)
    if not pieces:
        return ("no bench rows with both top-K and Gaussian-k", NOT_RUN)
    return ("time(Gaussian-k)/time(top-K): "
            + "; ".join(p[1] for p in pieces), combine(verdicts))


def claim_topk_bell(cases):
    """4c (Shi et al., docs/theory.md 4.5): on bell-shaped inputs top-K's
    error share is below (1 − K/d)², far under the worst case 1 − K/d.
    Two named checks: synthetic bell-shaped data (Gaussian, Laplace,
    Student-t; the worst share over the trials) and real gradients (epoch
    means of a training run: a mean above the bound has a step above it, a
    mean below it is what the paper's own evidence is too)."""
    pieces, checks = [], {"synthetic": [], "real": []}
    slack = TH["topk_bound_rel_slack"]
    for c in cases:
        bell = c["real"] or any(w in c["dist"].lower() for w in BELL_SHAPED)
        share = c["share"] if c["epoch_means"] else c["worst"]
        if not bell or share is None:
            continue
        bound = (1 - c["kd"]) ** 2
        ok = share <= bound * (1 + slack)
        checks["real" if c["real"] else "synthetic"].append(
            (c["label"], share, bound, HOLDS if ok else FAILS))
    for kind, what in (("synthetic", "synthetic worst"),
                       ("real", "training epoch-mean")):
        found = checks[kind]
        if not found:
            pieces.append("%s: not run" % kind)
            continue
        # the case nearest its bound speaks for all
        near = max(found, key=lambda f: (f[1] / f[2], f[0]))
        pieces.append("%d %s case(s), %d below; nearest: %s, %s vs "
                      "(1−K/d)² = %s" % (
                          len(found), what,
                          sum(f[3] == HOLDS for f in found), near[0],
                          fmt(near[1], 5), fmt(near[2], 5)))
    return ("; ".join(pieces), judged(
        [combine([f[3] for f in checks[k]]) for k in ("synthetic", "real")]))


# distribution names of `theory contraction` that are bell-shaped (the
# equal-magnitude worst case and a quadratic's accumulators are not)
BELL_SHAPED = ("gauss", "normal", "laplace", "student")


# ------------------------------------------------- training-run comparisons

# config.json entries in which the methods of one experiment may differ:
# each compressor with its own tuned step, density and momentum
METHOD_FREE = ("algorithm", "compressor", "lr", "seed", "density",
               "density_down", "k", "k_down", "momentum", "levels")


def method_of(run):
    """'sgd' for a dense run; the compressor's normalised name for a
    unidirectional one (the compressors' papers compress the uplink with
    worker memories); 'bi-NAME' for a bidirectional one."""
    if run.algo == "sgd":
        return "sgd"
    comp = _ncomp(str(run.config.get("compressor", "")))
    return comp if run.algo == "uni" else "%s-%s" % (run.algo, comp)


def method_experiments(runs):
    """{experiment: {method: [runs]}}: runs of one configuration but the
    entries of METHOD_FREE (a dense SGD baseline beside its compressed
    runs).  Seeds are replicates; a method with runs of several settings
    (two step sizes, say) is left out, never averaged."""
    g = {}
    for run in runs:
        if run.algo not in ("sgd", "uni", "bi"):
            continue
        key = run_setting(run, drop=METHOD_FREE)
        g.setdefault(key, {}).setdefault(method_of(run), []).append(run)
    for by in g.values():
        for m in list(by):
            if len({run_setting(r, drop=("seed",)) for r in by[m]}) > 1:
                del by[m]
    return g


def _exp_name(key):
    d = dict(key)
    return "%s-%s P=%s" % (json.loads(d["dataset"]), json.loads(d["model"]),
                           json.loads(d["workers"]))


def _mean_acc(runs):
    return mean([final_accuracy_pct(r) for r in runs])


def _long_enough(runs):
    return all(epochs_of(r) >= TH["acc_min_epochs"] for r in runs)


def _gap_verdict(short):
    """short = baseline − method accuracy (pp; > 0: the method is below)."""
    return (HOLDS if short <= TH["acc_gap_holds_pp"] else
            PARTLY if short <= TH["acc_gap_partly_pp"] else FAILS)


def claim_accuracy_vs(runs, methods, baseline, command):
    """A compressor's paper: training with it reaches `baseline`'s accuracy
    ('sgd': dense SGD; or another compressor) in the same experiment; judged
    on runs of at least acc_min_epochs epochs (shorter ones are shown)."""
    pieces, verdicts = [], []
    for key, by in sorted(method_experiments(runs).items()):
        if baseline not in by:
            continue
        b = _mean_acc(by[baseline])
        for m in sorted(set(by) & set(methods)):
            a = _mean_acc(by[m])
            if a is None or b is None:
                continue
            eps = min(epochs_of(r) for r in by[m] + by[baseline])
            pieces.append("%s: %s %s vs %s %s (%s pp, %d epochs)" % (
                _exp_name(key), m, fixed(a, 2), baseline, fixed(b, 2),
                signed(a - b, 2), eps))
            if _long_enough(by[m] + by[baseline]):
                verdicts.append(_gap_verdict(b - a))
    if not pieces:
        return ("no experiment with both; makes it: %s" % command, NOT_RUN)
    v = combine(verdicts)
    if v == NOT_RUN:
        pieces.append("runs under %d epochs are shown but not judged"
                      % TH["acc_min_epochs"])
    return ("; ".join(pieces), v)


def _train_cmd(comp, algo="uni"):
    return ("gradcomp train --dataset mnist --workers 10 --algorithm %s "
            "--compressor %s --epochs 10 --out DIR" % (algo, comp))


def _with_dense(comp):
    return "`%s`, and `--algorithm sgd` beside it" % _train_cmd(comp)


def _step_seconds(run):
    """Modelled seconds per step of a run with the α-β network model
    (--net-bandwidth): its measured compute, compression and aggregation
    times plus the modelled communication, over its steps; None without."""
    rows = run.log.rows
    if not rows or any(r.get("net_comm_s") is None for r in rows):
        return None
    cols = ("time_compute", "time_compress", "time_aggregate", "net_comm_s")
    tot = math.fsum(r[c] for r in rows for c in cols
                    if r.get(c) is not None)
    steps = rows[-1]["steps"]
    return tot / steps if steps else None


def claim_survey_speedup(runs, timing):
    """S1: compressed training beats the dense baseline in time per step,
    more so as the model (d) and the workers (P) grow.  Two named checks:
    beats (speed-up > 1 at the largest d·P) and grows (no case with both d
    and P at least another's has a smaller speed-up, beyond the tolerance
    of measured timings)."""
    if not timing:
        return ("timings are left out of the byte-compared tables", NOT_RUN)
    cases = []
    for key, by in sorted(method_experiments(runs).items()):
        if "sgd" not in by:
            continue
        dense = mean([_step_seconds(r) for r in by["sgd"]])
        best = None
        for m in sorted(set(by) - {"sgd"}):
            t = mean([_step_seconds(r) for r in by[m]])
            if dense and t and (best is None or dense / t > best[0]):
                best = (dense / t, m)
        if best:
            d = dict(key)
            cases.append((json.loads(d["d"]) if "d" in d else 0,
                          json.loads(d["workers"]) or 0, best[0], best[1],
                          _exp_name(key)))
    if not cases:
        return ("no dense and compressed runs with the network model; makes "
                "them: `%s --net-bandwidth 10Gbps --net-latency 50us`, and "
                "`--algorithm sgd` beside it, at several P and models"
                % _train_cmd("topk"), NOT_RUN)
    cases.sort()
    pieces = ["%s: dense/%s = %s" % (c[4], c[3], fmt(c[2], 3))
              for c in cases]
    top = max(cases, key=lambda c: (c[0] * c[1], c[0], c[1]))
    beats = HOLDS if top[2] > TH["speedup_holds"] else FAILS
    tol = TH["speedup_rel_tol"]
    pairs = [(a, b) for a in cases for b in cases
             if a[:2] != b[:2] and a[0] <= b[0] and a[1] <= b[1]]
    grows = NOT_RUN if not pairs else (
        HOLDS if all(b[2] >= a[2] * (1 - tol) for a, b in pairs) else FAILS)
    if grows == NOT_RUN:
        pieces.append("growth not run (one d and P)")
    return ("modelled time per step; " + "; ".join(pieces),
            judged([beats, grows]))


SPARSIFIERS = ("topk", "dgc")
QUANTISERS = ("qsgd",)


def _bytes_up_per_step(runs):
    vals = []
    for r in runs:
        up = [x for x in r.log.col("bytes_up") if x is not None]
        steps = r.log.rows[-1]["steps"] if r.log.rows else None
        if up and steps:
            vals.append(math.fsum(up) / steps)
    return mean(vals)


def claim_survey_accuracy(runs):
    """S2: sparsification (Top-k, DGC) keeps accuracy as quantisation (QSGD)
    does, at a higher compression.  Per experiment with a dense run, a
    sparsifier and a quantiser, two named checks: accuracy (the
    sparsifier's shortfall against dense at most the quantiser's plus the
    accuracy thresholds; runs of ≥ acc_min_epochs epochs) and compression
    (dense uplink bytes over the method's: the sparsifier's the higher)."""
    pieces, acc, comp = [], [], []
    for key, by in sorted(method_experiments(runs).items()):
        sp = [m for m in SPARSIFIERS if m in by]
        qs = [m for m in QUANTISERS if m in by]
        if "sgd" not in by or not sp or not qs:
            continue
        dense_acc = _mean_acc(by["sgd"])
        dense_up = _bytes_up_per_step(by["sgd"])
        for s in sp:
            for q in qs:
                accs = [dense_acc, _mean_acc(by[s]), _mean_acc(by[q])]
                ups = [dense_up, _bytes_up_per_step(by[s]),
                       _bytes_up_per_step(by[q])]
                if None in accs or None in ups or 0 in ups:
                    continue
                gs, gq = accs[0] - accs[1], accs[0] - accs[2]
                rs, rq = ups[0] / ups[1], ups[0] / ups[2]
                pieces.append("%s: %s −%s pp at %s×, %s −%s pp at %s×" % (
                    _exp_name(key), s, fixed(gs, 2), fmt(rs, 3), q,
                    fixed(gq, 2), fmt(rq, 3)))
                if _long_enough(by[s] + by[q] + by["sgd"]):
                    acc.append(_gap_verdict(gs - gq))
                comp.append(HOLDS if rs > rq else FAILS)
    if not pieces:
        return ("no experiment with dense, sparsified and quantised runs; "
                "makes it: `%s` with `--compressor dgc` and `--compressor "
                "qsgd` too, and `--algorithm sgd`" % _train_cmd("topk"),
                NOT_RUN)
    if not acc:
        pieces.append("accuracy not judged (runs under %d epochs)"
                      % TH["acc_min_epochs"])
    return ("; ".join(pieces), judged([combine(acc), combine(comp)]))


def claim_survey_compute(bench_rows, timing):
    """S3: the sparsifiers' higher compression costs compute time: their
    median compression time above QSGD's on the same device, d and
    threads, at every density."""
    if not timing:
        return ("timings are left out of the byte-compared tables", NOT_RUN)
    pieces, verdicts = [], []
    for dev in sorted(bench_rows):
        rows = bench_rows[dev]
        q = {(r["d"], r["threads"]): r["median_s"] for r in rows
             if _ncomp(r["compressor"]) in QUANTISERS and r["median_s"]}
        for r in sorted(rows, key=lambda r: (r["compressor"], r["d"] or 0,
                                             r["density"] or 0,
                                             r["threads"] or 0)):
            t = q.get((r["d"], r["threads"]))
            if _ncomp(r["compressor"]) not in SPARSIFIERS or not t \
                    or r["median_s"] is None:
                continue
            ratio = r["median_s"] / t
            pieces.append("%s %s ρ=%s d=%s threads=%s: %s" % (
                dev, r["compressor"], fmt(r["density"]), fmt(r["d"]),
                fmt(r["threads"]), fmt(ratio, 3)))
            verdicts.append(HOLDS if ratio > TH["sparsifier_time_ratio_holds"]
                            else FAILS)
    if not pieces:
        return ("no bench rows with a sparsifier and QSGD; makes them: "
                "`gradcomp bench compress --csv F`", NOT_RUN)
    return ("time(sparsifier)/time(QSGD): " + "; ".join(pieces),
            combine(verdicts))


# --------------------------------------------------- the compressors' own

def _rows_of(contraction_rows, names):
    return [r for r in contraction_rows if _ncomp(r["compressor"]) in names]


def _where(r):
    return "%s d=%s" % (r["distribution"], fmt(r["d"]))


def claim_qsgd_variance(contraction_rows):
    """Q1: QSGD is unbiased with E‖Q(x)−x‖² ≤ min(d/s², √d/s)‖x‖²: the mean
    ω̂ = 1 − δ̂ mean over the trials against it, with s from the CSV's
    levels column (without one: √d, which holds for every s ≥ 1)."""
    pieces, verdicts = [], []
    for r in _rows_of(contraction_rows, ("qsgd",)):
        if r["delta_mean"] is None or not r["d"]:
            continue
        s = r.get("levels") if isinstance(r.get("levels"), float) else None
        bound = min(r["d"] / s ** 2, math.sqrt(r["d"]) / s) if s \
            else math.sqrt(r["d"])
        omega = 1 - r["delta_mean"]
        pieces.append((omega / bound, "%s s=%s: ω̂ %s vs %s" % (
            _where(r), fmt(s) if s else "any", fmt(omega, 4), fmt(bound, 4))))
        verdicts.append(HOLDS if omega <= bound * (1 + TH["omega_rel_slack"])
                        else FAILS)
    if not pieces:
        return ("no QSGD contraction rows; makes them: `gradcomp theory "
                "contraction --compressors qsgd --csv F`", NOT_RUN)
    near = max(pieces)
    return ("%d case(s), highest ω̂/bound %s: %s" % (
        len(pieces), fmt(near[0], 3), near[1]), combine(verdicts))


def _bits(r):
    b = r.get("bytes_mean")
    return 8 * b if isinstance(b, float) and math.isfinite(b) else None


def claim_qsgd_bits(contraction_rows):
    """Q2: with s = √d levels and Elias coding QSGD sends at most 2.8d + 32
    bits (Alistarh et al., recalled [P]); judged on rows whose levels are
    √d rounded; other s are shown, not judged (no published figure)."""
    cases, verdicts, other = [], [], 0
    for r in _rows_of(contraction_rows, ("qsgd",)):
        bits, s, d = _bits(r), r.get("levels"), r["d"]
        if bits is None or not isinstance(s, float) or not d:
            continue
        if abs(s - math.sqrt(d)) > 1:
            other += 1
            continue
        bound = TH["qsgd_bits_per_entry"] * d + 32
        cases.append((bits / bound, "%s s=%s: %s bits/entry" % (
            _where(r), fmt(s), fmt(bits / d, 3))))
        verdicts.append(HOLDS if bits <= bound else FAILS)
    rest = ("; %d row(s) at other s not judged" % other) if other else ""
    if not cases:
        return ("not run at s = √d%s; makes it: `gradcomp theory contraction "
                "--compressors qsgd --d 100000 --levels 316 --csv F`" % rest,
                NOT_RUN)
    most = max(cases)
    return ("%d row(s) at s = √d, %d within; highest: %s%s" % (
        len(cases), verdicts.count(HOLDS), most[1], rest), combine(verdicts))


def claim_dgc_ratio(contraction_rows, runs):
    """D1: DGC compresses gradients 270× to 600× (Lin et al., at 99.9%
    sparsity): the dense message's bytes over DGC's, on rows and runs at
    density ≤ dgc_density (other densities are not the paper's setting and
    are left out).  Dense: a contraction CSV's identity row of the same d
    and distribution (the same value precision: theory contraction codes
    float64), a training run's 4 d bytes per worker and step (float32)."""
    pieces, verdicts = [], []
    cases = []
    dense = {(r["d"], r["distribution"]): _bits(r)
             for r in _rows_of(contraction_rows, ("identity",))}
    for r in _rows_of(contraction_rows, ("dgc",)):
        full = dense.get((r["d"], r["distribution"]))
        if _bits(r) and full and r["density"] and \
                r["density"] <= TH["dgc_density"]:
            cases.append(("%s ρ=%s" % (_where(r), fmt(r["density"])),
                          full / _bits(r)))
    for run in runs:
        cfg = run.config
        rho = cfg.get("density") or 1
        if method_of(run) != "dgc" or not cfg.get("d") or not run.P or \
                rho > TH["dgc_density"]:
            continue
        up = _bytes_up_per_step([run])
        if up:
            cases.append(("%s-%s P=%s (%s)" % (run.dataset, run.model, run.P,
                                                run.rel),
                          4 * cfg["d"] * run.P / up))
    for label, ratio in sorted(cases):
        pieces.append("%s: %s×" % (label, fmt(ratio, 3)))
        verdicts.append(HOLDS if ratio >= TH["dgc_ratio_low"] else FAILS)
    if not pieces:
        return ("no DGC message sizes at ρ ≤ %s; makes them: `gradcomp theory "
                "contraction --compressors dgc,identity --densities 0.001 "
                "--csv F`"
                % fmt(TH["dgc_density"]), NOT_RUN)
    return ("; ".join(pieces), combine(verdicts))


def claim_bits_per_entry(contraction_rows, names, limit, command):
    """Bits per entry of a compressor's message against its paper's figure
    (`limit` bits per entry plus a header of sign_header_bits)."""
    pieces, verdicts = [], []
    for r in _rows_of(contraction_rows, names):
        bits = _bits(r)
        if bits is None or not r["d"]:
            continue
        pieces.append((bits / r["d"], "%s %s: %s" % (
            r["compressor"], _where(r), fmt(bits / r["d"], 4))))
        verdicts.append(HOLDS if bits <= limit * r["d"] +
                        TH["header_bits"] else FAILS)
    if not pieces:
        return ("no message sizes; makes them: `%s`" % command, NOT_RUN)
    most = max(pieces)
    return ("%d case(s), bits per entry at most %s (%s)" % (
        len(pieces), fmt(most[0], 4), most[1]), combine(verdicts))


def claim_scaled_sign_delta(contraction_rows):
    """ES1: scaled sign (EF-signSGD) is a δ-compressor with δ(x) ≥ 1/d on
    every input: the worst δ̂ over the trials against 1/d."""
    pieces, verdicts = [], []
    for r in _rows_of(contraction_rows, ("scaledsign",)):
        if r["delta_worst"] is None or not r["d"]:
            continue
        ratio = r["delta_worst"] * r["d"]
        pieces.append((ratio, "%s: δ̂ worst · d = %s" % (_where(r),
                                                        fmt(ratio, 4))))
        verdicts.append(HOLDS if ratio >= 1 - TH["topk_bound_rel_slack"]
                        else FAILS)
    if not pieces:
        return ("no scaled-sign contraction rows; makes them: `gradcomp "
                "theory contraction --compressors scaled-sign --csv F`",
                NOT_RUN)
    low = min(pieces)
    return ("%d case(s), lowest %s" % (len(pieces), low[1]),
            combine(verdicts))


def claim_bound_rows(bounds_rows, name, algos, command):
    """A theorem's rate, as `gradcomp theory bounds` prints it (docs/theory.md
    4.7): measured ≤ bound on every row that met the theorem's assumptions
    (refused rows are no evidence either way)."""
    pieces, verdicts, refused = [], [], 0
    for r in bounds_rows:
        if r["bound_name"] != name or (algos and r["algorithm"] not in algos):
            continue
        if r.get("status") == "refused":
            refused += 1
            continue
        m = r.get("measured") if "status" in r else r["measured_min_grad2"]
        b = r["bound"]
        if m is None or b is None or not math.isfinite(b):
            continue
        pieces.append((m / b if b else math.inf, r))
        verdicts.append(HOLDS if m <= b else FAILS)
    if not pieces:
        return ("no printed `%s` row (%d refused); makes one: `%s`"
                % (name, refused, command), NOT_RUN)
    near = max(pieces, key=lambda p: (p[0], p[1]["problem"]))
    r = near[1]
    return ("%d row(s) (%d refused), measured ≤ bound in %d; nearest: %s %s "
            "%s, measured/bound %s" % (
                len(pieces), refused, verdicts.count(HOLDS), r["problem"],
                r["algorithm"], r["compressor"], fmt(near[0], 3)),
            combine(verdicts))


# The claims, grouped by source work, in the paper's order: (id, claim,
# threshold text, rule).  A rule takes the Inputs below and returns (our
# measurement, verdict); a new claim is one function and one entry here.
class Inputs:
    def __init__(self, t1_rows=(), t2_facts=None, t5_pairs=(), t6=None,
                 runs=(), bench_rows=None, timing=True, bounds_rows=(),
                 nn_bounds=()):
        self.t1_rows, self.t5_pairs, self.runs = t1_rows, t5_pairs, runs
        self.t2_facts = t2_facts or {"toy": [], "sweep": [], "cycle9": {},
                                     "search": {}}
        self.t6 = t6 or {"fits": []}
        self.bench_rows = bench_rows or {}
        self.timing = timing
        self.bounds_rows = bounds_rows
        self.nn_bounds = nn_bounds


ACC_RULE = ("the method's final accuracy ≥ the baseline's − "
            "%(acc_gap_holds_pp)s pp in every experiment of ≥ "
            "%(acc_min_epochs)s epochs (partly: − %(acc_gap_partly_pp)s pp)")
BOUND_RULE = ("measured ≤ bound on every row printed (refused rows: no "
              "evidence)")
BOUNDS_CMD = "gradcomp theory bounds --csv F"

SOURCES = [
    ("thesis", "Bidirectional top-K (Zou, De Sterck and Liu, arXiv "
     "2209.15203; Zou's MMath thesis)", [
         ("1", "Bidirectional top-K reaches the accuracy of unidirectional",
          "bi − uni ≥ −%(acc_gap_holds_pp)s pp in every experiment of ≥ "
          "%(acc_min_epochs)s epochs (partly: ≥ −%(acc_gap_partly_pp)s pp)",
          lambda i: claim_accuracy(i.t5_pairs)),
         ("2", "The downlink saving |S|/K grows almost linearly with P",
          "slope ≥ %(support_slope_holds)s and R² ≥ %(support_r2_holds)s over "
          "≥ %(support_min_points)s values of P (partly: slope ≥ "
          "%(support_slope_partly)s)",
          lambda i: claim_support(i.t6["fits"])),
         ("3", "Bidirectional can converge better than unidirectional "
          "(counterexamples)",
          "cycle9 exact (uni period %(cycle9_period)s, mean "
          "%(cycle9_uni_mean)s; bi reaches F*); toy bi/uni plateau ≤ "
          "%(toy_bi_ratio_holds)s; bi lower for every seed; a check not run: "
          "at most partly (a search find adds evidence)",
          lambda i: claim_counterexamples(i.t2_facts)),
         ("4a", "Top-K's error sits below (1 − K/d)",
          "every error share ≤ (1 − K/d)(1 + %(topk_bound_rel_slack)s), with "
          "K/d the case's own k/d; holds needs a worst case over inputs",
          lambda i: claim_topk_bound(topk_cases(i.t1_rows, i.runs))),
         ("6", "The non-convex bound (docs/theory.md 4.3) holds on neural "
          "nets; how close its tightest rung (4.9) comes",
          "tightest rung/measured ≥ 1 in every row; rungs evaluated with "
          "measured constants (worst local L seen, f(x0), xi_t, ||E_t||², "
          "||gbar_t||²)",
          lambda i: claim_nn_bounds(i.nn_bounds)),
     ]),
    ("shi", "Top-K on bell-shaped gradients and Gaussian-k (Shi et al., "
     "arXiv 1911.08772)", [
         ("4b", "Top-K's error is near the Gaussian prediction on real "
          "gradients",
          "|share − (1 − ρ − 2τφ(τ))| ≤ %(gauss_share_holds_abs)s, ρ = K/d "
          "(partly: ≤ %(gauss_share_partly_abs)s; synthetic data alone: at "
          "most partly)",
          lambda i: claim_topk_gauss(topk_cases(i.t1_rows, i.runs))),
         ("4c", "On bell-shaped gradients top-K's error is below (1 − K/d)², "
          "far under the worst case 1 − K/d",
          "every error share ≤ (1 − K/d)² on bell-shaped synthetic data "
          "(worst of the trials) and on training gradients (epoch means); "
          "either not run: at most partly",
          lambda i: claim_topk_bell(topk_cases(i.t1_rows, i.runs))),
         ("5a", "Gaussian-k selects about K elements (its threshold assumes "
          "Gaussian gradients)",
          "count / k ∈ [%(low).3f, %(high).3f] on Gaussian data and on real "
          "gradients (P workers: count ≤ |S|); either not run: at most partly",
          lambda i: claim_gaussk_count(i.t1_rows, i.runs)),
         ("5b", "Gaussian-k is cheaper than exact top-K",
          "median time ratio < %(gaussk_time_ratio_holds)s on every bench "
          "case",
          lambda i: claim_gaussk_speed(i.bench_rows, i.timing)),
         ("5c", "Training with Gaussian-k reaches top-K's accuracy",
          ACC_RULE + "; baseline: top-K",
          lambda i: claim_accuracy_vs(i.runs, ("gaussk",), "topk",
                                      "`%s`, and `--compressor topk` beside "
                                      "it" % _train_cmd("gaussk"))),
     ]),
    ("survey", "Survey of Top-k, DGC and QSGD on GRACE + Horovod, restated "
     "on this toolkit's models and data", [
         ("S1", "Tuning each compression setting separately (the fairer "
          "comparison; here each method keeps its own step), compressed "
          "training can beat the dense baseline, more so as the model and "
          "the workers grow",
          "dense/compressed modelled time per step > %(speedup_holds)s at "
          "the largest d·P, "
          "and not lower (beyond %(speedup_rel_tol)s) for a larger d and P; "
          "either not run: at most partly",
          lambda i: claim_survey_speedup(i.runs, i.timing)),
         ("S2", "Sparsification (Top-k, DGC) keeps accuracy as quantisation "
          "(QSGD) does, at a higher compression",
          "sparsifier's accuracy shortfall vs dense ≤ QSGD's + "
          "%(acc_gap_holds_pp)s pp (partly: + %(acc_gap_partly_pp)s; ≥ "
          "%(acc_min_epochs)s epochs) and its uplink compression higher",
          lambda i: claim_survey_accuracy(i.runs)),
         ("S3", "The sparsifiers' higher compression costs compute time",
          "median time of top-K and DGC / QSGD's > "
          "%(sparsifier_time_ratio_holds)s on every bench case (same "
          "device, d, threads)",
          lambda i: claim_survey_compute(i.bench_rows, i.timing)),
     ]),
    ("own", "The compressors' and methods' own papers", [
         ("Q1", "QSGD (Alistarh et al.): unbiased with variance "
          "≤ min(d/s², √d/s)‖x‖²",
          "mean ω̂ ≤ bound·(1 + %(omega_rel_slack)s) in every case (s from "
          "the CSV; without it √d, the bound at every s)",
          lambda i: claim_qsgd_variance(i.t1_rows)),
         ("Q2", "QSGD with s = √d levels sends at most 2.8d + 32 bits",
          "bits ≤ %(qsgd_bits_per_entry)s d + 32 on every row with s = √d "
          "(rounded)",
          lambda i: claim_qsgd_bits(i.t1_rows)),
         ("Q3", "QSGD trains to dense SGD's accuracy", ACC_RULE,
          lambda i: claim_accuracy_vs(i.runs, ("qsgd",), "sgd",
                                      _with_dense("qsgd"))),
         ("D1", "DGC (Lin et al.) compresses gradients 270× to 600×",
          "dense / DGC message bytes ≥ %(dgc_ratio_low)s at ρ ≤ "
          "%(dgc_density)s "
          "(the paper's 99.9%% sparsity), every case",
          lambda i: claim_dgc_ratio(i.t1_rows, i.runs)),
         ("D2", "DGC trains to dense SGD's accuracy", ACC_RULE,
          lambda i: claim_accuracy_vs(i.runs, ("dgc",), "sgd",
                                      _with_dense("dgc"))),
         ("TG1", "TernGrad (Wen et al.): three levels, at most 2 bits per "
          "entry",
          "bits ≤ 2d + %(header_bits)s in every case",
          lambda i: claim_bits_per_entry(
              i.t1_rows, ("terngrad",), 2, "gradcomp theory contraction "
              "--compressors terngrad --csv F")),
         ("TG2", "TernGrad trains to dense SGD's accuracy", ACC_RULE,
          lambda i: claim_accuracy_vs(i.runs, ("terngrad",), "sgd",
                                      _with_dense("terngrad"))),
         ("SG1", "signSGD (Bernstein et al.): one bit per entry, 32× less "
          "than float32",
          "bits ≤ d + %(header_bits)s for sign and scaled sign, every case",
          lambda i: claim_bits_per_entry(
              i.t1_rows, ("sign", "scaledsign"), 1, "gradcomp theory "
              "contraction --compressors sign,scaled-sign --csv F")),
         ("ES1", "EF-signSGD (Karimireddy et al.): scaled sign is a "
          "δ-compressor with δ ≥ 1/d",
          "worst δ̂ ≥ 1/d in every case",
          lambda i: claim_scaled_sign_delta(i.t1_rows)),
         ("ES2", "EF-SGD's non-convex rate (Karimireddy et al., Theorem II; "
          "docs/theory.md 4.6)", BOUND_RULE,
          lambda i: claim_bound_rows(i.bounds_rows, "ef_sgd_4.6", (),
                                     BOUNDS_CMD)),
         ("ES3", "EF-signSGD (scaled sign with error feedback) trains to "
          "dense SGD's accuracy", ACC_RULE,
          lambda i: claim_accuracy_vs(i.runs, ("scaledsign",), "sgd",
                                      _with_dense("scaled-sign"))),
         ("DS1", "DoubleSqueeze (Tang et al.): compression both ways with "
          "error feedback converges at SGD's non-convex rate",
          BOUND_RULE + "; checked through the bound of docs/theory.md 4.3 "
          "(same form), not the paper's own constants",
          lambda i: claim_bound_rows(i.bounds_rows, "nonconvex_4.3",
                                     ("doublesqueeze",), BOUNDS_CMD)),
         ("EF21", "EF21 (Richtarik et al.): O(1/T) for mean ‖∇f‖² with any "
          "contractive compressor (docs/theory.md 4.6)", BOUND_RULE,
          lambda i: claim_bound_rows(i.bounds_rows, "ef21_3d", (),
                                     BOUNDS_CMD)),
         ("MS1", "Mem-SGD (Stich et al., Theorem 2.4): sparsified SGD with "
          "memory converges at SGD's rate", BOUND_RULE,
          lambda i: claim_bound_rows(
              i.bounds_rows, "mem_sgd_2.4", (),
              "gradcomp theory bounds --lr-schedule mem-sgd:a=1000 "
              "--csv F")),
     ]),
]

CLAIMS = [(cid, claim, rule, fn) for _, _, rows in SOURCES
          for cid, claim, rule, fn in rows]


def evaluate(inputs):
    """{claim id: (our measurement, verdict)} for every claim."""
    return {cid: rule(inputs) for cid, _, _, rule in CLAIMS}


def claims_doc(inputs, commands, files):
    th = dict(TH, low=TH["gaussk_count_low"], high=TH["gaussk_count_high"])
    results = evaluate(inputs)
    blocks = []
    for _, title, rows in SOURCES:
        body = []
        for cid, claim, rule, _ in rows:
            meas, verdict = results[cid]
            body.append([cid, claim, meas, rule % th, "**%s**" % verdict])
        blocks.append(Block(["#", "claim", "our measurement", "threshold",
                             "verdict"], body,
                            ["l", "p{3.2cm}", "p{7.4cm}", "p{3.6cm}", "l"],
                            subtitle=title))
    doc = Doc("Claims", "Published claims against our measurements",
              "One block per source work. Generated from the tables; "
              "thresholds are in `paper/thresholds.py`; the data are those of "
              "tables T1-T7. A claim whose evidence did not run says not run "
              "and names the command that makes it. The survey ran its own "
              "models and data sets on a GPU cluster (GRACE + Horovod); here "
              "its claims are measured on MNIST and Fashion-MNIST models "
              "with the workers simulated in one process and the network "
              "time from the α-β model (`--net-bandwidth`).",
              commands, files, blocks, show_files=False)
    return doc, results


# The ladder of docs/theory.md 4.9: each rung and the assumption it
# replaces by its measured value.
LADDER = [("r0_theorem", None), ("r1_delta", "top-K contraction sqrt(1-K/d)"),
          ("r2_xi", "max xi, unrolled"), ("r3_memory", "the memories' bound"),
          ("r4_m2", "max ||gbar||^2"), ("r5_gradient", "Lipschitz L||E_t||"),
          ("r6_inner", "the Young step")]


def _num(v):
    return v if isinstance(v, float) and math.isfinite(v) else None


def claim_nn_bounds(bruns):
    """6: the ladder of docs/theory.md 4.9, evaluated along `gradcomp train
    --bounds` runs, against the measured mean ||grad f(x_t)||^2: the
    tightest rung's ratio per run, and which replaced assumption cost the
    most (the largest factor between two consecutive rungs); bruns as
    figures.nn_bounds_runs.  Rows without rung columns fall back on the
    bound of 4.3 (ratio)."""
    pieces, tight, cost = [], [], {}
    for label, cfg, t in bruns:
        best, worst_step = [], None
        for r in t.rows:
            g2 = _num(r.get("grad2_mean"))
            vals = [_num(r.get(c)) for c, _ in LADDER]
            if g2 and any(v is not None for v in vals):
                best.append(min(v for v in vals if v is not None) / g2)
                for k in range(1, len(LADDER)):
                    a, b = vals[k - 1], vals[k]
                    if a and b and (worst_step is None
                                    or a / b > worst_step[0]):
                        worst_step = (a / b, LADDER[k][1])
            elif _num(r.get("ratio")) is not None:
                best.append(r["ratio"])
        if not best:
            continue
        tight += best
        # one value when the range rounds to one (not "1e+09–1e+09")
        lo, hi = "%.3g" % min(best), "%.3g" % max(best)
        text = "%s rho=%s: tightest rung/measured %s" % (
            label, cfg.get("density", "?"),
            lo if lo == hi else "%s–%s" % (lo, hi))
        if worst_step:
            text += " (costliest: %s, x%.2g)" % (worst_step[1], worst_step[0])
            cost[worst_step[1]] = cost.get(worst_step[1], 0) + 1
        pieces.append(text)
    if not tight:
        return ("no --bounds rows; makes them: `gradcomp train --bounds 1 "
                "--out DIR`", NOT_RUN)
    if cost:
        pieces.append("the costliest assumption: %s"
                      % max(sorted(cost), key=lambda k: cost[k]))
    return ("; ".join(pieces), HOLDS if min(tight) >= 1 else FAILS)
