"""The README's code runs as written, and so does the code of the docs pages that hold
the README's former reference sections (``PAGES``: the README moved them there, issue 29).

Each fenced block, in the README and in ``PAGES``, that follows a ``<!-- readme-test: KIND -->`` comment is checked by KIND:

- ``run``: executed, in README order, in one namespace, with a scratch project as the
  working directory; the namespace starts with the sample data the examples name
  (``embeddings``, ``labels``, ``X``, ``y``, ``codes``, ``images``, ...: see ``_sample_namespace``;
  the classifier example gets its own, ``_classifier_namespace``);
- ``file PATH``: written to PATH in that scratch project ("Use it in your repository"
  writes a suite and a test there); pytest then runs the project, and the project's gates
  must pass, and fail once a threshold is raised above the measured value;
- ``pytest``: a test module (after ``_PRELUDE``, which defines ``X``, ``y`` and a
  ``test_result`` fixture) run by pytest in a project of its own;
- ``output``: the gate table the README shows for that project: each row's test, metric
  and value must be what the project's run measured;
- ``same-as PATH``: equal to the repository's file PATH;
- ``skip (reason)``: not run, and the reason is required.

Every ``python`` block of these files carries one of these comments (the first test
checks it), so a new example cannot slip in untested; a docs page that holds a marked
block must be listed in ``PAGES`` (checked too), so its blocks run. The blocks run in the
order of ``PAGES``, after the README's.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

import retrieval_checks as rc

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: Docs pages whose marked blocks run with the README's, in this order (one namespace).
PAGES = (
    "docs/evaluate.md",
    "docs/statistics.md",
    "docs/protocols.md",
    "docs/plugin.md",
    "docs/suites.md",
    "docs/regressions.md",
    "docs/explanation/engine.md",
    "docs/tutorials/training-loop.md",
    "docs/slices.md",
    "docs/power.md",
)
_MARK = re.compile(r"^<!-- readme-test: (run|pytest|output|file \S+|same-as \S+|skip \(.+\)) -->$")


def _blocks() -> list[dict]:
    """Every fenced block of the README, then of each page of ``PAGES``: its language,
    text, file and first line (``where``) and marker (or None)."""
    return [b for path in ("README.md", *PAGES) for b in _file_blocks(path)]


def _file_blocks(path: str) -> list[dict]:
    lines = (ROOT / path).read_text().split("\n")
    out, i = [], 0
    while i < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        prev = lines[i - 1] if i else ""
        mark = _MARK.match(prev)
        out.append(
            {
                "lang": fence.group(1),
                "text": "\n".join(lines[i + 1 : end]) + "\n",
                "line": f"{path}:{i + 1}",
                "mark": mark.group(1) if mark else None,
                "comment": prev.startswith("<!-- readme-test"),
            }
        )
        i = end + 1
    return out


def _kind(block) -> str:
    return (block["mark"] or "").split(" ")[0]


def test_every_python_block_is_marked_and_every_mark_is_well_formed():
    blocks = _blocks()
    assert sum(b["lang"] == "python" for b in blocks) >= 8
    unmarked = [b["line"] for b in blocks if b["lang"] == "python" and b["mark"] is None]
    assert not unmarked, (
        f"python blocks without a '<!-- readme-test: ... -->' comment at {unmarked}"
    )
    malformed = [b["line"] for b in blocks if b["comment"] and b["mark"] is None]
    assert not malformed, f"malformed readme-test comments before the blocks at lines {malformed}"
    assert sum(_kind(b) == "run" for b in blocks) >= 5


def test_every_docs_page_with_a_marked_block_is_run():
    marked = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "docs").rglob("*.md")
        if "<!-- readme-test:" in p.read_text()
    }
    assert marked <= set(PAGES), (
        f"add {sorted(marked - set(PAGES))} to PAGES in tests/test_readme.py"
    )


def _clusters(rng, n_classes, per_class, noise, d=32, centres=None):
    centres = rng.normal(size=(n_classes, d)) if centres is None else centres
    labels = np.repeat(np.arange(n_classes), per_class)
    return (centres[labels] + noise * rng.normal(size=(labels.size, d))).astype(np.float32), labels


def _sample_namespace() -> dict:
    """The names the README's examples use, bound to small synthetic data sets on which
    the examples' gates pass (Gaussian class clusters; captions are noisy copies of their
    image; binary codes are noisy copies of their class's code)."""
    rng = np.random.default_rng(0)
    ns: dict = {}
    ns["embeddings"], ns["labels"] = _clusters(rng, 40, 5, 0.5)
    centres = rng.normal(size=(50, 32))
    ns["query_embeddings"], ns["query_labels"] = _clusters(rng, 50, 4, 0.8, centres=centres)
    ns["gallery_embeddings"], ns["gallery_labels"] = _clusters(rng, 50, 10, 0.8, centres=centres)
    X, y = _clusters(rng, 100, 5, 0.6)
    ns["X"], ns["y"] = X, y
    grouped = dict(metrics=["grouped_recall@1"], group_size=10)
    x_train, y_train = _clusters(rng, 100, 5, 0.6)
    ns["train"] = rc.evaluate(x_train, query_labels=y_train, **grouped)
    ns["test"] = rc.evaluate(X, query_labels=y, **grouped)
    ns["candidate"] = rc.evaluate(X, query_labels=y, metrics=["map"])
    noisier = X + 0.3 * rng.normal(size=X.shape).astype(np.float32)
    ns["production"] = rc.evaluate(noisier, query_labels=y, metrics=["map"])
    images = rng.normal(size=(200, 32)).astype(np.float32)
    ns["images"], ns["caption_image"] = images, np.repeat(np.arange(200), 5)
    ns["captions"] = (images[ns["caption_image"]] + 0.3 * rng.normal(size=(1000, 32))).astype(
        np.float32
    )
    # image-text slices (docs/slices.md): a category per image, a language per caption (under
    # names of their own: a classifier block rebinds images)
    ns["image_embeddings"], ns["caption_embeddings"] = images, ns["captions"]
    ns["image_category"] = np.array(["dog", "cat", "car", "tree"])[np.arange(200) % 4]
    ns["caption_lang"] = np.array(["de", "en"])[np.arange(1000) % 2]
    # an older model of X, y (noisier), and slices: a language per query (docs/slices.md,
    # docs/power.md)
    ns["X_last_release"] = X + 0.3 * rng.normal(size=X.shape).astype(np.float32)
    ns["queries"], ns["gallery"] = ns["query_embeddings"], ns["gallery_embeddings"]
    ns["q_labels"], ns["g_labels"] = ns["query_labels"], ns["gallery_labels"]
    ns["languages"] = np.array(["de", "en", "fr"])[ns["q_labels"] % 3]
    older = ns["queries"] + 0.3 * rng.normal(size=ns["queries"].shape).astype(np.float32)
    ns["last_release"] = rc.evaluate(
        older,
        ns["gallery"],
        query_labels=ns["q_labels"],
        gallery_labels=ns["g_labels"],
        metrics=["map"],
        slices=ns["languages"],
    )
    class_codes = rng.random(size=(100, 64)) < 0.5  # binary codes of the items of X, y
    ns["codes"] = class_codes[y] ^ (rng.random(size=(y.size, 64)) < 0.15)
    return ns


