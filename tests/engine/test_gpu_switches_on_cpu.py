"""The GPU switches (RC_TRITON, RC_TRITON_SCREEN, RC_TRITON_TILE) are checked on every
machine (review finding 7): a typo in a CI configuration is a BackendError naming the
variable and the valid values where it is set, not first on the day the job lands on
a GPU runner; a valid value changes nothing on CPU.

Cost: about 1 s (small evaluations on CPU; no Triton, no interpreter).
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc


def _data():
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(10), 3)
    return rng.normal(size=(10, 8))[y] + 0.5 * rng.normal(size=(30, 8)), y


@pytest.mark.parametrize(
    "name, value",
    [
        ("RC_TRITON", "bogus"),
        ("RC_TRITON", "true"),
        ("RC_TRITON_SCREEN", "fp16"),
        ("RC_TRITON_TILE", "7x7x7"),
    ],
)
@pytest.mark.parametrize("metrics", [["map", "ndcg@10"], ["grouped_recall@1"]])
def test_an_invalid_switch_is_an_error_on_cpu(monkeypatch, name, value, metrics):
    x, y = _data()
    monkeypatch.setenv(name, value)
    # 10 labels: groups of 5 (the default 10 makes one group, refused before the pass)
    extra = {"group_size": 5} if metrics == ["grouped_recall@1"] else {}
    with pytest.raises(rc.BackendError, match=rf"{name}='{value}' is not valid; use "):
        rc.evaluate(x, query_labels=y, metrics=metrics, **extra)


def test_an_invalid_switch_is_an_error_for_image_text(monkeypatch):
    rng = np.random.default_rng(0)
    images = rng.normal(size=(6, 8)).astype(np.float32)
    caption_image = np.repeat(np.arange(6), 2)
    captions = images[caption_image] + 0.1 * rng.normal(size=(12, 8)).astype(np.float32)
    monkeypatch.setenv("RC_TRITON", "bogus")
    with pytest.raises(rc.BackendError, match="RC_TRITON='bogus' is not valid"):
        rc.evaluate_image_text(images, captions, caption_image)


def test_valid_switches_change_nothing_on_cpu(monkeypatch):
    x, y = _data()
    values = []
    for mode in ("0", "auto", "1", ""):
        monkeypatch.setenv("RC_TRITON", mode)
        monkeypatch.setenv("RC_TRITON_SCREEN", "bf16")
        monkeypatch.setenv("RC_TRITON_TILE", "64x64x32")
        r = rc.evaluate(x, query_labels=y, metrics=["map", "ndcg@10"])
        values.append((r["map"], r["ndcg@10"]))
    assert len(set(values)) == 1
