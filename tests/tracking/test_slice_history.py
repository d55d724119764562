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
        rc.assert_slices_at_least(r, "map", 0.1)
        with pytest.raises(AssertionError):
            rc.assert_no_slice_regression(r, base, "map", max_drop=0.01)
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