def _squares(rng, n):
    """Images (n x 1 x 16 x 16) of one bright square on black: side 8 is class 0, side 4
    class 1; each image's box is its square (x0, y0, x1, y1, ends exclusive)."""
    labels = rng.integers(0, 2, size=n)
    images, boxes = np.zeros((n, 1, 16, 16), np.float32), np.zeros((n, 4), np.int64)
    for i, c in enumerate(labels):
        side = 8 if c == 0 else 4
        x0, y0 = rng.integers(0, 17 - side, size=2)
        images[i, 0, y0 : y0 + side, x0 : x0 + side] = 1.0
        boxes[i] = (x0, y0, x0 + side, y0 + side)
    return images, labels, boxes


def _classifier_namespace() -> dict:
    """The classifier example's names: a hand-set CNN whose ``layer4`` (a 1x1 convolution,
    two copies of the input) feeds a global average pool and a linear layer that tells the
    squares apart by their area, so it is exact on every split and its Grad-CAM lights
    the square and nothing else."""
    from collections import OrderedDict

    import torch
    from torch import nn

    conv, fc = nn.Conv2d(1, 2, 1), nn.Linear(2, 2)
    with torch.no_grad():
        conv.weight.fill_(1.0)
        conv.bias.zero_()
        fc.weight.copy_(
            torch.tensor([[10.0, 0.0], [0.0, 2.0]])
        )  # class 0 when the mean exceeds 1/8
        fc.bias.copy_(torch.tensor([0.0, 1.0]))
    model = nn.Sequential(
        OrderedDict(
            layer4=conv, relu=nn.ReLU(), pool=nn.AdaptiveAvgPool2d(1), flat=nn.Flatten(), fc=fc
        )
    )
    rng = np.random.default_rng(1)
    images, labels, boxes = _squares(rng, 200)
    (x_train, y_train, _), (x_test, y_test, _) = _squares(rng, 200), _squares(rng, 200)
    return dict(
        model=model,
        images=images,
        labels=labels,
        boxes=boxes,
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
    )


