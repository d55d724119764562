"""Compiles the library's numba kernels into numba's on-disk cache once per xdist run,
split between the workers, before their tests need them (``tests/conftest.py`` calls
:func:`warm` in each worker of a whole-suite run).

Every kernel is ``@njit(cache=True)``: the first process that calls one compiles it and
writes the cache; later processes load it. In a clean clone (no cache yet, as in CI)
the two workers start at the same moment, and a kernel one of them is still compiling
is compiled by the other too: 28 CPU-s of compilation for the 20 kernels, measured one
call at a time. Here the kernels come in two parts of about equal cost, each compiled
under a file lock: worker ``gw0`` compiles part 0 while ``gw1`` compiles part 1, then
each loads the other's part from the cache (waiting on its lock while it is being
compiled), so each kernel is compiled once, by one worker, in about half the time;
the processes the tests start (plugin sessions, the CLI, DDP ranks) find them
compiled. Measured, two processes at once on an empty ``NUMBA_CACHE_DIR`` (load ~23):
60.1 CPU-s when each compiled everything, 28.3 split (12.6 + 15.7). In a warm cache the warm-up
only loads the kernels, which the worker's tests would load anyway. Best effort: a
failure here is left to the tests, which run the same kernels and report it.

Each part is a few calls of the public API on tiny data that reach its kernels
(``tests/test_warm_kernels.py`` checks that the two parts reach every cached kernel,
so a new kernel is warmed too or the test says which).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time

LOCK_WAIT_S = 300  # at most this long for another worker's part, then compile it here too


def _data():
    import numpy as np

    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(30), 4)
    x = rng.normal(size=(120, 8)).astype(np.float32)
    return x, labels


# pair metrics reach the tail histogram, the collection of negatives and the binning
_METRICS = ["map", "recall@5", "recall_at_precision@0.5", "pair_f1@t=0.1"]


def _runs_hamming_grouped() -> None:
    """``evaluate_run``'s reading of dicts (``_runs_numba``), the Hamming tile, grouped
    recall (about half the compilation: 14.5 CPU-s of 28, measured one call at a time)."""
    import retrieval_checks as rc

    x, y = _data()
    run = {f"q{q}": {f"d{d}": float((q * 7 + d * 3) % 11) for d in range(12)} for q in range(6)}
    qrels = {f"q{q}": {f"d{d}": (q + d) % 3 for d in range(0, 12, 2)} for q in range(6)}
    rc.evaluate_run(run, qrels, ["map", "ndcg@10"])
    _run_fallbacks()
    # device="cpu": the numba kernels are what the warm-up compiles, also on a machine with a GPU
    rc.evaluate(x > 0, query_labels=y, metrics=["map"], similarity="hamming", device="cpu")
    rc.evaluate(
        x, query_labels=y, metrics=["grouped_recall@1"], group_size=4, group_seed=0, device="cpu"
    )


def _run_fallbacks() -> None:
    """Two kernels of ``evaluate_run`` that the public API reaches only at sizes a warm-up
    cannot afford: ``grades_of`` (runs and qrels naming over 2**20 documents, more than
    four per entry) and ``block_order`` (entries whose packed (query, score, index) keys
    need over 48 bits). Compiled by a direct call with the library's argument types
    (int64 codes, float64 scores), so a test that forces them does not compile them."""
    import numpy as np

    from retrieval_checks.engine import _runs_numba as jit

    i64 = np.arange(4, dtype=np.int64)
    jit.grades_of(i64, i64, np.array([0, 2, 4, 4, 4], np.int64), i64, i64)
    jit.block_order(
        np.array([0.5, 0.25, 0.75, 1.0]),
        i64,
        True,
        np.array([0, 2], np.int64),
        np.array([2, 4], np.int64),
        np.array([0, 1], np.int64),
    )


def _scored_and_fused() -> None:
    """The scored path (``_kernels_numba``) and the fused CPU counter
    (``_fused_cpu_numba``): the mirrored leave-one-out pass over several chunks (its
    column-by-column half too), and the one-sided pass that seeds the tail histogram
    (``RC_CPU_COUNTER=fused``); 13.6 CPU-s."""
    import retrieval_checks as rc

    x, y = _data()
    cpu = {"device": "cpu"}  # the CPU counters, also on a machine with a GPU
    rc.evaluate(x[:40], x, query_labels=y[:40], gallery_labels=y, metrics=_METRICS, **cpu)
    rc.evaluate(x, query_labels=y, metrics=_METRICS, tile=(16, 32), **cpu)
    before = os.environ.get("RC_CPU_COUNTER")
    os.environ["RC_CPU_COUNTER"] = "fused"
    try:
        rc.evaluate(
            x[:40], x, query_labels=y[:40], gallery_labels=y, metrics=_METRICS, tile=(16, 32), **cpu
        )
    finally:
        if before is None:
            del os.environ["RC_CPU_COUNTER"]
        else:
            os.environ["RC_CPU_COUNTER"] = before


PARTS = (_runs_hamming_grouped, _scored_and_fused)


def order(worker: str) -> list[int]:
    """The parts in the order worker ``worker`` (``gw0``, ``gw1``...) warms them: each
    worker starts with a different part (its number modulo the parts), then the rest."""
    digits = "".join(c for c in worker if c.isdigit())
    first = int(digits) % len(PARTS) if digits else 0
    return [(first + i) % len(PARTS) for i in range(len(PARTS))]


def _lock_path(part: int) -> str:
    """One lock file per part and per cache (the checkout, or ``NUMBA_CACHE_DIR``)."""
    where = os.environ.get("NUMBA_CACHE_DIR") or os.path.dirname(os.path.abspath(__file__))
    key = hashlib.sha256(where.encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"rc-warm-kernels-{key}-{part}.lock")


@contextlib.contextmanager
def _locked(part: int, wait_s: float):
    """Holds the part's file lock (POSIX ``flock``; released by the OS if the process
    dies), waiting at most ``wait_s``; without ``fcntl`` (Windows), or past the wait,
    goes on unlocked (the worst case is a second compilation, as without warming)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(_lock_path(part), "a+") as f:
        deadline = time.monotonic() + wait_s
        held = False
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except OSError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.2)
        try:
            yield
        finally:
            if held:
                fcntl.flock(f, fcntl.LOCK_UN)


