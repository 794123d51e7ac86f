#!/usr/bin/env python3
"""test_claims -- the verdict rules of the claims table and the grouping
they rely on, driven by small fixtures to every verdict (holds / partly /
fails / not run).  Run by `make check` through paper/test-claims;
standalone: python3 paper/test_claims.py -v.  Standard library only.
"""
import csv
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import claims   # noqa: E402
import inputs   # noqa: E402
import render   # noqa: E402
import tables   # noqa: E402
from claims import HOLDS, PARTLY, FAILS, NOT_RUN   # noqa: E402

LOG_HEADER = ("epoch,steps,train_loss,test_acc,bytes_up,bytes_down,"
              "support_union_over_k,xi,delta,time_compute,time_compress,"
              "time_aggregate,time_total")
CONTRACTION_HEADER = ("compressor,distribution,d,density,k,trials,"
                      "delta_worst,delta_mean,delta_topk_theory,gauss_share")


def config(**kw):
    """A config.json like gradcomp train's (the fields the paper reads)."""
    c = {"program": "gradcomp train", "version": "0.1.0",
         "dataset": "mnist", "model": "mnist-mlp", "d": 50890, "workers": 10,
         "partition": "iid", "batch": 10, "epochs": 1, "lr": 0.04,
         "algorithm": "uni", "compressor": "topk", "density": 0.001,
         "density_down": 0.001, "k": 50, "k_down": 50, "seed": 0,
         "threads": 2, "train_subset": 20000, "machine": "x"}
    c.update(kw)
    return c


class Fixture(unittest.TestCase):
    """A temporary results folder with helpers to write producer files."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="test-claims-")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def fresh(self):
        """An empty results folder again (a second case in one test)."""
        self.tearDown()
        self.setUp()

    def run_dir(self, name, cfg, accs, deltas=None, support=None,
                bytes_up=1000, net_comm_s=None):
        """A `gradcomp train --out` folder: one log row per accuracy (200
        steps an epoch); net_comm_s adds the network model's column."""
        d = os.path.join(self.dir, name)
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        with open(os.path.join(d, "log.csv"), "w") as f:
            f.write(LOG_HEADER + (",net_comm_s" if net_comm_s is not None
                                  else "") + "\n")
            for e, a in enumerate(accs):
                dl = deltas[e] if deltas else "nan"
                s = support if support is not None else 5.0
                f.write("%d,%d,0.5,%s,%s,9000,%s,3.0,%s,0.1,0.1,0.1,0.3%s\n"
                        % (e + 1, 200 * (e + 1), a, bytes_up, s, dl,
                           "" if net_comm_s is None else ",%s" % net_comm_s))

    def csv_file(self, name, header, rows):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(header + "\n")
            for r in rows:
                f.write(",".join(str(v) for v in r) + "\n")

    def results(self):
        return inputs.discover([self.dir], lambda m: None)

    def claims(self, timing=True):
        res = self.results()
        _, t1 = tables.table_contraction(res)
        _, t2 = tables.table_counterexamples(res)
        _, t5 = tables.table_accuracy(res, {})
        _, t6 = tables.table_communication(res, {})
        _, bench = tables.table_speed(res)
        _, bounds = tables.table_bounds(res)
        return claims.evaluate(claims.Inputs(t1, t2, t5, t6, res.runs, bench,
                                             timing, bounds_rows=bounds))


# ----------------------------------------------------------- grouping (T5)

class Grouping(Fixture):
    def test_runs_of_different_settings_are_never_averaged(self):
        # the case: a full-data run and a 20000-image quick run
        self.run_dir("full-uni", config(train_subset=0, epochs=1), [0.9222])
        self.run_dir("quick-uni", config(), [0.8822])
        self.run_dir("quick-bi", config(algorithm="bi", lr=0.1), [0.8839])
        doc, pairs = tables.table_accuracy(self.results(), {})
        rows = doc.blocks[0].rows
        ours = [r for r in rows if r[3] != "reference (docs/theory.md 6)"]
        self.assertEqual(len(ours), 2, rows)
        self.assertNotIn("90.22", [c for r in rows for c in r])
        by_setting = {r[3]: r for r in ours}
        self.assertEqual(by_setting["train_subset=0"][4], "92.22")
        self.assertEqual(by_setting["train_subset=20000"][4], "88.22")
        # only the quick setting has both methods
        self.assertEqual(len(pairs), 1)
        # 0.8822 read back and scaled to percent: a rounding or two of 88,
        # ~3e-14, well inside assertAlmostEqual's default 7 places
        self.assertAlmostEqual(pairs[0]["uni"], 88.22)

    def test_seeds_are_averaged_and_threads_ignored(self):
        self.run_dir("s0", config(seed=0, threads=1), [0.90])
        self.run_dir("s1", config(seed=1, threads=8), [0.92])
        doc, _ = tables.table_accuracy(self.results(), {})
        (row,) = doc.blocks[0].rows
        self.assertEqual(row[4], "91.00")
        self.assertEqual(row[8], "2")

    def test_one_method_of_two_settings_is_not_averaged(self):
        self.run_dir("a", config(lr=0.04), [0.90])
        self.run_dir("b", config(lr=0.05), [0.92])
        self.run_dir("c", config(algorithm="bi", lr=0.1), [0.91])
        doc, pairs = tables.table_accuracy(self.results(), {})
        (row,) = doc.blocks[0].rows
        self.assertEqual(row[4], "2 settings")
        self.assertEqual(pairs, [])

    def test_interrupted_run_is_another_setting(self):
        self.run_dir("done", config(epochs=3), [0.8, 0.85, 0.9])
        self.run_dir("cut", config(epochs=3, seed=1), [0.8])
        doc, _ = tables.table_accuracy(self.results(), {})
        self.assertEqual(len(doc.blocks[0].rows), 2)


