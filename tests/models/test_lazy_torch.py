"""A numpy callable is embedded without importing torch (each subprocess that runs a suite
of numpy models saved a torch import, ~4 CPU-s); torch is imported where it is needed: a
torch module, a tensor, a hub model, ``device="auto"`` for them, and ``cuda`` names.

In-process, with a stand-in for the one place the module imports torch; about 0.1 s.
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.models import _embed


@pytest.fixture
def no_torch_import(monkeypatch):
    """``_embed._torch`` (its only ``import torch``) fails the test when called."""
    calls = []

    def spy():
        calls.append(1)
        raise AssertionError("torch was imported for a model that does not need it")

    monkeypatch.setattr(_embed, "_torch", spy)
    return calls


@pytest.mark.parametrize("device", [None, "auto", "cpu", "numpy", "torch-cpu"])
def test_a_numpy_callable_is_embedded_without_importing_torch(no_torch_import, device):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = rc.embed(lambda a: a[:, :2] * 2, x, device=device)
    np.testing.assert_array_equal(out, x[:, :2] * 2)
    assert not no_torch_import


@pytest.mark.parametrize("device", ["cpu", "numpy", "torch-cpu", "cuda:x"])
def test_resolve_device_imports_torch_only_for_auto_and_cuda(no_torch_import, device):
    if device == "cuda:x":
        with pytest.raises(rc.InputError, match="device='cuda:x'"):
            _embed.resolve_device(device)
    else:
        assert _embed.resolve_device(device) == "cpu"
    assert not no_torch_import


def test_a_bad_device_is_still_refused_for_a_numpy_callable():
    """Skipping torch must not skip the device's checks: a typo or a CUDA device that is
    not there fails as before, whatever the model."""
    x = np.ones((2, 3), dtype=np.float32)
    with pytest.raises(rc.InputError, match="device='gpu'"):
        rc.embed(lambda a: a, x, device="gpu")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        with pytest.raises(rc.BackendError, match="no CUDA device"):
            rc.embed(lambda a: a, x, device="cuda")


def test_a_torch_module_and_a_tensor_still_use_torch():
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(4, 2, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.eye(2, 4))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(rc.embed(model, x, device="auto"), x[:, :2])
    got = rc.embed(lambda a: a[:, :2], torch.from_numpy(x))  # a tensor given to a callable
    np.testing.assert_array_equal(got, x[:, :2])
