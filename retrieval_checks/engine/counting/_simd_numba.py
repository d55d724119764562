"""Stream compaction for the compiled scans: the scores of a tile row at or above a
threshold, copied to a short buffer in one vectorised pass (16 lanes at a time), so the
exact counts that follow read a few percent of the row instead of all of it.

The lanes are compared and the passing ones stored contiguously by LLVM's
``llvm.masked.compressstore`` (one ``vcompressps`` on AVX-512; LLVM expands it to
per-lane stores on other targets, where :data:`VECTOR_COMPRESS` is False and the
kernels take a branch-free scalar loop instead). Either way the buffer receives the same
values in the same order: those ``>= threshold``, in column order (NaN never passes; the
engine's scores are finite or -inf).

Imported with the numba kernels that use it (:mod:`._fused_cpu_numba`).
"""

from __future__ import annotations

import numba
from llvmlite import binding as _llvm
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = [
    "VECTOR_COMPRESS",
    "LANES",
    "compact_at_least",
    "compact_lanes_at_least",
    "place16",
]

LANES = 16


def _host_compresses() -> bool:
    """Whether numba compiles for a CPU with a vector compress-store (AVX-512F): the
    host (numba's default target), unless ``NUMBA_CPU_NAME`` names another CPU. Never
    under ``NUMBA_DISABLE_JIT`` (the kernels then run as Python, where the LLVM
    intrinsic does not exist)."""
    if numba.config.DISABLE_JIT:
        return False
    name = numba.config.CPU_NAME
    if name and name != "host":
        return "+avx512f" in (numba.config.CPU_FEATURES or "")
    try:
        return "avx512f" in _llvm.get_host_cpu_features().flatten()
    except RuntimeError:  # features unknown: the scalar loop is always right
        return False


VECTOR_COMPRESS = _host_compresses()

_I1x16 = ir.VectorType(ir.IntType(1), LANES)
_F32x16 = ir.VectorType(ir.FloatType(), LANES)
_I32x16 = ir.VectorType(ir.IntType(32), LANES)


def _splat(builder, value, vtype):
    first = builder.insert_element(
        ir.Constant(vtype, ir.Undefined), value, ir.Constant(ir.IntType(32), 0)
    )
    return builder.shuffle_vector(first, first, ir.Constant(_I32x16, [0] * LANES))


def _load16(builder, data, at):
    ptr = builder.gep(data, [at])
    return builder.load(builder.bitcast(ptr, _F32x16.as_pointer()), align=4)


def _compress_store(builder, vec, data, at, mask):
    elt = vec.type.element
    fnty = ir.FunctionType(ir.VoidType(), [vec.type, elt.as_pointer(), _I1x16])
    suffix = "v16f32" if isinstance(elt, ir.FloatType) else "v16i32"
    fn = cgutils.get_or_insert_function(builder.module, fnty, f"llvm.masked.compressstore.{suffix}")
    builder.call(fn, [vec, builder.gep(data, [at]), mask])


def _popcount(builder, mask):
    i16 = ir.IntType(16)
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(i16, [i16]), "llvm.ctpop.i16"
    )
    return builder.zext(builder.call(fn, [builder.bitcast(mask, i16)]), ir.IntType(64))


@intrinsic
def _compress16(typingctx, src, at, thr, dst, n0):
    """``src[at : at + 16]`` lanes ``>= thr`` stored at ``dst[n0 :]`` in order (only
    those lanes are written); returns how many."""
    sig = types.int64(src, types.int64, types.float32, dst, types.int64)

    def codegen(context, builder, signature, args):
        src_v, at_v, thr_v, dst_v, n0_v = args
        s = context.make_array(signature.args[0])(context, builder, src_v)
        d = context.make_array(signature.args[3])(context, builder, dst_v)
        vec = _load16(builder, s.data, at_v)
        mask = builder.fcmp_ordered(">=", vec, _splat(builder, thr_v, _F32x16))
        _compress_store(builder, vec, d.data, n0_v, mask)
        return _popcount(builder, mask)

    return sig, codegen


