"""Models fail closed (issue 12): embed checks every argument; exported programs load
without pickle or are refused; weights and model files name the file at fault; the
embedding cache warns and runs without itself instead of turning a gate red, and never
serves a damaged entry."""

from __future__ import annotations

import io
import json
import os
import warnings
import zipfile
from types import SimpleNamespace

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.models import EmbeddingCache, _embed, load_model, model_fingerprint

torch = pytest.importorskip("torch")

X = np.random.default_rng(3).normal(size=(10, 4)).astype(np.float32)


def _net():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 2)


def _model(**kw):
    base = dict(
        name="m",
        kind="callable",
        files={},
        target=None,
        path=None,
        kwargs={},
        batch_size=8,
        device=None,
        cam_layer=None,
        base_dir=None,
        line=None,
    )
    base.update(kw)
    return SimpleNamespace(**base)


# ---------------------------------------------------------------- embed arguments


@pytest.mark.parametrize("batch_size", [0, -1, "8", 1.5, True, None, 2.0])
@pytest.mark.parametrize("model", ["module", "callable"])
def test_embed_batch_size_must_be_a_positive_int(batch_size, model):
    m = _net() if model == "module" else (lambda v: v[:, :2])
    with pytest.raises(rc.InputError, match=r"batch_size=.*: expected a positive integer"):
        rc.embed(m, X, batch_size=batch_size, device="cpu")


@pytest.mark.parametrize("device", ["gpu", "GPU", 5, "cuda:x", "tpu", "cpu0"])
def test_embed_device_is_checked(device):
    with pytest.raises(rc.InputError, match=r"device=.*expected .*auto"):
        rc.embed(_net(), X, device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_embed_cuda_without_a_gpu_is_a_backend_error():
    with pytest.raises(rc.BackendError, match=r"device='cuda'.*no CUDA device; use device='cpu'"):
        rc.embed(_net(), X, device="cuda")


@pytest.mark.parametrize("model", [42, None, "model.pt", [1, 2]])
def test_embed_model_must_be_callable(model):
    with pytest.raises(rc.InputError, match=r"model=\w+: must be a torch.nn.Module or a callable"):
        rc.embed(model, X)


@pytest.mark.parametrize(
    "inputs, fragment",
    [
        (None, r"inputs=NoneType: expected an array or tensor"),
        ("images", r"inputs=str: expected an array"),
        ({"a": 1}, r"inputs=dict: expected an array"),
        (
            [[1.0, 2.0, 3.0, 4.0], [1.0, 2.0]],
            r"inputs: not a rectangular array|inputs: an array of Python objects",
        ),
        (np.array([object(), object()], dtype=object), r"inputs: an array of Python objects"),
        (
            np.where(np.arange(40).reshape(10, 4) == 5, np.nan, X),
            r"inputs: NaN or Inf in 1 input\(s\), first rows \[1\]",
        ),
        (
            np.where(np.arange(40).reshape(10, 4) >= 36, np.inf, X),
            r"NaN or Inf in 1 input\(s\), first rows \[9\]",
        ),
        (
            torch.full((3, 4), float("nan")),
            r"inputs: NaN or Inf in 3 input\(s\), first rows \[0, 1, 2\]",
        ),
        (np.zeros((0, 4), np.float32), r"need at least one row"),
        (np.float32(1.0), r"need at least one row"),
        (np.ones((3, 4), np.complex64), r"complex"),
        (np.array([["a", "b", "c", "d"]]), r"dtype <U1; a torch module needs numeric inputs"),
    ],
)
def test_embed_inputs_are_checked_for_modules(inputs, fragment):
    with pytest.raises(rc.InputError, match=fragment):
        rc.embed(_net(), inputs, device="cpu")


@pytest.mark.parametrize(
    "inputs, fragment",
    [
        (None, r"inputs=NoneType"),
        ([[1.0], [1.0, 2.0]], r"inputs: (not a rectangular array|an array of Python objects)"),
        (np.full((2, 4), np.nan), r"NaN or Inf in 2 input"),
    ],
)
def test_embed_inputs_are_checked_for_callables(inputs, fragment):
    with pytest.raises(rc.InputError, match=fragment):
        rc.embed(lambda v: np.ones((len(v), 2)), inputs)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"transform": 3}, r"transform=3: expected None or a callable"),
        ({"transform": "rotate"}, r"transform='rotate': expected None or a callable"),
        ({"part": 5}, r"part=5: expected None or a string"),
        ({"progress": "yes"}, r"progress='yes': expected True, False or None"),
    ],
)
def test_embed_other_arguments_are_checked(kwargs, fragment):
    with pytest.raises(rc.InputError, match=fragment):
        rc.embed(_net(), X, device="cpu", **kwargs)


