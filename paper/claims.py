"""The claims table: each published claim, our measurement, a verdict.

Verdicts are holds / partly / fails / not run, decided only by the numbers
in thresholds.THRESHOLDS.  A claim whose data are missing says "not run";
nothing is inferred from absent data.
"""
import math

from render import Block, Doc, fmt, fixed, NOT_RUN
import tables
from tables import gauss_share, is_topk, is_gaussk, is_gaussian_dist, mean
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
    pieces, verdicts = [], []
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
        verdicts.append(HOLDS if ok else FAILS)
    for toy in facts["toy"]:
        if toy["uni"] is None or toy["bi"] is None:
            continue
        ratio = toy["bi"] / toy["uni"] if toy["uni"] else math.inf
        pieces.append("toy plateau t∈[%d,%d): bi/uni = %s"
                      % (TH["toy_window"] + (fmt(ratio, 3),)))
        verdicts.append(HOLDS if ratio <= TH["toy_bi_ratio_holds"] else
                        PARTLY if ratio < 1 else FAILS)
    for sw in facts["sweep"]:
        if not sw["n"]:
            continue
        share = sw["wins"] / sw["n"]
        pieces.append("seed sweep: bi lower in %d/%d" % (sw["wins"], sw["n"]))
        verdicts.append(HOLDS if share >= TH["sweep_win_share_holds"] else
                        PARTLY if share >= TH["sweep_win_share_partly"]
                        else FAILS)
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
    # the threshold names cycle9, the toy and the seed sweep: a check that
    # did not run cannot hold, so it caps the verdict at partly
    missing = [name for name, ran in (
        ("cycle9", bool(cyc)),
        ("zou-toy", any(t["uni"] is not None and t["bi"] is not None
                        for t in facts["toy"])),
        ("zou-toy --sweep", any(sw["n"] for sw in facts["sweep"])))
        if not ran]
    v = combine(verdicts)
    if missing:
        pieces.append("not run: " + ", ".join(missing))
        if v == HOLDS:
            v = PARTLY
    return ("; ".join(pieces), v)


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
                    "real": False, "gaussian":
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
            "real": True, "gaussian": False, "epoch_means": True})
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


def _judge_count(ratio):
    return HOLDS if TH["gaussk_count_low"] <= ratio <= \
        TH["gaussk_count_high"] else FAILS


def claim_gaussk_count(contraction_rows, runs=()):
    """Gaussian-k (Shi et al.) claims its threshold selects about K entries
    because gradients are near Gaussian (docs/theory.md 2.5, 7.10).
    Judged on the count a contraction CSV logs on Gaussian data
    (selected_mean), never inferred from the error share (that would
    assume the answer), and on real gradients: a one-worker Gaussian-k
    training run logs its count (support_union_over_k is then the
    nonzeros of its one message over K).  Both are judged: the claim is
    made for training."""
    pieces, verdicts = [], []
    for r in contraction_rows:
        if not (is_gaussk(r["compressor"]) and r["k"]
                and is_gaussian_dist(r["distribution"])):
            continue
        n = next((r[c] for c in COUNT_COLUMNS
                  if isinstance(r.get(c), float)), None)
        if n is None:
            continue
        ratio = n / r["k"]
        pieces.append("%s ρ=%s: selected %s of k = %s (%s)"
                      % (r["distribution"], fmt(r["density"]), fmt(n),
                         fmt(r["k"]), fmt(ratio, 3)))
        verdicts.append(_judge_count(ratio))
    if not pieces:
        pieces.append("no logged count on Gaussian data (the contraction "
                      "CSV has no `selected_mean` column; the count is not "
                      "inferred from the error share)")
    for run in runs:
        counts = [x for x in run.log.col("support_union_over_k")
                  if x is not None and math.isfinite(x)]
        if is_gaussk(str(run.config.get("compressor", ""))) \
                and run.P == 1 and counts:
            ratio = mean(counts)
            pieces.append("real gradients, %s-%s one-worker run (%s): mean "
                          "count / k = %s" % (run.dataset, run.model, run.rel,
                                              fmt(ratio, 3)))
            verdicts.append(_judge_count(ratio))
    return ("; ".join(pieces), combine(verdicts))


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


