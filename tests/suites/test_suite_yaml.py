"""The suite reader's YAML layer (retrieval_checks/suites/_yaml.py) fails closed on hostile
files: alias bombs (in kwargs, a metric, merge keys), recursive aliases, nesting deeper
than MAX_DEPTH, integers longer than MAX_DIGITS and huge values are refused with a
located SuiteError in milliseconds, before anything is expanded; messages cut what they
show; small aliases still work; a suite path that is a directory, missing, larger than
MAX_BYTES, a symlink loop or a FIFO is refused without reading it.

Cost: about 3 s of CPU (measured; the bombs are refused unexpanded). The 1 MB values of
test_huge_values_are_cut_in_messages and the 5000-deep nestings dominate: 9 s and 3 s
wall at load 15 on the 2-core machine.
"""

from __future__ import annotations

import time

import pytest
from shared_setup import write_suite

from retrieval_checks import SuiteError, load_suite

HEAD = "datasets:\n  a: {queries: data/set.npz}\n"
TH = "checks:\n  - {metric: %s, %s}\n"


def test_libyaml_parses_under_the_python_composer_and_names_a_tab(where):
    """Where PyYAML has libyaml, its scanner and parser read the suite (about 3.6x less
    CPU per suite: the fuzz test's 400 suites took 4.4 s) under PyYAML's Python composer,
    whose hooks the bounds above rely on (they pass on either parser); libyaml's
    "found character that cannot start any token" names the character, as PyYAML's own
    scanner does."""
    import yaml

    from retrieval_checks.suites import _yaml

    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML without libyaml: its pure-Python parser serves")
    from yaml.cyaml import CParser

    assert issubclass(_yaml._Loader, CParser)
    mro = _yaml._Loader.__mro__
    assert mro.index(yaml.composer.Composer) < mro.index(CParser)  # the Python composer's hooks run
    with pytest.raises(
        SuiteError, match=r"found character '\\t' that cannot start any token"
    ) as info:
        load_suite(write_suite(where, HEAD + "checks:\n\t- {metric: map, at_least: 0.5}\n"))
    assert info.value.line == 4


@pytest.mark.parametrize("parser", ["default", "pure-python"])
def test_a_control_character_is_a_suite_error_on_its_line(where, monkeypatch, parser):
    """PyYAML's own reader refused a control character when the loader was built, outside
    the reader's error handling: a raw yaml ReaderError escaped load_suite (not a
    SuiteError, no line). Both parsers now give a SuiteError naming the character and
    its line; "pure-python" is PyYAML's reader, as where PyYAML lacks libyaml."""
    import yaml

    from retrieval_checks.suites import _yaml

    if parser == "pure-python":

        class Plain(yaml.SafeLoader):
            pass

        monkeypatch.setattr(_yaml, "_Loader", Plain)  # only the reader is reached
    path = write_suite(where, HEAD + "checks:\n  - {metric: map, at_least: \x01}\n")
    with pytest.raises(SuiteError, match=r"control character \(#x0001\)") as info:
        load_suite(path)
    assert info.value.line == 4 and str(path) in str(info.value)


# --- fail closed: hostile files: bombs, depth, size ---
def _bomb(levels=9, width=10):
    lines = ["    l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"    l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(lines)


def _timed_refusal(where, text, words, line=None):
    p = write_suite(where, text)
    start = time.perf_counter()
    with pytest.raises(SuiteError) as info:
        load_suite(p)
    elapsed = time.perf_counter() - start
    # expanded, the bombs hold ~10^9 nodes (hours of work); a refusal that reads only the
    # text takes milliseconds. The bound sits far from both, so a loaded machine does not
    # flake it (it did at 2 s) while an expansion still fails it
    assert elapsed < 30.0, f"took {elapsed:.1f} s: the aliases were expanded"
    message = str(info.value)
    assert len(message) < 1500
    for w in words:
        assert w in message, (w, message)
    if line is not None:
        assert info.value.line == line, message
    return info.value


def test_alias_bomb_in_kwargs_is_refused_quickly(where):
    text = (
        HEAD
        + "models:\n  m:\n    callable: emb.py:f\n    kwargs:\n"
        + _bomb()
        + "\n"
        + TH % ("map", "at_least: 0.5")
    )
    _timed_refusal(where, text, ["alias", "100000", "alias bomb"])


def test_alias_bomb_in_metric_is_refused_quickly(where):
    text = (
        "bomb: &b\n"
        + _bomb().replace("    ", "  ")
        + "\n"
        + HEAD
        + "checks:\n  - {metric: *b, at_least: 0.5}\n"
    )
    _timed_refusal(where, text, ["alias"])


def test_alias_bomb_through_merge_keys_is_refused(where):
    lines = ["x0: &x0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9, j: 10}"]
    for i in range(1, 8):
        lines.append(f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 10) + "]")
    text = "\n".join(lines) + "\n" + HEAD + "checks:\n  - {<<: *x0, metric: map, at_least: 0.5}\n"
    _timed_refusal(where, text, ["alias"])


