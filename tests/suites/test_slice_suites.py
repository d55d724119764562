"""Slices in YAML suites: a dataset's slices: (a column of the queries' file in each
format, a file of its own, map:, bins:), a check's slices: (all, worst, named; with
thresholds and per-slice baselines), and their located errors.

Cost: about 3 s (a 240-query precomputed dataset, evaluated once per runner).
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks import SuiteError, SuiteRunner, load_suite
from retrieval_checks.errors import InputError


def _data(tmp_path, fmt="npz"):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(40), 6)
    e = (rng.normal(size=(40, 16))[y] + rng.normal(size=(240, 16))).astype(np.float32)
    lang = np.where(y < 20, "de", "en")
    length = (np.arange(240) % 50).astype(np.int64)
    cat = (y % 3).astype(np.int64)
    (tmp_path / "data").mkdir(exist_ok=True)
    if fmt == "npz":
        np.savez(
            tmp_path / "data/set.npz", embeddings=e, labels=y, lang=lang, length=length, cat=cat
        )
    elif fmt == "parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        table = pa.table(
            {
                "embeddings": list(e),
                "labels": y,
                "lang": lang.tolist(),
                "length": length,
                "cat": cat,
            }
        )
        pq.write_table(table, tmp_path / "data/set.parquet")
    elif fmt == "safetensors":
        st = pytest.importorskip("safetensors.numpy")
        st.save_file(
            {
                "embeddings": e,
                "labels": y,
                "lang": (y < 20).astype(np.int64),
                "length": length,
                "cat": cat,
            },
            str(tmp_path / "data/set.safetensors"),
        )
    np.save(tmp_path / "data/region.npy", np.where(np.arange(240) % 2 == 0, "north", "south"))
    return e, y, lang


def _write(tmp_path, text):
    p = tmp_path / "rc_suite.yaml"
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def _run(suite, runner=None):
    runner = runner or SuiteRunner()
    out = {}
    for case in suite.cases:
        try:
            runner.run(suite, case)
            out[case.name] = "pass"
        except AssertionError as exc:
            out[case.name] = f"fail: {exc}"
    return out


def test_slice_checks_gate_every_named_and_worst_slice_exactly(tmp_path):
    e, y, lang = _data(tmp_path)
    alone = {
        s: rc.evaluate(
            e[lang == s], e, query_labels=y[lang == s], gallery_labels=y, metrics=["map"]
        )
        for s in ("de", "en")
    }
    p = _write(
        tmp_path,
        """
        datasets:
          set: {queries: data/set.npz, slices: lang}
        models:
          m: {embeddings: {set: data/set.npz}}
        checks:
          - {metric: map, dataset: set, at_least: 0.05}
          - {metric: map, dataset: set, slices: all, at_least: 0.05}
          - {metric: map, dataset: set, slices: [de], at_least: 0.99, id: de_only}
          - {metric: map, dataset: set, slices: worst, at_least: 0.05, on: interval}
        """,
    )
    suite = load_suite(p)
    assert [c.id for c in suite.checks] == [
        "map_at_least",
        "map_at_least_slices",
        "de_only",
        "map_ci_at_least_worst_slice",
    ]
    events = []
    with rc.gates.listening(events.append):
        out = _run(suite)
    assert out["map_at_least[m-set]"] == out["map_at_least_slices[m-set]"] == "pass"
    assert out["map_ci_at_least_worst_slice[m-set]"] == "pass"
    assert out["de_only[m-set]"].startswith("fail") and "de: map" in out["de_only[m-set]"]
    rows = {r["slice"]: r for r in events[1].extra["slices"]}
    # leave-one-out over the whole set: each slice's queries rank the full gallery (minus themselves)
    for s in ("de", "en"):
        idx = np.flatnonzero(lang == s)
        loo = rc.evaluate(e, query_labels=y, metrics=["map"])
        assert rows[s]["value"] == pytest.approx(np.mean(loo.per_query["map"][idx]), abs=1e-15)
    assert set(alone)  # (the explicit-gallery reference is tested in tests/engine/test_slices.py)


@pytest.mark.parametrize("fmt", ["npz", "parquet", "safetensors"])
def test_dimensions_map_bins_and_file_in_every_format(tmp_path, fmt):
    _data(tmp_path, fmt)
    lang = "lang" if fmt != "safetensors" else "{column: lang, map: {0: en, 1: de}}"
    p = _write(
        tmp_path,
        f"""
        datasets:
          set:
            queries: data/set.{fmt}
            slices:
              lang: {lang}
              cat: {{column: cat, map: {{0: shoes, 1: bags}}, default: other}}
              length: {{column: length, bins: [0, 25, 49]}}
              region: {{file: data/region.npy}}
        models:
          m: {{embeddings: {{set: data/set.{fmt}}}}}
        checks:
          - {{metric: hit_rate@1, dataset: set, slices: all, at_least: 0.01}}
        """,
    )
    suite = load_suite(p)
    runner = SuiteRunner()
    runner.run(suite, suite.cases[0])
    result = runner.result(
        suite, "m", "set", suite.evaluation_options(suite.checks[0], "set", runner.defaults, "m")
    )
    assert list(result.slices) == [
        *(["lang=de", "lang=en"]),
        "cat=shoes",
        "cat=bags",
        "cat=other",
        "length=[0, 25)",
        "length=[25, 49]",
        "region=north",
        "region=south",
    ]
    assert result.slices["cat=other"].n_queries == 6 * 13  # classes 2, 5, ..., 38
    assert result.slices["length=[25, 49]"].n_queries == 240 - 5 * 25


def test_per_slice_baselines_regen_compare_and_missing_slice(tmp_path):
    _data(tmp_path)
    text = """
        datasets:
          set: {queries: data/set.npz, slices: SLICES}
        models:
          m: {embeddings: {set: data/set.npz}}
        checks:
          - {metric: map, dataset: set, slices: all, baseline: {max_drop: 0.0}}
        """
    p = _write(tmp_path, text.replace("SLICES", "lang"))
    suite = load_suite(p)
    writer = SuiteRunner(regen="all")
    writer.run(suite, suite.cases[0])
    assert [k for _, k, _ in writer.baselines.pending] == [
        "map_vs_baseline_slices[m-set] slice=de",
        "map_vs_baseline_slices[m-set] slice=en",
    ]
    writer.baselines.write()
    events = []
    with rc.gates.listening(events.append):
        assert _run(load_suite(p))["map_vs_baseline_slices[m-set]"] == "pass"
    (event,) = events  # one gate, one row per slice, each beside its stored value
    assert [(r["slice"], r["drop"]) for r in event.extra["slices"]] == [("de", 0.0), ("en", 0.0)]
    # the same check on another slicing: the baseline's slices de and en are gone -> an error, not a skip
    p = _write(tmp_path, text.replace("SLICES", "{file: data/region.npy}"))
    suite = load_suite(p)
    with pytest.raises(SuiteError, match="'de', 'en' of the baseline are missing from this result"):
        SuiteRunner().run(suite, suite.cases[0])


def test_per_slice_baseline_fails_on_a_drop(tmp_path):
    e, y, lang = _data(tmp_path)
    p = _write(
        tmp_path,
        """
        datasets:
          set: {queries: data/set.npz, slices: lang}
        models:
          m: {embeddings: {set: data/EMB.npz}}
        checks:
          - {metric: map, dataset: set, slices: all, baseline: {max_drop: 0.01}}
        """.replace("EMB", "set"),
    )
    writer = SuiteRunner(regen="all")
    suite = load_suite(p)
    writer.run(suite, suite.cases[0])
    writer.baselines.write()
    worse = e.copy()
    worse[lang == "de"] += 3.0 * np.random.default_rng(1).normal(
        size=worse[lang == "de"].shape
    ).astype(np.float32)
    np.savez(tmp_path / "data/worse.npz", embeddings=worse, labels=y)
    p.write_text(p.read_text().replace("data/set.npz}}", "data/worse.npz}}"))
    out = _run(load_suite(p))["map_vs_baseline_slices[m-set]"]
    assert out.startswith("fail") and "1 of 2 slices dropped by more than max_drop 0.01" in out
    assert "  de: " in out and "  en: " not in out


BAD = [
    ("slices: 7", "datasets.set.slices", "expected a mapping"),
    ("slices: {lang: {column: lang, bins: [3, 1]}}", "datasets.set.slices.lang.bins", "rising"),
    (
        "slices: {lang: {column: lang, map: {a: 1, b: x}}}",
        "datasets.set.slices.lang.map",
        "mixed types",
    ),
    (
        "slices: {lang: {column: lang, default: x}}",
        "datasets.set.slices.lang.default",
        "goes with map",
    ),
    ("slices: {lang: {colum: lang}}", "datasets.set.slices.lang.colum", "unknown field"),
    ("slices: {a=b: lang}", "datasets.set.slices.a=b", "without '='"),
]


@pytest.mark.parametrize("dataset_slices, field, words", BAD)
def test_bad_dataset_slices_are_located_errors(tmp_path, dataset_slices, field, words):
    _data(tmp_path)
    p = _write(
        tmp_path,
        f"""
        datasets:
          set: {{queries: data/set.npz, {dataset_slices}}}
        models:
          m: {{embeddings: {{set: data/set.npz}}}}
        checks:
          - {{metric: map, dataset: set, at_least: 0.1}}
        """,
    )
    with pytest.raises(SuiteError) as info:
        load_suite(p)
    assert info.value.field == field and words in str(info.value) and info.value.line == 2


BAD_CHECKS = [
    ("slices: some, at_least: 0.1", "expected all, worst"),
    ("slices: [], at_least: 0.1", "non-empty list"),
    ("slices: worst, baseline: {max_drop: 0.1}", "worst goes with at_least"),
    ("slices: all, compare: {baseline: m}", "compare check compares whole evaluations"),
    ("slices: all, baseline: {max_drop: 0.1, significant: true}", "significant is not taken"),
]


@pytest.mark.parametrize("check, words", BAD_CHECKS)
def test_bad_check_slices_are_located_errors(tmp_path, check, words):
    _data(tmp_path)
    p = _write(
        tmp_path,
        f"""
        datasets:
          set: {{queries: data/set.npz, slices: lang}}
          plain: {{queries: data/set.npz}}
        models:
          m: {{embeddings: {{set: data/set.npz, plain: data/set.npz}}}}
          n: {{embeddings: {{set: data/set.npz, plain: data/set.npz}}}}
        checks:
          - {{metric: map, dataset: set, {check}}}
        """,
    )
    with pytest.raises(SuiteError) as info:
        load_suite(p)
    assert words in str(info.value) and info.value.line == 8


def test_check_needs_sliced_dataset_and_query_level_metric(tmp_path):
    _data(tmp_path)
    base = """
        datasets:
          set: {queries: data/set.npz, slices: lang}
          plain: {queries: data/set.npz}
        models:
          m: {embeddings: {set: data/set.npz, plain: data/set.npz}}
        checks:
          - CHECK
        """
    p = _write(
        tmp_path, base.replace("CHECK", "{metric: map, dataset: plain, slices: all, at_least: 0.1}")
    )
    with pytest.raises(SuiteError, match="dataset 'plain' declares no slices"):
        load_suite(p)
    p = _write(
        tmp_path,
        base.replace("CHECK", "{metric: pair_f1@t=0.5, dataset: set, slices: all, at_least: 0.1}"),
    )
    with pytest.raises(SuiteError, match="no per-query values"):
        load_suite(p)


def test_bad_column_values_fail_at_run_time_with_the_line(tmp_path):
    e, y, _ = _data(tmp_path)
    np.savez(
        tmp_path / "data/nan.npz",
        embeddings=e,
        labels=y,
        score=np.where(np.arange(240) == 5, np.nan, 1.0),
    )
    for slices, words in [
        ("score", "NaN metadata"),
        ("nope", "column 'nope' is not in nan.npz"),
        ("{column: labels, map: {0: a}}", "are not in map:"),
        ("{column: labels, bins: [0, 10]}", "outside bins"),
    ]:
        p = _write(
            tmp_path,
            f"""
            datasets:
              set: {{queries: data/nan.npz, slices: {slices}}}
            models:
              m: {{embeddings: {{set: data/nan.npz}}}}
            checks:
              - {{metric: map, dataset: set, slices: all, at_least: 0.1}}
            """,
        )
        suite = load_suite(p)
        with pytest.raises(SuiteError, match=words) as info:
            SuiteRunner().run(suite, suite.cases[0])
        assert info.value.line == 2, slices


def test_json_schema_accepts_what_the_loader_accepts():
    jsonschema = pytest.importorskip("jsonschema")
    from retrieval_checks.suites._jsonschema import suite_json_schema

    v = jsonschema.Draft202012Validator(suite_json_schema())
    good = {
        "datasets": {
            "a": {
                "queries": "x.npz",
                "slices": {"lang": "lang", "n": {"column": "n", "bins": [0, 1]}},
            }
        },
        "checks": [{"metric": "map", "dataset": "a", "slices": ["de", 3], "at_least": 0.1}],
    }
    assert not list(v.iter_errors(good))
    bad = {"datasets": {"a": {"queries": "x.npz", "slices": 3}}, "checks": []}
    assert list(v.iter_errors(bad))
    assert InputError  # (imported for the module's errors)


BEIR_EMBEDDER = """
import hashlib
import numpy as np

