"""The fused Triton kernel (engine/_triton.py), run in Triton's interpreter on the CPU.

References: the compiled CPU kernels (numba and numpy, engine/_kernels.py), the torch
path the CUDA device runs today (``_use_kernels=False`` on CPU tensors), and, for the
screened variant, the fp32 kernel itself (bit for bit). CUDA-only checks skip without a
GPU. ``TRITON_INTERPRET=1`` is set here before triton is first imported.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
import zlib

import numpy as np
import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import retrieval_checks as rc  # noqa: E402
from retrieval_checks.engine import _kernels, _triton  # noqa: E402
from retrieval_checks.errors import BackendError  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1" or (
        "retrieval_checks.engine._triton_kernels" in sys.modules and not _triton._interpreting()):
    pytest.skip("TRITON_INTERPRET is not 1 in this process: the kernel would need a GPU", allow_module_level=True)

METRICS = ["map", "map@R", "hit_rate@1", "recall@5", "precision@3", "mrr", "meanr", "map_cut@5"]
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the kernel compiles for it)")


@pytest.fixture
def spy(monkeypatch):
    """Counts the blocks the fused kernel ran."""
    calls = []
    real = _triton.run_block_triton

    def wrapped(p, start, stop):
        out = real(p, start, stop)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(_triton, "run_block_triton", wrapped)
    return calls


def _data(kind: str, rng, n: int, d: int):
    if kind == "float":
        return rng.standard_normal((n, d)).astype(np.float32)
    X = rng.integers(-2, 3, size=(n, d)).astype(np.float32)  # tie-heavy
    X[1::5] = X[0::5][: X[1::5].shape[0]]  # exact duplicates
    return X


def _evaluate(X, y, *, similarity, device, kernels, ties="pessimistic", tile=None, gallery=None, g_labels=None,
              query_ids=None, gallery_ids=None):
    kw = dict(query_labels=y, metrics=METRICS, similarity=similarity, device=device, ties=ties, tile=tile,
              _use_kernels=kernels, empty_queries="skip")
    if gallery is not None:
        kw.update(gallery_labels=g_labels, query_ids=query_ids, gallery_ids=gallery_ids)
        return rc.evaluate(X, gallery, **kw)
    return rc.evaluate(X, **kw)


def _same(a, b):
    for m in METRICS:
        np.testing.assert_array_equal(a.per_query[m], b.per_query[m], err_msg=m)


@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
@pytest.mark.parametrize("kind", ["float", "int"])
@pytest.mark.parametrize("screen", [False, True])
def test_leave_one_out_equals_cpu_kernels_and_torch_path(similarity, kind, screen, spy):
    rng = np.random.default_rng(zlib.crc32(f"{similarity}-{kind}".encode()))
    n = 83  # not a multiple of the 32-column tiles
    X = _data(kind, rng, n, 12)
    y = rng.integers(0, 7, size=n)
    ref = _evaluate(X, y, similarity=similarity, device="numpy", kernels=True)
    torch_path = _evaluate(X, y, similarity=similarity, device="torch-cpu", kernels=False, tile=(40, 16))
    with _triton.on_cpu(screen=screen):
        fused = _evaluate(X, y, similarity=similarity, device="torch-cpu", kernels=False, tile=(40, 16))
        fused_avg = _evaluate(X, y, similarity=similarity, device="torch-cpu", kernels=False, ties="average")
    assert spy and all(spy), "the fused kernel did not run"
    _same(fused, ref)
    _same(fused, torch_path)
    _same(fused_avg, _evaluate(X, y, similarity=similarity, device="numpy", kernels=True, ties="average"))


@pytest.mark.parametrize("similarity", ["cosine", "neg_l2"])
def test_separate_gallery_with_ids_equals_reference(similarity, spy):
    rng = np.random.default_rng(5)
    Q = _data("int", rng, 37, 9)
    G = np.concatenate([Q[:20], _data("int", rng, 50, 9)])  # queries found in the gallery, by id
    ql, gl = rng.integers(0, 5, 37), rng.integers(0, 5, 70)
    gl[:20] = ql[:20]
    qid = np.arange(37)
    gid = np.concatenate([np.arange(20), np.arange(20, 70) + 100])
    gid[30] = 3  # a second gallery item with query 3's id: two self pairs in one row
    kw = dict(similarity=similarity, gallery=G, g_labels=gl, query_ids=qid, gallery_ids=gid)
    ref = _evaluate(Q, ql, device="numpy", kernels=True, **kw)
    with _triton.on_cpu():
        fused = _evaluate(Q, ql, device="torch-cpu", kernels=False, **kw)
    assert spy and all(spy)
    _same(fused, ref)


def _block_problem(rng, n, d, n_labels, kind="float"):
    X = _data(kind, rng, n, d)
    y = rng.integers(0, n_labels, size=n)
    order = np.argsort(y, kind="stable")
    ys = y[order]
    grank = np.empty(n, np.int32)
    grank[order] = np.arange(n) - np.searchsorted(ys, ys, side="left")
    return X, y, grank


def _csr_loo(y, m):
    rows, cols = [], []
    for i in range(m):
        js = [j for j in np.flatnonzero(y == y[i]) if j != i]
        rows += [i] * len(js)
        cols += js
    rows, cols = np.array(rows, np.int64), np.array(cols, np.int64)
    indptr = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
    return indptr, rows, cols


def _kernel_counts(X, y, grank, m, screen=False, tile=None, similarity="dot"):
    G = torch.from_numpy(X.copy())
    indptr, rows, cols = _csr_loo(y, m)
    selfs = (np.arange(m, dtype=np.int32)[:, None], np.arange(m, dtype=np.int32)[:, None], 1)
    sq = (X.astype(np.float64) ** 2).sum(axis=1)
    ga = {"dot": None, "cosine": torch.from_numpy((1 / np.sqrt(sq)).astype(np.float32)),
          "neg_l2": torch.from_numpy(sq.astype(np.float32))}[similarity]
    qa = None if ga is None else ga[:m]
    (rel_sorted, order), above, tied = _triton.count_arrays(G[:m], G, similarity, qa, ga, y[:m], y, grank, indptr,
                                                            rows, cols, selfs, screen=screen, tile=tile)
    return indptr, rel_sorted.numpy(), order, above, tied


@pytest.mark.parametrize("impl", ["numba", "numpy"])
@pytest.mark.parametrize("kind", ["int", "float"])
def test_counts_equal_the_cpu_kernels(impl, kind):
    rng = np.random.default_rng(11)
    n, m = 101, 45
    X, y, grank = _block_problem(rng, n, 20, 6, kind)
    indptr, rel_sorted, _, above, tied = _kernel_counts(X, y, grank, m)
    S = (X[:m] @ X.T).astype(np.float32)
    _, rows, cols = _csr_loo(y, m)
    vals = S[rows, cols]
    S[rows, cols] = -np.inf
    S[np.arange(m), np.arange(m)] = -np.inf
    srt = np.concatenate([np.sort(vals[indptr[i]:indptr[i + 1]]) for i in range(m)])
    if kind == "int":  # exact products: the same bits from any GEMM (floats: the last bits may differ)
        np.testing.assert_array_equal(rel_sorted, srt)
    else:
        np.testing.assert_allclose(rel_sorted, srt, rtol=1e-5, atol=1e-5)
    want_above, want_tied = np.empty(srt.size, np.int64), np.empty(srt.size, np.int64)
    with _kernels.use(impl):
        _kernels.count_above_relevant(S[None], m, n, indptr, srt, want_above, want_tied, np.float32(math.inf),
                                      np.zeros(m, np.int64))
    np.testing.assert_array_equal(above, want_above)
    np.testing.assert_array_equal(tied, want_tied)
    assert (tied.sum() > 0) == (kind == "int")  # integer data tie; random floats do not


def _adversarial(rng, n_rel_groups=6, per=7, d=24):
    """Relevant items and non-relevant ones whose scores sit within a few ulps of them
    (the relevant row scaled by 1 + k 2^-23), exact duplicates, and far negatives."""
    X, y = [], []
    for gi in range(n_rel_groups):
        base = rng.standard_normal(d).astype(np.float32)
        for k in range(per):
            X.append(base)
            y.append(gi)  # relevant to each other (equal rows: tied relevant scores)
        for k in range(-3, 4):
            X.append((base * np.float32(1 + k * 2.0 ** -23)).astype(np.float32))
            y.append(100 + gi * 10 + k)  # non-relevant, scores within ulps of the relevant ones
    far = 0.05 * rng.standard_normal((40, d)).astype(np.float32)
    X = np.concatenate([np.array(X, np.float32), far])
    y = np.concatenate([np.array(y), 1000 + np.arange(40)])
    perm = rng.permutation(len(y))
    X, y = X[perm], y[perm]
    order = np.argsort(y, kind="stable")
    ys = y[order]
    grank = np.empty(len(y), np.int32)
    grank[order] = np.arange(len(y)) - np.searchsorted(ys, ys, side="left")
    return X, y, grank


@pytest.mark.parametrize("seed,similarity", [(0, "dot"), (1, "dot"), (2, "cosine"), (3, "neg_l2")])
def test_screened_equals_fp32_kernel_bit_for_bit_on_near_ties(seed, similarity):
    rng = np.random.default_rng(seed)
    X, y, grank = _adversarial(rng)
    m = X.shape[0]
    exact = _kernel_counts(X, y, grank, m, similarity=similarity)
    screened = _kernel_counts(X, y, grank, m, screen=True, similarity=similarity)
    assert exact[1].tobytes() == screened[1].tobytes()
    np.testing.assert_array_equal(exact[3], screened[3])
    np.testing.assert_array_equal(exact[4], screened[4])
    # the data are adversarial: negatives within ulps of relevant scores, some exactly equal
    assert exact[4].sum() > 0
    near = exact[3] - exact[4]
    assert near.sum() > 0


def test_screened_bound_holds_and_is_not_vacuous():
    """|bf16-input product - fp32 product| <= gamma |q| |g| on random rows, and within 100x of it."""
    rng = np.random.default_rng(3)
    for d in (8, 64, 300):
        A = rng.standard_normal((200, d)).astype(np.float32)
        B = rng.standard_normal((300, d)).astype(np.float32) * 3
        bf = lambda x: torch.from_numpy(x).to(torch.bfloat16).to(torch.float64).numpy()  # noqa: E731
        screened = (bf(A) @ bf(B).T).astype(np.float32)
        exact = A @ B.T
        bound = _triton.error_bound(d) * np.linalg.norm(A, axis=1)[:, None] * np.linalg.norm(B, axis=1)[None, :]
        err = np.abs(screened.astype(np.float64) - exact)
        assert (err <= bound).all()
        assert err.max() > bound.max() / 100


def test_self_check_passes_in_the_interpreter():
    assert _triton.self_check("cpu") == (True, None)


def test_self_check_catches_wrong_counts(monkeypatch):
    real = _triton.count_arrays

    def off_by_one(*a, **k):
        vals, above, tied = real(*a, **k)
        return vals, above + 1, tied

    monkeypatch.setattr(_triton, "count_arrays", off_by_one)
    ok, reason = _triton.self_check("cpu")
    assert not ok and "differ" in reason


def test_failed_self_check_warns_and_falls_back(monkeypatch):
    from retrieval_checks.engine._backend import Backend

    monkeypatch.setattr(_triton, "_STATE", {})
    monkeypatch.setattr(_triton, "self_check", lambda device: (False, "forced failure"))
    monkeypatch.setenv("RC_TRITON", "auto")
    fake_cuda = Backend("torch", torch.device("cuda", 0))
    with pytest.warns(RuntimeWarning, match="forced failure"):
        assert _triton.wanted(fake_cuda) is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _triton.wanted(fake_cuda) is False  # decided once per process, warned once
    monkeypatch.setenv("RC_TRITON", "0")
    monkeypatch.setattr(_triton, "_STATE", {})
    assert _triton.wanted(fake_cuda) is False
    monkeypatch.setenv("RC_TRITON", "auto")  # auto without triton installed: the torch path, nothing to warn
    monkeypatch.setattr(_triton.importlib.util, "find_spec", lambda name: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _triton.wanted(fake_cuda) is False
    monkeypatch.undo()
    monkeypatch.setattr(_triton, "_STATE", {})
    monkeypatch.setenv("RC_TRITON", "yes")
    with pytest.raises(BackendError, match="RC_TRITON"):
        _triton.wanted(fake_cuda)


def test_kernel_failure_on_a_block_warns_and_gives_the_same_result(monkeypatch):
    rng = np.random.default_rng(8)
    X = _data("int", rng, 50, 8)
    y = rng.integers(0, 4, 50)
    ref = _evaluate(X, y, similarity="cosine", device="torch-cpu", kernels=False)

    def broken(*a, **k):
        raise RuntimeError("forced compile failure")

    monkeypatch.setattr(_triton, "count_arrays", broken)
    with _triton.on_cpu(), pytest.warns(RuntimeWarning, match="forced compile failure"):
        got = _evaluate(X, y, similarity="cosine", device="torch-cpu", kernels=False)
    _same(got, ref)


def test_pair_metrics_and_explicit_relevance_stay_on_the_torch_path(spy):
    rng = np.random.default_rng(2)
    X = _data("float", rng, 40, 8)
    y = rng.integers(0, 4, 40)
    with _triton.on_cpu():
        r = rc.evaluate(X, query_labels=y, metrics=["map", "recall_at_precision@0.9"], device="torch-cpu",
                        _use_kernels=False)
    ref = rc.evaluate(X, query_labels=y, metrics=["map", "recall_at_precision@0.9"], device="numpy")
    assert spy == []
    assert r["map"] == ref["map"] and r["recall_at_precision@0.9"] == ref["recall_at_precision@0.9"]


def test_importing_the_package_does_not_import_triton():
    import subprocess

    code = "import sys, retrieval_checks; print('triton' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


_CUDA_SCRIPT = """
import warnings, numpy as np, retrieval_checks as rc, os
rng = np.random.default_rng(0)
X = rng.standard_normal((3000, 64)).astype(np.float32)
X[1::3] = X[0::3]
y = rng.integers(0, 300, 3000)
M = %r
out = {}
for flag, screen in (("0", "0"), ("1", "0"), ("1", "1")):
    os.environ["RC_TRITON"], os.environ["RC_TRITON_SCREEN"] = flag, screen
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        r = rc.evaluate(X, query_labels=y, metrics=M, device="cuda")
    out[flag + screen] = [r.per_query[m].tolist() for m in M]
