"""The package against the C library and its own contract: every
registered compressor gives the bytes and the decoded vector of `gradcomp
compress` for the same input (float32 and float64); errors carry the
library's message; bad input (integer or non-contiguous arrays, k > d,
NaN) raises before any memory moves; the probes' values on cases worked by
hand; the DDP hook's bad-input paths in a 1-process gloo group."""
import ctypes
import os
import re
import socket
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import gradcomp  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

BUILD = os.environ.get("GC_BUILDDIR", os.path.join(HERE, "..", ".."))
GRADCOMP = os.path.join(BUILD, "experiments", "gradcomp")

# One setting per compressor, as `gradcomp compress` options and as
# keyword arguments (the same names).
SETTINGS = {
    "topk": {"k": 37}, "randk": {"density": 0.05, "seed": 7},
    "randk-unbiased": {"k": 20, "seed": 3}, "threshold": {"threshold": 1.5},
    "gaussk": {"density": 0.02}, "dgc": {"density": 0.02, "seed": 5},
    "identity": {}, "sign": {}, "scaled-sign": {},
    "qsgd": {"levels": 4, "bucket": 128, "seed": 11},
    "terngrad": {"seed": 2}, "fp16": {}, "bf16": {},
    "powersgd": {"rank": 2, "shape": (20, 40), "seed": 1},
}


def cli(name, x, step, params, tmp):
    """(decoded vector, wire bytes) of `gradcomp compress`."""
    xin, yout = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(xin, x)
    args = [GRADCOMP, "compress", name, "--in", xin, "--out", yout, "--stats",
            "--step", str(step)]
    for k, v in params.items():
        args += ["--" + k, "%dx%d" % v if k == "shape" else str(v)]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return np.load(yout), int(re.search(r"bytes=(\d+)", out).group(1))


class TestCompress(unittest.TestCase):

    @unittest.skipUnless(os.path.exists(GRADCOMP), "gradcomp is not built")
    def test_every_compressor_matches_the_cli(self):
        names = set(gradcomp.compressors())
        self.assertEqual(names, set(SETTINGS), "a compressor without a setting here")
        rng = np.random.default_rng(42)
        with tempfile.TemporaryDirectory() as tmp:
            for dt in (np.float32, np.float64):
                x = rng.standard_normal(1000).astype(dt)
                for name, params in sorted(SETTINGS.items()):
                    with self.subTest(name=name, dtype=dt.__name__):
                        msg = gradcomp.compress(name, x, step=3, **params)
                        y, nbytes = cli(name, x, 3, params, tmp)
                        self.assertEqual(len(msg), nbytes)
                        self.assertEqual(len(bytes(msg)), nbytes)
                        got = msg.decode()
                        self.assertEqual(got.dtype, dt)
                        # exact: the same library call on the same input
                        np.testing.assert_array_equal(got, y)

    def test_message_api(self):
        x = np.array([0.5, -3, 1, 0, 2, -0.25, 4, 0, 0, 1.5], np.float32)
        msg = gradcomp.compress("topk", x, k=3)
        self.assertIsInstance(bytes(msg), bytes)
        want = np.where(np.isin(np.arange(10), [1, 4, 6]), x, 0).astype(np.float32)
        np.testing.assert_array_equal(msg.decode(), want)
        y = np.ones(10, np.float32)
        self.assertIs(msg.add_to(y, scale=-1.0), y)       # in place
        np.testing.assert_array_equal(y, 1 - want)
        # the same bytes for the same input, and deterministic per step
        self.assertEqual(bytes(gradcomp.compress("topk", x, k=3)), bytes(msg))

    @unittest.skipIf(torch is None, "python3-torch is not installed")
    def test_torch_tensors(self):
        t = torch.randn(500, dtype=torch.float64)
        m = gradcomp.compress("topk", t, density=0.1)
        d = m.decode()
        self.assertIsInstance(d, torch.Tensor)
        self.assertEqual(d.dtype, torch.float64)
        np.testing.assert_array_equal(
            d.numpy(), gradcomp.compress("topk", t.numpy(), density=0.1).decode())
        y = torch.zeros(500, dtype=torch.float64)
        m.add_to(y)
        self.assertTrue(torch.equal(y, d))

    def test_errors_carry_the_library_message(self):
        x = np.ones(10, np.float32)
        with self.assertRaises(gradcomp.InvalidInput) as e:
            gradcomp.compress("topk", x, k=11)
        self.assertIn("exceeds", str(e.exception))
        self.assertEqual(e.exception.code, 1)
        x[4] = np.nan
        with self.assertRaises(ValueError) as e:          # InvalidInput is one
            gradcomp.compress("topk", x, k=2)
        self.assertIn("index 4", str(e.exception))
        with self.assertRaises(ValueError):
            gradcomp.compress("topk", x, density=1.5)
        with self.assertRaises(ValueError):
            gradcomp.compress("nosuch", x)
        with self.assertRaises(TypeError):
            gradcomp.compress("topk", x, kk=2)

    def test_bad_arrays(self):
        with self.assertRaises(TypeError) as e:
            gradcomp.compress("topk", np.arange(10), k=2)
        self.assertIn("int64", str(e.exception))
        with self.assertRaises(ValueError) as e:
            gradcomp.compress("topk", np.ones((4, 4), np.float32)[:, 1], k=2)
        self.assertIn("contiguous", str(e.exception))
        if torch is not None:
            with self.assertRaises(TypeError):
                gradcomp.compress("topk", torch.arange(10), k=2)
            with self.assertRaises(ValueError):
                gradcomp.compress("topk", torch.ones(4, 4).t()[0], k=2)