# ------------------------------------------------ more claims of the sources

def claim_xi_bi(trajectories):
    """2b, the thesis (docs/theory.md 4.4): bi's bound is uni's with ξ_bi in
    place of ξ, and ξ_bi can be the smaller.  An existence claim: one
    trajectory with mean ξ_bi < mean ξ shows it."""
    pieces, smaller = [], 0
    for t in sorted(trajectories, key=lambda t: t.rel):
        xi, xb = mean(t.col("xi")), mean(t.col("xi_bi"))
        if xi is None or xb is None:
            continue
        pieces.append("%s: mean ξ %s, mean ξ_bi %s" % (t.rel, fmt(xi), fmt(xb)))
        smaller += xb < xi
    if not pieces:
        return ("no trajectory with both ξ and ξ_bi", NOT_RUN)
    return ("; ".join(pieces), HOLDS if smaller else FAILS)


SPARSIFIERS = ("topk", "dgc", "gaussk")
# what may differ between runs compared across compressors
COMPRESSOR_FREE = ("compressor", "density", "density_down", "k", "k_down",
                   "lr", "seed", "rank", "momentum")


def _comp(run):
    return tables._ncomp(str(run.config.get("compressor", "")))


def _ratio_up(run):
    """Uplink compression ratio: dense float32 bytes (4 d per worker and
    step) over the logged bytes up per step."""
    d, up = run.config.get("d"), tables._run_bytes_per_step(run, "bytes_up")
    if not (isinstance(d, (int, float)) and run.P and up):
        return None
    return 4.0 * d * run.P / up


def _long_enough(run):
    return tables.epochs_of(run) >= TH["acc_min_epochs"]


def claim_sparse_vs_quant(runs):
    """S1, the survey (Top-k, DGC, QSGD on GRACE + Horovod): sparsification
    keeps the accuracy of quantisation at a higher compression ratio.
    Compared within one setting (all but the compressor and its settings,
    the lr and the seed), runs of >= acc_min_epochs epochs."""
    groups = {}
    for run in runs:
        c = _comp(run)
        if run.algo not in ("uni", "bi") or c not in SPARSIFIERS + ("qsgd",) \
                or not _long_enough(run):
            continue
        key = tables.run_setting(run, drop=COMPRESSOR_FREE)
        groups.setdefault(key, {}).setdefault(c, []).append(run)
    pieces, verdicts = [], []
    for key in sorted(groups):
        g = groups[key]
        if "qsgd" not in g:
            continue
        q = g["qsgd"][0]
        qa, qr = tables.final_accuracy_pct(q), _ratio_up(q)
        for c in SPARSIFIERS:
            if c not in g or qa is None or qr is None:
                continue
            r = g[c][0]
            a, ratio = tables.final_accuracy_pct(r), _ratio_up(r)
            if a is None or ratio is None:
                continue
            gap = a - qa
            pieces.append("%s-%s P=%s %s: %s %s%% at %s× vs qsgd %s%% at %s×"
                          % (r.dataset, r.model, r.P, r.algo, c, fixed(a, 2),
                             fmt(ratio, 3), fixed(qa, 2), fmt(qr, 3)))
            higher = ratio > qr
            verdicts.append(HOLDS if higher and gap >= -TH["acc_gap_holds_pp"]
                            else PARTLY if higher and
                            gap >= -TH["acc_gap_partly_pp"] else FAILS)
    if not pieces:
        return ("no setting with a sparsifier and QSGD trained %d+ epochs "
                "(the survey: CIFAR-10 and ImageNet CNNs; here the MNIST and "
                "Fashion-MNIST nets)" % TH["acc_min_epochs"], NOT_RUN)
    return ("; ".join(pieces), combine(verdicts))


