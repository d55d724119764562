"""``did_you_mean``: the one suggestion rule of every message that rejects a name."""

from __future__ import annotations

import pytest

from retrieval_checks._suggest import did_you_mean, hint

INPUTS = ["queries", "gallery", "query_labels", "gallery_labels", "query_ids", "gallery_ids"]


@pytest.mark.parametrize(
    "typo, candidates, meant",
    [
        ("querys", INPUTS, "queries"),  # difflib alone said 'query_ids' (h13)
        ("galery", INPUTS, "gallery"),
        ("mapp", ["map", "mrr", "map@R"], "map"),
        ("simlarity", ["similarity", "seed"], "similarity"),
        ("AT_LEST", ["at_least", "at_most"], "at_least"),
        ("zzz", ["map", "mrr"], None),
        ("map", ["map"], None),  # never the name itself
    ],
)
def test_the_closest_name_is_suggested(typo, candidates, meant):
    assert did_you_mean(typo, candidates) == meant
    assert hint(typo, candidates) == (f" Did you mean {meant!r}?" if meant else "")


def test_the_image_text_papers_rank_words_name_the_rank_metrics():
    """'median_rank' was read as unknown with 'mean_recall' suggested (h20): the words of
    the papers' MedR and MeanR are aliases of medr and meanr."""
    import retrieval_checks as rc

    assert rc.parse_metric("median_rank").name == "medr"
    assert rc.parse_metric("mean_rank").name == "meanr"
