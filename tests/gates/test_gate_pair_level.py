"""assert_recall_at_precision checks the level it was given, not a rounded one (issue 25:
the level was formatted with six significant digits, so precision=0.9999999 gated
recall_at_precision@1)."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc


def test_the_gate_checks_the_precision_level_it_was_given():
    # one query: 9 positives at score 3, one negative at 2, one positive at 1 ->
    # precision 10/11 at threshold 1 (recall 1), precision 1 at threshold 3 (recall 0.9)
    # (scores Q . G: the query 0.5 and the rows doubled, so no gallery row equals the query,
    # which a gate would refuse as a query that retrieves itself)
    Q = np.full((1, 1), 0.5, np.float32)
    G = 2 * np.array([3] * 9 + [2, 1], np.float32)[:, None]
    rel = np.array([[True] * 9 + [False, True]])
    level = 0.9999999  # 9 / 9 reaches it, 10 / 11 does not
    res = rc.evaluate(
        Q,
        G,
        relevance=rel,
        similarity="dot",
        metrics=[f"recall_at_precision@{level!r}", "recall_at_precision@0.9"],
    )
    assert res[f"recall_at_precision@{level!r}"] == 0.9
    rc.assert_recall_at_precision(res, 0.9, precision=level)
    with pytest.raises(AssertionError, match=r"recall_at_precision@0\.9999999 "):
        rc.assert_recall_at_precision(res, 0.95, precision=level)
    assert res["recall_at_precision@0.9"] == 1.0  # 10/11 >= 0.9: recall 1
    # and so for any model: 0.9 is below the share of positive pairs (10 of 11), so the
    # gate could never fail and is refused (h22)
    with pytest.raises(rc.InputError, match=r"at or below the share of positive pairs"):
        rc.assert_recall_at_precision(res, 1.0 - 1e-9, precision=0.9)
