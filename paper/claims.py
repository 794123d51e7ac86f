"""The claims table: each published claim, our measurement, a verdict.

Verdicts are holds / partly / fails / not run, decided only by the numbers
in thresholds.THRESHOLDS.  A claim whose data are missing says "not run";
nothing is inferred from absent data.
"""
import math

from render import Block, Doc, fmt, fixed, NOT_RUN
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
    return ("; ".join(pieces), combine(verdicts))


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
    """The claim (docs/theory.md 2.5, 7.10) is about Gaussian data: judged on
    the count a contraction CSV logs (selected_mean), never inferred from
    the error share (that would assume the answer).  A one-worker
    Gaussian-k training run logs its count too (support_union_over_k is
    then the nonzeros of its one message over K): shown, not judged, since
    real gradients are not Gaussian."""
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
        verdicts.append(HOLDS if TH["gaussk_count_low"] <= ratio <=
                        TH["gaussk_count_high"] else FAILS)
    if not pieces:
        pieces.append("no logged count on Gaussian data (the contraction "
                      "CSV has no `selected_mean` column; the count is not "
                      "inferred from the error share)")
    for run in runs:
        counts = [x for x in run.log.col("support_union_over_k")
                  if x is not None and math.isfinite(x)]
        if is_gaussk(str(run.config.get("compressor", ""))) \
                and run.P == 1 and counts:
            pieces.append("not judged, real gradients: %s-%s one-worker run "
                          "(%s), mean count / k = %s"
                          % (run.dataset, run.model, run.rel,
                             fmt(mean(counts), 3)))
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


# The claims, in the paper's order: (id, claim, threshold text, rule).
# A rule takes the Inputs below and returns (our measurement, verdict);
# a new claim is one function and one entry here.
class Inputs:
    def __init__(self, t1_rows=(), t2_facts=None, t5_pairs=(), t6=None,
                 runs=(), bench_rows=None, timing=True):
        self.t1_rows, self.t5_pairs, self.runs = t1_rows, t5_pairs, runs
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
    ("5a", "Gaussian-k selects about K elements (on Gaussian data)",
     "logged count / k ∈ [%(low).3f, %(high).3f] on Gaussian data",
     lambda i: claim_gaussk_count(i.t1_rows, i.runs)),
    ("5b", "Gaussian-k is cheaper than exact top-K",
     "median time ratio < %(gaussk_time_ratio_holds)s on every bench case",
     lambda i: claim_gaussk_speed(i.bench_rows, i.timing)),
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