def test_one_alias_that_expands_beyond_the_limit_names_its_line(where):
    text = (
        "big: &big ["
        + ", ".join(["1"] * 1000)
        + "]\nrefs: ["
        + ", ".join(["*big"] * 200)
        + "]\n"
        + HEAD
        + TH % ("map", "at_least: 0.5")
    )
    _timed_refusal(where, text, ["alias"], line=2)


def test_a_recursive_alias_is_refused(where):
    text = (
        HEAD
        + "models:\n  m:\n    callable: emb.py:f\n    kwargs: &k {a: *k}\n"
        + TH % ("map", "at_least: 0.5")
    )
    _timed_refusal(where, text, ["alias", "inside its own anchor"], line=6)


def test_small_aliases_still_work(where):
    suite = load_suite(
        write_suite(
            where,
            HEAD + "models:\n  m:\n    callable: emb.py:f\n    kwargs: &k {dim: 4}\n"
            "  n:\n    callable: emb.py:f\n    kwargs: *k\n" + TH % ("map", "at_least: 0.5"),
        )
    )
    assert suite.models["n"].kwargs == {"dim": 4}


@pytest.mark.parametrize(
    "nested",
    [
        "[" * 5000 + "]" * 5000,
        "{a: " * 5000 + "1" + "}" * 5000,
    ],
)
def test_deep_nesting_is_a_suite_error_not_a_recursion_error(where, nested):
    text = (
        HEAD
        + "models:\n  m:\n    callable: emb.py:f\n    kwargs: {x: "
        + nested
        + "}\n"
        + TH % ("map", "at_least: 0.5")
    )
    _timed_refusal(where, text, ["nesting deeper than", "levels"], line=6)


def test_aliases_that_nest_deeper_than_the_limit_are_refused(where):
    lines = ["d0: &d0 [1]"] + [f"d{i}: &d{i} [*d{i - 1}]" for i in range(1, 200)]
    _timed_refusal(
        where, "\n".join(lines) + "\n" + HEAD + TH % ("map", "at_least: 0.5"), ["deeper than"]
    )


@pytest.mark.parametrize(
    "place, line",
    [
        ("checks:\n  - {metric: map, at_least: %s}\n", 4),
        ("checks:\n  - {metric: map, at_least: 0.5, seed: %s}\n", 4),
        (
            "models:\n  m: {callable: emb.py:f, batch_size: %s}\nchecks:\n  - {metric: map, at_least: 0.5}\n",
            4,
        ),
        (
            "models:\n  m: {callable: emb.py:f, kwargs: {n: -%s}}\nchecks:\n  - {metric: map, at_least: 0.5}\n",
            4,
        ),
    ],
)
def test_5000_digit_integers_are_suite_errors(where, place, line):
    _timed_refusal(where, HEAD + place % ("9" * 5000), ["5000 digits"], line=line)


def test_huge_values_are_cut_in_messages(where):
    huge = "x" * 1_000_000
    err = _timed_refusal(
        where,
        HEAD + f"checks:\n  - {{metric: map, at_least: 0.5, {huge[:1000]}: 1}}\n",
        ["unknown field", "(1000 characters)"],
        line=4,
    )
    assert huge[:200] not in str(err)
    err = _timed_refusal(
        where, HEAD + f"checks:\n  - {{metric: {huge}, at_least: 0.5}}\n", ["metric name"], line=4
    )
    assert err.field == "checks[0].metric" and len(str(err)) < 400
    err = _timed_refusal(
        where,
        HEAD + f"checks:\n  - {{metric: map, at_least: 0.5, similarity: {huge}}}\n",
        ["similarity"],
        line=4,
    )
    assert huge[:200] not in str(err)
    err = _timed_refusal(
        where,
        HEAD + f"checks:\n  - {{metric: map, dataset: {huge}, at_least: 0.5}}\n",
        ["no dataset named"],
        line=4,
    )
    assert huge[:200] not in str(err)


# --- fail closed: suite paths that are not a readable file ---
def test_a_suite_path_that_is_a_directory_or_missing(where):
    with pytest.raises(SuiteError, match="directory, not a suite file"):
        load_suite(where)
    with pytest.raises(SuiteError, match="cannot read the file") as info:
        load_suite(where / "missing.yaml")
    assert info.value.path == where / "missing.yaml"


def test_files_that_are_too_big_not_regular_or_looping_are_refused(where):
    big = write_suite(where, "suite: x\n# " + "x" * (9 * 2**20) + "\n", "big.yaml")
    start = time.perf_counter()
    with pytest.raises(SuiteError, match="larger than 8 MiB"):
        load_suite(big)
    assert time.perf_counter() - start < 2.0
    loop = where / "loop.yaml"
    loop.symlink_to(where / "loop.yaml")
    with pytest.raises(SuiteError, match="cannot read the file"):
        load_suite(loop)
    import os

    if hasattr(os, "mkfifo"):
        fifo = where / "pipe.yaml"
        os.mkfifo(fifo)
        with pytest.raises(SuiteError, match="not a regular file"):
            load_suite(fifo)  # reading it would block forever