def _run_readme(project: Path) -> dict:
    """Execute the ``run`` blocks and write the ``file`` blocks into ``project``."""
    ns = _sample_namespace()
    cwd = os.getcwd()
    os.chdir(project)
    try:
        for b in _blocks():
            kind = _kind(b)
            if kind == "run":
                if "rc.evaluate_classifier(" in b["text"]:  # its model, images and labels
                    ns.update(_classifier_namespace())
                try:
                    exec(compile(b["text"], b["line"], "exec"), ns)
                except Exception as e:  # noqa: BLE001 - re-raised with the block's line
                    raise AssertionError(f"the block at {b['line']} fails: {e!r}") from e
            elif kind == "file":
                path = project / b["mark"].split(" ", 1)[1]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(b["text"])
    finally:
        os.chdir(cwd)
    return ns


def _pytest(pytester, project: Path, *args: str) -> SimpleNamespace:
    """pytest as the user starts it in ``project`` (in-process: pytester's snapshot drops
    the project's own modules after each run; no GITHUB_ or PYTEST_ variable leaks in)."""
    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith(("GITHUB_", "PYTEST_"))]:
            mp.delenv(name)
        mp.chdir(project)
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)
    return SimpleNamespace(
        returncode=int(result.ret), stdout=result.stdout.str(), stderr=result.stderr.str()
    )


@pytest.mark.slow
def test_the_readme_examples_run_and_the_adopter_project_gates_pass_and_can_fail(pytester):
    tmp_path = pytester.path
    ns = _run_readme(tmp_path)
    assert 0.0 <= ns["result"]["map@R"] <= 1.0  # the opening example ran
    assert (tmp_path / "tests/quality/data/queries.npz").exists()
    suite, test = (
        tmp_path / "tests/quality/rc_quality.yaml",
        tmp_path / "tests/quality/test_quality.py",
    )
    assert suite.exists() and test.exists()

    out = _pytest(pytester, tmp_path, "tests/quality", "-q", "--rc-json=gates.json")
    assert out.returncode == 0, out.stdout + out.stderr
    gates = json.loads((tmp_path / "gates.json").read_text())["gates"]
    assert len(gates) == 5 and all(g["passed"] for g in gates), (
        gates
    )  # 3 in the suite, 2 in the test
    shown = [b for b in _blocks() if _kind(b) == "output"]
    assert len(shown) == 1
    rows = [
        line.split()
        for line in shown[0]["text"].splitlines()
        if line.rstrip().endswith(("PASS", "FAIL"))
    ]
    assert len(rows) == len(gates)
    for (name, metric, value, *_), g in zip(
        rows, gates
    ):  # the README's rows, in the order the run made them
        assert (
            g["test"].endswith(name) and g["metric"] == metric and f"{g['value']:.4f}" == value
        ), (rows, gates)

    # the same project with the suite's map threshold above the measured value: that gate fails
    suite.write_text(
        suite.read_text().replace("{metric: map, at_least: 0.80}", "{metric: map, at_least: 0.999}")
    )
    out = _pytest(pytester, tmp_path, "tests/quality", "-q", "--rc-json=gates.json")
    assert out.returncode == 1, out.stdout + out.stderr
    failed = [
        g["test"]
        for g in json.loads((tmp_path / "gates.json").read_text())["gates"]
        if not g["passed"]
    ]
    assert failed == ["tests/quality/rc_quality.yaml::map_at_least[precomputed-test]"], out.stdout


