"""The architecture, as tests: the layers' import contracts (import-linter), the plugin as
a client of the public API, the public surface pinned name by name (as httpx's
``test_exported_members``), and no function over about 80 lines of code without a
reason written next to it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import retrieval_checks as rc

ROOT = Path(__file__).resolve().parents[1]

PUBLIC = {
    "retrieval_checks": [
        "AccuracyResult",
        "BackendError",
        "BaselineFile",
        "Change",
        "ClassifierResult",
        "Comparison",
        "EmbeddingSet",
        "EmptyQueriesError",
        "EvaluationResult",
        "Gap",
        "GateEvent",
        "GroupedRecall",
        "History",
        "IMAGE_TEXT_METRICS",
        "ImageTextResult",
        "InputError",
        "Interval",
        "IntervalWarning",
        "PowerWarning",
        "SelfMatchWarning",
        "plan_queries",
        "adjust_pvalues",
        "LocalizationResult",
        "METRIC_TEMPLATES",
        "MeasureCorrelation",
        "Measurement",
        "MetricNameError",
        "MetricSpec",
        "ModelTimeoutError",
        "NuclearNorm",
        "RetrievalChecksError",
        "SpectralMeasure",
        "Suite",
        "SuiteError",
        "SuiteRunner",
        "SweepTable",
        "__version__",
        "accuracy",
        "assert_cam_iou_at_least",
        "assert_gap_below",
        "assert_grouped_recall_ci",
        "assert_map_at_least",
        "assert_metric",
        "assert_no_regression",
        "assert_not_worse",
        "assert_recall_at_least",
        "assert_recall_at_precision",
        "assert_rsum",
        "assert_slices",
        "assert_slices_at_least",
        "assert_worst_slice",
        "assert_worst_slice_at_least",
        "assert_no_slice_regression",
        "ann_recall",
        "baseline_record",
        "bootstrap_interval",
        "boxes_to_masks",
        "cam_iou",
        "cam_iou_box",
        "canonical_metric_name",
        "class_count_sweep",
        "classification_gap",
        "classifier_accuracy",
        "compare",
        "correlate_with_gap",
        "discriminant_ratio",
        "effective_invariance",
        "embed",
        "evaluate",
        "evaluate_classifier",
        "evaluate_image_text",
        "evaluate_run",
        "generalization_gap",
        "grad_cam",
        "label_partition",
        "load_embeddings",
        "load_suite",
        "measure_change",
        "nuclear_norm",
        "parse_metric",
        "predict_proba",
        "render_report",
        "selection_accuracy",
        "spectral_measure",
        "split_difference",
        "slice_intervals",
        "slice_baseline",
        "with_slices",
    ],
    "retrieval_checks.metrics": [
        "AccuracyResult",
        "CLASSIFIER_METRICS",
        "FAMILIES",
        "Family",
        "METRIC_TEMPLATES",
        "Measurable",
        "Measurement",
        "MetricSpec",
        "accuracy",
        "canonical_metric_name",
        "classifier_metric",
        "discriminant_ratio",
        "metric_spec",
        "parse_metric",
        "check_threshold",
        "check_finite",
        "probable_meaning",
    ],
    "retrieval_checks.data": ["EmbeddingSet", "load_embeddings", "read_arrays", "read_npy"],
    "retrieval_checks.engine": [
        "EvaluationCache",
        "EvaluationResult",
        "GroupedRecall",
        "IMAGE_TEXT_METRICS",
        "ImageTextResult",
        "ann_recall",
        "check_device",
        "content_digest",
        "evaluate",
        "evaluate_image_text",
        "evaluate_run",
        "label_partition",
        "Provenance",
        "Slice",
        "SliceSet",
        "with_slices",
    ],
    "retrieval_checks.models": [
        "EmbeddingCache",
        "HubModel",
        "call_with_timeout",
        "embed",
        "load",
        "load_model",
        "model_fingerprint",
    ],
    "retrieval_checks.stats": [
        "Comparison",
        "Gap",
        "Interval",
        "MeasureCorrelation",
        "SweepTable",
        "bootstrap_interval",
        "compare",
        "correlate_with_gap",
        "generalization_gap",
        "newcombe_interval",
        "selection_accuracy",
        "wilson_interval",
        "SliceInterval",
        "slice_intervals",
        "slice_rows",
        "Power",
        "Plan",
        "plan_queries",
    ],
    "retrieval_checks.classifiers": [
        "ClassifierResult",
        "LocalizationResult",
        "NuclearNorm",
        "SpectralMeasure",
        "boxes_to_masks",
        "cam_iou",
        "cam_iou_box",
        "classification_gap",
        "classifier_accuracy",
        "effective_invariance",
        "evaluate_classifier",
        "find_layer",
        "grad_cam",
        "nuclear_norm",
        "predict_proba",
        "spectral_measure",
    ],
    "retrieval_checks.experiments": ["class_count_sweep", "split_difference"],
    "retrieval_checks.gates": [
        "BaselineFile",
        "BaselineStore",
        "Change",
        "GateEvent",
        "Subscription",
        "assert_cam_iou_at_least",
        "assert_gap_below",
        "assert_grouped_recall_ci",
        "assert_map_at_least",
        "assert_metric",
        "assert_no_regression",
        "assert_not_worse",
        "assert_recall_at_least",
        "assert_recall_at_precision",
        "assert_rsum",
        "assert_slices",
        "assert_slices_at_least",
        "assert_worst_slice",
        "assert_worst_slice_at_least",
        "assert_no_slice_regression",
        "slice_baseline",
        "check_slice_baselines",
        "slice_key",
        "baseline_path",
        "baseline_record",
        "emit",
        "higher_is_better",
        "listening",
        "measure_change",
        "records_differ",
        "rule_text",
        "verdict",
        "tally",
        "slice_verdict",
        "subscribe",
        "write_records",
        "skipped_limit",
        "CORRECTIONS",
        "adjust_pvalues",
        "check_correction",
        "claim",
        "decide_family",
        "family_error_rate",
        "family_line",
        "session_correction",
        "set_session_correction",
    ],
    "retrieval_checks.suites": [
        "Case",
        "Check",
        "Dataset",
        "Model",
        "Node",
        "NodeList",
        "Source",
        "Suite",
        "SuiteRunner",
        "load_suite",
        "load_yaml",
        "suite_errors",
    ],
    "retrieval_checks.tracking": [
        "History",
        "absent_text",
        "default_history_path",
        "main",
        "render_markdown",
        "render_report",
        "run_metadata",
    ],
    "retrieval_checks.options": [
        "DATASET_TYPES",
        "DEFAULTS",
        "MIN_RESAMPLES",
        "OPTIONS",
        "Option",
        "check_embedding_ties",
        "check_option",
        "parse_memory",
        "parse_text",
        "positive_int",
    ],
    "retrieval_checks.errors": [
        "BackendError",
        "EmptyQueriesError",
        "InputError",
        "IntervalWarning",
        "PowerWarning",
        "SelfMatchWarning",
        "MetricNameError",
        "ModelTimeoutError",
        "RetrievalChecksError",
        "SuiteError",
    ],
    "retrieval_checks.integrations": [
        "DiscriminantRatioMonitor",
        "RetrievalChecksCallback",
        "RetrievalChecksEvaluator",
        "RetrievalChecksTrainerCallback",
        "check_gates",
        "dedupe_by_id",
    ],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_exported_members(module):
    """Each public namespace exports exactly the pinned names, and each name exists."""
    import importlib

    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(PUBLIC[module])
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name}"


def test_import_contracts_hold():
    """The layers import one way, shared modules import no layer, the library never imports
    pytest (contracts in pyproject.toml, checked by import-linter; imports inside functions
    count)."""
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True) == 0


def test_the_engine_contracts_cover_every_engine_module_and_forbid_cycles():
    """The engine's own contracts exist: an exhaustive layers contract over
    ``retrieval_checks.engine`` (a new module must be placed in a layer) and an
    acyclic one; every engine module is named in a layer (import-linter enforces it,
    this says which contract does)."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    layered = [c for c in contracts if c.get("containers") == ["retrieval_checks.engine"]]
    assert layered and layered[0]["type"] == "layers" and layered[0]["exhaustive"] is True
    named = {m.strip(" ()") for layer in layered[0]["layers"] for m in layer.split("|")}
    engine = ROOT / "retrieval_checks" / "engine"
    modules = {p.stem for p in engine.glob("_*.py")} - {"__init__"}
    packages = {p.parent.name for p in engine.glob("*/__init__.py")}
    assert modules | packages <= named, sorted((modules | packages) - named)
    assert any(
        c["type"] == "acyclic_siblings" and c["ancestors"] == ["retrieval_checks.engine"]
        for c in contracts
    )


