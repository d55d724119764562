"""Records written before an option stopped being one that changes a value (review
finding 9: ``similarity`` left VALUE_OPTIONS in 38702e7) keep working: a baselines
file that records ``options.similarity`` is read, compared and left unrewritten under
--rc-force-regen, and a history run that recorded it compares with a newer run; an
option no version ever recorded is still refused, naming the field.

Cost: about 1 s in process (one small evaluate call, the rest reads records).
"""

from __future__ import annotations

import io

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.gates import BaselineFile, BaselineStore
from retrieval_checks.gates._baselines import check_record, records_differ
from retrieval_checks.tracking import History
from retrieval_checks.tracking import main as cli

META = {"started": "2026-01-01T00:00:00+00:00", "git_commit": "abc", "git_dirty": 0, "machine": "m"}


@pytest.fixture(scope="module")
def result():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 4)
    x = rng.normal(size=(10, 8))[y] + 0.5 * rng.normal(size=(40, 8))
    return rc.evaluate(x.astype(np.float32), query_labels=y, metrics=["map"])


def _old(record: dict) -> dict:
    """The record as a version before 38702e7 wrote it (similarity among its options)."""
    return {**record, "options": {"similarity": "cosine", **record["options"]}}


def test_a_record_with_similarity_among_its_options_is_read_and_compared(tmp_path, result):
    record = rc.baseline_record(result, "map")
    path = tmp_path / "old.baselines.yaml"
    BaselineFile(path).update({"k": record})
    text = path.read_text().replace("options: {", "options: {similarity: cosine, ")
    path.write_text(text)
    assert "similarity: cosine" in path.read_text()
    stored = BaselineFile(path).get("k")
    assert "similarity" not in stored["options"]  # read as no option (it changes no value now)
    assert BaselineStore().check(record, path=path, key="k", max_drop=0.01) is not None
    # --rc-force-regen: the same result is no change, so nothing is rewritten or failed
    force = BaselineStore(regen="force")
    assert force.check(record, path=path, key="k", max_drop=0.01) is not None
    assert force.pending == []
    assert not records_differ(_old(record), record)


def test_an_option_no_version_recorded_is_still_refused(result):
    record = rc.baseline_record(result, "map")
    bad = {**record, "options": {"simlarity": "cosine", **record["options"]}}
    with pytest.raises(rc.InputError, match=r"options\.simlarity.*not an option that changes"):
        check_record(bad, where="f.yaml: baseline 'k'")
    assert check_record(_old(record), where="x")["options"] == record["options"]


def _gate(value, **options):
    return {"test": "t", "metric": "map", "value": value, "passed": True, "options": options}


def test_a_history_run_that_recorded_similarity_compares_with_a_newer_run(tmp_path):
    path = tmp_path / "h.sqlite"
    History(path).record(META, [_gate(0.80, similarity="cosine", ties="pessimistic")])
    History(path).record(META, [_gate(0.80, ties="pessimistic")])
    out = io.StringIO()
    code = cli(["--db", str(path), "compare", "-2", "-1", "--max-drop", "0.05"], out=out)
    assert code == 0 and "NOT COMPARED" not in out.getvalue(), out.getvalue()
    # an option that changes a value still refuses the comparison
    History(path).record(META, [_gate(0.80, similarity="cosine", ties="average")])
    code = cli(["--db", str(path), "compare", "-3", "-1", "--max-drop", "0.05"], out=io.StringIO())
    assert code == 1
