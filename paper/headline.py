"""The headline table: the four results of the bidirectional top-K thesis
in one place, each with its verdict from the claims table, before the
full tables.  Every number comes from the tables' own data (no new
measurement, no number typed in)."""

from inputs import commands_of
from render import Block, Doc, fmt, fixed, signed, NOT_RUN
from tables import label_of, mean


def _accuracy(pairs):
    if not pairs:
        return NOT_RUN + " (no configuration with both uni and bi runs)"
    return "; ".join("%s, %s epoch(s): uni %s, bi %s (bi − uni %s pp)"
                     % (p["exp"], ",".join(map(str, p["epochs"])),
                        fixed(p["uni"], 2), fixed(p["bi"], 2),
                        signed(p["bi"] - p["uni"], 2)) for p in pairs)


def _saving(t6, pairs):
    ours = t6["fig"]["ours"]
    pieces = []
    for p in pairs:
        u, b = p.get("down_uni"), p.get("down_bi")
        if u and b:
            pieces.append("%s: downlink bytes per step uni %s, bi %s (%s×)"
                          % (p["exp"], fmt(u), fmt(b), fmt(u / b, 3)))
    for label in sorted(ours):
        pts = ours[label]
        pieces.append("%s: |S|/K = %s" % (label, ", ".join(
            "%s at P=%s" % (fmt(pts[P], 3), P) for P in sorted(pts))))
    for f in t6["fits"]:
        if f["slope"] is not None:
            pieces.append("%s %s slope %s (R² %s)" % (
                f["who"], f["model"], fmt(f["slope"], 3), fmt(f["r2"], 4)))
    return "; ".join(pieces) if pieces else NOT_RUN


def _xi(trajectories):
    pieces = []
    for t in trajectories:
        xi, xib = mean(t.col("xi")), mean(t.col("xi_bi"))
        pieces.append("%s: mean ξ %s, mean ξ_bi %s over %d steps"
                      % (label_of(t), fmt(xi), fmt(xib), len(t.rows)))
    return "; ".join(pieces) if pieces else NOT_RUN


def _counterexamples(facts):
    pieces = []
    u, b = facts["cycle9"].get("uni"), facts["cycle9"].get("bi")
    if u and b:
        pieces.append("2-d cycle: uni loops with period %s and mean F−F* "
                      "%s, bi reaches F−F* = %s" % (u["period"], u["mean"],
                                                   b["final"]))
    for toy in facts["toy"]:
        if toy["uni"] and toy["bi"] is not None:
            pieces.append("100-d toy: bi plateau %s of uni's"
                          % fmt(toy["bi"] / toy["uni"], 3))
    for sw in facts["sweep"]:
        if sw["n"]:
            pieces.append("bi lower for %d of %d start seeds"
                          % (sw["wins"], sw["n"]))
    c = facts["search"]
    if c:
        pieces.append("search: bi strictly better in %d exact instances of %d"
                      % (c.get("bi_better", 0), sum(c.values())))
    return "; ".join(pieces) if pieces else NOT_RUN


def scale_note(runs):
    """What the training runs are, when they are smaller than the
    reference grid (docs/theory.md 6: 100 epochs, the whole training set):
    which command replaces them.  None for runs at full scale."""
    small = [r for r in runs if r.config.get("train_subset")
             or (r.config.get("epochs") or 0) < 100]
    if not small:
        return None
    eps = sorted({str(r.config.get("epochs", "?")) for r in small})
    subs = sorted({str(r.config.get("train_subset")) for r in small
                   if r.config.get("train_subset")})
    return ("The training runs here are smaller than the reference grid "
            "(%s epoch(s)%s; `experiments/reproduce --quick` runs such a "
            "grid in minutes): their verdicts speak for that scale.  The "
            "full grid, `experiments/reproduce` (MNIST and Fashion-MNIST, "
            "MLP and CNN, P up to 100, 100 epochs on all the data; hours), "
            "replaces them; `make paper` then judges those runs."
            % (",".join(eps), ", training subset of %s images"
               % ",".join(subs) if subs else ""))


def headline_doc(t2_facts, trajectories, t5_pairs, t6, verdicts, runs):
    """verdicts: claims.evaluate()'s {id: (text, verdict)}."""
    def v(*ids):
        return ", ".join("%s: **%s**" % (i, verdicts[i][1]) for i in ids
                         if i in verdicts)
    rows = [
        ["bi reaches uni's accuracy", _accuracy(t5_pairs), v("1"),
         "T5, F3, F7"],
        ["downlink saving |S|/K grows with P", _saving(t6, t5_pairs), v("2"),
         "T6, F4"],
        ["ξ (uni) against ξ_bi (bi)", _xi(trajectories), "", "T3, F2"],
        ["bi can converge where uni cycles", _counterexamples(t2_facts),
         v("3"), "T2, F1"],
    ]
    files = [r.log for r in runs] + list(trajectories)
    return Doc("H", "Headline results of bidirectional top-K",
               "The thesis in four lines; the verdicts are those of the "
               "claims table (thresholds in `paper/thresholds.py`), the full "
               "data in the tables and figures named.",
               commands_of(files), [], [Block(
                   ["result", "our measurement", "claim", "see"], rows,
                   ["p{3cm}", "p{9.6cm}", "p{2.4cm}", "l"])],
               notes=[n for n in [scale_note(runs)] if n],
               show_files=False)
