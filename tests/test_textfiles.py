"""The one home of the text-file rules (issue 25), checked directly: line ends and
numbering, the byte-order mark, the number grammar and the field separators."""

from __future__ import annotations

import math

import pytest

from retrieval_checks._textfiles import (
    id_mismatch,
    parse_float,
    parse_int,
    split_fields,
    text_lines,
)
from retrieval_checks.errors import InputError


def test_lines_end_at_lf_crlf_and_cr_and_are_numbered_like_text_mode(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"\xef\xbb\xbfa\r\nb\rc\n\nd")
    assert list(text_lines(p, "test")) == [(1, "a"), (2, "b"), (3, "c"), (4, ""), (5, "d")]
    with open(
        p, encoding="utf-8-sig", newline=None
    ) as fh:  # Python's own reading, for the numbering
        assert [line.rstrip("\n") for line in fh] == ["a", "b", "c", "", "d"]


def test_a_file_holding_only_a_bom_has_one_empty_line(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"\xef\xbb\xbf")
    assert list(text_lines(p, "test")) == [(1, "")]


def test_unicode_line_separators_do_not_end_a_line(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("a\u2028b\x85c\n", encoding="utf-8")
    assert list(text_lines(p, "test")) == [(1, "a\u2028b\x85c")]


@pytest.mark.parametrize(
    "text,value",
    [
        ("0", 0),
        ("+7", 7),
        ("-3", -3),
        ("007", 7),
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775807", 1 - 2**63),
    ],
)
def test_integers_in_the_grammar(text, value):
    assert parse_int(text, "f:1", "grade", "fix.") == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1_0",
        "\u0661",
        "\uff11",
        "1.0",
        "1e1",
        " 1",
        "1 ",
        "0x1",
        "+",
        "--1",
        "9223372036854775808",
        "-9223372036854775808",
    ],
)
def test_integers_outside_the_grammar(text):
    with pytest.raises(InputError, match=r"f:1: grade .*fix\."):
        parse_int(text, "f:1", "grade", "fix.")


@pytest.mark.parametrize(
    "text,value",
    [
        ("1", 1.0),
        ("-0.5", -0.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("1E-2", 0.01),
        ("+1.5e+3", 1500.0),
        ("1e308", 1e308),
    ],
)
def test_decimals_in_the_grammar(text, value):
    assert parse_float(text, "f:1", "score") == value


@pytest.mark.parametrize("text", ["inf", "-Infinity", "NaN", "+nan"])
def test_inf_and_nan_are_read_where_allowed_and_left_to_the_caller(text):
    assert not math.isfinite(parse_float(text, "f:1", "score"))
    with pytest.raises(InputError, match="not a number"):
        parse_float(text, "f:1", "score", special=False)


@pytest.mark.parametrize(
    "text", ["1_0", "\u0661.5", "0x1p3", ".", "e5", "1e", "1.2.3", "1,5", "infinit", "1e400"]
)
def test_decimals_outside_the_grammar(text):
    with pytest.raises(InputError, match=r"f:1: score .*(not a number|beyond the float64)"):
        parse_float(text, "f:1", "score")


def test_fields_split_on_ascii_whitespace_only():
    assert split_fields(" q1\tQ0  d1 \x0b1 2.5 t\r", "f:1") == ["q1", "Q0", "d1", "1", "2.5", "t"]
    for bad in ("q1\u00a0Q0", "q1\u3000Q0", "q1\x1cQ0", "q\u200d1"):
        with pytest.raises(InputError, match=r"f:1: the field 1 .* holds U\+"):
            split_fields(bad, "f:1")


def test_id_mismatch_says_which_side_uses_row_numbers():
    assert "row number" in id_mismatch(["3"], ["a", "b", "c", "d"], "queries.jsonl")
    assert "(row 3 of queries.jsonl (from 0) is 'd')" in id_mismatch(
        ["3"], ["a", "b", "c", "d"], "queries.jsonl"
    )
    assert "look like row numbers" in id_mismatch(["x"], ["0", "1", "2"], "queries.jsonl")
    assert "both are numbers" in id_mismatch(["0"], ["1", "2"], "queries.jsonl")
    assert id_mismatch(["x"], ["a", "b"], "f") == "ids there look like 'a', 'b'"