# ------------------------------------------------------------ claim 1

def pair(uni, bi, epochs=20):
    return {"exp": "mnist-mlp P=10", "uni": uni, "bi": bi,
            "epochs": [epochs]}


class Claim1Accuracy(unittest.TestCase):
    def verdict(self, pairs):
        return claims.claim_accuracy(pairs)[1]

    def test_holds(self):
        self.assertEqual(self.verdict([pair(90.0, 89.8)]), HOLDS)

    def test_partly(self):
        self.assertEqual(self.verdict([pair(90.0, 89.0)]), PARTLY)
        self.assertEqual(self.verdict([pair(90.0, 89.9), pair(90.0, 85.0)]),
                         PARTLY)

    def test_fails(self):
        self.assertEqual(self.verdict([pair(90.0, 88.0)]), FAILS)

    def test_not_run(self):
        self.assertEqual(self.verdict([]), NOT_RUN)
        # short runs are shown, never judged
        self.assertEqual(self.verdict([pair(90.0, 80.0, epochs=1)]), NOT_RUN)


# ------------------------------------------------------------ claim 2

def fit(pts):
    return [tables.fit_support("mnist-mlp bi", "ours", pts)]


class Claim2Support(unittest.TestCase):
    def verdict(self, pts):
        return claims.claim_support(fit(pts))[1]

    def test_holds(self):
        self.assertEqual(self.verdict({10: 8.5, 20: 17.0, 50: 42.0}), HOLDS)

    def test_partly_on_slope(self):
        self.assertEqual(self.verdict({10: 5.0, 20: 10.0, 50: 25.0}), PARTLY)

    def test_partly_on_r2(self):
        # slope 0.8 but far from a line: R² < 0.98 must stop "holds"
        pts = {10: 20.0, 20: 5.0, 50: 44.0, 100: 80.0}
        f = fit(pts)[0]
        self.assertGreaterEqual(f["slope"], 0.7)
        self.assertLess(f["r2"], 0.98)
        self.assertEqual(self.verdict(pts), PARTLY)

    def test_fails(self):
        self.assertEqual(self.verdict({10: 3.0, 20: 3.5, 50: 4.0}), FAILS)

    def test_not_run(self):
        self.assertEqual(claims.claim_support([])[1], NOT_RUN)
        # two P values always lie on a line: no slope, no verdict
        self.assertEqual(self.verdict({10: 8.0, 20: 30.0}), NOT_RUN)
        self.assertIsNone(fit({10: 8.0, 20: 30.0})[0]["r2"])


# ------------------------------------------------------------ claim 3

def facts(cycle_ok=True, toy_ratio=None, wins=None):
    from fractions import Fraction as F
    f = {"toy": [], "sweep": [], "cycle9": {}, "search": {}}
    if cycle_ok is not None:
        f["cycle9"] = {
            "uni": {"period": 9 if cycle_ok else 4, "mean": F(9, 256),
                    "max": F(9, 128)},
            "bi": {"period": 1, "final": F(0)}}
    if toy_ratio is not None:
        f["toy"].append({"uni": 1.0, "bi": toy_ratio})
    if wins is not None:
        f["sweep"].append({"n": 5, "wins": wins})
    return f


class Claim3Counterexamples(unittest.TestCase):
    def verdict(self, f):
        return claims.claim_counterexamples(f)[1]

    def test_holds(self):
        self.assertEqual(self.verdict(facts(True, 0.6, 5)), HOLDS)

    def test_a_named_check_not_run_stops_holds(self):
        self.assertEqual(self.verdict(facts(True, 0.6)), PARTLY)
        self.assertEqual(self.verdict(facts(True)), PARTLY)

    def test_partly(self):
        self.assertEqual(self.verdict(facts(None, 0.95)), PARTLY)
        self.assertEqual(self.verdict(facts(True, 0.6, 3)), PARTLY)
        self.assertEqual(self.verdict(facts(False, 0.6)), PARTLY)

    def test_fails(self):
        self.assertEqual(self.verdict(facts(False, 1.2, 0)), FAILS)

    def test_not_run(self):
        self.assertEqual(self.verdict(facts(None)), NOT_RUN)


class Claim3Search(Fixture):
    HEADER = ("P,d,alpha,targets,x0,uni_limit,bi_limit,verdict,arithmetic,"
              "ties_low,ties_high")

    def search_facts(self, ties):
        self.csv_file("search.csv", self.HEADER,
                      [[2, 2, 0.5, "(0 -1 0 1)", "(-3 -1)", 0.03, 0,
                        "bi_better", "exact", ties, ties]])
        _, f = tables.table_counterexamples(self.results())
        return f

    def test_tie_free_find_alone_is_partly(self):
        # the threshold names cycle9, the toy and the sweep: with only the
        # search run, the claim cannot hold on checks that never ran
        f = self.search_facts(0)
        self.assertEqual(f["search"], {"bi_better": 1})
        txt, v = claims.claim_counterexamples(f)
        self.assertEqual(v, PARTLY)
        self.assertIn("not run: cycle9", txt)
        full = facts(True, 0.6, 5)
        full["search"] = f["search"]
        self.assertEqual(claims.claim_counterexamples(full)[1], HOLDS)

    def test_tie_decided_find_does_not_count(self):
        # a verdict a top-K tie decided is no evidence for the claim
        f = self.search_facts(2)
        self.assertEqual(f["search"], {"bi_better_tied": 1})
        self.assertEqual(claims.claim_counterexamples(f)[1], NOT_RUN)


