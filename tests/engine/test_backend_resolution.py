"""Where ``device="auto"`` computes (engine/_backend.resolve_backend), and that
``device="numpy"`` imports no torch. Cost: < 1 s.

Found on an H200: every sharded test over a gloo process group failed there, because
``auto`` picked CUDA and the ranks' check then refused CUDA over gloo, so a user's
default call on a GPU machine with a gloo group raised. Under a group that does not
carry CUDA tensors, ``auto`` now computes on the CPU; CUDA inputs still decide (and an
explicit ``device="cuda"`` over gloo is still refused by the ranks' check)."""

import pytest

torch = pytest.importorskip("torch")

from retrieval_checks.engine._backend import resolve_backend  # noqa: E402


@pytest.fixture
def gpu_machine(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


def test_auto_on_a_gpu_machine_picks_cuda_in_one_process_and_under_nccl(gpu_machine):
    assert resolve_backend("auto", []).is_cuda
    assert resolve_backend("auto", [], collectives="nccl").is_cuda


@pytest.mark.parametrize("group", ["gloo", "cpu:gloo,cuda:nccl", "mpi"])
def test_auto_under_a_group_without_cuda_collectives_computes_on_the_cpu(gpu_machine, group):
    backend = resolve_backend("auto", [], collectives=group)
    assert backend.kind == "torch" and backend.device.type == "cpu", backend.name


def test_explicit_devices_are_kept_under_any_group(gpu_machine):
    assert resolve_backend("cpu", [], collectives="nccl").device.type == "cpu"
    assert resolve_backend("numpy", [], collectives="gloo").name == "numpy"
    assert resolve_backend("cuda", [], collectives="gloo").is_cuda  # refused later, by name


def test_the_numpy_device_never_imports_torch(monkeypatch):
    """``device="numpy"`` resolved without importing torch: a fresh process (an xdist
    worker, a pytest session the tests start) that evaluates on it paid torch's import,
    ~2 CPU-s, for nothing. Every ``import torch`` statement the evaluation executes is
    recorded (torch is loaded in this process already, so its presence in sys.modules
    cannot tell)."""
    import builtins

    import numpy as np

    import retrieval_checks as rc

    real, asked = builtins.__import__, []

    def spy(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            asked.append(name)
        return real(name, *args, **kwargs)

    x = np.random.default_rng(0).normal(size=(12, 4)).astype(np.float32)
    y = np.repeat(np.arange(4), 3)
    monkeypatch.setattr(builtins, "__import__", spy)
    numpy_result = rc.evaluate(x, query_labels=y, metrics=["map", "mrr"], device="numpy")
    assert asked == [] and numpy_result.config["backend"] == "numpy"
    cpu_result = rc.evaluate(x, query_labels=y, metrics=["map", "mrr"], device="cpu")
    assert asked and cpu_result.config["backend"] != "numpy"  # the spy sees torch's import
    assert dict(numpy_result) == dict(cpu_result)


def test_a_sharded_pass_under_gloo_computes_on_the_cpu_end_to_end(gpu_machine, tmp_path):
    """The whole sharded call, not only ``resolve_backend``: found on an H200 (the fourth
    session), where the ranks checked their inputs against the CPU backend but the pass
    planned its blocks with ``auto`` resolved again without the group's collectives, so
    evaluate and evaluate_image_text computed on CUDA over a gloo group (and reported
    ``torch:cuda``). Here torch only pretends to see a GPU: a pass that plans on CUDA
    fails."""
    import numpy as np
    import torch.distributed as dist

    import retrieval_checks as rc

    rng = np.random.default_rng(0)
    x = rng.integers(-2, 3, size=(24, 6)).astype(np.float32)
    y = np.repeat(np.arange(6), 4)
    captions = np.repeat(x[:12], 2, axis=0) + rng.integers(-1, 2, size=(24, 6)).astype(np.float32)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'init'}", rank=0, world_size=1)
    try:
        group = dist.group.WORLD
        res = rc.evaluate(x, query_labels=y, metrics=["map", "mrr"], process_group=group)
        it = rc.evaluate_image_text(
            x[:12], captions, np.repeat(np.arange(12), 2), n_resamples=100, process_group=group
        )
    finally:
        dist.destroy_process_group()
    assert res.config["backend"] == "torch:cpu" and res.provenance.sharded
    assert it.config["backend"] == "torch:cpu"
