"""The content-addressed embedding cache (EmbeddingCache) fails closed (issue 12): an
unusable cache directory warns and runs without the cache instead of turning a gate red,
and a damaged entry (truncated, flipped, swapped, another key's, not a regular file) is
recomputed, never served. (Its key over the model's code: test_model_code_key.py.)
Cost: under 1 s (6 x 2 entries in a temporary directory; one suite of a numpy callable)."""

from __future__ import annotations

import io
import os
import warnings

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.models import EmbeddingCache, _embed

X = np.random.default_rng(3).normal(size=(10, 4)).astype(np.float32)


E = np.arange(12, dtype=np.float32).reshape(6, 2)


def test_cache_round_trip_and_counts(tmp_path):
    cache = EmbeddingCache(tmp_path / "c")
    key = EmbeddingCache.key("fp", X, None)
    assert cache.get(key) is None and cache.misses == 1
    cache.put(key, E)
    np.testing.assert_array_equal(cache.get(key), E)
    assert cache.hits == 1


def test_cache_directory_that_is_a_file_warns_and_runs_without(tmp_path):
    f = tmp_path / "cachefile"
    f.write_text("not a directory")
    with pytest.warns(
        RuntimeWarning,
        match=r"embedding cache .*cachefile: it exists and is not a directory; running "
        r"without the cache",
    ):
        cache = EmbeddingCache(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once, then silent
        assert cache.get("k") is None
        cache.put("k", E)
    assert f.read_text() == "not a directory"


def test_cache_directory_replaced_by_a_file_later(tmp_path):
    d = tmp_path / "c"
    cache = EmbeddingCache(d)
    d.write_text("x")
    with pytest.warns(RuntimeWarning, match=r"c: cannot write there"):
        cache.put("k", E)
    assert cache.get("k") is None and cache.directory is None


def test_unwritable_cache_warns_and_runs_without(tmp_path, monkeypatch):
    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_embed.tempfile, "mkstemp", read_only)
    cache = EmbeddingCache(tmp_path / "ro")
    with pytest.warns(
        RuntimeWarning,
        match=r"ro: cannot write there \(PermissionError: Permission denied\); "
        r"running without the cache",
    ):
        cache.put("k", E)
    assert cache.get("k") is None


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root writes into read-only directories; the monkeypatched test covers it",
)
def test_read_only_cache_directory_for_real(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    try:
        cache = EmbeddingCache(d)
        with pytest.warns(RuntimeWarning, match="cannot write there"):
            cache.put("k", E)
    finally:
        d.chmod(0o755)


def _corrupt(kind, path):
    raw = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "garbage":
        path.write_bytes(b"\x93NUMPY garbage" * 10)
    elif kind == "flipped":
        at = raw.find(E.tobytes())
        data = bytearray(raw)
        data[at + 5] ^= 0x01
        path.write_bytes(bytes(data))
    elif kind == "swapped":  # a valid archive of other numbers, without a matching checksum
        buf = io.BytesIO()
        np.savez(buf, embeddings=E + 1, sha256=np.zeros(32, np.uint8))
        path.write_bytes(buf.getvalue())
    elif kind == "directory":
        path.unlink()
        path.mkdir()
    elif kind == "old_npy":
        buf = io.BytesIO()
        np.save(buf, E + 1)
        path.write_bytes(buf.getvalue())


@pytest.mark.parametrize(
    "kind", ["truncated", "empty", "garbage", "flipped", "swapped", "directory", "old_npy"]
)
def test_damaged_cache_entry_is_recomputed_never_served(tmp_path, kind):
    cache = EmbeddingCache(tmp_path / "c")
    key = EmbeddingCache.key("fp", X, "queries")
    cache.put(key, E)
    entry = next((tmp_path / "c").glob(f"{key}*"))
    _corrupt(kind, entry)
    with pytest.warns(
        RuntimeWarning, match=r"embedding cache entry .* is damaged .*recomputing it"
    ):
        assert cache.get(key) is None
    cache.put(key, E)  # the recomputed value replaces it
    np.testing.assert_array_equal(cache.get(key), E)


def test_cache_argument_is_checked(tmp_path):
    with pytest.raises(rc.InputError, match=r"cache directory=42: expected a path"):
        EmbeddingCache(42)


def test_suite_runner_recomputes_a_damaged_entry_with_the_same_numbers(tmp_path):
    from retrieval_checks.suites import SuiteRunner, load_suite

    (tmp_path / "enc.py").write_text("def f(x):\n    return x[:, :3] * 2.0\n")
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "d.npz",
        inputs=rng.normal(size=(12, 5)).astype(np.float32),
        labels=np.repeat(np.arange(4), 3),
    )
    (tmp_path / "s.yaml").write_text(
        "datasets: {a: {queries: d.npz}}\nmodels: {m: {callable: 'enc:f'}}\n"
        "checks: [{metric: map, at_least: 0.1}]\n"
    )
    suite = load_suite(tmp_path / "s.yaml")
    first = SuiteRunner(cache_dir=tmp_path / "cache")
    ref = first.part(suite, "m", "a", "queries").embeddings.copy()
    for entry in (tmp_path / "cache").iterdir():
        entry.write_bytes(entry.read_bytes()[:40])
    second = SuiteRunner(cache_dir=tmp_path / "cache")
    with pytest.warns(RuntimeWarning, match="damaged"):
        again = second.part(suite, "m", "a", "queries").embeddings
    np.testing.assert_array_equal(again, ref)
    assert second.embedded == 1


def test_an_entry_of_another_key_is_not_served(tmp_path):
    """A valid entry copied or renamed onto another key's name (another model's, other
    inputs'): its checksum matches its numbers, but it is not this key's entry."""
    cache = EmbeddingCache(tmp_path / "c")
    mine, other = (
        EmbeddingCache.key("fp", X, "queries"),
        EmbeddingCache.key("fp-other-model", X, "queries"),
    )
    cache.put(other, E + 1)
    (tmp_path / "c" / f"{other}.npz").replace(tmp_path / "c" / f"{mine}.npz")
    with pytest.warns(
        RuntimeWarning, match=rf"embedding cache entry .*{mine}\.npz is damaged .*another key"
    ):
        assert cache.get(mine) is None
    cache.put(mine, E)
    np.testing.assert_array_equal(cache.get(mine), E)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_an_entry_that_is_not_a_regular_file_is_not_opened(tmp_path):
    """A named pipe where an entry should be would block np.load forever."""
    cache = EmbeddingCache(tmp_path / "c")
    key = EmbeddingCache.key("fp", X, "queries")
    (tmp_path / "c").mkdir()
    os.mkfifo(tmp_path / "c" / f"{key}.npz")
    with pytest.warns(RuntimeWarning, match=r"is damaged \(not a regular file\)"):
        assert cache.get(key) is None
