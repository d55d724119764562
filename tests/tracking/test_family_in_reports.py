"""The raw and adjusted p-values of significance-gated gates in the markdown table and
the HTML report (issue 28: "reported with the raw and adjusted p-values in every
output"). Cost: < 1 s."""

from retrieval_checks.tracking import render_markdown, render_report

BASE = dict(
    test="tests/test_gate.py::test_map",
    model="m",
    dataset="d",
    metric="map",
    value=0.41,
    passed=False,
    kind="baseline",
    baseline=0.45,
    max_drop=0.01,
    family=True,
    p_raw=0.0123,
    significance_level=0.05,
    beyond_tolerance=True,
)


def test_a_corrected_gate_shows_its_raw_and_adjusted_p_values():
    rec = dict(BASE, correction="holm", p_adjusted=0.0492, family_size=4)
    md = render_markdown([rec])
    assert "p 0.0123, holm 0.0492 of 4" in md, md
    html = render_report([rec], run={"id": 1})
    assert "p 0.0123, holm 0.0492 of 4" in html


def test_an_uncorrected_gate_shows_its_raw_p_value_only():
    rec = dict(BASE, correction="none", p_adjusted=0.0123, family_size=1)
    md = render_markdown([rec])
    assert "p 0.0123" in md and "none 0.0123" not in md, md


def test_a_gate_outside_a_family_shows_no_p_value():
    rec = {k: v for k, v in BASE.items() if k not in ("family", "p_raw")}
    assert "p 0.0123" not in render_markdown([rec])
