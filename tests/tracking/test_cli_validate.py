"""``retrieval-checks validate`` and ``retrieval-checks schema``: suites and baselines files
checked without running a model, and the suite format as a generated JSON Schema."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest

from retrieval_checks.errors import SuiteError
from retrieval_checks.metrics import CLASSIFIER_METRICS, METRIC_TEMPLATES, metric_spec
from retrieval_checks.suites import load_suite, load_yaml
from retrieval_checks.suites._jsonschema import metric_pattern, suite_json_schema
from retrieval_checks.tracking import main as cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(
    p for p in (ROOT / "example_suites").rglob("rc_*.y*ml") if ".baselines." not in p.name
)

GOOD = """\
suite: tiny
datasets:
  test:
    queries: q.npz
checks:
  - {metric: map, dataset: test, at_least: 0.5}
"""


def _cli(*args):
    out = io.StringIO()
    return cli(list(map(str, args)), out=out), out.getvalue()


def _suite(folder: Path, name: str = "rc_tiny.yaml", text: str = GOOD) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "q.npz").write_bytes(b"")  # the loader checks that data files exist, never reads them
    path = folder / name
    path.write_text(text)
    return path


def test_a_valid_suite_exits_0(tmp_path):
    code, out = _cli("validate", _suite(tmp_path))
    assert code == 0, out
    assert out.strip().endswith("all valid")
    assert "1 file(s) checked (1 suite(s), 0 baselines file(s))" in out


def test_an_invalid_suite_exits_1_with_file_and_line(tmp_path):
    path = _suite(tmp_path, text=GOOD.replace("at_least: 0.5}", "at_least: 0.5, at_lest: 0.6}"))
    code, out = _cli("validate", path)
    assert code == 1
    first = out.splitlines()[0]
    assert first.startswith(f"{path}:6: checks[0].at_lest: unknown field"), first
    assert "did you mean" in first.lower()
    assert out.splitlines()[-1].startswith("1 file(s) checked") and "1 invalid, 1 error(s)" in out


def test_a_missing_data_file_is_an_error_of_the_suite(tmp_path):
    path = _suite(tmp_path, text=GOOD.replace("q.npz", "missing.npz"))
    code, out = _cli("validate", path)
    assert code == 1
    assert re.match(
        rf"{re.escape(str(path))}:4: datasets\.test\.queries: file 'missing\.npz'", out
    ), out


@pytest.mark.parametrize("make", ["missing", "unknown_kind", "empty_dir"])
def test_usage_errors_exit_2(tmp_path, capsys, make):
    target = {
        "missing": tmp_path / "nope.yaml",
        "unknown_kind": tmp_path / "notes.txt",
        "empty_dir": tmp_path / "empty",
    }[make]
    if make == "unknown_kind":
        target.write_text("hello")
    if make == "empty_dir":
        target.mkdir()
        (target / "other.yaml").write_text(GOOD)  # not a suite by the plugin's pattern
    code, out = _cli("validate", _suite(tmp_path / "ok"), target)
    assert code == 2
    assert out == ""  # nothing is judged when a path is wrong
    assert str(target) in capsys.readouterr().err


def test_no_path_is_a_usage_error():
    assert _cli("validate")[0] == 2


def test_a_directory_validates_suites_and_baselines_below_it(tmp_path):
    _suite(tmp_path)
    bad = _suite(tmp_path / "sub", "rc_bad.yml", GOOD.replace("metric: map", "metric: mapp"))
    _suite(
        tmp_path / "sub", "helpers.yaml", "not: a suite"
    )  # not rc_*: the plugin does not collect it
    _suite(tmp_path / ".hidden", "rc_hidden.yaml", "broken: [")
    shutil.copy(
        ROOT / "example_suites" / "digits" / "rc_digits.baselines.yaml",
        tmp_path / "rc_tiny.baselines.yaml",
    )
    code, out = _cli("validate", tmp_path)
    assert code == 1
    assert "3 file(s) checked (2 suite(s), 1 baselines file(s)): 1 invalid, 1 error(s)" in out
    (line,) = [x for x in out.splitlines() if x.startswith(str(bad))]
    assert line.startswith(f"{bad}:6: checks[0].metric: Unknown or malformed metric name 'mapp'")
    code, out = _cli("validate", tmp_path, "--suite-files", "helpers.yaml")
    assert (
        code == 1
        and "(1 suite(s), 1 baselines file(s))" in out
        and "helpers.yaml:1: not: unknown field" in out
    )


def _write_the_canvas_datasets() -> None:
    """The canvas suite's data files are generated (not committed) by its conftest when
    the example gates run; a fresh clone that runs the tests first has none. Write them
    the same way (deterministic, atomic, about a second; nothing when they exist)."""
    import importlib.util

    path = ROOT / "example_suites" / "canvas_digits" / "conftest.py"
    spec = importlib.util.spec_from_file_location("_rc_canvas_conftest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_datasets()


def test_the_example_suites_are_valid():
    _write_the_canvas_datasets()  # the tests alone, in a fresh clone, must pass too
    code, out = _cli("validate", ROOT / "example_suites")
    assert code == 0, out
    assert f"({len(EXAMPLES)} suite(s)" in out


def test_baselines_files_good_and_bad(tmp_path):
    good = tmp_path / "rc_x.baselines.yaml"
    shutil.copy(ROOT / "example_suites" / "digits" / "rc_digits.baselines.yaml", good)
    assert _cli("validate", good)[0] == 0
    bad = tmp_path / "rc_y.baselines.yaml"
    bad.write_text(
        "a[m-t]:\n  metric: map\n  value: 0.5\n  n: 10\n"
        "b[m-t]:\n  metric: map\n  n: 10\n  value: high\n"
        "c[m-t]:\n  metric: mapp\n  value: 0.5\n"
    )
    code, out = _cli("validate", bad)
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith(f"{bad}:8: baseline 'b[m-t]', field 'value': expected a number"), (
        lines
    )
    assert lines[1].startswith(f"{bad}:10: baseline 'c[m-t]', field 'metric':"), lines
    assert "1 baselines file(s)): 1 invalid, 2 error(s)" in lines[-1]


@pytest.mark.parametrize(
    "text, line, words",
    [
        ("a:\n  metric: map\n  value: [1\n", 4, "invalid YAML"),
        ("a: {metric: map, value: 0.5}\na: {metric: map, value: 0.6}\n", 2, "duplicate key"),
        ("- one\n- two\n", 1, "a mapping of check names to records"),
    ],
)
def test_unreadable_baselines_files_name_the_line(tmp_path, text, line, words):
    path = tmp_path / "t.baselines.yml"
    path.write_text(text)
    code, out = _cli("validate", path)
    assert code == 1
    assert out.startswith(f"{path}:{line}: ") and words in out.splitlines()[0], out


def test_version():
    import retrieval_checks

    with pytest.raises(SystemExit) as exc:  # argparse's version action prints and exits
        from retrieval_checks.tracking._cli import build_parser

        build_parser().parse_args(["--version"])
    assert exc.value.code == 0
    assert _cli("--version")[0] == 0 and retrieval_checks.__version__


# ---------------------------------------------------------------------------- schema


@pytest.fixture(scope="module")
def validator():
    jsonschema = pytest.importorskip("jsonschema")
    code, out = _cli("schema")
    assert code == 0
    schema = json.loads(out)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _plain(path_or_text, tmp_path=None):
    """A suite as the loader reads it (YAML 1.2: ``on`` is a key, not true), as JSON data."""
    if tmp_path is not None:
        p = tmp_path / "s.yaml"
        p.write_text(path_or_text)
        path_or_text = p
    return json.loads(json.dumps(load_yaml(path_or_text)))


def test_schema_is_valid_json_and_written_with_o(tmp_path):
    code, out = _cli("schema", "-o", tmp_path / "suite.schema.json")
    assert code == 0 and "wrote" in out
    data = json.loads((tmp_path / "suite.schema.json").read_text())
    assert data == suite_json_schema()
    assert data["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert _cli("schema", "-o", tmp_path / "no" / "dir" / "s.json")[0] == 2


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_schema_accepts_the_example_suites(validator, path):
    errors = [e.message for e in validator.iter_errors(_plain(path))]
    assert not errors, errors


@pytest.mark.parametrize(
    "edit",
    [
        ("checks:", "colour: red\nchecks:"),  # an unknown top-level field
        ("at_least: 0.5}", "at_least: 0.5, ties: sometimes}"),  # an option outside its choices
        ("at_least: 0.5}", "at_least: 0.5, confidence: 95}"),  # an option out of range
        ("metric: map,", "metric: recal@10,"),  # an unknown metric
        ("metric: map,", "metric: hit_rate@0,"),  # K must be positive
        (
            "at_least: 0.5}",
            "at_least: 0.5, gap: {train: test, test: test}}",
        ),  # a threshold and a gap
        ("at_least: 0.5}", "compare: a, baseline: true}"),  # two rules
        ("at_least: 0.5}", "on: value}"),  # no rule at all
        ("queries: q.npz", "queries: q.npz\n    protocol: 5k"),  # a field of another type
        ("checks:\n  - {metric: map, dataset: test, at_least: 0.5}", "checks: []"),
        (
            "datasets:",
            "models: {m: {callable: 'a:b', factory: 'a:b'}}\ndatasets:",
        ),  # two model kinds
    ],
)
def test_the_schema_rejects_invalid_suites(validator, tmp_path, edit):
    text = GOOD.replace(*edit)
    assert text != GOOD
    assert list(validator.iter_errors(_plain(text, tmp_path)))
    with pytest.raises(SuiteError):  # the loader agrees
        load_suite(_suite(tmp_path, text=text))


def test_every_metric_template_matches_the_pattern():
    pattern = re.compile(metric_pattern())
    examples = {"K": "10", "t=T": "t=0.5", "P": "0.9", "Q": "0.9", "p": "0.8", "L": "0.5"}
    for template in (*METRIC_TEMPLATES, *CLASSIFIER_METRICS):
        base, _, param = template.partition("@")
        name = f"{base}@{examples.get(param, param)}" if param else base
        assert pattern.match(name), name
        metric_spec(name)  # and the library reads it
    for wrong in ("recal@10", "map@0", "pair_f1@0.5", "rsum@5", ""):
        assert not pattern.match(wrong), wrong


_UNKNOWN = [  # (where a stray field goes, the schema's properties there)
    ("top", "colour: red\n" + GOOD, lambda s: s["properties"]),
    (
        "check",
        GOOD.replace("at_least: 0.5}", "at_least: 0.5, zzz: 1}"),
        lambda s: s["$defs"]["check"]["properties"],
    ),
    ("options", "options: {zzz: 1}\n" + GOOD, lambda s: s["$defs"]["options"]["properties"]),
    (
        "source",
        GOOD.replace("q.npz", "{file: q.npz, zzz: a}"),
        lambda s: s["$defs"]["source"]["anyOf"][1]["properties"],
    ),
    (
        "baseline",
        GOOD.replace("at_least: 0.5}", "baseline: {zzz: 1}}"),
        lambda s: s["$defs"]["check"]["properties"]["baseline"]["anyOf"][2]["properties"],
    ),
    (
        "compare",
        GOOD.replace("at_least: 0.5}", "compare: {baseline: m, zzz: 1}}").replace(
            "checks:", "models: {m: {embeddings: {test: q.npz}}}\nchecks:"
        ),
        lambda s: s["$defs"]["check"]["properties"]["compare"]["anyOf"][1]["properties"],
    ),
    (
        "model",
        GOOD.replace("checks:", "models: {m: {callable: 'a:b', zzz: 1}}\nchecks:"),
        lambda s: s["$defs"]["model"]["properties"],
    ),
] + [
    (
        f"dataset {t}",
        GOOD.replace("    queries: q.npz", f"    type: {t}\n    zzz: 1"),
        lambda s, i=i: s["$defs"]["dataset"]["anyOf"][i]["properties"],
    )
    for i, t in enumerate(("retrieval", "image_text", "images", "run", "ann"))
]


@pytest.mark.parametrize("where, text, properties", _UNKNOWN, ids=[u[0] for u in _UNKNOWN])
def test_the_schema_lists_the_fields_the_loader_accepts(tmp_path, where, text, properties):
    """No drift: the loader's own "Expected one of" list is the schema's properties."""
    with pytest.raises(SuiteError) as exc:
        load_suite(_suite(tmp_path, text=text))
    expected = re.search(r"Expected one of: (.*)\.$", exc.value.detail)
    assert expected, exc.value.detail
    assert set(expected.group(1).split(", ")) == set(properties(suite_json_schema()))


def test_an_unknown_slice_column_of_a_readable_file_is_found(tmp_path):
    """validate opens a readable queries file's array names (no data) and finds a slice
    column it lacks, at the column's line; an unreadable file is left to the run."""
    import numpy as np

    np.savez(
        tmp_path / "q.npz", embeddings=np.zeros((4, 2), np.float32), lang=np.array(list("abab"))
    )
    text = GOOD.replace("    queries: q.npz\n", "    queries: q.npz\n    slices: langg\n")
    path = tmp_path / "rc_tiny.yaml"
    path.write_text(text)
    code, out = _cli("validate", path)
    assert code == 1, out
    first = out.splitlines()[0]
    assert first.startswith(f"{path}:5: datasets.test.slices"), first
    assert "'langg' is not in q.npz" in first and "'lang'" in first
    path.write_text(GOOD.replace("    queries: q.npz\n", "    queries: q.npz\n    slices: lang\n"))
    assert _cli("validate", path)[0] == 0
    (tmp_path / "q.npz").write_bytes(b"")  # unreadable: the run reports it
    path.write_text(text)
    assert _cli("validate", path)[0] == 0