def test_embed_valid_variants_agree():
    net = _net()
    ref = rc.embed(net, X, device="cpu")
    np.testing.assert_allclose(
        rc.embed(net, X.tolist(), device="cpu", batch_size=np.int64(3)), ref, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        rc.embed(net, X.astype(">f4"), device="cpu"), ref, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        rc.embed(net, torch.from_numpy(X).double(), device="numpy"), ref, rtol=1e-5, atol=1e-6
    )
    out = rc.embed(
        lambda v: v[:, :2], torch.from_numpy(X)
    )  # tensors reach callables as numpy arrays
    np.testing.assert_array_equal(out, X[:, :2])
    strings = rc.embed(
        lambda v: np.array([[len(s), 1.0] for s in v]), np.array(["ab", "c"])
    )  # text encoders
    np.testing.assert_array_equal(strings, [[2, 1], [1, 1]])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float64"])
def test_embed_converts_low_and_high_precision_tensors_to_the_module_dtype(dtype):
    """bfloat16 / float16 / float64 inputs reach a float32 module as float32 (torch would
    raise a dtype mismatch), and the result equals embedding the rounded values."""
    net = _net()
    x = torch.from_numpy(X).to(getattr(torch, dtype))
    out = rc.embed(net, x, device="cpu")
    np.testing.assert_allclose(out, rc.embed(net, x.float(), device="cpu"), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- exported programs


def _export(path):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.lin(x)

    torch.manual_seed(0)
    net = Net().eval()
    ep = torch.export.export(
        net, (torch.randn(3, 4),), dynamic_shapes=({0: torch.export.Dim("batch")},)
    )
    torch.export.save(ep, str(path))
    return net


def _rewrite(src, dst, change):
    """Copy a .pt2 zip, letting ``change(relative_name, data)`` return new bytes, None to drop,
    or a list of (relative_name, bytes) to add."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        names = zin.namelist()
        prefix = names[0].split("/", 1)[0] + "/"
        for name in names:
            rel = name[len(prefix) :]
            out = change(rel, zin.read(name))
            if out is None:
                continue
            if isinstance(out, list):
                for extra_rel, extra in out:
                    zout.writestr(prefix + extra_rel, extra)
                continue
            zout.writestr(name, out)
    return dst


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _pickled(marker) -> bytes:
    buf = io.BytesIO()
    torch.save(_Payload(str(marker)), buf)
    return buf.getvalue()


def test_a_clean_exported_program_loads_and_runs(tmp_path):
    net = _export(tmp_path / "m.pt2")
    module = load_model(_model(kind="exported", path=tmp_path / "m.pt2"))
    out = rc.embed(module, X, device="cpu", batch_size=4)
    np.testing.assert_allclose(out, net(torch.from_numpy(X)).detach().numpy(), rtol=1e-5, atol=1e-6)


def _use_pickle(rel, data):
    if rel.endswith("model_weights_config.json"):
        cfg = json.loads(data)
        first = next(iter(cfg["config"]))
        cfg["config"][first]["use_pickle"] = True
        return json.dumps(cfg).encode()
    return data


def _opaque(rel, data):
    if rel.endswith("model_constants_config.json"):
        return json.dumps(
            {"config": {"c": {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True}}}
        ).encode()
    return data


@pytest.mark.parametrize(
    "change, fragment",
    [
        (
            lambda marker: (
                lambda rel, d: _pickled(marker) if rel == "data/sample_inputs/model.pt" else d
            ),
            r"sample inputs .* are not plain tensors",
        ),
        (lambda marker: (lambda rel, d: _use_pickle(rel, d)), r"stored pickled \(use_pickle\)"),
        (
            lambda marker: (lambda rel, d: _opaque(rel, d)),
            r"(stored pickled|pickled Python or TorchBind object)",
        ),
        (
            lambda marker: (lambda rel, d: d if rel != "archive_version" else None),
            r"no archive_version record",
        ),
        (
            lambda marker: (
                lambda rel, d: [(rel, d), ("data/weights/model.pt", _pickled(marker))]
                if rel == "archive_version"
                else d
            ),
            r"legacy pickled format",
        ),
        (
            lambda marker: (
                lambda rel, d: [(rel, d), ("data/aotinductor/model/model.so", b"\x7fELF")]
                if rel == "archive_version"
                else d
            ),
            r"AOTInductor compiled code",
        ),
    ],
)
def test_exported_archives_that_would_unpickle_or_run_code_are_refused(tmp_path, change, fragment):
    marker = tmp_path / "ran"
    _export(tmp_path / "m.pt2")
    bad = _rewrite(tmp_path / "m.pt2", tmp_path / "bad.pt2", change(marker))
    with pytest.raises(rc.InputError, match=fragment) as info:
        load_model(_model(kind="exported", path=bad))
    msg = str(info.value)
    assert str(bad) in msg and "run code from the file" in msg and "factory" in msg
    assert not marker.exists()


def test_legacy_flat_archive_is_refused(tmp_path):
    p = tmp_path / "old.pt2"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("version", "8.0")
        z.writestr("serialized_exported_program.json", "{}")
        z.writestr("serialized_example_inputs.pt", _pickled(tmp_path / "ran"))
    with pytest.raises(rc.InputError, match=r"not in one top folder .*legacy"):
        load_model(_model(kind="exported", path=p))
    assert not (tmp_path / "ran").exists()


def test_raw_torch_export_load_would_have_run_the_payload(tmp_path):
    """Why the check exists: torch.export.load retries sample inputs with weights_only=False."""
    marker = tmp_path / "ran"
    _export(tmp_path / "m.pt2")
    bad = _rewrite(
        tmp_path / "m.pt2",
        tmp_path / "bad.pt2",
        lambda rel, d: _pickled(marker) if rel == "data/sample_inputs/model.pt" else d,
    )
    with pytest.raises(Exception):  # noqa: B017 (whatever torch raises: the point is the marker)
        torch.export.load(str(bad))
    assert marker.exists()


@pytest.mark.parametrize("kind", ["exported", "torchscript"])
@pytest.mark.parametrize(
    "damage, fragment",
    [
        ("missing", r"no such .*check the path"),
        ("directory", r"is a directory"),
        ("empty", r"is empty \(0 bytes\)"),
        ("garbage", r"not a (saved torch.export program|TorchScript file|torch.export program)"),
        ("truncated", r"(damaged|not a)"),
    ],
)
def test_model_files_that_are_missing_or_damaged_name_the_file(tmp_path, kind, damage, fragment):
    p = tmp_path / ("m.pt2" if kind == "exported" else "m.pt")
    if kind == "exported":
        _export(p)
    else:
        torch.jit.save(torch.jit.script(_net()), str(p))
    if damage == "missing":
        p.unlink()
    elif damage == "directory":
        p.unlink()
        p.mkdir()
    elif damage == "empty":
        p.write_bytes(b"")
    elif damage == "garbage":
        p.write_bytes(b"\x00junk" * 50)
    else:
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    with pytest.raises(rc.InputError, match=fragment) as info:
        load_model(_model(kind=kind, path=p))
    assert str(p) in str(info.value)


# ---------------------------------------------------------------- factory and weights

FACTORY = """
import torch

def make(dim=2, boom=False):
    if boom:
        raise RuntimeError("factory exploded")
    torch.manual_seed(0)
    return torch.nn.Linear(4, dim)

def not_a_module():
    return 42
"""


@pytest.fixture
def nets(tmp_path):
    (tmp_path / "nets.py").write_text(FACTORY)
    torch.manual_seed(1)
    good = torch.nn.Linear(4, 2)
    torch.save(good.state_dict(), tmp_path / "w.pt")
    return tmp_path, good


def test_factory_with_weights_loads_them(nets):
    base, good = nets
    m = load_model(_model(kind="factory", target="nets:make", path=base / "w.pt", base_dir=base))
    np.testing.assert_allclose(
        rc.embed(m, X, device="cpu"),
        good(torch.from_numpy(X)).detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


def test_weights_with_pickled_code_are_refused_and_nothing_runs(nets):
    base, good = nets
    marker = base / "ran"
    torch.save({"weight": good.weight, "bias": _Payload(str(marker))}, base / "evil.pt")
    with pytest.raises(
        rc.InputError, match=r"(?s)evil\.pt: torch\.load\(weights_only=True\) refused.*state_dict"
    ):
        load_model(_model(kind="factory", target="nets:make", path=base / "evil.pt", base_dir=base))
    assert not marker.exists()


@pytest.mark.parametrize(
    "setup, fragment",
    [
        (
            lambda b: (b / "w.pt").write_bytes((b / "w.pt").read_bytes()[:200]),
            r"w\.pt.*(damaged|truncated)",
        ),
        (lambda b: (b / "w.pt").write_bytes(b""), r"w\.pt: the weights file is empty"),
        (lambda b: (b / "w.pt").unlink(), r"w\.pt: no such weights file"),
        (
            lambda b: torch.save(torch.nn.Linear(4, 3).state_dict(), b / "w.pt"),
            r"w\.pt: these weights do not fit the module nets:make builds",
        ),
        (lambda b: torch.save([1, 2], b / "w.pt"), r"expected a state_dict"),
    ],
)
def test_bad_weights_name_the_file(nets, setup, fragment):
    base, _ = nets
    setup(base)
    with pytest.raises(rc.InputError, match=fragment):
        load_model(_model(kind="factory", target="nets:make", path=base / "w.pt", base_dir=base))


def test_flipped_bits_in_weights_fail_the_crc(nets):
    base, good = nets
    raw = bytearray((base / "w.pt").read_bytes())
    at = bytes(raw).find(good.weight.detach().numpy().tobytes())
    raw[at + 2] ^= 0xFF
    (base / "w.pt").write_bytes(bytes(raw))
    with pytest.raises(rc.InputError, match=r"w\.pt: the weights file is damaged.*CRC"):
        load_model(_model(kind="factory", target="nets:make", path=base / "w.pt", base_dir=base))


def test_damaged_safetensors_weights(nets):
    base, _ = nets
    (base / "w.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{garbage")
    with pytest.raises(
        rc.InputError, match=r"w\.safetensors: cannot read the weights as \.safetensors"
    ):
        load_model(
            _model(kind="factory", target="nets:make", path=base / "w.safetensors", base_dir=base)
        )


@pytest.mark.parametrize(
    "kw, fragment",
    [
        (
            dict(target="nets:make", kwargs={"dims": 3}),
            r"kwargs \['dims'\] do not fit nets:make.*parameters are dim, boom",
        ),
        (
            dict(target="nets:make", kwargs={"boom": True}),
            r"nets:make\(\*\*kwargs\) raised RuntimeError: factory exploded",
        ),
        (
            dict(target="nets:not_a_module"),
            r"returned int; a factory must return a torch.nn.Module",
        ),
        (dict(target="nets"), r"target='nets': expected 'module:function'"),
        (dict(target="nets:missing"), r"has no 'missing'; its callables: .*make"),
        (dict(target="nowhere_module_xyz:f"), r"cannot import module 'nowhere_module_xyz'"),
    ],
)
def test_factory_mistakes(nets, kw, fragment):
    base, _ = nets
    with pytest.raises(rc.InputError, match=fragment):
        load_model(_model(kind="factory", base_dir=base, **kw))


def test_callable_module_with_a_syntax_error_names_the_line(tmp_path):
    (tmp_path / "broken.py").write_text("def f(x):\n    return x +\n")
    with pytest.raises(rc.InputError, match=r"broken\.py:2: .*syntax error"):
        load_model(_model(kind="callable", target="broken.py:f", base_dir=tmp_path))


def test_callable_module_that_raises_on_import(tmp_path):
    (tmp_path / "raises.py").write_text("raise ImportError('no gpu lib')\n")
    with pytest.raises(rc.InputError, match=r"raises\.py: importing the model's module .* failed"):
        load_model(_model(kind="callable", target="raises.py:f", base_dir=tmp_path))


def test_callable_kwargs_must_fit(tmp_path):
    (tmp_path / "enc.py").write_text("def f(x, scale=1.0):\n    return x * scale\n")
    with pytest.raises(rc.InputError, match=r"kwargs \['scael'\] do not fit enc.py:f"):
        load_model(
            _model(kind="callable", target="enc.py:f", base_dir=tmp_path, kwargs={"scael": 2})
        )
    fn = load_model(
        _model(kind="callable", target="enc.py:f", base_dir=tmp_path, kwargs={"scale": 2.0})
    )
    np.testing.assert_array_equal(fn(X), X * 2)


def test_fingerprint_of_a_missing_model_file_names_it(tmp_path):
    with pytest.raises(rc.InputError, match=r"gone\.pt: no such TorchScript file"):
        model_fingerprint(_model(kind="torchscript", path=tmp_path / "gone.pt"))
    with pytest.raises(rc.InputError, match=r"is a directory"):
        model_fingerprint(_model(kind="factory", target="x:y", path=tmp_path))


# ---------------------------------------------------------------- embedding cache

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