def test_only_the_two_seams_may_import_the_gpu_kernels():
    """``engine/gpu/`` is a leaf: the forbidden contract names every other engine module
    (a new module is held to it by construction), and the GPU package imports nothing
    above the counters (the layers contract places it under ``_counting`` and over
    ``counting/``, the counters it selects from)."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    (gpu,) = [c for c in contracts if c["type"] == "forbidden" and "seams" in c["name"]]
    assert "retrieval_checks.engine.gpu" in gpu["forbidden_modules"]
    engine = ROOT / "retrieval_checks" / "engine"
    core = {f"retrieval_checks.engine.{p.stem}" for p in engine.glob("_*.py")}
    core -= {f"retrieval_checks.engine.{m}" for m in ("__init__", "_counting", "_fused_tasks")}
    core |= {f"retrieval_checks.engine.{p.parent.name}" for p in engine.glob("*/__init__.py")}
    core -= {"retrieval_checks.engine.gpu"}
    assert core == set(gpu["source_modules"]), sorted(core ^ set(gpu["source_modules"]))
    (layers,) = [c for c in contracts if c.get("containers") == ["retrieval_checks.engine"]]
    order = [{m.strip(" ()") for m in layer.split("|")} for layer in layers["layers"]]
    at = {m: i for i, layer in enumerate(order) for m in layer}
    assert at["_counting"] < at["gpu"] < at["_grouped"] < at["counting"]


# What an engine module may import inside a function: optional dependencies, and the
# modules that need them (the fused CPU pass, issue 32, loads its numba tile kernels when
# first wanted; the seams import the GPU kernels of gpu/ only when they select them).
_OPTIONAL = ("torch", "triton", "numba", "tqdm", "scipy", "concurrent", "threadpoolctl")
_OPTIONAL_MODULES = tuple(
    f"retrieval_checks.engine.{m}"
    for m in (
        "gpu",
        "counting._kernels_numba",
        "_hamming_numba",
        "counting._fused_cpu",
        "counting._fused_cpu_numba",
        "_grouped_numba",
        "_runs_numba",
    )
)

# The function-local imports the library has, each with its reason: every other import is
# at the top of its module, where a cycle shows (and is fixed by moving the shared piece
# down a layer, not by importing inside a function). A reason is the start-up of
# ``import retrieval_checks`` (at most 0.3 s, tests/test_startup.py, which every pytest
# session, xdist worker and command-line call pays) or an optional dependency. Rows:
# (a module, or a package for all of its modules; what it may import inside a function,
# a module and its submodules; why). A new local import fails
# test_no_module_of_the_library_imports_inside_a_function_without_a_reason until it
# moves to the top or has a row here; a row nothing uses any more fails it too.
LOCAL_IMPORTS = (
    (
        "retrieval_checks.engine",
        _OPTIONAL + _OPTIONAL_MODULES,
        "the accelerators (torch, triton, numba) and the kernels that need them, loaded when "
        "a pass selects them; scipy, thread pools and the bar only where used",
    ),
    (
        "retrieval_checks.data._files",
        ("torch", "safetensors", "pyarrow"),
        "reading .pt, .safetensors and .parquet files: optional dependencies",
    ),
    (
        "retrieval_checks.metrics._embedding",
        ("torch",),
        "only for a tensor input (torch is loaded then); at the top, ~2 s for every import",
    ),
    (
        "retrieval_checks.models._device",
        ("torch",),
        "optional_torch: for torch models and device='auto' only (a numpy model never loads it)",
    ),
    (
        "retrieval_checks.models._embed",
        ("tqdm", "safetensors"),
        "the progress bar (tqdm.auto: ~80 ms) when one is shown; .safetensors weights (optional)",
    ),
    (
        "retrieval_checks.models._hub",
        ("torch", "timm", "PIL", "tqdm", "importlib.metadata"),
        "the model libraries' dependencies (torch, timm, Pillow), loaded with a model; the "
        "bar (~80 ms) when shown; package versions (~20 ms) for a fingerprint",
    ),
    (
        "retrieval_checks.stats._sweep",
        ("matplotlib",),
        "plots only (an optional dependency)",
    ),
    (
        "retrieval_checks.integrations._hf",
        ("torch",),
        "transformers imports without torch; embedding inside the Trainer needs it",
    ),
)


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def engine_imports(root: Path = ROOT, where: str = "retrieval_checks/engine"):
    """Every import of every module under ``where`` (the engine and its subpackages by
    default): ``(module, line, inside a function, [(absolute module, imported name or
    None)])``."""
    for path in sorted((root / where).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
        name = ".".join(parts)
        tree = ast.parse(path.read_text())
        local = {
            id(node)
            for fn in ast.walk(tree)
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
            for node in ast.walk(fn)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = ".".join(package[: len(package) - node.level + 1])
                    base = f"{up}.{base}" if base else up
                targets = [(base, a.name) for a in node.names]
            else:
                continue
            yield name, node.lineno, id(node) in local, targets


def _is_module(root: Path, dotted: str) -> bool:
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def private_reach_ins(root: Path = ROOT, where: str = "retrieval_checks/engine") -> list[str]:
    """Imports, by the modules under ``where``, of a private name (not a module) defined
    in another module."""
    found = []
    for name, line, _, targets in engine_imports(root, where):
        for module, imported in targets:
            name_ = imported or ""
            if not module.startswith("retrieval_checks") or not name_.startswith("_"):
                continue
            if name_.startswith("__") and name_.endswith("__"):  # __version__, __all__
                continue
            if not _is_module(root, f"{module}.{imported}"):
                found.append(f"{name}:{line} imports {imported} from {module}")
    return found


def _local_imports(root: Path, where: str):
    """``(module, line, imported module, its LOCAL_IMPORTS row or None)`` for every
    function-local import of the modules under ``where``."""
    for name, line, inside, targets in engine_imports(root, where):
        if not inside:
            continue
        for module, imported in targets:
            full = (
                module
                if imported is None or not _is_module(root, f"{module}.{imported}")
                else f"{module}.{imported}"
            )
            row = next(
                (
                    r
                    for r in LOCAL_IMPORTS
                    if _within(name, r[0]) and any(_within(full, m) for m in r[1])
                ),
                None,
            )
            yield name, line, full, row


def local_imports(root: Path = ROOT, where: str = "retrieval_checks/engine") -> list[str]:
    """Function-local imports, by the modules under ``where`` (the engine by default),
    that no row of :data:`LOCAL_IMPORTS` gives a reason for."""
    return [
        f"{name}:{line} imports {full} in a function"
        for name, line, full, row in _local_imports(root, where)
        if row is None
    ]


def unused_local_import_rows(root: Path = ROOT) -> list[str]:
    """The entries of :data:`LOCAL_IMPORTS` (module, imported module) no local import of
    the library uses any more: a reason kept for an import that is gone. Not the engine's
    row: it is the engine's rule for its optional dependencies, whichever it uses now."""
    used = {
        (row[0], m)
        for name, _, full, row in _local_imports(root, "retrieval_checks")
        if row is not None
        for m in row[1]
        if _within(full, m)
    }
    return [
        f"{r[0]}: {m}"
        for r in LOCAL_IMPORTS
        if r[0] != "retrieval_checks.engine"
        for m in r[1]
        if (r[0], m) not in used
    ]