_PRELUDE = """\
import numpy as np
import pytest

import retrieval_checks as rc
from pytest_retrieval_checks import *  # noqa: F403 - the gates, re-exported

_rng = np.random.default_rng(0)
y = np.repeat(np.arange(100), 5)
X = (_rng.normal(size=(100, 32))[y] + 0.6 * _rng.normal(size=(500, 32))).astype(np.float32)
languages = np.array(["de", "en", "fr"])[y % 3]  # a slice per query (docs/slices.md)


@pytest.fixture(scope="module")
def test_result():
    return rc.evaluate(X, query_labels=y, metrics=["map@R"])

"""


@pytest.mark.slow
def test_the_readme_pytest_examples_pass(pytester):
    tmp_path = pytester.path
    blocks = [b for b in _blocks() if _kind(b) == "pytest"]
    assert blocks
    for i, b in enumerate(blocks):
        (tmp_path / f"test_readme_block_{i}.py").write_text(
            _PRELUDE + f"# {b['line']}\n" + b["text"]
        )
    first = _pytest(
        pytester, tmp_path, "-q", "--rc-regen-all"
    )  # writes the baselines the rc_baseline example reads
    assert first.returncode == 0, first.stdout + first.stderr
    again = _pytest(pytester, tmp_path, "-q", "--rc-json=gates.json")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{len(blocks)} passed" in again.stdout, again.stdout
    gates = json.loads((tmp_path / "gates.json").read_text())["gates"]
    assert {g["gate"] for g in gates} >= {"assert_map_at_least", "assert_no_regression"} and all(
        g["passed"] for g in gates
    ), gates


def test_blocks_that_copy_a_file_equal_it():
    copies = [b for b in _blocks() if _kind(b) == "same-as"]
    assert copies
    for b in copies:
        path = ROOT / b["mark"].split(" ", 1)[1]
        assert b["text"] == path.read_text(), f"{b['line']} differs from {path.relative_to(ROOT)}"


def test_the_github_actions_example_keeps_the_history_and_runs_the_gates():
    flow = yaml.safe_load((ROOT / "docs/examples/github-actions.yml").read_text())
    assert flow.get("on", flow.get(True))  # YAML 1.1 reads the key `on` as true
    steps = flow["jobs"]["gates"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    restore = next(s for s in steps if s.get("uses", "").startswith("actions/cache/restore@"))
    save = next(s for s in steps if s.get("uses", "").startswith("actions/cache/save@"))
    assert (
        restore["with"]["path"] == save["with"]["path"] == ".retrieval-checks"
    )  # the history's directory
    assert restore["with"]["key"] == save["with"]["key"] and "restore-keys" in restore["with"]
    assert save.get("if") == "always()"  # kept when a gate fails too
    gates = next(i for i, s in enumerate(steps) if "pytest" in s.get("run", ""))
    assert uses.index(restore["uses"]) < gates < uses.index(save["uses"])
    assert any(s.get("uses", "").startswith("actions/upload-artifact@") for s in steps)


def test_the_extras_table_lists_what_each_extra_installs():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    rows = re.findall(r"^\| `\[(\w+)\]` \| ([^|]+) \|", README.read_text(), flags=re.M)
    assert {name for name, _ in rows} == {
        "torch",
        "text",
        "vision",
        "lightning",
        "trackers",
        "files",
    }
    for name, listed in rows:
        wanted = {re.split(r"[<>=;\s\[]", req, maxsplit=1)[0] for req in extras[name]}
        assert {w.strip() for w in re.sub(r" >= \S+", "", listed).split(",")} == wanted, (
            name,
            listed,
            wanted,
        )


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_links_resolve():
    text = re.sub(
        r"^```.*?^```", "", README.read_text(), flags=re.M | re.S
    )  # headings outside code
    anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        path, _, anchor = link.partition("#")
        if path:
            assert (ROOT / path).exists(), f"README.md links to {path}, which does not exist"
        else:
            assert anchor in anchors, f"README.md links to #{anchor}, which no heading makes"


def test_the_readme_stays_short_and_links_into_the_docs():
    """The README is the adopter's first page (issue 29): what it is, the install, a first
    suite and gate, the run, a training loop, CI, the two contributor commands and links;
    reference material lives in the docs site."""
    text = README.read_text()
    assert len(text.splitlines()) <= 300, "move reference material into a docs page"
    for page in ("docs/tutorials/digits.md", "docs/metrics.md", "CONTRIBUTING.md"):
        assert f"]({page})" in text, page
    assert "./dev gates" in text and "./dev test" in text  # .ci/run and CONTRIBUTING rely on them
    assert "OWNER" not in text  # no placeholder URL in the install
