"""The fused kernels compiled for real GPUs without one: Triton's own compiler, in a
fresh process without ``TRITON_INTERPRET`` and with an empty cache, takes the kernels
of the main pass (engine/gpu/_triton_kernels.py), of grouped recall
(engine/gpu/_triton_grouped_kernels.py) and of image-text
(engine/gpu/_triton_image_text_kernels.py) to machine code with the ptxas it ships, at
the production tile (``_triton.TILE``). The interpreter runs the kernels' arithmetic;
this checks what it does not: types, layouts, scalar atomics, control flow inside loops.

Default run (one process, 11 compiles, sm_90 only; about 42 CPU-s, ptxas included,
measured 27 November 2026 on the 2-core machine: a screened count, bin, grouped or
image-text kernel ~4.5-7 CPU-s, the others ~1-2, the process's start ~1; the former 27
compiles cost ~100): each kernel in each distinct code path once. The code paths: the
screened product tile, which holds the exact fp32 tile as its recompute branch (so an
exact float variant compiles nothing the screened one does not), and Hamming's integer
tile (exact only); for the count launch, linear and search counting, each screened; the
image-text pair launch (no screen). Between them they take each screen's product (bf16,
TF32), the cosine (fp64 division and square root, checked in the PTX) and neg_l2
epilogues on a screen's interval, CSR and label relevance, the pair outputs on and off.
The dot epilogue is the product itself, and an epilogue's other kernels compile the same
helper; but grouped recall's and image-text's kernels load the row factors only for
cosine and neg_l2 (``if EPI != 0``), and with no Hamming tile there, their dot branch is
reached by dot alone: an exact dot grouped kernel and the dot pair launch compile it
(review of issue 27: a compile error planted in that branch passed the 10 compiles that
lacked them). The architecture is sm_90 (H100 / H200, the GPUs the project measures
on): the kernels' source has nothing per architecture, and sm_90 is where Triton's
lowering of ``tl.dot`` and the instruction selection differ most (Hopper's warp-group
MMA and its layouts; sm_80 takes the older MMA path that sm_90 also keeps).

``--rc-exhaustive`` adds the former sweeps on sm_90 and sm_80 (A100): every flag meeting
every other flag (pairwise) for the main kernels, every epilogue with its screen for
grouped, every image-text epilogue x screen, and this default set.
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
from retrieval_checks.engine.gpu import _triton
from retrieval_checks.engine.gpu import _triton_grouped_kernels as gk, _triton_kernels as k
from retrieval_checks.engine.gpu import _triton_image_text_kernels as itk

BM, BN, BK = _triton.TILE  # the production tile
TILE = {"BM": BM, "BN": BN, "BK": BK}


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
IT_PTR = {"Q": "*fp32", "G": "*fp32", "CAPIMG": "*i32", "QA": "*fp32", "GA": "*fp32"}
IT_PAIR = dict(IT_PTR, TM="*i32", TN="*i32", PAIR="*fp32", n_i="i32", n_c="i32", d="i32")
IT_COUNT = dict(IT_PTR, PAIR="*fp32", BEST="*fp32", ABOVE_I="*i32", TIED_I="*i32", LOW_I="*i32",
                ABOVE_T="*i32", TIED_T="*i32", OWN="*fp32", OPTR="*i64", QN="*fp32", GN="*fp32", RECOMP="*i32",
                n_i="i32", n_c="i32", d="i32", tiles_m="i32", n_steps="i32", gamma="fp32")


def extract(e, csr):
    return k.extract_kernel, SIGS["extract"](e), dict(TILE, K=2, EPI=e, CSR=csr)


def count(e, s, csr, pairs, linear):
    return k.count_kernel, SIGS["count"](e), dict(TILE, K=2, EPI=e, SCREEN=s, EMULATE=False, CSR=csr,
                                                  PAIRS=pairs, LINEAR=linear)


def binning(e, s):
    return k.bin_kernel, SIGS["bin"](e), dict(TILE, K=2, EPI=e, SCREEN=s, EMULATE=False, CSR=bool(e % 2))


def grouped(e, s):
    return gk.grouped_kernel, GROUPED, dict(TILE, EPI=e, SCREEN=s, EMULATE=False)


def it_pair(e):
    return itk.pair_kernel, IT_PAIR, dict(TILE, EPI=e)


def it_count(e, s):
    return itk.count_kernel, IT_COUNT, dict(TILE, EPI=e, SCREEN=s, EMULATE=False)


# EPI: 0 dot, 1 cosine (fp64 epilogue), 2 neg_l2, 3 hamming (integer words, never screened);
# SCREEN: 0 exact fp32, 1 bf16 product, 2 TF32 product (each screened tile holds the exact tile)
DEFAULT = [
    # extract: the float tile with cosine's epilogue and CSR relevance; Hamming's tile, labels
    extract(1, 1), extract(3, 0),
    # count: linear counting screened (TF32, cosine on the interval, labels, pair outputs),
    # search counting screened (bf16, neg_l2 on the interval, CSR, pair outputs), Hamming's
    # exact tile (linear, CSR, no pair outputs)
    count(1, 2, False, True, True), count(2, 1, True, True, False), count(3, 0, True, False, True),
    # binning: screened (bf16, cosine, CSR); Hamming's exact tile
    binning(1, 1), binning(3, 0),
    # grouped recall: screened (TF32, cosine); exact dot, whose EPI == 0 branches (no row
    # factors loaded) are its own: grouped recall has no Hamming tile to take them
    grouped(1, 2), grouped(0, 0),
    # image-text: the pair launch with dot (tile_parts' EPI == 0 branch, which no Hamming
    # tile takes either); the count launch screened (bf16, neg_l2: the EPI != 0 branch)
    it_pair(0), it_count(2, 1),
]
# the exhaustive sweep, on both archs: every flag meets every other flag (main kernels), each
# grouped epilogue with its screen, every image-text pair of epilogue and screen
PAIRWISE = [(0, 0, False, False, True), (0, 1, True, True, False), (1, 2, False, True, True),
            (1, 0, True, False, False), (2, 1, False, False, False), (2, 2, True, True, True),
            (3, 0, True, True, True), (3, 0, False, False, False), (1, 1, True, True, True),
            (0, 2, False, True, False)]
EVERY = ([extract(e, c) for e in range(4) for c in (0, 1)] + [count(*c) for c in PAIRWISE]
         + [binning(e, s) for e, s in ((0, 0), (1, 1), (2, 2), (3, 0))]
         + [grouped(e, s) for e, s in ((0, 0), (1, 1), (2, 2))]
         + [it_pair(e) for e in range(3)] + [it_count(e, s) for e in range(3) for s in range(3)])

plan = [(90, c) for c in DEFAULT]
if sys.argv[1] == "exhaustive":
    plan, seen = [], set()
    for arch in (90, 80):
        for c in EVERY + DEFAULT:
            key = (arch, c[0].__name__, c[0].__module__, tuple(sorted(c[2].items())))
            if key not in seen:
                seen.add(key)
                plan.append((arch, c))
for arch, (fn, sig, consts) in plan:
    sig = dict(sig, **{name: "constexpr" for name in consts})
    try:
        out = compile(ASTSource(fn, sig, constexprs=consts), target=GPUTarget("cuda", arch, 32),
                      options={"enable_fp_fusion": False})  # as the launches pass it
    except Exception as exc:
        sys.exit(f"{fn.__module__}.{fn.__name__} {consts} sm_{arch}: {type(exc).__name__}: {exc}")
    assert len(out.asm["cubin"]) > 1000, (fn.__name__, consts, arch)
    if consts.get("EPI") == 1:  # cosine's epilogue: correctly rounded fp64 division and square root
        ops = set(re.findall(r"\b(?:div|sqrt|rcp|rsqrt)\.[a-z0-9.]*f64", out.asm["ptx"]))
        assert ops == {"div.rn.f64", "sqrt.rn.f64"}, (fn.__name__, consts, arch, sorted(ops))
print("ok", len(plan))
"""


@pytest.mark.slow  # starts early (tests/conftest.py: slow modules first)
@pytest.mark.default_cases(dict(sweep="default"))
@pytest.mark.parametrize("sweep", ["default", "exhaustive"])
def test_the_fused_kernels_compile_for_gpus_without_one(tmp_path, sweep):
    if not (Path(_SPEC.origin).parent / "backends" / "nvidia" / "bin" / "ptxas").exists():
        pytest.skip("this triton ships no ptxas (no NVIDIA backend)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path), TRITON_DEFAULT_FP_FUSION="1")
    # a limit that catches a hung compiler but not a busy machine: generous per compile
    # (about 5 CPU-s each; a load of 10 on 2 cores makes that ~30 s of wall time)
    limit = 120 + 90 * (11 if sweep == "default" else 80)
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, sweep],
        capture_output=True,
        text=True,
        env=env,
        timeout=limit,
    )
    want = "ok 11" if sweep == "default" else "ok 80"  # each planned compile ran
    assert out.returncode == 0 and out.stdout.strip() == want, (out.stdout + out.stderr)[-3000:]
