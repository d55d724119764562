"""What a model returns: anything but one dense (n x d) real array is an InputError
naming the model and saying what to do (sparse matrices: densify them; tuples and
dicts: pick the embeddings; ragged rows, objects, masked and complex values), never a
traceback from numpy or torch and never a silently changed number."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc

torch = pytest.importorskip("torch")
X = np.random.default_rng(0).random((6, 4)).astype(np.float32)


def _named(fn, name="my_encoder"):
    fn.__name__ = name
    return fn


CASES = {
    "scipy_csr": (
        lambda x: __import__("scipy.sparse").sparse.csr_matrix(x),
        r"sparse.*\.toarray\(\)",
    ),
    "scipy_coo_array": (
        lambda x: __import__("scipy.sparse").sparse.coo_array(x),
        r"sparse.*\.toarray\(\)",
    ),
    "torch_sparse_coo": (lambda x: torch.from_numpy(x).to_sparse(), r"sparse.*\.to_dense\(\)"),
    "torch_sparse_csr": (lambda x: torch.from_numpy(x).to_sparse_csr(), r"sparse.*\.to_dense\(\)"),
    "ragged_rows": (lambda x: [r[: i + 1] for i, r in enumerate(x)], r"rows of different lengths"),
    "object_array": (
        lambda x: np.array([list(r) for r in x] + [None], dtype=object)[:6],
        r"Python objects",
    ),
    "dict": (lambda x: {"pooled": x, "tokens": x}, r"dict.*'pooled', 'tokens'.*pick"),
    "tuple": (lambda x: (x, x[:, :1]), r"tuple of 2 items.*pick"),
    "none": (lambda x: None, r"returned None"),
    "string": (lambda x: "abc", r"returned str"),
    "numpy_complex": (lambda x: x.astype(np.complex64), r"complex"),
    "torch_complex": (lambda x: torch.from_numpy(x).to(torch.complex64), r"complex"),
    "masked": (lambda x: np.ma.masked_array(x, mask=x > 0.5), r"masked.*filled"),
    "meta_tensor": (
        lambda x: torch.empty(6, 4, device="meta"),
        r"my_encoder returned a tensor that cannot be read",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_callable_returning_other_than_a_dense_array_is_named(case):
    fn, message = CASES[case]
    with pytest.raises(
        rc.InputError, match=r"my_encoder.*" + message if "my_encoder" not in message else message
    ):
        rc.embed(_named(lambda x: fn(x)), X)


class _Net(torch.nn.Module):
    def __init__(self, make):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.make = make

    def forward(self, x):
        return self.make(self.lin(x))


@pytest.mark.parametrize(
    "case,message",
    [
        ("sparse", r"_Net returned a sparse tensor.*\.to_dense\(\)"),
        ("complex", r"_Net returned complex"),
    ],
)
def test_a_torch_module_returning_a_sparse_or_complex_tensor_is_named(case, message):
    make = (lambda y: y.to_sparse()) if case == "sparse" else (lambda y: y.to(torch.complex64))
    with pytest.raises(rc.InputError, match=message):
        rc.embed(_Net(make), X, device="cpu")


def test_dense_outputs_still_pass():
    for out in (
        lambda x: x,
        lambda x: torch.from_numpy(x),
        lambda x: [r for r in x],
        lambda x: np.ma.masked_array(x, mask=False),
        lambda x: x.astype(np.float64),
    ):
        np.testing.assert_array_equal(rc.embed(out, X), X)