def embed(texts, part=None):
    out = np.zeros((len(texts), 32))
    for i, t in enumerate(texts):
        for w in t.lower().split():
            out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 32] += 1.0
    return out + 0.01 * (part == "queries")
"""


def test_beir_slices_are_fields_of_each_query(tmp_path):
    import json

    rng = np.random.default_rng(0)
    words = (
        "cat dog bird fish red blue green text search model query document river stone tree".split()
    )
    docs = [{"_id": f"d{i}", "text": " ".join(rng.choice(words, 6))} for i in range(60)]
    queries = []
    for i in range(40):
        q = {"_id": f"q{i}", "text": " ".join(rng.choice(words, 3))}
        if i != 7:  # q7 has no language: counted, in no slice
            q["metadata"] = {"lang": "de" if i % 2 else "en"}
        queries.append(q)
    root = tmp_path / "beir"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    lines = ["query-id\tcorpus-id\tscore"] + [
        f"q{i}\td{d}\t1" for i in range(40) for d in rng.choice(60, 3, replace=False)
    ]
    (root / "qrels/test.tsv").write_text("\n".join(lines) + "\n")
    (tmp_path / "bow.py").write_text(BEIR_EMBEDDER)
    p = _write(
        tmp_path,
        """
        datasets:
          b: {type: beir, path: beir, slices: {column: metadata.lang}}
        models:
          bow: {callable: bow.py:embed}
        checks:
          - {metric: ndcg@10, dataset: b, slices: all, at_least: 0.0001, id: per_lang, unsliced: ignore}
        """,
    )
    suite = load_suite(p)
    runner = SuiteRunner()
    events = []
    with rc.gates.listening(events.append):
        runner.run(suite, suite.cases[0])
    rows = {r["slice"]: r for r in events[0].extra["slices"]}
    assert set(rows) == {"de", "en"} and rows["de"]["n_queries"] == 19  # q7: no value
    assert rows["en"]["n_queries"] == 20 and events[0].extra["slice_missing"] == {"slice": 1}
    whole = runner.result(
        suite, "bow", "b", suite.evaluation_options(suite.checks[0], "b", runner.defaults, "bow")
    )
    de = [i for i, q in enumerate(whole.query_ids) if int(q[1:]) % 2 and q != "q7"]
    assert rows["de"]["value"] == pytest.approx(np.mean(whole.per_query["ndcg@10"][de]), abs=1e-15)