def claim_compression_costs_time(bench_rows, timing):
    """S2, the survey: the higher compression of sparsification costs
    compute time: top-K and DGC take longer than QSGD on the same d and
    threads."""
    if not timing:
        return ("timings are left out of the byte-compared tables", NOT_RUN)
    pieces, verdicts = [], []
    for dev in sorted(bench_rows):
        rows = bench_rows[dev]
        q = {(r["d"], r["threads"]): r for r in rows
             if tables._ncomp(r["compressor"]) == "qsgd" and r["median_s"]}
        for r in rows:
            c = tables._ncomp(r["compressor"])
            key = (r["d"], r["threads"])
            if c not in ("topk", "dgc") or key not in q or not r["median_s"]:
                continue
            ratio = r["median_s"] / q[key]["median_s"]
            pieces.append("%s %s ρ=%s d=%s threads=%s: %s× QSGD's time"
                          % (dev, c, fmt(r["density"]), fmt(key[0]),
                             fmt(key[1]), fmt(ratio, 3)))
            verdicts.append(HOLDS if ratio > 1 else FAILS)
    if not pieces:
        return ("no bench rows with QSGD and top-K or DGC", NOT_RUN)
    return ("; ".join(pieces), combine(verdicts))


def claim_tuned_beats_dense(runs):
    """S3, the survey: with each method tuned on its own (here: the tuned
    learning rates of docs/theory.md 6), compressed training can beat the
    dense baseline as the workers grow.  Holds: a compressed method at or
    above SGD at the largest P, with a gap no smaller than at the smallest
    P; partly: at or above SGD at some P."""
    g = tables.experiments([r for r in runs if _long_enough(r)])
    by_model = {}
    for ek, algos in g.items():
        if "sgd" not in algos or not ({"uni", "bi"} & set(algos)):
            continue
        sgd = tables.mean_final_accuracy(algos["sgd"])[0]
        best = max((tables.mean_final_accuracy(algos[a])[0]
                    for a in ("uni", "bi") if a in algos),
                   key=lambda x: -math.inf if x is None else x)
        d = dict(ek)
        if sgd is None or best is None:
            continue
        model = "%s-%s" % (d["dataset"].strip('"'), d["model"].strip('"'))
        by_model.setdefault(model, {})[int(d["workers"])] = best - sgd
    pieces, verdicts = [], []
    for model in sorted(by_model):
        gaps = by_model[model]
        if len(gaps) < 2:
            continue
        Ps = sorted(gaps)
        pieces.append("%s: best compressed − SGD %s" % (model, ", ".join(
            "%s pp at P=%d" % (fixed(gaps[P], 2), P) for P in Ps)))
        lo, hi = gaps[Ps[0]], gaps[Ps[-1]]
        verdicts.append(HOLDS if hi >= 0 and hi >= lo else
                        PARTLY if any(v >= 0 for v in gaps.values())
                        else FAILS)
    if not pieces:
        return ("no model with uni or bi and SGD runs of %d+ epochs at two "
                "or more P (the survey: CIFAR-10 and ImageNet CNNs)"
                % TH["acc_min_epochs"], NOT_RUN)
    return ("; ".join(pieces), combine(verdicts))


def claim_qsgd_variance(contraction_rows):
    """QSGD (Alistarh et al.): E‖Q(x) − x‖² ≤ min(d/s², √d/s)‖x‖², at most
    √d‖x‖² for every s ≥ 1 (the contraction CSV does not log s)."""
    pieces, verdicts, seen = [], [], set()
    for r in contraction_rows:
        # QSGD ignores the density: one row per distribution and d
        if tables._ncomp(r["compressor"]) != "qsgd" or r["delta_mean"] is None \
                or not r["d"] or (r["distribution"], r["d"]) in seen:
            continue
        seen.add((r["distribution"], r["d"]))
        omega, bound = 1 - r["delta_mean"], math.sqrt(r["d"])
        pieces.append("%s d=%s: trial-mean ω %s vs √d = %s"
                      % (r["distribution"], fmt(r["d"]), fmt(omega, 4),
                         fmt(bound, 4)))
        verdicts.append(HOLDS if omega <= bound else FAILS)
    if not pieces:
        return ("no QSGD contraction rows", NOT_RUN)
    return ("; ".join(pieces), combine(verdicts))