def test_the_help_names_every_command(capsys):
    code, out = _cli("--help")
    assert code == 0
    text = " ".join((out + capsys.readouterr().out).split())
    head = text.split("positional arguments")[0]
    for command in ("compare", "export", "report", "plan", "validate", "schema"):
        assert command in head, command


# --------------------------------------------------- every independent error of a suite file


@pytest.mark.parametrize(
    "text, expected",
    [
        (  # two checks, each with an unknown metric
            "suite: tiny\ndatasets:\n  test:\n    queries: q.npz\nchecks:\n"
            "  - {metric: hitrate@1, dataset: test, at_least: 0.5}\n"
            "  - {metric: recal_at_precision@0.9, dataset: test, at_least: 0.5}\n",
            [
                (6, "checks[0].metric: Unknown or malformed metric name 'hitrate@1'"),
                (7, "checks[1].metric: Unknown or malformed metric name 'recal_at_precision@0.9'"),
            ],
        ),
        (  # an unknown top-level key, then a bad value in a check
            "suite: tiny\noption: {ties: average}\ndatasets:\n  test:\n    queries: q.npz\n"
            "checks:\n  - {metric: map, dataset: test, at_least: 0.5, on: intervall}\n",
            [(2, "option: unknown field 'option'"), (7, "checks[0].on:")],
        ),
        (  # an unknown field in one check, two in the next
            "suite: tiny\ndatasets:\n  test:\n    queries: q.npz\nchecks:\n"
            "  - {metric: map, dataset: test, at_lest: 0.5}\n"
            "  - {metric: map, dataset: test, atleast: 0.5, max_skiped: 0}\n",
            [
                (6, "checks[0].at_lest: unknown field"),
                (7, "checks[1].atleast: unknown field"),
                (7, "checks[1].max_skiped: unknown field"),
            ],
        ),
    ],
    ids=["two-metrics", "top-key-and-check", "three-unknown-fields"],
)
def test_validate_reports_every_independent_error_in_file_order(tmp_path, text, expected):
    path = _suite(tmp_path, text=text)
    code, out = _cli("validate", path)
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == len(expected) + 1, out
    for line, (n, words) in zip(lines, expected):
        assert line.startswith(f"{path}:{n}: {words}"), (line, out)
    assert lines[-1].endswith(f"1 invalid, {len(expected)} error(s)"), out


