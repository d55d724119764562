"""Ranks that make different calls on one process group (rank 0 ``evaluate``, rank 1
``evaluate_image_text``) raise the library's error on every rank, naming both calls,
instead of failing on each other's messages; the group stays usable. Two Gloo ranks,
one launch."""

from __future__ import annotations

import pytest

import retrieval_checks as rc

pytest.importorskip("torch.distributed")

from test_distributed import _float_problem, _image_text_scenarios, _launch  # noqa: E402


def test_ranks_calling_different_functions_raise_on_every_rank_naming_both(tmp_path):
    Q, G, ql, gl, qi, gi = _float_problem(5)
    plain = dict(
        name="same-call",
        Q=Q,
        G=G,
        kw=dict(
            query_labels=ql,
            gallery_labels=gl,
            query_ids=qi,
            gallery_ids=gi,
            metrics=["map"],
            empty_queries="skip",
        ),
    )
    mixed = dict(plain, name="different-calls", rank_scenario={1: _image_text_scenarios()[0]})
    per_rank = _launch(tmp_path, 2, [mixed, plain], timeout=90)
    for rank, results in enumerate(per_rank):
        got = results["different-calls"]
        assert got[0] == "error" and got[1] == "InputError", (rank, got)
        assert (
            "rank 0 called retrieval_checks.evaluate(" in got[2]
            and "rank 1 called retrieval_checks.evaluate_image_text(" in got[2]
        ), got
        assert results["same-call"][0] == "ok", (
            rank,
            results["same-call"],
        )  # the group still works


def test_a_bad_or_differing_option_on_one_rank_raises_on_every_rank(tmp_path):
    """Options checked before the ranks talk left the other ranks waiting in the call's
    first exchange (or pairing it with the failing rank's next call); options the ranks
    did not compare (protocol, seed...) ran different collectives or gave each rank its
    own numbers."""
    Q, G, ql, gl, qi, gi = _float_problem(5)
    plain = dict(
        name="same-call",
        Q=Q,
        G=G,
        kw=dict(
            query_labels=ql,
            gallery_labels=gl,
            query_ids=qi,
            gallery_ids=gi,
            metrics=["map"],
            empty_queries="skip",
        ),
    )
    it = _image_text_scenarios()[0]
    scenarios = [
        dict(
            it, name="it-bad-metric", rank_kw={1: {"metrics": ["i2t_recall@5", "no_such_metric"]}}
        ),
        dict(it, name="it-seed-differs", rank_kw={1: {"seed": 7}}),
        dict(it, name="it-protocol-differs", rank_kw={1: {"protocol": "1k"}}),
        dict(plain, name="executor-on-one-rank", rank_kw={1: {"executor": "a pool"}}),
        plain,
    ]
    per_rank = _launch(tmp_path, 2, scenarios, timeout=90)
    expected = {
        "it-bad-metric": "no_such_metric",
        "it-seed-differs": "seed",
        "it-protocol-differs": "protocol",
        "executor-on-one-rank": "executor= and process_group= do not combine",
    }
    for rank, results in enumerate(per_rank):
        for name, word in expected.items():
            got = results[name]
            assert got[0] == "error" and word in got[2], (name, rank, got)
            assert issubclass(getattr(rc, got[1], Exception), rc.InputError), (name, rank, got)
        assert results["same-call"][0] == "ok", (rank, results["same-call"])
