"""The suite project the suite tests of several files share (test_suites.py,
test_suite_yaml.py): a few small arrays and two model files in a temporary folder,
built per test (milliseconds)."""

from __future__ import annotations

import numpy as np
import pytest

EMB = """
import numpy as np

def f(x):
    return np.asarray(x, dtype=np.float64)
"""

SLOW = """
import time
import numpy as np

def f(x):
    time.sleep(30)  # never returns within the test's timeout
    return np.asarray(x)
"""


@pytest.fixture
def where(tmp_path):
    """A suite project: data/set.npz (40 queries of 10 classes: embeddings, inputs,
    labels), data/skip.npz (the same with half the queries skipped: no relevant item),
    data/pairs.npz (20 images x 100 captions) and two models, emb.py:f (the identity)
    and slow.py:f (never returns within a test's timeout)."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 4)
    e = (rng.normal(size=(10, 8))[y] + 1.0 * rng.normal(size=(40, 8))).astype(np.float32)
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/set.npz", embeddings=e, inputs=e, labels=y)
    y2 = y.copy()
    y2[::2] = 100 + np.arange(20)  # half the queries have no relevant item: skipped
    np.savez(tmp_path / "data/skip.npz", embeddings=e, inputs=e, labels=y2)
    images = rng.normal(size=(20, 8)).astype(np.float32)
    image = np.repeat(np.arange(20), 5)
    captions = (images[image] + 1.0 * rng.normal(size=(100, 8))).astype(np.float32)
    np.savez(tmp_path / "data/pairs.npz", images=images, captions=captions, image=image)
    (tmp_path / "emb.py").write_text(EMB)
    (tmp_path / "slow.py").write_text(SLOW)
    return tmp_path