def claim_scaled_sign(contraction_rows):
    """EF-signSGD (Karimireddy et al.): the scaled sign (‖x‖₁/d) sign(x) is a
    δ-compressor with δ = ‖x‖₁²/(d‖x‖²) ≥ 1/d on every input."""
    pieces, verdicts, seen = [], [], set()
    for r in contraction_rows:
        # the scaled sign ignores the density: one row per distribution, d
        if tables._ncomp(r["compressor"]) != "scaledsign" or \
                r["delta_worst"] is None or not r["d"] or \
                (r["distribution"], r["d"]) in seen:
            continue
        seen.add((r["distribution"], r["d"]))
        pieces.append("%s d=%s: worst δ %s vs 1/d = %s"
                      % (r["distribution"], fmt(r["d"]),
                         fmt(r["delta_worst"], 4), fmt(1 / r["d"], 4)))
        verdicts.append(HOLDS if r["delta_worst"] >= (1 / r["d"]) * (
            1 - TH["topk_bound_rel_slack"]) else FAILS)
    if not pieces:
        return ("no scaled-sign contraction rows", NOT_RUN)
    return ("; ".join(pieces), combine(verdicts))


def claim_dgc_ratio(runs):
    """DGC (Lin et al.): 270-600x smaller gradients without losing accuracy:
    a DGC run against the SGD run of the same setting (>= acc_min_epochs
    epochs): bytes up ratio >= dgc_ratio_holds and accuracy within
    acc_gap_holds_pp."""
    groups = {}
    for run in runs:
        if not _long_enough(run):
            continue
        c = "sgd" if run.algo == "sgd" else _comp(run)
        if c not in ("sgd", "dgc"):
            continue
        key = tables.run_setting(run, drop=COMPRESSOR_FREE + ("algorithm",))
        groups.setdefault(key, {}).setdefault(c, []).append(run)
    pieces, verdicts = [], []
    for key in sorted(groups):
        g = groups[key]
        if "sgd" not in g or "dgc" not in g:
            continue
        s, r = g["sgd"][0], g["dgc"][0]
        su = tables._run_bytes_per_step(s, "bytes_up")
        ru = tables._run_bytes_per_step(r, "bytes_up")
        sa, ra = tables.final_accuracy_pct(s), tables.final_accuracy_pct(r)
        if not su or not ru or sa is None or ra is None:
            continue
        ratio = su / ru
        pieces.append("%s-%s P=%s: bytes up %s× smaller, accuracy %s vs SGD "
                      "%s" % (r.dataset, r.model, r.P, fmt(ratio, 3),
                              fixed(ra, 2), fixed(sa, 2)))
        ok_ratio = ratio >= TH["dgc_ratio_holds"]
        ok_acc = ra - sa >= -TH["acc_gap_holds_pp"]
        verdicts.append(HOLDS if ok_ratio and ok_acc else
                        PARTLY if ok_ratio or ok_acc else FAILS)
    if not pieces:
        return ("no DGC run beside an SGD run of the same setting (%d+ "
                "epochs; DGC's own: ResNet, AlexNet, LSTMs)"
                % TH["acc_min_epochs"], NOT_RUN)
    return ("; ".join(pieces), combine(verdicts))


