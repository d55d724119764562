"""rc.embed fails closed (issue 12): every argument checked (batch_size, device, model,
inputs for modules and for callables, transform, part, progress) with an InputError
naming it; valid variants (lists, big-endian, float64, tensors to callables, texts)
agree; bfloat16 / float16 / float64 inputs reach a float32 module as float32.
Cost: under 1 s (tiny arrays, a torch Linear(4, 2))."""

from __future__ import annotations

import numpy as np
import pytest
from shared_setup import seeded_linear as _net

import retrieval_checks as rc

torch = pytest.importorskip("torch")

X = np.random.default_rng(3).normal(size=(10, 4)).astype(np.float32)


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