class TestMemoryLedgerProbes(unittest.TestCase):

    def test_error_feedback_untouched_on_error(self):
        c = gradcomp.Compressor("topk", 6, k=2)
        ef = gradcomp.ErrorFeedback(6, np.float32)
        g = np.array([1, -4, 2, 0.5, 3, -1], np.float32)
        m = ef.step(g, c)
        np.testing.assert_array_equal(m.decode(), [0, -4, 0, 0, 3, 0])
        np.testing.assert_array_equal(ef.memory, [1, 0, 2, 0.5, 0, -1])
        before = ef.memory
        bad = g.copy()
        bad[2] = np.inf
        with self.assertRaises(gradcomp.InvalidInput):
            ef.step(bad, c)
        np.testing.assert_array_equal(ef.memory, before)
        with self.assertRaises(TypeError):
            ef.step(g.astype(np.int32), c)
        with self.assertRaises(ValueError):
            ef.step(np.ones(12, np.float32)[::2], c)
        np.testing.assert_array_equal(ef.memory, before)
        # checkpoint: a fresh memory continues identically
        ef2 = gradcomp.ErrorFeedback(6, np.float32)
        ef2.load_state_dict(ef.state_dict())
        self.assertEqual(bytes(ef2.step(g, c, step=1)), bytes(ef.step(g, c, step=1)))

    def test_library_layout_guard(self):
        """A library whose structs differ from the package's mirror (or
        that predates the size queries) is refused at import."""
        from gradcomp import _lib

        class Fn:
            def __init__(self, v):
                self.v = v

            def __call__(self):
                return self.v

        class Lib:
            gc_compressor_params_size = Fn(ctypes.sizeof(_lib.gc_compressor_params) + 8)
            gc_algo_config_size = Fn(ctypes.sizeof(_lib.gc_algo_config))
        with self.assertRaises(ImportError) as e:
            _lib.check_layout(Lib(), "libx.so")
        self.assertIn("gc_compressor_params", str(e.exception))
        with self.assertRaises(ImportError):
            _lib.check_layout(object(), "libold.so")
        _lib.check_layout(_lib.lib, _lib.path)          # this build: fine

    def test_ledger(self):
        led = gradcomp.Ledger(2)
        led.record(0, 0, gradcomp.GC_UP, 10)
        led.record(0, 1, gradcomp.GC_UP, 12)
        led.record(1, 0, gradcomp.GC_UP, 5)
        led.record(0, 0, gradcomp.GC_DOWN, 7)
        self.assertEqual(led.total(gradcomp.GC_UP), 27)
        self.assertEqual(led.step_total(0, gradcomp.GC_UP), 22)
        self.assertEqual(led.worker_total(0, gradcomp.GC_UP), 15)
        self.assertEqual(led.total(gradcomp.GC_DOWN), 7)

    def test_probes(self):
        x = np.array([3, -4, 0, 0], np.float64)
        # top-1 keeps -4: 1 - 9/25; exact dyadic sums, then a quotient and
        # a subtraction: 2 roundings near 0.64, < 3e-16, so places=15
        # (|diff| < 5e-16)
        self.assertAlmostEqual(gradcomp.delta_hat(x, [0, -4, 0, 0]), 16 / 25, places=15)
        a1 = np.array([3, 0, 1, 0.0])
        a2 = np.array([1, 0, -1, 2.0])
        g = np.array([3, 4, 0, 0.0])
        # xi = |TopK(mean a) - mean m| / |mean g| with K = 1:
        # mean a = (2, 0, 0, 1), TopK = (2, 0, 0, 0); each worker sent its
        # own top-1: m1 = (3,0,0,0), m2 = (0,0,0,2), mean m = (1.5, 0, 0, 1)
        m1, m2 = np.array([3, 0, 0, 0.0]), np.array([0, 0, 0, 2.0])
        # sqrt(1.25)/5 = 0.22: exact dyadic squares, a sqrt and a quotient on
        # each side, 2 roundings = 6e-17 each: places=15
        want = np.linalg.norm([0.5, 0, 0, -1]) / 5
        self.assertAlmostEqual(gradcomp.xi([a1, a2], [m1, m2], [g, g], k=1),
                               want, places=15)
        # one worker: TopK(acc) is what it sent, xi = 0
        self.assertEqual(gradcomp.xi([a1], [m1], [g], k=1), 0.0)
        # xi_bi with delta: TopK_1(delta + mean a) - TopK_1(delta + mean m)
        d = np.array([0, 0, 0, 2.0])
        # delta + mean a = (2,0,0,3) -> (0,0,0,3); delta + mean m = (1.5,0,0,3)
        # -> (0,0,0,3): xi_bi = 0
        self.assertEqual(gradcomp.xi_bi([a1, a2], [m1, m2], [g, g], d, k_down=1), 0.0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeBucket:
    """What the hook reads of a dist.GradBucket."""

    def __init__(self, t, params):
        self.t, self.params = t, params

    def buffer(self):
        return self.t

    def index(self):
        return 0

    def is_last(self):
        return True

    def parameters(self):
        return self.params


@unittest.skipIf(torch is None, "python3-torch is not installed")
class TestHookBadInput(unittest.TestCase):
    """The hook's checks in a 1-process gloo group (this process)."""

    @classmethod
    def setUpClass(cls):
        import torch.distributed as dist
        if not dist.is_initialized():
            dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d"
                                    % free_port(), rank=0, world_size=1)

    def test_bad_buckets(self):
        import gradcomp.torch as gt
        p = torch.nn.Parameter(torch.zeros(8))
        state, hook = gt.comm_hook("bi", "topk", k=2)
        g = torch.tensor([1, -4, 2, 0.5, 3, -1, 0, 0.25])
        out = hook(state, FakeBucket(g.clone(), [p])).wait()
        self.assertTrue(torch.equal(out, torch.tensor([0, -4, 0, 0, 3, 0, 0, 0.])))
        # no -0.0 where the downlink left an entry out
        self.assertFalse(bool(torch.signbit(out[out == 0]).any()))
        mem = state.memory(0)
        np.testing.assert_array_equal(mem, [1, 0, 2, 0.5, 0, -1, 0, 0.25])
        sd = state.state_dict()
        with self.assertRaises(TypeError):
            hook(state, FakeBucket(torch.arange(8), [p]))
        with self.assertRaises(ValueError):
            hook(state, FakeBucket(torch.zeros(16)[::2], [p]))
        nan = g.clone()
        nan[3] = float("nan")
        with self.assertRaises(gradcomp.InvalidInput) as e:
            hook(state, FakeBucket(nan, [p]))
        self.assertIn("non-finite", str(e.exception))
        np.testing.assert_array_equal(state.memory(0), mem)
        self.assertEqual(state.state_dict()["step"], sd["step"])
        self.assertEqual(state.state_dict()["buckets"], sd["buckets"])
        # k > d: the first compressed step names it; nothing is created
        s2, h2 = gt.comm_hook("uni", "topk", k=9)
        with self.assertRaises(gradcomp.InvalidInput) as e:
            h2(s2, FakeBucket(g.clone(), [p]))
        self.assertIn("exceeds", str(e.exception))
        self.assertIsNone(s2.memory(0))
        self.assertEqual(s2.step, 0)
        with self.assertRaises(ValueError):
            gt.comm_hook("tri", "topk", k=2)
        with self.assertRaises(ValueError):
            gt.comm_hook("uni", "nosuch", k=2)

    def test_probes_csv(self):
        """One worker: TopK(acc) is its message, so xi = 0 and xi_bi = 0;
        delta-hat is top-2's on acc; the CSV reads back with genfromtxt."""
        import gradcomp.torch as gt
        p = torch.nn.Parameter(torch.zeros(8))
        state, hook = gt.comm_hook("bi", "topk", k=2, probe_every=1)
        g = torch.tensor([1, -4, 2, 0.5, 3, -1, 0, 0.25])
        hook(state, FakeBucket(g.clone(), [p]))
        r = state.probes[0]
        self.assertEqual((r["step"], r["bucket"]), (0, 0))
        self.assertEqual((r["xi"], r["xi_bi"]), (0.0, 0.0))
        a = g.double().numpy()
        # dyadic entries: the sums are exact, the quotient and 1 - q round
        # (~2 ulp of 0.8, 2e-16); places=12 (5e-13) admits any float64 order
        # but not a float32 evaluation (~6e-8)
        self.assertAlmostEqual(r["delta"], 25 / float(np.dot(a, a)), places=12)
        self.assertEqual(r["support_union_over_k"], 1.0)
        self.assertEqual(r["bytes_up"], state.ledger.rows[0][1])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "probes.csv")
            state.write_csv(path)
            t = np.genfromtxt(path, delimiter=",", names=True)
            self.assertEqual(t.dtype.names, gt.PROBE_COLUMNS)
            self.assertEqual(float(t["delta"]), r["delta"])

    def test_every_compressor_and_method(self):
        """Each registered compressor under uni and bi (and the other
        methods with top-K): three steps on a two-layer bucket give a
        finite update of the bucket's length; a dense compressor
        (identity) gives the gradient itself."""
        import gradcomp.torch as gt
        w = torch.nn.Parameter(torch.zeros(6, 5))
        b = torch.nn.Parameter(torch.zeros(6))
        rng = np.random.default_rng(0)
        runs = [(m, name) for m in ("uni", "bi") for name in SETTINGS]
        runs += [(m, "topk") for m in ("downlink", "doublesqueeze", "sgd")]
        for method, name in runs:
            with self.subTest(method=method, compressor=name):
                params = {k: v for k, v in SETTINGS[name].items() if k != "shape"}
                if "k" in params:
                    params["k"] = 5
                state, hook = gt.comm_hook(method, name, **params)
                for _ in range(3):
                    g = torch.from_numpy(rng.standard_normal(36).astype(np.float32))
                    out = hook(state, FakeBucket(g.clone(), [w, b])).wait()
                    self.assertEqual(out.shape, g.shape)
                    self.assertTrue(bool(torch.isfinite(out).all()))
                    if name == "identity" and method == "uni":
                        self.assertTrue(torch.equal(out, g))
                self.assertEqual(state.step, 3)
                self.assertEqual(len(state.ledger.rows), 3)
                self.assertGreater(state.ledger.total_up, 0)


if __name__ == "__main__":
    unittest.main()