def claim_bits(runs, compressor, bits):
    """signSGD (1 bit per entry, 32x less than float32) and TernGrad (2
    bits, 16x): the uplink compression ratio of training runs with that
    compressor, dense float32 bytes over the bytes logged, at least
    32/bits less the share its per-message header may take
    (bits_ratio_slack)."""
    want = 32.0 / bits
    pieces, verdicts = [], []
    for run in sorted(runs, key=lambda r: r.rel):
        if _comp(run) != compressor or run.algo == "sgd":
            continue
        ratio = _ratio_up(run)
        if ratio is None:
            continue
        pieces.append("%s-%s P=%s %s (%s): %s× less than float32"
                      % (run.dataset, run.model, run.P, run.algo, run.rel,
                         fmt(ratio, 4)))
        verdicts.append(HOLDS if ratio >= want * (1 - TH["bits_ratio_slack"])
                        else FAILS)
    if not pieces:
        return ("no training run with --compressor %s" % compressor, NOT_RUN)
    return ("; ".join(pieces), combine(verdicts))


def claim_bound_holds(bounds_rows, name, algorithms=None):
    """A method's convergence bound (docs/theory.md 4.7), evaluated where
    the run meets its theorem's assumptions (status ok), against the
    quantity it bounds: measured ≤ bound on every such row.  A refused row
    is no evidence either way."""
    ok = [r for r in bounds_rows if r.get("bound_name") == name
          and r.get("status", "ok") == "ok" and r.get("bound") is not None
          and not math.isnan(r["bound"]) and r.get("measured") is not None
          and (algorithms is None or r.get("algorithm") in algorithms)]
    if not ok:
        return ("no run meets the theorem's assumptions (`gradcomp theory "
                "bounds`; refused rows are no evidence)", NOT_RUN)
    bad = [r for r in ok if r["measured"] > r["bound"]]
    tight = max(ok, key=lambda r: (r["measured"] / r["bound"]
                                   if r["bound"] else math.inf))
    txt = ("%d row(s) within their assumptions, %d above the bound; "
           "tightest: %s %s/%s measured %s vs bound %s"
           % (len(ok), len(bad), tight["problem"], tight["algorithm"],
              tight["compressor"], fmt(tight["measured"]),
              fmt(tight["bound"])))
    return (txt, FAILS if bad else HOLDS)


# The claims, in the paper's order: (id, claim, threshold text, rule).
# A rule takes the Inputs below and returns (our measurement, verdict);
# a new claim is one function and one entry here.
class Inputs:
    def __init__(self, t1_rows=(), t2_facts=None, t5_pairs=(), t6=None,
                 runs=(), bench_rows=None, timing=True, trajectories=(),
                 bounds_rows=()):
        self.t1_rows, self.t5_pairs, self.runs = t1_rows, t5_pairs, runs
        self.trajectories, self.bounds_rows = trajectories, bounds_rows
        self.t2_facts = t2_facts or {"toy": [], "sweep": [], "cycle9": {},
                                     "search": {}}
        self.t6 = t6 or {"fits": []}
        self.bench_rows = bench_rows or {}
        self.timing = timing


