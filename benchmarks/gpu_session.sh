#!/usr/bin/env bash
# One GPU session for the CUDA path (issue 30), as one prepared command: the lent machine is
# billed by the second, so every phase that belongs together runs in one call, with its own
# time limit, and writes its log under $OUT (what comes back from the device machine).
#
#   OUT=/tmp/gpu bash benchmarks/gpu_session.sh suites exact bench     # the first call
#   OUT=/tmp/gpu bash benchmarks/gpu_session.sh big tiles              # the second call
#
# Phases:
#   env     versions, nvidia-smi (always run first)
#   suites  the whole test suite on CUDA twice, at the same time on the machine's cores:
#           RC_TRITON=0 (the torch path) and RC_TRITON=1 (the fused kernels), JUnit XML
#   exact   benchmarks/gpu_exactness.py: every CUDA variant against the CPU path, bit for bit
#   bench   benchmarks/bench_gpu.py $BENCH_ARGS (default 100k x 128, grouped 2M, image-text 5k)
#   big     bench_gpu.py $BIG_ARGS (default: 1M x 128, the issue's goal row, fused fp32 only,
#           after a 20k row that compiles; the torch path at 1M takes 83 s and each screened
#           row about as long as the fused one, so a call of a few minutes holds none of them)
#   tiles   the tile-shape sweep of the fused kernel at 200k x 128
#
# What came back is at most 8 files: with RESULTS set (the device's $OUT), every log is
# packed into $RESULTS/logs.tgz after every phase and when the script ends:
#
#   RESULTS=$OUT OUT=/tmp/g bash benchmarks/gpu_session.sh suites exact bench big
#
# RESULTS first: bash expands a command's prefix assignments left to right, so with
# `OUT=/tmp/g RESULTS=$OUT` RESULTS is /tmp/g too and nothing comes back (the fifth session
# lost its logs so). The script refuses RESULTS equal to OUT.
#
# Lessons of the four sessions so far (docs/gpu.md, "What ran on a GPU"): a machine is lent
# for 15 minutes in all and a second call may be refused, so the first call holds every
# phase; the suites share the machine with exact (its timings mean nothing), never with
# bench or big.
#
# Missing Python packages travel as wheels in .whl/ (see /work/.library/device/README.md);
# the package is installed editable so that pytest finds the plugin's entry point.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=${PY:-python3}
log() { echo "== $(date +%T) $*"; }
pack() {  # the logs so far, packed again after every phase: a call killed at its limit keeps them
    if [ -n "${RESULTS:-}" ]; then tar czf "$RESULTS/logs.tgz" -C "$OUT" . 2>/dev/null; fi
}
trap pack EXIT
if [ -n "${RESULTS:-}" ] && [ "$(realpath -m "$RESULTS")" = "$(realpath -m "$OUT")" ]; then
    echo "gpu_session: RESULTS ($RESULTS) is OUT: write RESULTS=\$OUT OUT=/tmp/g (RESULTS first)" >&2
    exit 2
fi

if compgen -G ".whl/*.whl" >/dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! $PY -m pip install -q --no-index --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1; then
    log "editable install failed (see install.log); using PYTHONPATH and -p for the plugin"
    export PYTHONPATH=$PWD:$PWD/plugins${PYTHONPATH:+:$PYTHONPATH}
    export PYTEST_ADDOPTS="-p pytest_retrieval_checks.plugin ${PYTEST_ADDOPTS:-}"
fi

{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    $PY - <<'EOF'
import importlib, platform
print("python", platform.python_version())
for m in ("torch", "triton", "numpy", "numba", "scipy", "sklearn", "pytest", "xdist", "hypothesis",
          "pytorch_metric_learning", "captum", "torchmetrics", "retrieval_checks"):
    try:
        mod = importlib.import_module(m)
        print(m, getattr(mod, "__version__", "?"))
    except Exception as e:  # noqa: BLE001
        print(m, "MISSING", type(e).__name__, e)
import torch
print("cuda", torch.version.cuda, torch.cuda.get_device_name(), torch.cuda.get_device_capability())
EOF
} >"$OUT/env.txt" 2>&1
log "env"; cat "$OUT/env.txt"

# The interpreter test files set TRITON_INTERPRET=1 at import, and xdist workers import every
# test module: with the kernels on, those files stay out, so that every kernel is compiled for
# the GPU (their CUDA checks start their own processes and run in the RC_TRITON=0 suite).
INTERPRETED=(tests/engine/test_triton.py tests/engine/test_triton_compile.py
    tests/engine/test_triton_edges.py tests/engine/test_triton_edges_it_grouped.py
    tests/engine/test_triton_grouped.py tests/engine/test_triton_image_text.py)

suite() {  # $1: RC_TRITON value, $2: workers, $3: seconds, then extra pytest arguments
    local flag=$1 workers=$2 secs=$3
    shift 3
    # failures are written to $OUT/failures.txt as they happen (benchmarks/_failure_log.py)
    RC_TRITON=$flag PYTHONPATH=$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH} timeout "$secs" \
        $PY -m pytest -q -p no:cacheprovider -p _failure_log -p no:benchmark -n "$workers" \
        --dist loadgroup -o addopts="" -rfE --durations=10 --junitxml="$OUT/junit$flag.xml" \
        --timeout="${TEST_TIMEOUT:-90}" "$@" >"$OUT/suite$flag.log" 2>&1
    echo "rc=$?" >>"$OUT/suite$flag.log"
}
finish_suites() {
    if [ -n "${SUITES_STARTED:-}" ]; then
        wait
        # timeout stops pytest, not always its xdist workers: none may run beside a timing
        pkill -f "xdist.remote|execnet" 2>/dev/null
        for f in "$OUT"/suite*.log; do tail -n 25 "$f"; done
        SUITES_STARTED=
    fi
}