def warm(worker: str = "gw0", wait_s: float = LOCK_WAIT_S) -> list[str]:
    """Compiles (or loads) every part, in ``order(worker)``, each under its lock; returns
    the errors met (``"part: ExcType: message"``), empty when every part ran."""
    errors = []
    for part in order(worker):
        with _locked(part, wait_s):
            try:
                PARTS[part]()
            except Exception as exc:  # the tests run the same kernels and report it
                errors.append(f"{PARTS[part].__name__}: {type(exc).__name__}: {exc}")
    return errors


# the ranx measures the oracle tests compare with (tests/oracles/test_ranx.py,
# tests/suites/test_beir_datasets.py), by ranx's names
RANX_METRICS = [
    "ndcg@10", "ndcg", "map", "mrr", "mrr@10", "recall@10", "precision@10", "f1@5",
    "hit_rate@10", "r-precision", "rbp.8", "dcg@10", "bpref",
]  # fmt: skip


def warm_ranx() -> None:
    """ranx's numba kernels (``cache=True`` in its site-packages): the measures the
    oracle tests take from ranx, through the same conversion of plain dicts
    (``shared_setup.ranx_evaluate``); nothing where ranx is not installed."""
    try:
        import ranx  # noqa: F401
    except ImportError:
        return
    from shared_setup import ranx_evaluate

    run = {f"q{q}": {f"d{d}": float((q * 7 + d * 3) % 11) for d in range(12)} for q in range(6)}
    qrels = {f"q{q}": {f"d{d}": (q + d) % 3 for d in range(0, 12, 2)} for q in range(6)}
    ranx_evaluate(qrels, run, RANX_METRICS)


def main() -> int:
    """``python tests/warm_kernels.py``, which ``./dev`` runs once after installing an
    environment: fills numba's on-disk caches of the library's kernels and of ranx's
    before any test run, as pip byte-compiles what it installs (both caches are
    per environment and per source: they are kept until the code changes). Best effort:
    prints what failed and exits 0; the tests compile what they need."""
    started = time.monotonic()
    errors = warm("setup")
    try:
        warm_ranx()
    except Exception as exc:  # the oracle tests call ranx the same way and report it
        errors.append(f"warm_ranx: {type(exc).__name__}: {exc}")
    for error in errors:
        print(f"warm_kernels: {error}")
    print(f"warm_kernels: numba caches filled in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
