"""Ranks that make different calls on one process group (rank 0 ``evaluate``, rank 1
``evaluate_image_text``) raise the library's error on every rank, naming both calls,
instead of failing on each other's messages; the group stays usable. Two Gloo ranks,
one launch."""

from __future__ import annotations

import pytest

pytest.importorskip("torch.distributed")

from test_distributed import _float_problem, _image_text_scenarios, _launch  # noqa: E402


def test_ranks_calling_different_functions_raise_on_every_rank_naming_both(tmp_path):
    Q, G, ql, gl, qi, gi = _float_problem(5)
    plain = dict(name="same-call", Q=Q, G=G, kw=dict(query_labels=ql, gallery_labels=gl, query_ids=qi,
                                                      gallery_ids=gi, metrics=["map"], empty_queries="skip"))
    mixed = dict(plain, name="different-calls", rank_scenario={1: _image_text_scenarios()[0]})
    per_rank = _launch(tmp_path, 2, [mixed, plain], timeout=90)
    for rank, results in enumerate(per_rank):
        got = results["different-calls"]
        assert got[0] == "error" and got[1] == "InputError", (rank, got)
        assert "rank 0 called retrieval_checks.evaluate(" in got[2] and \
            "rank 1 called retrieval_checks.evaluate_image_text(" in got[2], got
        assert results["same-call"][0] == "ok", (rank, results["same-call"])  # the group still works