CLAIMS = [
    ("1", "Bidirectional top-K reaches the accuracy of unidirectional",
     "bi − uni ≥ −%(acc_gap_holds_pp)s pp in every experiment of ≥ "
     "%(acc_min_epochs)s epochs (partly: ≥ −%(acc_gap_partly_pp)s pp)",
     lambda i: claim_accuracy(i.t5_pairs)),
    ("2", "The downlink saving |S|/K grows almost linearly with P",
     "slope ≥ %(support_slope_holds)s and R² ≥ %(support_r2_holds)s over "
     "≥ %(support_min_points)s values of P (partly: slope ≥ "
     "%(support_slope_partly)s)",
     lambda i: claim_support(i.t6["fits"])),
    ("2b", "Thesis: bi's bound is uni's with ξ_bi for ξ, and ξ_bi can be "
     "the smaller (docs/theory.md 4.4)",
     "mean ξ_bi < mean ξ on some trajectory (theory trajectory)",
     lambda i: claim_xi_bi(i.trajectories)),
    ("3", "Bidirectional can converge better than unidirectional "
     "(counterexamples)",
     "cycle9 exact (uni period %(cycle9_period)s, mean %(cycle9_uni_mean)s; "
     "bi reaches F*); toy bi/uni plateau ≤ %(toy_bi_ratio_holds)s; bi lower "
     "for every seed",
     lambda i: claim_counterexamples(i.t2_facts)),
    ("4a", "Top-K's error sits below (1 − K/d)",
     "every error share ≤ (1 − K/d)(1 + %(topk_bound_rel_slack)s), with K/d "
     "the case's own k/d; holds needs a worst case over inputs",
     lambda i: claim_topk_bound(topk_cases(i.t1_rows, i.runs))),
    ("4b", "Top-K's error is near the Gaussian prediction on real gradients",
     "|share − (1 − ρ − 2τφ(τ))| ≤ %(gauss_share_holds_abs)s, ρ = K/d "
     "(partly: ≤ %(gauss_share_partly_abs)s; synthetic data alone: at "
     "most partly)",
     lambda i: claim_topk_gauss(topk_cases(i.t1_rows, i.runs))),
    ("5a", "Gaussian-k selects about K elements (Shi et al.)",
     "logged count / k ∈ [%(low).3f, %(high).3f] on Gaussian data and on "
     "real gradients (one-worker training runs)",
     lambda i: claim_gaussk_count(i.t1_rows, i.runs)),
    ("5b", "Gaussian-k is cheaper than exact top-K",
     "median time ratio < %(gaussk_time_ratio_holds)s on every bench case",
     lambda i: claim_gaussk_speed(i.bench_rows, i.timing)),
    ("S1", "Survey (Top-k, DGC, QSGD on GRACE + Horovod; its nets: CIFAR-10 "
     "and ImageNet CNNs, here the MNIST and Fashion-MNIST ones): "
     "sparsification keeps the accuracy of quantisation at a higher "
     "compression ratio",
     "same setting, ≥ %(acc_min_epochs)s epochs: sparsifier ratio > "
     "QSGD's and accuracy ≥ QSGD's − %(acc_gap_holds_pp)s pp (partly: "
     "− %(acc_gap_partly_pp)s pp)",
     lambda i: claim_sparse_vs_quant(i.runs)),
    ("S2", "Survey: the higher compression costs compute time",
     "top-K and DGC median time > QSGD's on the same d and threads",
     lambda i: claim_compression_costs_time(i.bench_rows, i.timing)),
    ("S3", "Survey: tuned per method, compressed training can beat the "
     "dense baseline as the workers grow",
     "≥ %(acc_min_epochs)s epochs, tuned lr: best of uni/bi ≥ SGD at the "
     "largest P with a gap ≥ the smallest P's (partly: ≥ SGD at some P)",
     lambda i: claim_tuned_beats_dense(i.runs)),
    ("Q", "QSGD: E‖Q(x)−x‖² ≤ min(d/s², √d/s)‖x‖²",
     "trial-mean ω ≤ √d (the bound for every s ≥ 1) on every row",
     lambda i: claim_qsgd_variance(i.t1_rows)),
    ("D", "DGC: gradients 270–600× smaller without losing accuracy",
     "bytes up ≥ %(dgc_ratio_holds)s× smaller than SGD's and accuracy ≥ "
     "SGD's − %(acc_gap_holds_pp)s pp, same setting, ≥ %(acc_min_epochs)s "
     "epochs (partly: one of the two)",
     lambda i: claim_dgc_ratio(i.runs)),
    ("B1", "signSGD: 1 bit per entry, 32× less than float32",
     "uplink ratio ≥ 32 (1 − %(bits_ratio_slack)s) on every sign run",
     lambda i: claim_bits(i.runs, "sign", 1)),
    ("B2", "TernGrad: 2 bits per entry, 16× less than float32",
     "uplink ratio ≥ 16 (1 − %(bits_ratio_slack)s) on every terngrad run",
     lambda i: claim_bits(i.runs, "terngrad", 2)),
    ("E1", "EF-signSGD: the scaled sign is a δ-compressor, δ ≥ 1/d",
     "worst δ ≥ 1/d on every scaled-sign row",
     lambda i: claim_scaled_sign(i.t1_rows)),
    ("E2", "EF-SGD (Karimireddy et al.): min_t ‖∇f‖² bound with error "
     "feedback",
     "measured ≤ bound on every row within the assumptions (ef_sgd_4.6)",
     lambda i: claim_bound_holds(i.bounds_rows, "ef_sgd_4.6")),
    ("E3", "EF21 (Richtárik et al.): its mean_t ‖∇f‖² bound",
     "measured ≤ bound on every row within the assumptions (ef21_3d)",
     lambda i: claim_bound_holds(i.bounds_rows, "ef21_3d")),
    ("E4", "Mem-SGD (Stich et al.): bound on F − F* at the weighted "
     "average of the iterates",
     "measured ≤ bound on every row within the assumptions (mem_sgd_2.4)",
     lambda i: claim_bound_holds(i.bounds_rows, "mem_sgd_2.4")),
    ("E5", "DoubleSqueeze: converges within the non-convex bound with its "
     "aggregation error",
     "measured ≤ bound (nonconvex_4.3) on every doublesqueeze row within "
     "the assumptions",
     lambda i: claim_bound_holds(i.bounds_rows, "nonconvex_4.3",
                                 ("doublesqueeze",))),
]


