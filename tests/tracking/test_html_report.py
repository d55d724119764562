"""The HTML report's figures, read back from the SVG: a value-only gate's axis is the
metric's attainable range (from the registry), ticks are round numbers evenly spaced,
the precision-recall axis spans [0, 1] with the curve inside its frame, detail numbers
are formatted, a sweep names its model; and ``retrieval-checks report`` of a stored run
shows what the live report of that session showed (pytester, in-process). Fail closed
(issue 12, at the end): every text field read back from the history is escaped, a damaged
numeric field is formatted or escaped, a history with garbage in it says so instead of
being drawn."""

from __future__ import annotations

import re
import sqlite3
from decimal import Decimal

import numpy as np
import pytest
from shared_setup import HISTORY_GATE as GATE
from shared_setup import HISTORY_META as META

from retrieval_checks.metrics import metric_spec
from retrieval_checks.tracking import History, main, render_report
from retrieval_checks.tracking._report import interval_svg, line_svg

pytest_plugins = ["pytester"]


def _ticks(svg: str) -> list[tuple[float, str]]:
    """(x, label) of each tick label of a figure."""
    return [
        (float(x), label)
        for x, label in re.findall(r'<text class="tick" x="([\d.]+)"[^>]*>([^<]*)</text>', svg)
    ]


def _dot(svg: str) -> float:
    return float(re.search(r'<circle cx="([\d.]+)"', svg).group(1))


def _at(ticks, value: float) -> float:
    """The x of ``value`` by linear interpolation between the first and last tick."""
    (x0, a), (x1, b) = ticks[0], ticks[-1]
    return x0 + (value - float(a)) / (float(b) - float(a)) * (x1 - x0)


@pytest.mark.parametrize("metric", ["map", "hit_rate@1", "accuracy", "rsum"])
def test_a_value_only_gate_is_drawn_on_the_metric_range(metric):
    family = metric_spec(metric).capabilities
    span = family.high - family.low
    value, threshold = family.low + 0.61 * span, family.low + 0.5 * span
    svg = interval_svg(value, None, None, threshold, metric=metric)
    ticks = _ticks(svg)
    assert (
        float(ticks[0][1]) == family.low and float(ticks[-1][1]) == family.high
    )  # the whole range
    assert _dot(svg) == pytest.approx(_at(ticks, value), abs=0.1)


def test_an_unbounded_metric_starts_at_its_lowest_value_and_ends_above_the_points():
    svg = interval_svg(3.0, None, None, 5.0, metric="medr")
    ticks = _ticks(svg)
    assert float(ticks[0][1]) == metric_spec("medr").capabilities.low and float(ticks[-1][1]) >= 5.0
    assert _dot(svg) == pytest.approx(_at(ticks, 3.0), abs=0.1)


def test_a_gap_is_drawn_on_plus_minus_the_width_of_its_metric():
    ticks = _ticks(interval_svg(0.05, None, None, 0.1, metric="map gap"))
    assert (float(ticks[0][1]), float(ticks[-1][1])) == (-1.0, 1.0)


def _is_round_and_even(labels: list[str]) -> bool:
    values = [Decimal(v) for v in labels]
    steps = {b - a for a, b in zip(values, values[1:])}
    if len(steps) != 1:
        return False
    step = steps.pop()
    mantissa = step.normalize().as_tuple()
    # 1, 2, 2.5 or 5 times a power of ten, and every tick a multiple of it
    return int("".join(map(str, mantissa.digits))) in (1, 2, 25, 5) and all(
        v % step == 0 for v in values
    )


def _labels(svg: str, anchor: str) -> list[str]:
    return re.findall(rf'<text class="tick" [^>]*text-anchor="{anchor}">([^<]*)</text>', svg)


@pytest.mark.parametrize(
    "values", [(0.5731, 0.6123, 0.5902), (0.00123, 0.00311), (12.7, 88.1, 45.0), (0.91, 0.91)]
)
def test_tick_labels_are_round_and_evenly_spaced(values):
    svg = line_svg([("m", list(range(1, len(values) + 1)), list(values))], title="t")
    ys, xs = (
        _labels(svg, "end"),
        _labels(svg, "middle"),
    )  # y labels left of the frame, x labels under it
    assert _is_round_and_even(ys), ys
    assert _is_round_and_even(xs) and all(float(v) == int(float(v)) for v in xs), (
        xs
    )  # run numbers: whole ticks
    assert float(ys[0]) <= min(values) and float(ys[-1]) >= max(values)


