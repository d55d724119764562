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