# ------------------------------------------------------- claims 4a, 4b, 5a

def contraction_row(compressor="topk", dist="gaussian", d=100000,
                    density=0.001, k=100, worst=0.0124, mean=0.0126,
                    extra=()):
    r = [compressor, dist, d, density, k, 3, worst, mean, k / d,
         tables.gauss_share(k / d)]
    return r + list(extra)


class Claim4aBound(Fixture):
    def verdict(self, rows, runs=()):
        self.csv_file("c.csv", CONTRACTION_HEADER, rows)
        for i, deltas in enumerate(runs):
            self.run_dir("run%d" % i, config(), [0.9] * len(deltas), deltas)
        return self.claims()["4a"]

    def test_holds(self):
        self.assertEqual(self.verdict([contraction_row()])[1], HOLDS)

    def test_uses_each_cases_own_k_over_d(self):
        # d = 50890, k = 50: K/d = 0.000983 < ρ = 0.001.  δ̂ = 0.00099 meets
        # K/d; a rule on 1 − ρ would call it a violation.
        row = contraction_row(d=50890, k=50, worst=0.00099, mean=0.00099)
        self.assertEqual(self.verdict([row])[1], HOLDS)

    def test_fails(self):
        self.assertEqual(self.verdict([contraction_row(worst=0.0005)])[1],
                         FAILS)
        # an epoch mean below K/d has a step below it
        self.assertEqual(self.verdict([], runs=[[0.0009]])[1], FAILS)

    def test_partly(self):
        rows = [contraction_row(), contraction_row(dist="laplace",
                                                   worst=0.0005)]
        self.assertEqual(self.verdict(rows)[1], PARTLY)

    def test_not_run(self):
        self.assertEqual(self.verdict([])[1], NOT_RUN)
        # epoch means alone cannot show a worst-case bound holds
        txt, v = self.verdict([], runs=[[0.012, 0.013]])
        self.assertEqual(v, NOT_RUN)
        self.assertIn("epoch", txt)

    def test_other_compressors_are_not_judged_by_topk(self):
        # random-K's δ̂ falls below K/d on some draws: not a top-K case
        rows = [contraction_row(), contraction_row("randk", worst=0.0009)]
        self.assertEqual(self.verdict(rows)[1], HOLDS)


class Claim4bGaussian(Fixture):
    def verdict(self, rows=(), runs=()):
        self.csv_file("c.csv", CONTRACTION_HEADER, rows)
        for i, deltas in enumerate(runs):
            self.run_dir("run%d" % i, config(), [0.9] * len(deltas), deltas)
        return self.claims()["4b"]

    # K/d = 50/50890 for the runs; δ̂ = 1 − share
    g = tables.gauss_share(50 / 50890)

    def test_holds(self):
        self.assertEqual(self.verdict(runs=[[1 - self.g + 0.002]])[1], HOLDS)

    def test_partly(self):
        self.assertEqual(self.verdict(runs=[[1 - self.g - 0.03]])[1], PARTLY)
        # Gaussian synthetic data alone: at most partly
        self.assertEqual(self.verdict(rows=[contraction_row()])[1], PARTLY)

    def test_fails(self):
        self.assertEqual(self.verdict(runs=[[1 - self.g - 0.2]])[1], FAILS)

    def test_not_run(self):
        self.assertEqual(self.verdict()[1], NOT_RUN)
        # a distribution *named* like a gradient is not a real gradient
        row = contraction_row(dist="real-grad")
        self.assertEqual(self.verdict(rows=[row])[1], NOT_RUN)


class Claim5aCount(Fixture):
    header = CONTRACTION_HEADER + ",selected_mean"

    def verdict(self, counts, real=None, P=1):
        self.csv_file("c.csv", self.header,
                      [contraction_row("gaussk", density=rho, k=int(rho * 1e5),
                                       extra=[n])
                       for rho, n in counts])
        if real is not None:
            self.run_dir("gk", config(compressor="gaussk", workers=P), [0.9],
                         support=real)
        return self.claims()["5a"]

    def test_holds(self):
        self.assertEqual(self.verdict([(0.001, 89), (0.01, 969)], 0.9)[1],
                         HOLDS)

    def test_partly(self):
        self.assertEqual(self.verdict([(0.001, 89), (0.01, 400)], 0.9)[1],
                         PARTLY)
        self.fresh()
        # Gaussian data alone: the real-gradient check did not run
        txt, v = self.verdict([(0.001, 89), (0.01, 969)])
        self.assertEqual(v, PARTLY)
        self.assertIn("real gradients: not run", txt)

    def test_fails(self):
        self.assertEqual(self.verdict([(0.001, 20)], 0.1)[1], FAILS)
        self.fresh()
        self.assertEqual(self.verdict([(0.001, 20)])[1], FAILS)

    def test_real_gradient_counts_are_judged(self):
        # the case: a one-worker run keeps 0.0133 k on MNIST
        # gradients; with Gaussian data in the window the claim is partly
        txt, v = self.verdict([(0.001, 97)], 0.0133)
        self.assertEqual(v, PARTLY)
        self.assertIn("0.0133", txt)
        self.assertEqual(self.claims()["5a"][1], PARTLY)

    def test_real_counts_alone_fail(self):
        txt, v = self.verdict([], 0.0133)
        self.assertEqual(v, FAILS)

    def test_many_workers_bound_the_count_from_above(self):
        # |S|/k = 0.2 with P = 4: every worker kept at most 0.2 k
        self.assertEqual(self.verdict([], 0.2, P=4)[1], FAILS)
        # |S|/k = 3 with P = 4 bounds nothing from below: not judged
        self.fresh()
        txt, v = self.verdict([], 3.0, P=4)
        self.assertEqual(v, NOT_RUN)
        self.assertIn("not judged", txt)

    def test_not_run_without_a_logged_count(self):
        # an error share that matches the Gaussian one exactly is not a count
        self.csv_file("c.csv", CONTRACTION_HEADER,
                      [contraction_row("gaussk")])
        txt, v = self.claims()["5a"]
        self.assertEqual(v, NOT_RUN)
        self.assertIn("not inferred", txt)