@intrinsic
def _compress16_lanes(typingctx, src, at, thr, t0, vals, idx, n0, j0):
    """``src[at : at + 16]`` lanes ``>= thr[t0 : t0 + 16]`` (a threshold per lane):
    their values stored at ``vals[n0 :]`` and their lane numbers plus ``j0`` (int32) at
    ``idx[n0 :]``, in order; returns how many."""
    sig = types.int64(src, types.int64, thr, types.int64, vals, idx, types.int64, types.int32)

    def codegen(context, builder, signature, args):
        src_v, at_v, thr_v, t0_v, vals_v, idx_v, n0_v, j0_v = args
        s = context.make_array(signature.args[0])(context, builder, src_v)
        t = context.make_array(signature.args[2])(context, builder, thr_v)
        v = context.make_array(signature.args[4])(context, builder, vals_v)
        ix = context.make_array(signature.args[5])(context, builder, idx_v)
        vec = _load16(builder, s.data, at_v)
        mask = builder.fcmp_ordered(">=", vec, _load16(builder, t.data, t0_v))
        lanes = builder.add(
            _splat(builder, j0_v, _I32x16), ir.Constant(_I32x16, list(range(LANES)))
        )
        _compress_store(builder, vec, v.data, n0_v, mask)
        _compress_store(builder, lanes, ix.data, n0_v, mask)
        return _popcount(builder, mask)

    return sig, codegen


@intrinsic
def _place16(typingctx, pads, at, s):
    """``(#(pads[at : at + 16] <= s)) | (#(pads[at : at + 16] == s)) << 8``: one vector
    compare each."""
    sig = types.int64(pads, types.int64, types.float32)

    def codegen(context, builder, signature, args):
        pads_v, at_v, s_v = args
        p = context.make_array(signature.args[0])(context, builder, pads_v)
        vec = _load16(builder, p.data, at_v)
        splat = _splat(builder, s_v, _F32x16)
        le = _popcount(builder, builder.fcmp_ordered("<=", vec, splat))
        eq = _popcount(builder, builder.fcmp_ordered("==", vec, splat))
        return builder.or_(le, builder.shl(eq, ir.Constant(ir.IntType(64), 8)))

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def place16(pads, at, s, vector):
    """Where ``s`` falls among 16 ascending scores ``pads[at : at + 16]`` (a row's
    relevant scores, then +inf): ``(p, e)`` with ``p`` of them ``<= s`` and ``e`` of
    those ``== s``. ``vector``: two 16-lane compares (:data:`VECTOR_COMPRESS`), else a
    loop."""
    if vector:
        got = _place16(pads, at, s)
        return got & 255, got >> 8
    p = 0
    e = 0
    for u in range(LANES):
        v = pads[at + u]
        p += v <= s
        e += v == s
    return p, e


@njit(cache=True, nogil=True, inline="always")
def compact_at_least(row, base, width, thr, buf, vector):
    """The scores ``row[base : base + width]`` ``>= thr``, copied in order to ``buf``
    (``width`` long at least); returns how many. ``vector``: 16 lanes at a time
    (:data:`VECTOR_COMPRESS`; callers pass the constant), else one branch-free loop."""
    n = 0
    j = 0
    if vector:
        while j + LANES <= width:
            n += _compress16(row, base + j, thr, buf, n)
            j += LANES
    while j < width:
        s = row[base + j]
        buf[n] = s
        n += s >= thr
        j += 1
    return n


@njit(cache=True, nogil=True, inline="always")
def compact_lanes_at_least(row, base, width, thr, vals, idx, vector):
    """The scores ``row[base + j] >= thr[j]`` for ``j < width`` (a threshold per column):
    values to ``vals`` and columns ``j`` (int32) to ``idx``, in order (both ``width``
    long at least); returns how many. ``vector``: as :func:`compact_at_least`."""
    n = 0
    j = 0
    if vector:
        while j + LANES <= width:
            n += _compress16_lanes(row, base + j, thr, j, vals, idx, n, numba.int32(j))
            j += LANES
    while j < width:
        s = row[base + j]
        vals[n] = s
        idx[n] = j
        n += s >= thr[j]
        j += 1
    return n
