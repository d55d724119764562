"""A timm pretrained-config JSON follows the library's text-file rules (issue 25): UTF-8,
a byte-order mark at the start dropped (Windows editors write one), as the TREC and BEIR
readers do; other encodings are an InputError naming the file."""

from __future__ import annotations

import json

import pytest

from retrieval_checks.errors import InputError
from retrieval_checks.models._hub import _timm_cfg

CFG = {"pretrained_cfg": {"mean": [0.2, 0.3, 0.4], "std": [0.5, 0.6, 0.7], "crop_pct": 0.75}}


def test_a_config_with_a_leading_byte_order_mark_is_read(tmp_path):
    plain, bom = tmp_path / "cfg.json", tmp_path / "bom.json"
    plain.write_text(json.dumps(CFG), encoding="utf-8")
    bom.write_text(json.dumps(CFG), encoding="utf-8-sig")
    assert _timm_cfg(bom) == _timm_cfg(plain) == CFG["pretrained_cfg"]


def test_a_config_that_is_not_utf8_names_the_file(tmp_path):
    p = tmp_path / "cfg.json"
    p.write_bytes(json.dumps({"pretrained_cfg": {"name": "caf\u00e9"}}).encode("utf-16"))
    with pytest.raises(InputError, match=r"cfg.json: not a JSON pretrained config"):
        _timm_cfg(p)