# ------------------------------------------------------------ claim 5b

def bench(compressor, median):
    return {"compressor": compressor, "d": 1e6, "density": 0.001,
            "threads": 1, "median_s": median}


class Claim5bSpeed(unittest.TestCase):
    def verdict(self, rows, timing=True):
        return claims.claim_gaussk_speed({"cpu": rows}, timing)[1]

    def test_holds(self):
        self.assertEqual(self.verdict([bench("topk", 2.0),
                                       bench("gaussk", 1.0)]), HOLDS)

    def test_fails(self):
        self.assertEqual(self.verdict([bench("topk", 1.0),
                                       bench("gaussk", 2.0)]), FAILS)

    def test_partly(self):
        rows = [bench("topk", 1.0), bench("gaussk", 0.5)]
        other = dict(bench("topk", 1.0), density=0.01)
        rows += [other, dict(bench("gaussk", 3.0), density=0.01)]
        self.assertEqual(self.verdict(rows), PARTLY)

    def test_not_run(self):
        self.assertEqual(self.verdict([bench("topk", 1.0)]), NOT_RUN)
        self.assertEqual(self.verdict([bench("topk", 1.0),
                                       bench("gaussk", 0.5)], False), NOT_RUN)


# ------------------------------------------------------------ claim 4c

class Claim4cBellShaped(Fixture):
    """(1 − K/d)² = 0.998001 at K/d = 0.001; the runs' K/d = 50/50890."""

    def verdict(self, rows=(), runs=()):
        self.csv_file("c.csv", CONTRACTION_HEADER, rows)
        for i, deltas in enumerate(runs):
            self.run_dir("run%d" % i, config(), [0.9] * len(deltas), deltas)
        return self.claims()["4c"]

    def test_holds(self):
        self.assertEqual(self.verdict([contraction_row()], [[0.012]])[1],
                         HOLDS)

    def test_fails(self):
        # δ̂ 0.0015: share 0.9985 > 0.998 (still above K/d: no 4a failure)
        self.assertEqual(self.verdict([contraction_row(dist="laplace",
                                                       worst=0.0015)],
                                      [[0.0012]])[1], FAILS)

    def test_partly(self):
        # synthetic only: the real-gradient check did not run
        self.assertEqual(self.verdict([contraction_row()])[1], PARTLY)
        self.fresh()
        self.assertEqual(self.verdict([contraction_row()], [[0.0012]])[1],
                         PARTLY)

    def test_not_run(self):
        self.assertEqual(self.verdict()[1], NOT_RUN)
        # the equal-magnitude worst case is not bell-shaped: not a case
        self.assertEqual(self.verdict([contraction_row(
            dist="equal", worst=0.001, mean=0.001)])[1], NOT_RUN)


# -------------------------------------- accuracy against a baseline (5c, ...)

class AccuracyAgainstBaseline(Fixture):
    def runs(self, gaps, epochs=10, baseline="sgd", comp="qsgd"):
        """One experiment: the baseline at 90% and `comp` 90 − gap %."""
        alg = "sgd" if baseline == "sgd" else "uni"
        self.run_dir("base", config(algorithm=alg, compressor=baseline,
                                    epochs=epochs, lr=0.03), [0.9] * epochs)
        for i, g in enumerate(gaps):
            self.run_dir("m%d" % i, config(compressor=comp, epochs=epochs,
                                           seed=i),
                         [(90.0 - g) / 100] * epochs)

    def test_each_compressor_row(self):
        for cid, comp, base in (("Q3", "qsgd", "sgd"), ("D2", "dgc", "sgd"),
                                ("TG2", "terngrad", "sgd"),
                                ("ES3", "scaled-sign", "sgd"),
                                ("5c", "gaussk", "topk")):
            for gap, want in ((0.2, HOLDS), (1.0, PARTLY), (3.0, FAILS)):
                self.fresh()
                self.runs([gap], baseline=base, comp=comp)
                txt, v = self.claims()[cid]
                self.assertEqual(v, want, (cid, gap, txt))

    def test_settings_are_never_averaged(self):
        # two step sizes of QSGD (one far below): not one method's mean
        self.runs([0.2])
        self.run_dir("other-lr", config(compressor="qsgd", epochs=10,
                                        lr=0.5), [0.5] * 10)
        self.assertEqual(self.claims()["Q3"][1], NOT_RUN)
        # bidirectional runs are another method, not mixed into uni's
        self.fresh()
        self.runs([0.2])
        self.run_dir("bi", config(algorithm="bi", compressor="qsgd",
                                  epochs=10), [0.5] * 10)
        self.assertEqual(self.claims()["Q3"][1], HOLDS)

    def test_short_runs_are_shown_not_judged(self):
        self.runs([5.0], epochs=2)
        txt, v = self.claims()["Q3"]
        self.assertEqual(v, NOT_RUN)
        self.assertIn("85.00", txt)

    def test_not_run_names_the_command(self):
        txt, v = self.claims()["D2"]
        self.assertEqual(v, NOT_RUN)
        self.assertIn("--compressor dgc", txt)


