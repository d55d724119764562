"""Whether this Triton's interpreter can run the engine's kernels at all.

Triton 3.6's interpreter converts a loop bound held in a one-element array with ``int()``,
which NumPy >= 2.4 refuses ("only 0-dimensional arrays can be converted to Python
scalars"); the engine's kernels loop ``for k0 in range(0, d, BK)`` over the embedding
dimension, so under that pair every interpreted launch fails (seen on the H200 machine:
triton 3.6.0, numpy 2.5.2). The compiled kernels are unaffected. The interpreter test files
call :func:`interpreter_blocker` after importing triton with ``TRITON_INTERPRET=1`` and
skip with its reason instead of failing on a bug that is not this project's; the pinned
triton (constraints.txt) has no such bug, so CI runs them.

Once the probe passes, :func:`patch_once_per_launch` removes the interpreter's repeated
patching of ``triton.language`` at every helper call (about 40% of an interpreted
kernel's CPU time; the kernels compute the same on every program).
"""

from __future__ import annotations

import functools
import inspect

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _count_steps(d, BK: tl.constexpr):
    n = 0
    for _ in range(0, d, BK):  # the kernels' loop over the embedding dimension
        n += 1
    return n


@triton.jit
def _probe(out, d, BK: tl.constexpr):
    tl.store(out, _count_steps(d, BK))


def _run_probe() -> int:
    out = torch.zeros(1, dtype=torch.int32)
    _probe[(1,)](out, 5, BK=2)
    return int(out[0])


def patch_once_per_launch() -> bool:
    """Triton's interpreter re-patches ``triton.language`` (an ``inspect.getmembers``
    scan of its modules) at every call of a jitted helper inside a kernel, per program:
    about a third of an interpreted kernel's time here, for nothing, since the launch
    already patched those modules (a helper's patch is never undone before the launch
    ends). This makes a helper call skip the patching when the launch running now, or an
    earlier helper call in it, patched every language module the helper sees; anything
    else (the first helper seeing another module, a Triton whose interpreter has other
    internals) takes Triton's own path. What the kernels compute is
    unchanged: the same patched operations run on every program. True when installed
    (the probe is then run again through it; a wrong count removes it)."""
    try:
        from triton.runtime import interpreter as ti
    except ImportError:  # pragma: no cover - no interpreter in this triton
        return False
    real_patch = getattr(ti, "_patch_lang", None)
    executor = getattr(ti, "GridExecutor", None)
    if real_patch is None or executor is None or getattr(real_patch, "_rc_once", False):
        return bool(getattr(real_patch, "_rc_once", False))
    real_call = executor.__call__
    launches: list = []  # per running launch: the language modules its patch covered

    def langs(fn) -> set:
        mods = (tl, tl.core)
        return {id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in mods}

    class _Kept:  # what a helper call gets back instead of a scope (it drops it)
        def restore(self):
            pass

    def patch_lang(fn):
        if not launches:
            return real_patch(fn)
        need = langs(fn)
        if launches[-1] is None:  # the launch's own patch (restored when the launch ends)
            launches[-1] = need
        elif need <= launches[-1]:
            return _Kept()
        else:  # a helper seeing another module (triton.language.core: tl.sum, tl.zeros...):
            launches[-1] |= need  # Triton's patch, which stays for the rest of the launch
        return real_patch(fn)

    def call(self, *args, **kwargs):
        launches.append(None)
        try:
            return real_call(self, *args, **kwargs)
        finally:
            launches.pop()

    patch_lang._rc_once = True
    ti._patch_lang, executor.__call__ = patch_lang, call
    try:
        ok = _run_probe() == 3
    except Exception:  # noqa: BLE001 - any failure: Triton's own path stays
        ok = False
    if not ok:
        ti._patch_lang, executor.__call__ = real_patch, real_call
    return ok


@functools.lru_cache(maxsize=None)
def interpreter_blocker() -> str | None:
    """None when the interpreter runs the probe right, else the reason to skip. The probe
    runs on Triton's own interpreter first; then :func:`patch_once_per_launch`."""
    out = torch.zeros(1, dtype=torch.int32)
    try:
        _probe[(1,)](out, 5, BK=2)
    except Exception as exc:  # the interpreter's own failure, reported as the skip reason
        return (
            f"triton {triton.__version__}'s interpreter cannot run the kernels beside numpy "
            f"{np.__version__} ({type(exc).__name__}: {str(exc)[:160]}); the compiled kernels "
            "are unaffected (their CUDA tests run where a GPU is present)"
        )
    if int(out[0]) != 3:
        return f"triton {triton.__version__}'s interpreter counts a loop wrong ({int(out[0])} != 3)"
    patch_once_per_launch()
    return None


_IMPORT_PROBE = """
import json, sys
out = {}
import retrieval_checks
out["package"] = "triton" in sys.modules
import retrieval_checks.engine._grouped, retrieval_checks.engine.gpu._triton_grouped
out["grouped"] = sorted(m for m in ("triton", "torch") if m in sys.modules)
import numpy as np
x = np.eye(4, dtype=np.float32)
retrieval_checks.evaluate_image_text(x, x, np.arange(4), device="numpy", n_resamples=0)
out["image_text"] = "triton" in sys.modules
print(json.dumps(out))
"""


@functools.lru_cache(maxsize=None)
def import_probe() -> dict:
    """What a fresh interpreter has imported at three points, in one subprocess (one
    interpreter start for the three tests that ask; each asserts its own key, once per
    process): ``package``: whether triton is loaded after ``import retrieval_checks``;
    ``grouped``: triton/torch loaded after also importing the grouped engine and its
    Triton module; ``image_text``: whether triton is loaded after evaluating image-text
    on device="numpy". The steps only add imports (a module once loaded stays), so each
    key sees every module its entry point alone would load (with the earlier steps'):
    none can hide an import. The torch check comes before image-text's evaluation, which
    imports torch."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])
