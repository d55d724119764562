"""Slice gates in the tracking layer, without a pytest session: the history keeps every
slice row of a gate (read back equal), the HTML report draws one chart per slice gate
(a failed slice in red, the baseline as a ring, the too-small and missing-value notes),
and the markdown table lists the slices with their baseline.

Cost: about 1 s (one 240-query evaluation, three gates).
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.tracking import History, render_markdown, render_report


@pytest.fixture(scope="module")
def records():
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(40), 6)
    X = (rng.normal(size=(40, 16))[y] + rng.normal(size=(240, 16))).astype(np.float32)
    lang = np.where(y < 20, "de", "en").astype(object)
    lang[-2:] = None
    r = rc.evaluate(X, query_labels=y, metrics=["map"], slices=lang)
    base = {
        k: {"value": v["value"] + (0.05 if k == "de" else 0.0)}
        for k, v in rc.slice_baseline(r, "map").items()
    }
    events = []
    with rc.gates.listening(events.append):
        # the 2 queries without a value are counted and reported (what these tests read), not gated
        rc.assert_slices_at_least(r, "map", 0.1, unsliced="ignore")
        with pytest.raises(AssertionError):
            rc.assert_no_slice_regression(r, base, "map", max_drop=0.01, unsliced="ignore")
    out = []
    for i, e in enumerate(events):
        d = e.to_dict()
        d["test"] = f"tests/test_model.py::test_{i}"
        out.append(d)
    return out


def test_history_keeps_every_slice_row(tmp_path, records):
    h = History(tmp_path / "h.sqlite")
    run = h.record({"command": "pytest"}, records, exitstatus=1)
    back = h.results(run)
    assert [b["slices"] for b in back] == [r["slices"] for r in records]
    assert back[0]["slice_missing"] == {"slice": 2}
    drop = {row["slice"]: row for row in back[1]["slices"]}
    assert drop["de"]["passed"] is False and drop["en"]["passed"] is True
    assert drop["de"]["baseline"] == pytest.approx(drop["de"]["value"] + 0.05)


def test_html_report_charts_each_slice_gate(records):
    page = render_report(records, run={"command": "pytest"})
    assert "<h2>Slices</h2>" in page and page.count('<svg class="slices"') == 2
    assert 'fill="#c5221f"><title>de: ' in page  # the failed slice's dot is red
    assert "<title>baseline " in page  # baseline rings on the drop gate
    assert "2 queries have no slice value (in no slice)" in page


def test_markdown_lists_slices_with_baseline_and_verdict(records):
    md = render_markdown(records)
    assert md.count("| slice | value [interval] | baseline | queries | units | result |") == 2
    de_rows = [line for line in md.splitlines() if line.startswith("| de |")]
    assert any(line.endswith("| FAIL |") and "| 0." in line for line in de_rows)
    assert "2 queries have no slice value (in no slice)." in md


def _slice_gate(rows, worst):
    """A slice gate's record as the history keeps it: the worst slice's value on the
    record, each slice's row in ``slices``."""
    return {
        "test": "t.py::test_slices",
        "metric": "map",
        "value": rows[worst][0],
        "passed": True,
        "gate": "assert_slices",
        "worst_slice": worst,
        "slices": [
            {
                "slice": k,
                "metric": "map",
                "value": v,
                "low": v - 0.03,
                "high": v + 0.03,
                "n": 40,
                "unit": "classes",
                "confidence": 0.95,
                "passed": True,
            }
            for k, (v,) in ((k, (v[0],)) for k, v in rows.items())
        ],
    }


def test_compare_judges_a_slice_gate_slice_by_slice(tmp_path):
    """compare on a slice gate compares each slice with itself, never the worst slice
    of one run with the worst slice of the other: German fell 0.727 -> 0.630 (beyond
    the 0.06 tolerance) while the worst slice moved from French 0.685 to German 0.630."""
    import io

    from retrieval_checks.tracking import main as cli

    h = History(tmp_path / "h.sqlite")
    meta = {"started": "t", "git_commit": None, "git_dirty": 0, "selection": ""}
    h.record(
        meta, [_slice_gate({"en": (0.694,), "de": (0.727,), "fr": (0.685,)}, "fr")], exitstatus=0
    )
    h.record(
        meta, [_slice_gate({"en": (0.694,), "de": (0.630,), "fr": (0.685,)}, "de")], exitstatus=0
    )
    out = io.StringIO()
    code = cli(
        ["--db", str(tmp_path / "h.sqlite"), "compare", "-2", "-1", "--max-drop", "0.06"], out=out
    )
    text = out.getvalue()
    assert code == 1, text
    de = [line for line in text.splitlines() if "slice de" in line]
    assert de and "REGRESSED" in de[0] and "0.7270" in de[0] and "0.6300" in de[0], text
    assert "1 regressed" in text
    # a slice of the baseline run missing from the candidate is a lost gate, not a pass
    h.record(meta, [_slice_gate({"en": (0.694,), "fr": (0.685,)}, "fr")], exitstatus=0)
    out = io.StringIO()
    code = cli(
        ["--db", str(tmp_path / "h.sqlite"), "compare", "-2", "-1", "--max-drop", "0.2"], out=out
    )
    assert code == 1 and "MISSING" in out.getvalue() and "slice de" in out.getvalue(), (
        out.getvalue()
    )


def test_the_change_of_a_slice_gate_is_its_worst_slice_against_the_same_slice():
    from retrieval_checks.tracking._markdown import change_text

    before = _slice_gate({"en": (0.694,), "de": (0.727,), "fr": (0.685,)}, "fr")
    now = _slice_gate({"en": (0.694,), "de": (0.630,), "fr": (0.685,)}, "de")
    text = change_text(now, {(now["test"], "map"): before}, "previous run")
    assert text == "-0.0970 vs previous run (slice de)"  # not 0.630 - 0.685 (French then)
    gone = _slice_gate({"en": (0.694,), "fr": (0.685,)}, "fr")
    assert "slice de: no value" in change_text(now, {(now["test"], "map"): gone}, "previous run")


def test_a_change_over_another_evaluated_set_is_not_shown_as_one():
    """The markdown report's change column: values over different evaluated sets (n_used)
    are not a change (a new user's trial read "+0.1282 vs run 2" across 1797 and 300)."""
    from retrieval_checks.tracking._markdown import change_text

    before = {"test": "t", "metric": "map", "value": 0.5614, "n_used": 1797}
    now = {"test": "t", "metric": "map", "value": 0.6896, "n_used": 300}
    assert change_text(now, {("t", "map"): before}, "run 2") == (
        "not compared with run 2: n_used 1797 -> 300"
    )
    assert change_text({**now, "n_used": 1797}, {("t", "map"): before}, "run 2") == (
        "+0.1282 vs run 2"
    )