def test_engine_modules_use_no_private_name_of_another_and_import_locally_only_the_optional():
    """No engine module imports another's private names (``from ._x import _y``, the GPU
    package included), and a function-local import is of an optional dependency (torch,
    triton, numba, ...) or of a module that needs one (the GPU kernels, which the seams
    import when they select them): the rest is imported at the top, where cycles show."""
    assert not private_reach_ins(), private_reach_ins()
    assert not local_imports(), local_imports()


def test_no_module_of_the_library_imports_inside_a_function_without_a_reason():
    """Outside the engine too: a function-local import is one LOCAL_IMPORTS gives a
    reason for (start-up, an optional dependency); everything else is imported at the
    top of its module (46 local imports of the library's own modules were not, among
    them two cycles, models._embed <-> models._hub and tracking._cli <-> the package's
    __version__, fixed by moving the shared pieces down: models._device, _outputs,
    _code.file_digest, retrieval_checks._version). And every entry of the table is still
    used, so that it lists exactly the reasons there are."""
    found = local_imports(where="retrieval_checks")
    assert not found, (
        "import these at the top of the module (a cycle: move what both need to the lower "
        "module), or, for a heavy or optional dependency, add a row to LOCAL_IMPORTS in "
        f"tests/test_architecture.py saying why: {found}"
    )
    stale = unused_local_import_rows()
    assert not stale, f"LOCAL_IMPORTS entries no local import uses any more (remove them): {stale}"


