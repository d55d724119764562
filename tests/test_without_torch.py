"""The CPU engine needs no torch: run the library in a fresh interpreter that cannot import it."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_everything_cpu_works_without_torch():
    code = textwrap.dedent(
        """
        import sys

        class NoTorch:  # as if torch were not installed: every `import torch...` fails
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError(f"No module named {name!r} (blocked for this test)")
                return None

        sys.meta_path.insert(0, NoTorch())
        import numpy as np
        import retrieval_checks as rc

        rng = np.random.default_rng(0)
        y = np.repeat(np.arange(30), 5)
        X = (rng.normal(size=(30, 8))[y] + rng.normal(size=(150, 8))).astype(np.float32)
        r = rc.evaluate(X, query_labels=y, metrics=["map", "map@R", "hit_rate@1", "recall_at_precision@0.5",
                                                    "precision_at_recall@0.5", "grouped_recall@1",
                                                    "discriminant_ratio"], group_size=5)
        assert r.config["backend"] == "numpy", r.config
        assert 0 < r["map"] < 1 and r.intervals["grouped_recall@1"]
        rc.bootstrap_interval(r, "map", n_resamples=200)
        img = rng.normal(size=(40, 8)).astype(np.float32)
        ci = np.repeat(np.arange(40), 3)
        t = rc.evaluate_image_text(img, img[ci] + rng.normal(size=(120, 8)).astype(np.float32), ci, n_resamples=100)
        assert 0 <= t["rsum"] <= 600
        try:
            rc.evaluate(X, query_labels=y, metrics=["map"], device="cuda")
        except rc.BackendError as exc:
            assert "needs PyTorch" in str(exc)
        else:
            raise AssertionError("device='cuda' without torch must fail clearly")
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")