assert out["00"] == out["10"] == out["11"], "fused kernel differs from the torch path"
print("ok")
""" % (METRICS,)


@CUDA
def test_cuda_fused_kernel_equals_the_torch_path():  # pragma: no cover - needs a GPU
    """Compiled for the GPU (a fresh process without TRITON_INTERPRET): the fused kernel,
    fp32 and screened, gives the torch path's per-query values and passes its self-check."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", _CUDA_SCRIPT], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_gpu_benchmark_prints_the_triton_rows_in_the_interpreter():
    """bench_gpu.py --triton on --device cpu: both Triton rows run (interpreted) and give
    the torch path's numbers."""
    import subprocess
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu.py"
    out = subprocess.run([sys.executable, str(bench), "--device", "cpu", "--sizes", "120x8", "--skip-full",
                          "--triton", "on"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("| 120, 8 |"))
    assert row.count("(same)") == 2, row


def test_off_by_default_until_measured_on_a_gpu(monkeypatch):
    """Never run on a GPU yet: a CUDA run uses today's torch path unless RC_TRITON opts in."""
    from retrieval_checks.engine._backend import Backend

    monkeypatch.delenv("RC_TRITON", raising=False)
    monkeypatch.setattr(_triton, "_STATE", {})
    monkeypatch.setattr(_triton, "self_check", lambda device: pytest.fail("the self-check ran with RC_TRITON unset"))
    assert _triton.mode() == "0"
    assert _triton.wanted(Backend("torch", torch.device("cuda", 0))) is False
