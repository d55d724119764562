"""The counters behind the Counter seam (:mod:`.._counting`, whose :func:`select` picks
one per pass): how a block's scores become above / tied counts and pair outputs.

- :mod:`._counters`: the scored counters (:class:`~._counters.CpuCounter` on the
  compiled or numpy kernels, :class:`~._counters.TorchCounter`), which read a block of
  scores the block task computed;
- :mod:`._fused_cpu`: the fused CPU counter, which computes its own scores tile by tile
  and scans each while it is in cache (its compiled scans in :mod:`._fused_cpu_numba`,
  their vector steps in :mod:`._simd_numba`);
- :mod:`._kernels`: the CPU kernels' switch between the compiled twins
  (:mod:`._kernels_numba`) and the numpy ones (:mod:`._kernels_numpy`), the same bits.

The GPU kernels (:mod:`..gpu`) sit above this package and reuse its scored counters'
helpers; nothing here imports them, nor the pass around it (blocks, plan, stream).
"""