def _frame(svg: str) -> tuple[float, float, float, float]:
    x, y, w, h = map(
        float,
        re.search(
            r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"', svg
        ).groups(),
    )
    return x, y, x + w, y + h


def test_the_pr_curve_axis_spans_zero_to_one_and_holds_the_curve():
    curve = {
        "recall": [0.0, 0.05, 0.12, 0.31],
        "precision": [1.0, 1.0, 0.93, 0.8],
        "complete": False,
    }
    page = render_report(
        [
            {
                "test": "t.py::pr",
                "metric": "recall_at_precision@0.8",
                "value": 0.31,
                "threshold": 0.2,
                "passed": True,
                "on": "value",
                "comparison": ">=",
                "curve": curve,
            }
        ]
    )
    svg = page[page.index("precision-recall over pairs") - 400 :]
    svg = svg[svg.index("<svg") : svg.index("</svg>")]
    for anchor in ("end", "middle"):  # both axes from 0 to 1
        labels = _labels(svg, anchor)
        assert (float(labels[0]), float(labels[-1])) == (0.0, 1.0), labels
    x0, y0, x1, y1 = _frame(svg)
    points = re.search(r'<polyline[^>]*points="([^"]+)"', svg).group(1).split()
    for point in points:
        px, py = map(float, point.split(","))
        assert x0 <= px <= x1 and y0 <= py <= y1
    assert max(float(p.split(",")[0]) for p in points) < x0 + 0.35 * (
        x1 - x0
    )  # recall 0.31 of a [0, 1] axis


def test_detail_numbers_are_formatted():
    page = render_report(
        [
            {
                "test": "t.py::a",
                "metric": "map",
                "value": 0.123456789,
                "threshold": 0.1,
                "passed": True,
                "p_worse": 1.23456789e-05,
                "baseline": 0.2,
                "bounds": {"at_least": 0.1},
                "per_class": [0.333333333333] * 20,
            }
        ]
    )
    details = page[page.index("<h2>Details</h2>") :]
    assert not re.search(r"\d\.\d{5,}", details)  # no float printed raw
    assert ">0.1235<" in details and ">1.235e-05<" in details and "{at_least: 0.1000}" in details
    assert "... (20 in all)]" in details


def test_a_sweep_names_its_model_or_says_it_was_not_given():
    rows = [
        {"n_classes": n, "metric": "hit_rate@1", "value": v}
        for n, v in ((10, 0.9), (20, 0.8), (40, 0.7))
    ]
    named = render_report(
        [],
        figures=[
            {
                "kind": "sweep",
                "title": "R@1",
                "model": "resnet-50",
                "dataset": "cub",
                "rows": rows,
                "test": "t.py::sweep",
            }
        ],
    )
    assert "R@1 (resnet-50)" in named and "model resnet-50 on dataset cub · t.py::sweep" in named
    anonymous = render_report([], figures=[{"kind": "sweep", "rows": rows}])
    assert "model not named (rc_report.add_sweep(..., model=...))" in anonymous


def test_history_keeps_figures_and_refuses_a_damaged_one(tmp_path):
    h = History(tmp_path / "h.sqlite")
    figure = {"kind": "sweep", "title": "t", "model": "m", "rows": [{"n_classes": 5, "value": 0.5}]}
    run = h.record(
        {"started": "x"},
        [{"test": "a", "metric": "map", "value": 0.5, "passed": True}],
        figures=[figure],
    )
    assert h.figures(run) == [figure]
    bare = History(
        tmp_path / "old.sqlite"
    )  # a database written without figures has no table: nothing to show
    assert (
        bare.figures(
            bare.record({"started": "x"}, [{"test": "a", "metric": "map", "passed": True}])
        )
        == []
    )
    import sqlite3

    con = sqlite3.connect(tmp_path / "h.sqlite")
    con.execute("UPDATE figures SET figure = '[1, 2]'")
    con.commit()
    con.close()
    import retrieval_checks as rc

    with pytest.raises(rc.InputError, match="figures row 1"):
        h.figures(run)