for phase in "$@"; do
    case "$phase" in
        cuda-suite)
            # the torch path on CUDA, every test but the interpreter files, on most cores
            log "suite: RC_TRITON=0 without the interpreter files"
            suite 0 "${WORKERS:-12}" "${SUITE_S:-150}" "${INTERPRETED[@]/#/--ignore=}" &
            SUITES_STARTED=1 ;;
        default-suite)
            # the default users get on CUDA (RC_TRITON unset: the fused kernels after their
            # self-checks), every test but the interpreter files, in the background: exact runs beside
            log "suite: RC_TRITON=auto without the interpreter files"
            suite auto "${WORKERS:-12}" "${SUITE_S:-270}" "${INTERPRETED[@]/#/--ignore=}" &
            SUITES_STARTED=1 ;;
        suites)
            # in the background: the next phase (exact) runs beside them; bench waits for them
            log "suites: RC_TRITON=0 and RC_TRITON=1 side by side"
            suite 0 7 "${SUITE_S:-230}" &
            suite 1 7 "${SUITE_S:-230}" "${INTERPRETED[@]/#/--ignore=}" &
            SUITES_STARTED=1 ;;
        exact)
            log "exactness"
            timeout "${EXACT_S:-200}" $PY benchmarks/gpu_exactness.py ${EXACT_ARGS:-} \
                --json "$OUT/exact.json" 2>&1 | tee -a "$OUT/exact.log" | tail -n 30 ;;
        bench)
            finish_suites
            log "bench ${BENCH_ARGS:=--sizes 100000x128 --grouped-n 2000000 --image-text 5000}"
            # shellcheck disable=SC2086
            timeout "${BENCH_S:-200}" $PY benchmarks/bench_gpu.py $BENCH_ARGS --json "$OUT/bench.json" 2>&1 \
                | tee "$OUT/bench.log" | tail -n 40 ;;
        big)
            finish_suites
            log "bench ${BIG_ARGS:=--sizes 20000x128 1000000x128 --skip-torch --warmup none --screens 0}"
            # shellcheck disable=SC2086
            timeout "${BIG_S:-300}" $PY benchmarks/bench_gpu.py $BIG_ARGS --json "$OUT/big.json" 2>&1 | tee "$OUT/big.log" | tail -n 30 ;;
        tiles)
            finish_suites
            log "tile sweep 200k x 128"
            timeout "${TILES_S:-200}" $PY benchmarks/bench_gpu.py --sizes 200000x128 --skip-full \
                --tiles 32x64x32 64x64x32 64x128x32 128x64x32 128x128x32 128x128x64 \
                --json "$OUT/tiles.json" 2>&1 | tee "$OUT/tiles.log" | tail -n 30 ;;
        profile)
            # where the fused kernel's time goes, by differences at 100k x 128 (fp32, rank set):
            # tile shapes (each checked "same" against the torch path), then the epilogue's
            # cost (dot and neg_l2 on the same unit rows: cosine minus dot is its fp64 epilogue)
            finish_suites
            log "profile: tiles ${PROFILE_TILES:=64x64x32 64x128x32 128x64x32 128x128x32}"
            # shellcheck disable=SC2086
            timeout "${PROFILE_S:-150}" $PY benchmarks/bench_gpu.py --sizes 100000x128 --skip-full \
                --screens 0 --tiles $PROFILE_TILES --json "$OUT/profile.json" 2>&1 | tee "$OUT/profile.log" | tail -n 8
            for sim in dot neg_l2; do
                timeout 40 $PY benchmarks/bench_gpu.py --sizes 100000x128 --skip-full --skip-torch \
                    --screens 0 --similarity $sim --json "$OUT/profile_$sim.json" 2>&1 | tee -a "$OUT/profile.log" | tail -n 3
            done ;;
        big-best)
            # the 1M row on the fastest tile shape of profile that gave the torch path's numbers
            finish_suites
            best=$($PY - "$OUT/profile.json" <<'PYEOF'
import json, sys
try:
    row = json.load(open(sys.argv[1]))["size 100000, 128"]
except Exception:  # noqa: BLE001
    row = {}
same = {k: v["s"] for k, v in row.items() if k.startswith("tile ") and v.get("check") == "same"}
fused = row.get("triton", {})
if fused.get("check") == "same":
    same["tile default"] = fused["s"]
best = min(same, key=same.get) if same else "tile default"
print("" if best == "tile default" else best.split()[1])
PYEOF
)
            log "1M x 128 on tile '${best:-default}'"
            RC_TRITON_TILE=$best timeout "${BIG_S:-100}" $PY benchmarks/bench_gpu.py --sizes 20000x128 1000000x128 \
                --skip-torch --skip-full --warmup none --screens 0 --json "$OUT/big.json" 2>&1 | tee "$OUT/big.log" | tail -n 6 ;;
        env) ;;
        *) log "unknown phase $phase" ;;
    esac
    pack
done
finish_suites
log "done"