def test_validate_reports_errors_of_datasets_models_and_checks_but_not_their_echoes(tmp_path):
    """A check (or model) naming a dataset or model that has its own error is not
    reported again as 'unknown dataset': only the independent errors are."""
    text = (
        "suite: tiny\n"
        "datasets:\n"
        "  bad: {queries: missing.npz}\n"  # 3: the file is missing
        "  test: {queries: q.npz, wat: 1}\n"  # 4: unknown field
        "  fine: {queries: q.npz}\n"
        "checks:\n"
        "  - {metric: map, dataset: bad, at_least: 0.5}\n"  # depends on 'bad': not reported
        "  - {metric: mapp, dataset: fine, at_least: 0.5}\n"  # 8: its own error
        "  - {metric: map, dataset: fine, at_least: 1.5}\n"  # 9: its own error
        "  - {metric: map, dataset: fine, at_least: 0.5}\n"  # valid
    )
    path = _suite(tmp_path, text=text)
    code, out = _cli("validate", path)
    lines = out.splitlines()
    assert [x.split(": ")[0] for x in lines[:-1]] == [f"{path}:{n}" for n in (3, 4, 8, 9)], out
    assert "unknown dataset" not in out.lower() and "4 error(s)" in lines[-1], out


def test_load_suite_still_raises_the_first_error(tmp_path):
    path = _suite(tmp_path, text=GOOD.replace("metric: map", "metric: mapp") + "  - {metric: x}\n")
    with pytest.raises(SuiteError) as exc:
        load_suite(path)
    assert exc.value.line == 6 and exc.value.field == "checks[0].metric"