TEST_FILE = """
import numpy as np
import retrieval_checks as rc


def test_gates_and_sweep(rc_evaluate, rc_report):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(20), 5)
    x = (rng.normal(size=(20, 8))[y] + 0.8 * rng.normal(size=(100, 8))).astype(np.float32)
    result = rc_evaluate(x, query_labels=y, metrics=["map", "recall_at_precision@0.8"], model="m1", dataset="d1")
    rc.assert_map_at_least(result, 0.1)
    rc.assert_recall_at_precision(result, 0.001, precision=0.8)
    rc_report.add_sweep(rc.class_count_sweep(x, y, metrics=["hit_rate@1"], class_counts=[5, 10, 20], trials=2),
                        title="Recall@1 vs. classes", model="m1", dataset="d1")
"""


def _section(page: str, start: str, end: str) -> str:
    return page[page.index(start) : page.index(end, page.index(start))]


def test_the_stored_report_shows_what_the_live_one_did(pytester):
    pytester.makepyfile(test_sweep=TEST_FILE)
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-history=h.sqlite", "--rc-html=live.html"
    )
    result.assert_outcomes(passed=1)
    live = (pytester.path / "live.html").read_text()
    assert (
        main(
            [
                "--db",
                str(pytester.path / "h.sqlite"),
                "report",
                "latest",
                "-o",
                str(pytester.path / "stored.html"),
            ]
        )
        == 0
    )
    stored = (pytester.path / "stored.html").read_text()
    assert _section(stored, "<table class='gates'", "</table>") == _section(
        live, "<table class='gates'", "</table>"
    )
    sweeps = "<h2>Recall vs. number of classes</h2>"
    assert _section(stored, sweeps, "<h2>Details") == _section(live, sweeps, "<h2>Details")
    assert "Recall@1 vs. classes (m1)" in stored and "precision-recall over pairs" in stored
    live_fields = re.findall(
        r"<tr><td>([^<]*)</td><td>([^<]*)</td></tr>", _section(live, "<h2>Details", "<script>")
    )
    stored_fields = re.findall(
        r"<tr><td>([^<]*)</td><td>([^<]*)</td></tr>", _section(stored, "<h2>Details", "<script>")
    )
    assert set(live_fields) <= set(stored_fields)  # the stored run adds its row ids, loses nothing
    assert np.isfinite(float(dict(live_fields)["value"]))


# --- fail closed (issue 12): the report escapes every field read back from the history ---
HOSTILE = "<script>alert('x')</script>\"'><img src=x onerror=alert(1)>"


def _assert_no_markup(page: str) -> None:
    assert "<script>alert" not in page and "<img" not in page and "onerror=alert(1)>" not in page
    assert page.count("<script>") == 1  # the report's own script only


@pytest.mark.parametrize(
    "field", ["test", "suite", "model", "dataset", "metric", "gate", "comparison", "on", "unit"]
)
def test_report_escapes_every_text_field_read_back_from_the_history(tmp_path, field):
    path = tmp_path / "h.sqlite"
    h = History(path)
    hostile = {**GATE, field: HOSTILE}
    h.record({**META, "command": HOSTILE, "machine": HOSTILE, "git_commit": HOSTILE}, [hostile])
    h.record(META, [hostile])
    outcomes = h.results(2)
    page = render_report(outcomes, run=h.runs()[0], history=h)
    _assert_no_markup(page)
    assert "&lt;script&gt;" in page


@pytest.mark.parametrize(
    "field",
    [
        "value",
        "low",
        "high",
        "threshold",
        "n",
        "n_used",
        "n_skipped",
        "bounds",
        "warnings",
        "confidence",
        "passed",
    ],
)
def test_report_formats_or_escapes_a_damaged_numeric_field(field):
    value = {"bounds": {"at_least": HOSTILE}, "warnings": [HOSTILE]}.get(field, HOSTILE)
    page = render_report([{**GATE, field: value}], run={"id": HOSTILE, "exitstatus": HOSTILE})
    _assert_no_markup(page)


def test_report_with_garbage_in_the_history_says_so_instead_of_drawing_it(db):
    con = sqlite3.connect(db)
    con.execute(
        f"UPDATE results SET value={sqlite3.connect(':memory:').execute('SELECT quote(?)', (HOSTILE,)).fetchone()[0]} "
        "WHERE id=1"
    )
    con.commit()
    con.close()
    page = render_report([GATE], run={"id": 1}, history=History(db))
    _assert_no_markup(page)
    assert "history not shown" in page and "results row 1" in page


def test_report_numbers_are_formatted():
    page = render_report([{**GATE, "value": 0.123456789}], run={"id": 1})
    assert ">0.1235</td>" in page
