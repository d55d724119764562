"""The plugin's session options (``--rc-<name>`` and the ini's ``rc_<name>``): a bad
flag or ini value is one usage error at start-up (exit 4) naming the flag and its ini
name, never a traceback; --rc-max-skipped and --rc-timeout reach rc_options and the suite
runner (issue 12). pytester in-process, one session per case: about 0.2 CPU-s each
(measured: this file, test_plugin_max_skipped, test_plugin_outputs and
test_plugin_suite_errors, 74 tests, took 25.5 CPU-s together, start-up included)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def _run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


# ------------------------------------------------------------------ options: one usage error at start-up
BAD_FLAGS = [
    ("--rc-seed", "abc", "integer"),
    ("--rc-seed", "-1", "integer >= 0"),
    ("--rc-seed", "1.5", "integer"),
    ("--rc-confidence", "2", "strictly between 0 and 1"),
    ("--rc-confidence", "nan", "strictly between 0 and 1"),
    ("--rc-confidence", "inf", "strictly between 0 and 1"),
    ("--rc-confidence", "0", "strictly between 0 and 1"),
    ("--rc-confidence", "95", "did you mean 0.95"),
    ("--rc-confidence", "x", "strictly between 0 and 1"),
    ("--rc-device", "gpu", "auto, cpu"),
    ("--rc-device", "cuda:x", "auto, cpu"),
    ("--rc-max-memory", "10", "at least a few MiB"),
    ("--rc-max-memory", "lots", "not a size"),
    ("--rc-ties", "random", "pessimistic"),
    ("--rc-max-skipped", "-1", "a count of queries"),
    ("--rc-max-skipped", "1.5", "a count of queries"),
    ("--rc-max-skipped", "x", "a count of queries"),
    ("--rc-max-skipped", "nan", "a count of queries"),
    ("--rc-timeout", "0", "seconds > 0"),
    ("--rc-timeout", "-5", "seconds > 0"),
    ("--rc-timeout", "nan", "seconds > 0"),
    ("--rc-timeout", "soon", "seconds > 0"),
]


@pytest.mark.parametrize(
    "flag, value, expected", BAD_FLAGS, ids=[f"{f}={v}" for f, v, _ in BAD_FLAGS]
)
def test_a_bad_flag_is_one_usage_error(pytester, flag, value, expected):
    pytester.makepyfile(test_a="def test_a(): pass\ndef test_b(): pass\n")
    result = _run(pytester, f"{flag}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    ini = "rc_" + flag[5:].replace("-", "_")
    assert (
        err.count("ERROR: retrieval-checks:") == 1
        and flag in err
        and f"ini {ini}" in err
        and expected in err
    )
    assert "Traceback" not in err + result.stdout.str()


@pytest.mark.parametrize(
    "ini, value, expected",
    [
        ("rc_seed", "x", "integer"),
        ("rc_confidence", "95", "did you mean 0.95"),
        ("rc_device", "tpu", "auto, cpu"),
        ("rc_max_skipped", "-2", "a count of queries"),
        ("rc_timeout", "0", "seconds > 0"),
        ("rc_max_memory", "1KB", "at least a few MiB"),
    ],
)
def test_a_bad_ini_value_is_one_usage_error_naming_it(pytester, ini, value, expected):
    pytester.makepyfile(test_a="def test_a(): pass\n")
    pytester.makeini(f"[pytest]\n{ini} = {value}\n")
    result = _run(pytester)
    err = result.stderr.str()
    assert (
        result.ret == pytest.ExitCode.USAGE_ERROR
        and ini in err
        and expected in err
        and "Traceback" not in err
    )


def test_cuda_without_a_cuda_device_is_a_usage_error(pytester):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    pytester.makepyfile(test_a="def test_a(): pass\n")
    result = _run(pytester, "--rc-device=cuda")
    err = result.stderr.str()
    assert (
        result.ret == pytest.ExitCode.USAGE_ERROR
        and "--rc-device" in err
        and "ini rc_device" in err
    )
    assert "device='cpu'" in err


def test_max_skipped_and_timeout_reach_the_options_and_the_suite_runner(pytester):
    pytester.makepyfile(
        test_a="""
from pytest_retrieval_checks.plugin import suite_runner

def test_a(rc_options, pytestconfig):
    assert rc_options["max_skipped"] == 0.25 and rc_options["timeout"] == 30.0
    defaults = suite_runner(pytestconfig).defaults
    assert defaults["max_skipped"] == 0.25 and defaults["timeout"] == 30.0 and defaults["seed"] == 3
"""
    )
    _run(pytester, "--rc-max-skipped=0.25", "--rc-timeout=30", "--rc-seed=3").assert_outcomes(
        passed=1
    )
    pytester.makeini("[pytest]\nrc_max_skipped = none\nrc_timeout = none\n")
    pytester.makepyfile(
        test_a="""
def test_a(rc_options):
    assert rc_options["max_skipped"] is None and rc_options["timeout"] is None
"""
    )
    _run(pytester).assert_outcomes(passed=1)