# ------------------------------------------------------- the survey, S1-S3

class SurveySpeedup(Fixture):
    """Dense and top-K runs with the network model's column; seconds per
    step = (0.1 + 0.1 + 0.1 + net) / 200."""

    def pair(self, P, d, dense_net, topk_net):
        self.run_dir("sgd-%d-%d" % (P, d), config(algorithm="sgd", workers=P,
                                                  d=d), [0.9],
                     net_comm_s=dense_net)
        self.run_dir("uni-%d-%d" % (P, d), config(workers=P, d=d), [0.9],
                     net_comm_s=topk_net)

    def test_holds(self):
        self.pair(2, 50890, 1.0, 0.1)
        self.pair(8, 50890, 4.0, 0.2)
        self.assertEqual(self.claims()["S1"][1], HOLDS)

    def test_fails(self):
        self.pair(2, 50890, 0.0, 0.5)
        self.pair(8, 50890, 0.0, 1.0)
        self.assertEqual(self.claims()["S1"][1], FAILS)

    def test_partly(self):
        # beats at P = 8 but less than at P = 2: does not grow
        self.pair(2, 50890, 4.0, 0.1)
        self.pair(8, 50890, 1.0, 0.2)
        self.assertEqual(self.claims()["S1"][1], PARTLY)
        self.fresh()
        # one (d, P): growth not run, so at most partly
        self.pair(2, 50890, 4.0, 0.1)
        self.assertEqual(self.claims()["S1"][1], PARTLY)

    def test_not_run(self):
        self.run_dir("sgd", config(algorithm="sgd"), [0.9])
        self.run_dir("uni", config(), [0.9])
        txt, v = self.claims()["S1"]
        self.assertEqual(v, NOT_RUN)
        self.assertIn("--net-bandwidth", txt)
        self.pair(8, 50890, 4.0, 0.2)
        self.assertEqual(self.claims(timing=False)["S1"][1], NOT_RUN)


class SurveyAccuracy(Fixture):
    def runs(self, topk, qsgd, epochs=10):
        """(accuracy %, uplink bytes per epoch) of top-K and QSGD beside a
        dense run at 90% sending 40000 bytes an epoch."""
        self.run_dir("sgd", config(algorithm="sgd", epochs=epochs),
                     [0.9] * epochs, bytes_up=40000)
        for name, (acc, up) in (("topk", topk), ("qsgd", qsgd)):
            self.run_dir(name, config(compressor=name, epochs=epochs),
                         [acc / 100] * epochs, bytes_up=up)

    def test_holds(self):
        self.runs((89.8, 100), (89.9, 4000))
        self.assertEqual(self.claims()["S2"][1], HOLDS)

    def test_fails(self):
        self.runs((85.0, 8000), (89.9, 4000))
        self.assertEqual(self.claims()["S2"][1], FAILS)

    def test_partly(self):
        # accuracy kept, compression lower than QSGD's
        self.runs((89.8, 8000), (89.9, 4000))
        self.assertEqual(self.claims()["S2"][1], PARTLY)
        self.fresh()
        # short runs: accuracy not judged, compression higher: partly
        self.runs((80.0, 100), (89.9, 4000), epochs=2)
        self.assertEqual(self.claims()["S2"][1], PARTLY)

    def test_not_run(self):
        self.run_dir("sgd", config(algorithm="sgd"), [0.9])
        self.run_dir("topk", config(), [0.9])
        txt, v = self.claims()["S2"]
        self.assertEqual(v, NOT_RUN)
        self.assertIn("qsgd", txt)


class SurveyCompute(unittest.TestCase):
    def verdict(self, rows, timing=True):
        return claims.claim_survey_compute({"cpu": rows}, timing)[1]

    def test_holds(self):
        self.assertEqual(self.verdict([bench("qsgd", 1.0),
                                       bench("topk", 2.0),
                                       bench("dgc", 3.0)]), HOLDS)

    def test_fails(self):
        self.assertEqual(self.verdict([bench("qsgd", 1.0),
                                       bench("topk", 0.5)]), FAILS)

    def test_partly(self):
        self.assertEqual(self.verdict([bench("qsgd", 1.0), bench("topk", 0.5),
                                       bench("dgc", 3.0)]), PARTLY)

    def test_not_run(self):
        self.assertEqual(self.verdict([bench("topk", 1.0)]), NOT_RUN)
        self.assertEqual(self.verdict([bench("qsgd", 1.0),
                                       bench("topk", 2.0)], False), NOT_RUN)


# ------------------------------------------- the compressors' own claims

BYTES_HEADER = CONTRACTION_HEADER + ",selected_mean,levels,bytes_mean"


def sized_row(compressor, nbytes, levels=1, d=100000, density=0.001,
              worst=0.5, mean=0.5):
    return contraction_row(compressor, d=d, density=density,
                           k=int(density * d), worst=worst, mean=mean,
                           extra=[int(density * d), levels, nbytes])