def test_no_module_of_the_library_or_plugin_uses_a_private_name_of_another():
    """Outside the engine too (gates, suites, stats, models, tracking, the plugin): a
    name another module needs is not private to its own (``from ._schema import
    _describe`` was one of 20 such imports; the names are now public in their private
    modules, and helpers two modules share live in the lower one)."""
    for where in ("retrieval_checks", "plugins"):
        assert not private_reach_ins(where=where), private_reach_ins(where=where)


def test_the_import_audit_sees_reach_ins_and_local_imports(tmp_path):
    """The audit above can fail: a private name and a function-local import of a
    non-optional module, planted in a copy of a tiny engine, are both reported (and a
    private module, an optional dependency and a GPU module are not); outside the
    engine, a local import no LOCAL_IMPORTS row gives a reason for is reported, one a row
    does is not, and an entry nothing uses is stale."""
    engine = tmp_path / "retrieval_checks" / "engine"
    (engine / "gpu").mkdir(parents=True)
    for init in (tmp_path / "retrieval_checks", engine, engine / "gpu"):
        (init / "__init__.py").write_text("")
    (engine / "gpu" / "_k.py").write_text("")
    (engine / "_a.py").write_text("_hidden = 1\n")
    (engine / "_b.py").write_text(
        "from ._a import _hidden\nfrom .gpu import _k\n\n"
        "def f():\n    import torch\n    from .gpu import _k\n    from . import _a\n"
    )
    assert private_reach_ins(tmp_path) == [
        "retrieval_checks.engine._b:1 imports _hidden from retrieval_checks.engine._a"
    ]
    assert local_imports(tmp_path) == [
        "retrieval_checks.engine._b:7 imports retrieval_checks.engine._a in a function"
    ]
    # outside the engine: a local import of the library's own module, and of torch where no
    # row allows it, are reported; a row's (stats._sweep: matplotlib) and a top-level
    # import are not; the table's other entries, now unused here, are reported as stale
    for pkg in ("gates", "stats"):
        (tmp_path / "retrieval_checks" / pkg).mkdir()
        (tmp_path / "retrieval_checks" / pkg / "__init__.py").write_text("")
    (tmp_path / "retrieval_checks" / "gates" / "_c.py").write_text(
        "from ..engine import _a\n\ndef g():\n    import torch\n    from ..engine._a import x\n"
    )
    (tmp_path / "retrieval_checks" / "stats" / "_sweep.py").write_text(
        "def plot():\n    import matplotlib.pyplot\n"
    )
    assert local_imports(tmp_path, where="retrieval_checks") == [
        "retrieval_checks.engine._b:7 imports retrieval_checks.engine._a in a function",
        "retrieval_checks.gates._c:4 imports torch in a function",
        "retrieval_checks.gates._c:5 imports retrieval_checks.engine._a in a function",
    ]
    stale = unused_local_import_rows(tmp_path)
    assert "retrieval_checks.models._hub: PIL" in stale
    assert "retrieval_checks.stats._sweep: matplotlib" not in stale


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, []


