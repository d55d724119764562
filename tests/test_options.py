"""One table of options: each option is validated the same way wherever it is written."""

from __future__ import annotations

import math

import pytest

import retrieval_checks as rc
from retrieval_checks.options import DEFAULTS, OPTIONS, check_option, parse_memory, parse_text


def test_defaults_are_valid_and_used_by_the_entry_points():
    import inspect

    for name, value in DEFAULTS.items():
        if value is not None:
            assert OPTIONS[name].problem(value) is None, name
    sig = inspect.signature(rc.evaluate).parameters
    assert (
        sig["similarity"].default == DEFAULTS["similarity"]
        and sig["confidence"].default == DEFAULTS["confidence"]
    )
    assert sig["group_seed"].default == DEFAULTS["seed"]
    runner = rc.SuiteRunner()
    assert (
        runner.defaults["confidence"] == DEFAULTS["confidence"] and "device" not in runner.defaults
    )


@pytest.mark.parametrize(
    "name, value, fragment",
    [
        ("similarity", "cosin", "Did you mean 'cosine'?"),
        ("ties", 1, "one of pessimistic, optimistic"),
        ("confidence", 95, "did you mean 0.95?"),
        ("confidence", math.nan, "strictly between 0 and 1"),
        ("confidence", True, "strictly between 0 and 1"),
        ("seed", -1, "an integer >= 0"),
        ("seed", 2.0, "an integer >= 0"),
        ("group_size", 1, "an integer >= 2"),
        ("rho", 1.5, "in [0, 1]"),
        ("device", "gpu", "cuda or cuda:N"),
        ("max_memory", "lots", "not a size"),
    ],
)
def test_bad_values_name_the_option_and_what_is_expected(name, value, fragment):
    with pytest.raises(rc.InputError) as info:
        check_option(name, value)
    assert str(info.value).startswith(f"{name}={value!r}: ") and fragment in str(info.value)


def test_text_values_from_flags_and_ini():
    assert parse_text("seed", " 3 ") == 3 and parse_text("confidence", "0.9") == 0.9
    assert parse_text("max_memory", "2GiB") == 2 * 2**30 and parse_text("max_memory", "") is None
    assert parse_text("device", "") == "auto"
    for name, text in [
        ("seed", "abc"),
        ("confidence", "2"),
        ("confidence", "nan"),
        ("ties", "random"),
    ]:
        with pytest.raises(rc.InputError, match=name):
            parse_text(name, text)
    assert parse_memory("1.5 GiB") == int(1.5 * 2**30)


def _image_text(n_resamples):
    """A small image-text problem (h19 F4: value 249.53, interval [252.93, 252.93] at
    n_resamples=1, so the on='lower' gate passed where the value gate failed)."""
    import numpy as np

    rng = np.random.default_rng(2)
    imgs = rng.normal(size=(300, 16)).astype(np.float32)
    ci = np.repeat(np.arange(300), 5)
    caps = (imgs[ci] + 2.0 * rng.normal(size=(1500, 16))).astype(np.float32)
    return rc.evaluate_image_text(imgs, caps, ci, n_resamples=n_resamples, seed=1)


@pytest.mark.parametrize("n", [1, 2, 5, 10, 99])
def test_a_handful_of_resamples_is_refused_everywhere(n):
    """A bootstrap of a few resamples is no interval: refused in the option table, so the
    engine, the suite loader, the plugin's flags and the statistics functions agree; 0
    (no interval) and the minimum stay valid."""
    fragment = "or 0 for no interval"
    with pytest.raises(rc.InputError, match=f"^n_resamples={n}: .*{fragment}"):
        check_option("n_resamples", n)
    with pytest.raises(rc.InputError, match=fragment):
        parse_text("n_resamples", str(n))
    with pytest.raises(rc.InputError, match=f"n_resamples={n}: .*{fragment}"):
        _image_text(n)
    assert check_option("n_resamples", 0) == 0 and check_option("n_resamples", 100) == 100


def test_an_interval_of_the_minimum_resamples_holds_its_value():
    res = _image_text(OPTIONS["n_resamples"].zero_or_least[0])
    low, high = res.intervals["rsum"]
    assert low <= res["rsum"] <= high
    assert not _image_text(0).intervals


def test_a_suite_with_a_handful_of_resamples_is_refused_naming_the_line(tmp_path):
    from retrieval_checks.suites import load_suite

    (tmp_path / "s.yaml").write_text(
        "suite: s\noptions: {n_resamples: 1}\ndatasets:\n"
        "  v: {type: image_text, images: i.npz, captions: c.npz}\n"
        "checks:\n  - {metric: rsum, at_least: 251.2, on: interval}\n"
    )
    with pytest.raises(rc.InputError, match=r"s\.yaml:2: options\.n_resamples: .*or 0 for no"):
        load_suite(tmp_path / "s.yaml")
