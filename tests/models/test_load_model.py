"""Loading the models a suite names (load_model, model_fingerprint) fails closed (issue 12):
exported programs load without pickle or are refused; TorchScript and exported files,
factories, weights and callable modules name the file at fault and the fix; nothing in a
file runs code. Cost: about 19 s at a load average of 14 (measured; most of it torch.export
of a Linear(4, 2), once per exported-program case)."""

from __future__ import annotations

import io
import json
import zipfile
from types import SimpleNamespace

import numpy as np
import pytest
from shared_setup import seeded_linear as _net

import retrieval_checks as rc
from retrieval_checks.models import load_model, model_fingerprint

torch = pytest.importorskip("torch")

X = np.random.default_rng(3).normal(size=(10, 4)).astype(np.float32)


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