def test_the_plugin_uses_only_the_public_api():
    """No module of the plugin imports a private module of the library (or a private name)."""
    offenders = []
    for path in (ROOT / "plugins" / "pytest_retrieval_checks").glob("*.py"):
        for line, module, names in _imports(path):
            if not module.startswith("retrieval_checks"):
                continue
            private = [p for p in module.split(".") if p.startswith("_")] + [
                n for n in names if n.startswith("_")
            ]
            if private:
                offenders.append(f"{path.name}:{line}: {module} {names}")
    assert not offenders, offenders


def test_no_function_over_60_statements():
    """Functions stay short: at most 60 lines that start a statement (the docstring not
    counted; a statement the formatter wraps over several lines counts once, so the
    measure does not move when ``ruff format`` rewraps). A longer one says why in a
    ``# long:`` comment on its first lines. (It counted physical lines, at most 80, until
    the code was formatted with ruff.)"""
    too_long = []
    for root in ("retrieval_checks", "plugins"):
        for path in (ROOT / root).rglob("*.py"):
            source = path.read_text().splitlines()
            for node in ast.walk(ast.parse("\n".join(source))):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                starts = {s.lineno for s in ast.walk(node) if isinstance(s, ast.stmt)}
                starts.discard(node.lineno)
                body = node.body
                if (
                    body
                    and isinstance(body[0], ast.Expr)
                    and isinstance(getattr(body[0], "value", None), ast.Constant)
                ):
                    starts.discard(body[0].lineno)
                n = len(starts)
                if n > 60 and not any(
                    "# long:" in line for line in source[node.lineno - 1 : node.lineno + 3]
                ):
                    too_long.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} statements)"
                    )
    assert not too_long, too_long


