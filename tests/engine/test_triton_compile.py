"""The fused kernels compiled for real GPUs without one: Triton's own compiler, in a
fresh process without ``TRITON_INTERPRET`` and with an empty cache, takes every kernel
of the main pass (engine/gpu/_triton_kernels.py) and of grouped recall
(engine/gpu/_triton_grouped_kernels.py) to sm_90 (H100 / H200) and sm_80 (A100) machine
code with the ptxas it ships. The interpreter runs the kernels' arithmetic; this checks
what it does not: types, layouts, scalar atomics, control flow inside loops. The
constexpr combinations cover every flag with every other flag at least once.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

# triton is not imported here: the interpreter tests set TRITON_INTERPRET before its first import
_SPEC = importlib.util.find_spec("triton")
pytestmark = pytest.mark.skipif(_SPEC is None, reason="triton is not installed")

_SCRIPT = r"""
import re
import sys
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile
from retrieval_checks.engine.gpu import _triton_grouped_kernels as gk, _triton_kernels as k

TILE = {"BM": 32, "BN": 64, "BK": 32, "K": 2}


def common(epi):
    words = "*i64" if epi == 3 else "*fp32"  # hamming: packed code words
    return {"Q": words, "G": words, "QC": "*i64", "GC": "*i64", "COLS": "*i64", "SELF": "*i32", "PTR": "*i64",
            "QA": "*fp32", "GA": "*fp32"}


SIGS = {
    "extract": lambda epi: dict(common(epi), SELFREL="*i32", GRANK="*i32", TM="*i32", TN="*i32", OUT="*fp32",
                                m="i32", n_g="i32", d="i32", c_steps="i32"),
    "count": lambda epi: dict(common(epi), REL="*fp32", QN="*fp32", GN="*fp32", HIST="*i32", TIES="*i32",
                              FIX="*fp32", FIXCNT="*i64", TAIL="*fp32", TAILN="*i64", STATS="*i64", m="i32",
                              n_g="i32", d="i32", width="i32", n_steps="i32", c_steps="i32", gamma="fp32",
                              tau="fp32", n_fix="i32", cap="i64"),
    "bin": lambda epi: dict(common(epi), U="*fp32", QN="*fp32", GN="*fp32", OUT="*i64", STATS="*i64", m="i32",
                            n_g="i32", d="i32", nu="i32", n_steps="i32", c_steps="i32", gamma="fp32"),
}
GROUPED = {"Q": "*fp32", "G": "*fp32", "QC": "*i64", "GC": "*i64", "QID": "*i64", "GID": "*i64", "QA": "*fp32",
           "GA": "*fp32", "QN": "*fp32", "GN": "*fp32", "WR0": "*i32", "WRE": "*i32", "WG0": "*i32",
           "WGE": "*i32", "WS0": "*i32", "WS1": "*i32", "BEST": "*fp32", "HAS": "*i32", "ABOVE": "*i32",
           "TIED": "*i32", "GROUP": "*i32", "CAND": "*i32", "STATS": "*i32", "d": "i32", "gamma": "fp32"}
# (EPI, SCREEN, CSR, PAIRS, LINEAR): every flag meets every other flag
COUNT = [(0, 0, False, False, True), (0, 1, True, True, False), (1, 2, False, True, True), (1, 0, True, False, False),
         (2, 1, False, False, False), (2, 2, True, True, True), (3, 0, True, True, True), (3, 0, False, False, False),
         (1, 1, True, True, True), (0, 2, False, True, False)]


def case_list(full):
    cases = [(k.extract_kernel, SIGS["extract"](e), dict(TILE, EPI=e, CSR=csr)) for e in range(4) for csr in (0, 1)]
    cases += [(k.count_kernel, SIGS["count"](e), dict(TILE, EPI=e, SCREEN=s, EMULATE=False, CSR=bool(c), PAIRS=p,
                                                       LINEAR=lin)) for e, s, c, p, lin in COUNT]
    cases += [(k.bin_kernel, SIGS["bin"](e), dict(TILE, EPI=e, SCREEN=s, EMULATE=False, CSR=bool(e % 2)))
              for e, s in ((0, 0), (1, 1), (2, 2), (3, 0))]
    cases += [(gk.grouped_kernel, GROUPED, dict(BM=32, BN=64, BK=32, EPI=e, SCREEN=s, EMULATE=False))
              for e, s in ((0, 0), (1, 1), (2, 2))]
    return cases if full else cases[::4]


for arch, full in ((90, True), (80, sys.argv[1] == "full")):
    for fn, sig, consts in case_list(full):
        sig = dict(sig, **{name: "constexpr" for name in consts})
        try:
            out = compile(ASTSource(fn, sig, constexprs=consts), target=GPUTarget("cuda", arch, 32),
                          options={"enable_fp_fusion": False})  # as the launches pass it
        except Exception as exc:
            sys.exit(f"{fn.__name__} {consts} sm_{arch}: {type(exc).__name__}: {exc}")
        assert len(out.asm["cubin"]) > 1000, (fn.__name__, consts)
        if consts.get("EPI") == 1:  # cosine's epilogue: correctly rounded fp64 division and square root
            ops = set(re.findall(r"\b(?:div|sqrt|rcp|rsqrt)\.[a-z0-9.]*f64", out.asm["ptx"]))
            assert ops == {"div.rn.f64", "sqrt.rn.f64"}, (fn.__name__, consts, sorted(ops))
print("ok")
"""


@pytest.mark.slow  # starts early (tests/conftest.py: slow modules first)
@pytest.mark.default_cases(dict(sm_80="subset"))
@pytest.mark.parametrize("sm_80", ["subset", "full"])  # sm_80: every fourth case, or all
def test_the_fused_kernels_compile_for_gpus_without_one(tmp_path, sm_80):
    if not (Path(_SPEC.origin).parent / "backends" / "nvidia" / "bin" / "ptxas").exists():
        pytest.skip("this triton ships no ptxas (no NVIDIA backend)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path), TRITON_DEFAULT_FP_FUSION="1")
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, sm_80], capture_output=True, text=True, env=env, timeout=600
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.stdout + out.stderr)[-3000:]