def test_an_unknown_name_lists_the_declared_names_that_have_errors_too(tmp_path):
    text = (
        "datasets:\n"
        "  bad: {queries: missing.npz}\n"  # 2
        "  test: {queries: q.npz}\n"
        "models:\n"
        "  m1: {embeddings: {test: q.npz, bda: q.npz}}\n"  # 5: bda is no dataset
        "  m2: {embeddings: {test: q.npz}, wat: 1}\n"  # 6
        "  m3: {embeddings: {test: q.npz}}\n"
        "checks:\n"
        "  - {metric: map, dataset: test, models: [m4], at_least: 0.5}\n"  # 9
    )
    path = _suite(tmp_path, text=text)
    lines = _cli("validate", path)[1].splitlines()
    assert [x.split(": ")[0] for x in lines[:-1]] == [f"{path}:{n}" for n in (2, 5, 6, 9)], lines
    assert "Did you mean 'bad'?" in lines[1] and "Declared: bad, test." in lines[1], lines[1]
    assert "no model named 'm4'" in lines[3] and "Declared: m1, m2, m3." in lines[3], lines[3]


def test_each_top_level_part_and_each_option_is_checked_on_its_own(tmp_path):
    text = (
        "suite: bad name!\n"  # 1
        "markers: 5\n"  # 2
        "options: {ties: sideways, foo: 1, seed: 3}\n"  # 3: two errors, in the line's order
        "correction: maybe\n"  # 4
        "datasets:\n  test: {queries: q.npz}\n"
        "checks:\n"
        "  - {metric: mapp, dataset: test, at_least: 0.5}\n"  # 8
        "  - {metric: map, dataset: test, at_least: 0.5}\n"
    )
    path = _suite(tmp_path, text=text)
    code, out = _cli("validate", path)
    fields = [x.split(": ")[1] for x in out.splitlines()[:-1]]
    expected = ["suite", "markers", "options.ties", "options.foo", "correction", "checks[0].metric"]
    assert code == 1 and fields == expected, out
    with pytest.raises(SuiteError) as exc:  # the loader raises the first of them
        load_suite(path)
    assert (exc.value.line, exc.value.field) == (1, "suite")


