"""The fused GPU kernels (Triton), imported only when a seam selects them.

- :mod:`._triton`: the main pass's fused kernel (scores, counts and pair outputs in one
  launch), chosen by the Counter seam (:func:`.._counting.select`);
- :mod:`._triton_grouped`: grouped Recall@K, every group in one launch;
- :mod:`._triton_image_text`: both image-text directions in one pass over shared tiles;
  both chosen by the task seam (:mod:`.._fused_tasks`).

The ``*_kernels`` modules hold the Triton JIT functions (importing one imports triton).
This package imports nothing at import time: the engine core never names Triton.
"""