def evaluate(inputs):
    """{claim id: (our measurement, verdict)} for every claim."""
    return {cid: rule(inputs) for cid, _, _, rule in CLAIMS}


def claims_doc(inputs, commands, files):
    th = dict(TH, low=TH["gaussk_count_low"], high=TH["gaussk_count_high"])
    results = evaluate(inputs)
    body = []
    for cid, claim, rule, _ in CLAIMS:
        meas, verdict = results[cid]
        body.append([cid, claim, meas, rule % th, "**%s**" % verdict])
    doc = Doc("Claims", "Published claims against our measurements",
              "Generated from the tables; thresholds are in "
              "`paper/thresholds.py`; the data are those of tables T1-T7.",
              commands, files,
              [Block(["#", "claim", "our measurement", "threshold", "verdict"],
                     body, ["l", "p{3.2cm}", "p{7.4cm}", "p{3.6cm}", "l"])],
              show_files=False)
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
        text = "%s rho=%s: tightest rung/measured %.3g–%.3g" % (
            label, cfg.get("density", "?"), min(best), max(best))
        if worst_step:
            text += " (costliest: %s, x%.2g)" % (worst_step[1], worst_step[0])
            cost[worst_step[1]] = cost.get(worst_step[1], 0) + 1
        pieces.append(text)
    if not tight:
        return ("no --bounds rows", NOT_RUN)
    if cost:
        pieces.append("the costliest assumption: %s"
                      % max(sorted(cost), key=lambda k: cost[k]))
    return ("; ".join(pieces), HOLDS if min(tight) >= 1 else FAILS)


def add_nn_bounds_row(doc, results, bruns):
    """Append claim 6 to the claims table, only when --bounds rows exist
    (so the byte-compared fixture tables do not change)."""
    meas, verdict = claim_nn_bounds(bruns)
    results["6"] = (meas, verdict)
    doc.blocks[0].rows.append(
        ["6", "The non-convex bound (docs/theory.md 4.3) holds on neural nets; "
         "how close its tightest rung (4.9) comes", meas,
         "tightest rung/measured ≥ 1 in every row; rungs evaluated with "
         "measured constants (worst local L seen, f(x0), xi_t, ||E_t||², "
         "||gbar_t||²)",
         "**%s**" % verdict])