def test_an_array_a_part_names_that_its_file_lacks_is_found(tmp_path):
    """validate reads a readable file's array names (no data): an array the suite names
    itself must exist, as the run requires, with the run's message and the part's line;
    an array left at its default name may be absent (the run decides whether it needs it)."""
    import numpy as np

    np.savez(tmp_path / "q.npz", embeddings=np.zeros((4, 2), np.float32), y=np.arange(4))
    path = tmp_path / "rc_tiny.yaml"
    path.write_text(
        GOOD.replace("    queries: q.npz\n", "    queries: {file: q.npz, labels: ys}\n")
    )
    code, out = _cli("validate", path)
    assert code == 1, out
    first = out.splitlines()[0]
    assert first.startswith(
        f"{path}:4: datasets.test.queries: q.npz has no array 'ys' for labels"
    ), first
    assert "Did you mean 'y'? Set datasets.test.queries.labels: <name>." in first
    path.write_text(GOOD.replace("    queries: q.npz\n", "    queries: {file: q.npz, labels: y}\n"))
    assert _cli("validate", path)[0] == 0  # no 'ids' array: not named, so not required here
    named = "    queries: {file: q.npz, labels: y, inputs: pixels}\n"
    path.write_text(GOOD.replace("    queries: q.npz\n", named))
    assert _cli("validate", path)[0] == 0  # the check's embeddings are read, not inputs (h16)