class CompressorClaims(Fixture):
    def verdict(self, cid, rows, header=BYTES_HEADER):
        self.fresh()
        self.csv_file("c.csv", header, rows)
        return self.claims()[cid]

    def check(self, cid, holds, fails, not_run):
        self.assertEqual(self.verdict(cid, holds)[1], HOLDS, cid)
        self.assertEqual(self.verdict(cid, fails)[1], FAILS, cid)
        txt, v = self.verdict(cid, not_run)
        self.assertEqual(v, NOT_RUN, cid)
        self.assertIn("`gradcomp theory", txt)

    def test_qsgd_variance_uses_the_rows_levels(self):
        # d = 10^5: s = 1 gives √d = 316.2; s = 4 gives min(6250, 79.06)
        self.check("Q1", [sized_row("qsgd", 1, mean=1 - 100)],
                   [sized_row("qsgd", 1, levels=4, mean=1 - 100)], [])
        # without a levels column: √d, the bound for every s
        self.assertEqual(self.verdict("Q1", [contraction_row(
            "qsgd", mean=1 - 300)], CONTRACTION_HEADER)[1], HOLDS)

    def test_qsgd_bits_at_sqrt_d_levels(self):
        # 2.8 d + 32 bits = 35004 bytes at d = 10^5
        self.check("Q2", [sized_row("qsgd", 30000, levels=316)],
                   [sized_row("qsgd", 40000, levels=316)],
                   [sized_row("qsgd", 30000, levels=1)])

    def test_dgc_ratio(self):
        # dense (identity) 400000 bytes: 1000 bytes is 400x, 2000 bytes 200x
        dense = sized_row("identity", 400000)
        self.check("D1", [dense, sized_row("dgc", 1000)],
                   [dense, sized_row("dgc", 2000)],
                   [dense, sized_row("dgc", 1000, density=0.01)])
        # without an identity row the dense size is unknown: not judged
        self.assertEqual(self.verdict("D1", [sized_row("dgc", 1000)])[1],
                         NOT_RUN)

    def test_dgc_ratio_of_a_training_run(self):
        # 4 d P = 2035600 bytes a step against 1000/200 = 5: 4e5x
        self.run_dir("dgc", config(compressor="dgc"), [0.9])
        self.assertEqual(self.claims()["D1"][1], HOLDS)

    def test_terngrad_bits(self):
        self.check("TG1", [sized_row("terngrad", 25000)],
                   [sized_row("terngrad", 30000)], [sized_row("topk", 1)])

    def test_sign_bits(self):
        # measured: 12502 and 12510 bytes at d = 10^5 (float64 scale)
        self.check("SG1", [sized_row("sign", 12502),
                           sized_row("scaled-sign", 12510)],
                   [sized_row("sign", 25000)], [])

    def test_scaled_sign_delta(self):
        self.check("ES1", [sized_row("scaled-sign", 1, worst=2e-5)],
                   [sized_row("scaled-sign", 1, worst=5e-6)], [])


BOUNDS_HEADER = ("problem,algorithm,compressor,density,steps,lr,L,gamma,"
                 "xi_max,measured_min_grad2,measured_mean_grad2,bound,"
                 "bound_name,bounds,measured,status,failed_assumption")


class RateClaims(Fixture):
    """ES2, DS1, EF21, MS1: measured ≤ bound on every printed row."""

    def verdict(self, cid, name, algo, measured, bound, status="ok"):
        self.fresh()
        self.csv_file("b.csv", BOUNDS_HEADER, [[
            "toy", algo, "topk", 0.01, 100, 0.01, 1, 0.9, 3, 1, 2, bound,
            name, "min_t_grad2", measured, status,
            "" if status == "ok" else "P = 3 (theorem: one worker)"]])
        return self.claims()[cid]

    def test_each_rate(self):
        for cid, name, algo in (("ES2", "ef_sgd_4.6", "uni"),
                                ("DS1", "nonconvex_4.3", "doublesqueeze"),
                                ("EF21", "ef21_3d", "ef21"),
                                ("MS1", "mem_sgd_2.4", "uni")):
            self.assertEqual(self.verdict(cid, name, algo, 1, 5)[1], HOLDS)
            self.assertEqual(self.verdict(cid, name, algo, 6, 5)[1], FAILS)
            txt, v = self.verdict(cid, name, algo, 1, "nan", "refused")
            self.assertEqual(v, NOT_RUN, cid)
            self.assertIn("1 refused", txt)
        # DS1 reads DoubleSqueeze's rows only
        self.assertEqual(self.verdict("DS1", "nonconvex_4.3", "uni", 6,
                                      5)[1], NOT_RUN)


class EveryClaimHasARow(unittest.TestCase):
    def test_ids_unique_and_in_the_doc(self):
        ids = [c[0] for c in claims.CLAIMS]
        self.assertEqual(len(ids), len(set(ids)))
        doc, res = claims.claims_doc(claims.Inputs(), [], [])
        shown = [r[0] for b in doc.blocks for r in b.rows]
        self.assertEqual(shown, ids)
        # nothing ran: every claim says so
        self.assertEqual({v for _, v in res.values()}, {NOT_RUN})


# ------------------------------------------------------------ T1 constants