def test_the_metric_contract_ships_with_the_repository():
    """docs/metrics.md holds every canonical family of the registry, and the README links to it."""
    text = (ROOT / "docs" / "metrics.md").read_text()
    for family in rc.metrics.FAMILIES.values():
        assert f"`{family.template}`" in text or f"`{family.name}`" in text, family.name
    assert "docs/metrics.md" in (ROOT / "README.md").read_text()


def _warn_calls(root: Path) -> list[str]:
    """``file:line`` of each ``warnings.warn(...)`` call under ``root`` outside
    ``errors.py`` (whose ``warn_outside`` is the one that may make it)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "errors.py" and path.parent.name == "retrieval_checks":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            func = node.func if isinstance(node, ast.Call) else None
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "warn"
                and isinstance(func.value, ast.Name)
                and func.value.id == "warnings"
            ):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_every_warning_is_said_at_the_users_line(tmp_path):
    """The library and the plugin warn through ``errors.warn_outside``, which finds the
    first frame outside them, instead of stacklevels counted by hand (which a new wrapper
    breaks: a failing listener's warning pointed into gates/_assertions.py). The audit
    can fail: a planted call is found."""
    for where in ("retrieval_checks", "plugins"):
        found = _warn_calls(ROOT / where)
        assert not found, f"warn with retrieval_checks.errors.warn_outside instead: {found}"
    planted = tmp_path / "pkg"
    planted.mkdir()
    (planted / "m.py").write_text("import warnings\n\nwarnings.warn('x', stacklevel=2)\n")
    assert _warn_calls(planted) == ["pkg/m.py:3"]