CAMS = """\
suite: cams
datasets:
  train: {type: images, images: {file: train.npz, inputs: images}}
models:
  net: {factory: net.py:build, cam_layer: features}
checks:
  - {metric: METRIC, dataset: train, models: [net], at_least: 0.2}
"""


@pytest.mark.parametrize("metric", ["cam_iou", "cam_iou_box"])
def test_a_cam_iou_check_on_a_file_without_boxes_or_masks_is_found(tmp_path, metric):
    import numpy as np

    (tmp_path / "net.py").write_text("def build():\n    raise AssertionError('not run')\n")
    images = np.zeros((2, 1, 4, 4), np.float32)
    np.savez(tmp_path / "train.npz", images=images, labels=np.arange(2))
    path = tmp_path / "rc_cams.yaml"
    path.write_text(CAMS.replace("METRIC", metric))
    code, out = _cli("validate", path)
    assert code == 1, out
    assert out.splitlines()[0] == (
        f"{path}:3: datasets.train.images: train.npz has neither boxes 'boxes' nor masks 'masks'; "
        "cam_iou needs the objects' boxes (N x 4: x0, y0, x1, y1) or binary masks."
    )
    np.savez(tmp_path / "train.npz", images=images, labels=np.arange(2), masks=images > 0)
    assert _cli("validate", path)[0] == 0, _cli("validate", path)[1]
    np.savez(tmp_path / "train.npz", images=images, labels=np.arange(2))
    path.write_text(CAMS.replace("METRIC", "accuracy"))  # no cam_iou: boxes are not needed
    assert _cli("validate", path)[0] == 0