class T1Constants(unittest.TestCase):
    def check(self, compressor, worst, mean=0.5, d=100000, k=100):
        r = dict(zip(CONTRACTION_HEADER.split(","),
                     contraction_row(compressor, d=d, k=k, worst=worst,
                                     mean=mean)))
        return tables.guarantee(r)[0], tables.guarantee_check(r)

    def test_each_compressor_has_its_own_constant(self):
        self.assertEqual(self.check("topk", 0.0124), ("δ ≥ K/d", "yes"))
        self.assertEqual(self.check("topk", 0.0009), ("δ ≥ K/d", "NO"))
        self.assertEqual(self.check("scaled-sign", 0.4), ("δ ≥ 1/d", "yes"))
        # random-K meets K/d in expectation only: a ratio, never "NO"
        self.assertEqual(self.check("randk", 0.0005, mean=0.001),
                         ("E δ = K/d", "mean 1×"))
        text, chk = self.check("qsgd", -300, mean=-199)
        self.assertEqual(text, "ω ≤ √d")
        self.assertTrue(chk.startswith("mean 0.632"), chk)
        for c in ("gaussk", "dgc", "threshold", "terngrad", "fp16"):
            self.assertEqual(self.check(c, 0.0001), ("—", "—"))


# ------------------------------------------------------ inputs and output

class Inputs(Fixture):
    def test_extra_columns_are_read(self):
        # a producer that adds a column (keeping the old ones) still parses
        self.csv_file("s.csv", "P,d,alpha,targets,x0,uni_limit,bi_limit,"
                      "verdict,steps", [[2, 2, 0.5, "(1 1)", "(0 0)", 0, 0,
                                         "bi_better", 100]])
        res = self.results()
        (t,) = res.files["search"]
        self.assertEqual(t.rows[0]["steps"], 100.0)

    def test_quoted_commas_are_one_field(self):
        self.csv_file("b.csv", "problem,algorithm,compressor,density,steps,"
                      "lr,L,gamma,xi_max,measured_min_grad2,"
                      "measured_mean_grad2,bound,bound_name",
                      [['"quadratic:P=4,d=100"', "uni", "topk", 0.01, 10,
                        0.01, 1, 0.9, 3, 1e-3, 1e-2, 5, "nonconvex_4.3"]])
        (t,) = self.results().files["bounds"]
        self.assertEqual(t.rows[0]["problem"], "quadratic:P=4,d=100")

    def test_refused_bounds_are_no_bounds(self):
        # a refused row (assumption not met) must not appear as a bound
        head = ("problem,algorithm,compressor,density,steps,lr,L,gamma,"
                "xi_max,measured_min_grad2,measured_mean_grad2,bound,"
                "bound_name,runs,sigma,delta,bounds,expectation,measured,"
                "status,failed_assumption")
        self.csv_file("b.csv", head, [
            ["toy", "uni", "topk", 0.01, 300, 0.01, 1, 0.99, 46, 40, 5926,
             1.9e8, "nonconvex_4.3", 1, 0, "nan", "mean_t_grad2", "path",
             5926, "ok", ""],
            ["toy", "uni", "topk", 0.01, 300, 0.01, 1, "nan", "nan", 40,
             5926, "nan", "ef_sgd_4.6", 1, 0, "nan", "min_t_grad2", "path",
             40, "refused", "P = 3 (theorem: one worker)"]])
        doc, _ = tables.table_bounds(self.results())
        shown, refused = doc.blocks
        self.assertEqual([r[12] for r in shown.rows], ["nonconvex_4.3"])
        self.assertEqual(shown.rows[0][9], "mean")
        self.assertEqual(shown.rows[0][-1], "yes")
        self.assertEqual(refused.rows, [["ef_sgd_4.6",
                                         "P = 3 (theorem: one worker)", "1"]])

    def test_reference_csv_is_plain_csv(self):
        # readable by any CSV reader (pandas, numpy): no comment lines
        with open(os.path.join(HERE, "reference.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        self.assertTrue(rows)
        for r in rows:
            float(r["value"])
            int(r["P"])


class Claim6Ladder(unittest.TestCase):
    """Claim 6 reports the tightest rung of docs/theory.md 4.9 and names the
    replaced assumption that cost the most (largest factor between two
    consecutive rungs); rows without rungs fall back on the 4.3 ratio."""

    class T:
        def __init__(self, rows):
            self.rows = rows

    def row(self, g2, rungs):
        r = {"epoch": 1.0, "grad2_mean": g2, "ratio": rungs[0] / g2}
        for (col, _), v in zip(claims.LADDER, rungs):
            r[col] = v
        return r

    def test_tightest_rung_and_costliest_assumption(self):
        rungs = [1e6, 1e5, 1e4, 10.0, 8.0, 4.0, 3.0]
        runs = [("mlp uni", {"density": 0.1}, self.T([self.row(2.0, rungs)]))]
        meas, verdict = claims.claim_nn_bounds(runs)
        self.assertEqual(verdict, HOLDS)
        # one value when the range is one (not "1.5–1.5")
        self.assertIn("tightest rung/measured 1.5 (", meas)
        self.assertIn("costliest: the memories' bound, x1e+03", meas)
        rungs[-1] = 1.0        # below the measured 2.0
        meas, verdict = claims.claim_nn_bounds(
            [("mlp uni", {}, self.T([self.row(2.0, rungs)]))])
        self.assertEqual(verdict, FAILS)

    def test_range_prints_as_a_range_or_one_value(self):
        # the case: two rows that both round to 1e+09 print once
        rows = [{"epoch": 1.0, "grad2_mean": 1.0, "ratio": 1.0e9},
                {"epoch": 2.0, "grad2_mean": 1.0, "ratio": 1.0004e9}]
        meas, _ = claims.claim_nn_bounds([("mlp bi", {}, self.T(rows))])
        self.assertIn("tightest rung/measured 1e+09", meas)
        self.assertNotIn("1e+09–1e+09", meas)
        rows[1]["ratio"] = 3e9
        meas, _ = claims.claim_nn_bounds([("mlp bi", {}, self.T(rows))])
        self.assertIn("tightest rung/measured 1e+09–3e+09", meas)

    def test_old_rows_fall_back_on_the_bound(self):
        runs = [("mlp bi", {}, self.T([{"epoch": 1.0, "grad2_mean": 1.0,
                                         "ratio": 3e8}]))]
        meas, verdict = claims.claim_nn_bounds(runs)
        self.assertEqual(verdict, HOLDS)
        self.assertIn("3e+08", meas)
        self.assertEqual(claims.claim_nn_bounds([])[1], NOT_RUN)


class Rendering(unittest.TestCase):
    def test_no_question_marks_for_symbols(self):
        s = "Δ ξ_bi ‖∇F‖² ≤ ρ·K/d — ≈ θ π Σ ω √d"
        self.assertNotIn("?", render.tex(s))

    def test_subscripts_in_math(self):
        self.assertIn(r"\xi_{\mathrm{bi}}", render.tex("ξ_bi"))
        self.assertNotIn(r"\_", render.tex("ξ_bi"))
        self.assertIn(r"\_", render.tex("bytes_up"))
        self.assertIn("$x_{t}$", render.tex("F(x_t)"))
        self.assertIn(r"f\_gap", render.tex("f_gap"))

    def test_double_hyphens_stay_two(self):
        # T1 fonts (typewriter too) join -- into an en dash: a command
        # copied from the PDF would fail
        for s in ("`train --epochs 2 --out D`", "run with --no-timing",
                  "`a ---b`"):
            out = render.tex(s)
            self.assertNotIn("--", out.replace("-{}-", "x"), out)
        self.assertIn(r"\texttt{train -{}-epochs", render.tex("`train --epochs`"))
        self.assertEqual(render.tex("a — b"), "a --- b")   # the em dash itself

    def test_one_caption_label_and_number_per_table(self):
        doc = render.Doc("T9", "Two blocks", "c", ["x --csv F"], [], [
            render.Block(["a", "b"], [["1", "2"]], subtitle="first"),
            render.Block(["a", "b"], [["3", "4"]], subtitle="second")])
        out = render.to_latex(doc)
        # the label only in the first head (\endfirsthead), never in the
        # \endhead that repeats on every page
        self.assertEqual(out.count(r"\label{tab:T9}"), 1)
        self.assertEqual(out.count(r"\caption{"), 1)
        self.assertLess(out.index(r"\label{tab:T9}"), out.index(r"\endfirsthead"))
        self.assertEqual(out.count(r"\endfirsthead"), 2)
        self.assertEqual(out.count(r"\endhead"), 2)
        # every longtable steps the table counter: the second block undoes it
        self.assertEqual(out.count(r"\addtocounter{table}{-1}"), 1)
        self.assertLess(out.index(r"\addtocounter{table}{-1}"),
                        out.rindex(r"\begin{longtable}"))


class ScaleNote(unittest.TestCase):
    def run_of(self, **kw):
        log = inputs.Table("train_log", "/x/log.csv", "r/log.csv", [], {}, None)
        return inputs.TrainRun(log, config(**kw), "r")

    def test_quick_runs_name_the_full_grid(self):
        import headline
        note = headline.scale_note([self.run_of(epochs=10,
                                                train_subset=20000)])
        self.assertIn("`experiments/reproduce`", note)
        self.assertIn("10 epoch(s)", note)
        self.assertIn("20000", note)

    def test_full_runs_need_no_note(self):
        import headline
        self.assertIsNone(headline.scale_note(
            [self.run_of(epochs=100, train_subset=0)]))


class Figures(unittest.TestCase):
    def test_missing_figure_is_a_line_not_a_frame(self):
        import figures
        d = tempfile.mkdtemp()
        try:
            res = inputs.discover([d], lambda m: None)
            fs = figures.FigureSet(d)
            for fig in figures.FIGURES:
                fig(fs, figures.Data(res))
            for name in fs.names:
                with open(os.path.join(d, "figures", name + ".tex")) as f:
                    text = f.read()
                self.assertNotIn("fbox", text, name)
                self.assertNotIn("not drawn", text, name)
                self.assertNotIn("begin{figure}", text, name)
                self.assertIn("draws it", text, name)
        finally:
            shutil.rmtree(d)

    def test_bench_bars_at_every_thread_count(self):
        import figures
        rows = [dict(compressor=c, d=1000, density=rho, threads=t, gbps=g)
                for c, rho, t, g in (("stream-read", 0, 1, 5.0),
                                     ("stream-read", 0, 2, 9.0),
                                     ("memcpy", 0, 2, 8.0),
                                     ("topk", 0.01, 1, 1.0))]
        d = tempfile.mkdtemp()
        try:
            res = inputs.discover([d], lambda m: None)
            fs = figures.FigureSet(d)
            figures.fig_bench(fs, figures.Data(
                res, bench_rows={"cpu": rows, "cuda": []}))
            with open(os.path.join(d, "figures", "F5-bench.dat")) as f:
                dat = f.read()
            with open(os.path.join(d, "figures", "F5-bench.gp")) as f:
                gp = f.read()
            # the compressor keeps its bar though it ran on 1 thread only
            self.assertIn('"topk rho=0.01" 1.0 NaN', dat)
            self.assertIn('"stream-read rho=0" 5.0 9.0', dat)
            self.assertIn("CPU, 1 thread", gp)
            self.assertIn("CPU, 2 threads", gp)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main(verbosity=2)