def test_the_arrays_a_checks_model_reads_are_found(tmp_path):
    """A precomputed model reads the datasets' embeddings, a model that runs reads their
    inputs, and a model of embeddings files reads its own files' embeddings: validate
    names the one a check's model would read and the file lacks, as the run would."""
    import numpy as np

    np.savez(tmp_path / "q.npz", inputs=np.zeros((4, 2), np.float32), labels=np.arange(4))
    path = tmp_path / "rc_tiny.yaml"
    path.write_text(GOOD)  # no models: the datasets' own embeddings
    code, out = _cli("validate", path)
    assert code == 1, out
    assert out.splitlines()[0].startswith(
        f"{path}:4: datasets.test.queries: q.npz has no array 'embeddings' for embeddings; it has "
        "'inputs', 'labels'."
    ), out
    (tmp_path / "net.py").write_text("def build():\n    raise AssertionError('not run')\n")
    factory = GOOD.replace(
        "checks:\n", "models:\n  net: {factory: net.py:build}\nchecks:\n"
    ).replace("at_least: 0.5}", "at_least: 0.5, models: [net]}")
    path.write_text(factory)  # the model runs on the inputs, which are there
    assert _cli("validate", path)[0] == 0, _cli("validate", path)[1]
    np.savez(tmp_path / "q.npz", embeddings=np.zeros((4, 2), np.float32), labels=np.arange(4))
    code, out = _cli("validate", path)
    assert code == 1 and "q.npz has no array 'inputs' for inputs" in out, out
    np.savez(tmp_path / "m.npz", emb=np.zeros((4, 2), np.float32))
    files = GOOD.replace(
        "checks:\n", "models:\n  files: {embeddings: {test: {queries: m.npz}}}\nchecks:\n"
    ).replace("at_least: 0.5}", "at_least: 0.5, models: [files]}")
    path.write_text(files)
    code, out = _cli("validate", path)
    assert code == 1, out
    assert (
        "models.files.embeddings.test.queries: m.npz has no array 'embeddings' for embeddings"
        in out
    ), out


def test_each_field_of_the_schema_has_its_own_description():
    """One schema object stands for several fields (the datasets' slices); a description
    written for one of them (image_text's caption_slices) must not reach the others, and
    a second schema must equal the first (nothing shared is mutated)."""
    schema = suite_json_schema()
    variants = {
        v["properties"]["type"]["const"]: v["properties"]
        for v in schema["$defs"]["dataset"]["anyOf"]
    }
    for kind in ("retrieval", "ann", "beir"):
        text = variants[kind]["slices"]["description"]
        assert "caption" not in text and text.startswith("per-query"), (kind, text)
    assert "caption" in variants["image_text"]["caption_slices"]["description"]
    assert variants["image_text"]["slices"]["description"].startswith("per-image")
    for where in (
        schema["$defs"]["check"]["properties"],
        schema["$defs"]["check"]["properties"]["compare"]["anyOf"][1]["properties"],
    ):
        text = where["min_power"]["description"]
        assert text.startswith("fail when the gate's test has less than this power"), text
    assert suite_json_schema() == schema


def test_an_empty_list_and_a_missing_file_are_named_plainly(tmp_path, monkeypatch):
    """'expected a non-empty list ..., found a list' did not say it was empty, and a
    missing module was 'looked for' by its relative name only (h13)."""
    monkeypatch.chdir(tmp_path)
    _suite(
        tmp_path,
        text=GOOD.replace("checks:\n", "models:\n  m: {factory: mymodel.py:build}\nchecks:\n"),
    )
    code, out = _cli("validate", "rc_tiny.yaml")
    assert code == 1 and f"(looked for '{tmp_path / 'mymodel.py'}')" in out, out
    _suite(tmp_path, text=GOOD.replace("at_least: 0.5}", "at_least: 0.5, models: []}"))
    code, out = _cli("validate", "rc_tiny.yaml")
    assert code == 1, out
    assert "expected a non-empty list of model names, found an empty list ([])" in out, out
