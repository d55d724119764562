"""The documentation site builds with ``mkdocs build --strict`` (issue 29).

A broken link, a page missing from the nav, a snippet of a file that no longer exists, a
reference page the hook cannot generate or a docstring that no longer parses is a warning,
and ``--strict`` turns it into a failed build, so this test fails. A second, tiny build
shows that each of those kinds of problem does fail a build with this project's settings
(the test is not one that cannot fail). The built home page and one reference page are
rendered in headless Chromium and saved under test-artifacts/ (skipped, saying why, where
Chromium is absent).

The docstrings' examples of the main public functions run as doctests.

Cost: about 20 CPU-s in all (measured on the 2-core machine): one full build in a
subprocess (about 8 CPU-s: mkdocstrings reads the package with griffe) shared by the tests
of this module, one tiny build (about 3 CPU-s), two pages rendered and screenshotted (one
Chromium launch per page for the DOM and the screenshot together, about 3 s each; two each
before, 11 s), the doctests (tiny arrays, a few seconds). Its tests share one xdist group, so
one worker builds the site once. Skipped where mkdocs is not installed (the `docs` extra).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from browser import MISSING, chromium, run

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install -e '.[docs]'")
pytest.importorskip(
    "mkdocstrings", reason="mkdocstrings is not installed: pip install -e '.[docs]'"
)
pytest.importorskip("material", reason="mkdocs-material is not installed: pip install -e '.[docs]'")

pytestmark = pytest.mark.xdist_group("docs_site")


def _build(config: Path, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    done = _build(ROOT / "mkdocs.yml", out, ROOT)
    assert done.returncode == 0, "mkdocs build --strict failed:\n" + done.stderr[-6000:]
    return out


def _text(path: Path) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", path.read_text()).split())


def test_the_site_builds_strict_with_every_page(site):
    for page in (
        "index",
        "tutorials/digits",
        "tutorials/beir",
        "tutorials/training-loop",
        "tutorials/ci",
        "metrics",
        "slices",
        "power",
        "explanation/engine",
    ):
        assert (site / f"{page}.html").exists(), page
    # every markdown page under docs/ is in the site (a page left out of the nav fails the
    # build: validation.nav.omitted_files)
    for md in (ROOT / "docs").rglob("*.md"):
        assert (site / md.relative_to(ROOT / "docs").with_suffix(".html")).exists(), md


def test_the_reference_is_generated_from_the_code(site):
    import retrieval_checks as rc
    from retrieval_checks.gates._spec import GATE_FIELDS
    from retrieval_checks.options import OPTIONS
    from retrieval_checks.tracking._cli import build_parser

    metrics = _text(site / "reference/metrics.html")
    for family in rc.metrics.FAMILIES.values():
        assert family.template in metrics, family.name
    options = _text(site / "reference/options.html")
    assert all(name in options for name in OPTIONS)
    gates = _text(site / "reference/gate-fields.html")
    assert all(name in gates for name in GATE_FIELDS)
    cli = _text(site / "reference/cli.html")
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert all(f"retrieval-checks {name}" in cli for name in commands)
    assert "--rc-correction" in cli and "--rc-html" in cli  # the plugin's options
    assert all(f in cli for f in ("rc_evaluate", "rc_load", "rc_baseline", "rc_report"))  # fixtures
    schema = _text(site / "reference/yaml-schema.html")
    assert "at_least" in schema and "datasets" in schema
    # the public API: every top-level name has its docstring rendered, with its anchor
    pages = {p.stem: p.read_text() for p in (site / "reference/api").glob("*.html")}
    for name in ("evaluate", "evaluate_run", "evaluate_image_text", "assert_metric", "compare"):
        assert any(f'id="retrieval_checks.{sub}.{name}"' in html for sub, html in pages.items()), (
            name
        )
    assert "Evaluate retrieval metrics exactly" in pages["engine"]
    # Sphinx roles in the docstrings read as code (docs/_griffe_roles.py), not as ":func:"
    for page in [*pages.values(), *(p.read_text() for p in (site / "reference").glob("*.html"))]:
        assert not re.search(r":(func|class|data|mod|meth|attr|exc):<code>", page)


def test_broken_links_missing_files_and_bad_docstrings_fail_a_build(tmp_path):
    """The project's settings (validation, snippets' check_paths, mkdocstrings' numpy
    docstrings) applied to a tiny site with one problem of each kind: the build fails and
    names each one."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "badmod.py").write_text(
        'def f(a):\n    """One line.\n\n    Parameters\n    ----------\n    a:\n        the a.\n'
        '\n    Trailing prose that the parser reads as a parameter.\n    """\n'
    )
    (docs / "index.md").write_text("# Home\n\n[gone](missing.md)\n\n::: badmod.f\n")
    (docs / "tut.md").write_text('# Tut\n\n```python\n--8<-- "no/such/file.py"\n```\n')
    (docs / "orphan.md").write_text("# Not in the nav\n")
    config.update(docs_dir="docs", nav=[{"Home": "index.md"}, {"Tut": "tut.md"}])
    config.pop("hooks")
    python = next(p for p in config["plugins"] if isinstance(p, dict))["mkdocstrings"]["handlers"][
        "python"
    ]
    python["paths"] = ["."]
    python["options"]["extensions"] = [  # the project's extension, from the repository
        e.replace("docs/", f"{ROOT}/docs/", 1) for e in python["options"]["extensions"]
    ]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site", tmp_path)
    assert done.returncode != 0
    log = done.stderr
    assert "missing.md" in log, log[-3000:]
    assert "no/such/file.py" in log, log[-3000:]
    assert "Trailing" in log, log[-3000:]  # griffe: a "parameter" not in the signature
    assert "orphan.md" in log, log[-3000:]


def test_repository_links_are_checked_by_the_hook(tmp_path):
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import _hooks
    finally:
        sys.path.remove(str(ROOT / "docs"))

    class _File:
        src_uri = "tutorials/x.md"

    class _Page:
        file = _File()

    md = "[ok](../../CONTRIBUTING.md) [bad](../../NO_SUCH_FILE.md) [page](../metrics.md)\n"
    config = {"docs_dir": str(ROOT / "docs")}
    import logging

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    _hooks.log.addHandler(handler)
    try:
        out = _hooks.on_page_markdown(md, _Page(), config, None)
    finally:
        _hooks.log.removeHandler(handler)
    assert "ok (`CONTRIBUTING.md`)" in out and "[page](../metrics.md)" in out
    assert [r.levelname for r in records] == ["WARNING"]
    assert "NO_SUCH_FILE.md" in records[0].getMessage()


def test_the_home_page_and_a_reference_page_render_in_headless_chromium(site, tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip(MISSING)
    artifacts = Path(os.environ.get("RC_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    for page, shot in (
        ("index.html", "docs-home.png"),
        ("reference/metrics.html", "docs-reference-metrics.png"),
    ):
        # one launch per page: the screenshot and the rendered DOM (--dump-dom) together
        done = run(
            browser,
            tmp_path / "profile",
            "--window-size=1400,1000",
            f"--screenshot={artifacts / shot}",
            "--dump-dom",
            (site / page).as_uri(),
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "retrieval-checks" in done.stdout and "Uncaught" not in done.stderr, done.stderr[
            -2000:
        ]
        assert (artifacts / shot).stat().st_size > 10_000, done.stderr[-2000:]


# The docstrings' examples are the reference's examples: they run, as torchmetrics runs
# each metric's. Cost: about a second (tiny arrays; the modules are already imported).
DOCTEST_MODULES = (
    "retrieval_checks.engine._evaluate",
    "retrieval_checks.engine._runs",
    "retrieval_checks.engine._image_text",
    "retrieval_checks.gates._assertions",
    "retrieval_checks.options",
)


@pytest.mark.parametrize("module", DOCTEST_MODULES)
def test_the_docstring_examples_run(module):
    import doctest
    import importlib
    import warnings

    mod = importlib.import_module(module)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an example that warns is not an example to copy
        results = doctest.testmod(
            mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=True
        )
    assert results.attempted > 0, f"{module} has no examples"
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples of {module} fail"


def test_the_main_public_functions_have_examples():
    import retrieval_checks as rc

    for name in (
        "evaluate",
        "evaluate_run",
        "evaluate_image_text",
        "assert_metric",
        "assert_map_at_least",
        "assert_recall_at_least",
        "assert_not_worse",
        "assert_recall_at_precision",
        "assert_grouped_recall_ci",
        "assert_gap_below",
        "assert_rsum",
    ):
        doc = getattr(rc, name).__doc__
        assert ">>> " in doc, f"rc.{name} has no example"
        assert "Raises\n" in doc, f"rc.{name} does not say what it raises"
        if not name.startswith("assert_"):
            assert "Returns\n" in doc and "Parameters\n" in doc, name


# ---------------------------------------------------------------- nothing listed twice by hand
# The Reference section is generated from the option table, the gate-field table, the
# suites' JSON schema, the metric registry, the CLI's parser and the plugin's options. A
# how-to page (or the README, or CONTRIBUTING) that lists those names again in a table of
# its own drifts from the code (docs/suites.md's option table had lost `hamming` and the
# suite's `correction:`). It inserts the generated table instead
# (``<!-- rc-generated: options suite -->``, docs/_hooks.py's GENERATED) or links to the
# reference. Cost: well under a second (no build; the tables are read from the sources).

#: Hand-written tables whose first column names registry entries on purpose, keyed by
#: (page, the table's header line), each with the reason. A key that no longer matches a
#: table fails the test (the list only shrinks).
HAND_TABLES = {
    (
        "docs/metrics.md",
        "| canonical name | definition for one query | notes |",
    ): "the metric contract: the definitions the registry's one-line summaries point to",
    ("docs/metrics.md", "| canonical name | definition |"): "the metric contract, as above",
    (
        "docs/metrics.md",
        "| option | values | equals |",
    ): "the contract's equivalence with trec_eval's query sets (evaluate_run's options)",
    (
        "docs/protocols.md",
        "| measure | all 11 models: Pearson r [95% CI] | Spearman | selection acc. "
        "| 7 models with train acc. >= 0.8: Pearson r [95% CI] | Spearman | selection acc. |",
    ): "measured correlations per measure, not a definition",
    (
        "docs/models.md",
        "| kind | value | settings | embeds |",
    ): "which settings each model kind takes and what it embeds: the schema has one model "
    "definition for every kind and cannot say it",
}


def _registries() -> dict[str, set[str]]:
    import argparse

    from retrieval_checks.gates._spec import GATE_FIELDS
    from retrieval_checks.metrics import FAMILIES
    from retrieval_checks.options import OPTIONS
    from retrieval_checks.suites._jsonschema import suite_json_schema
    from retrieval_checks.tracking._cli import build_parser

    def properties(node, acc):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    acc.update(value)
                properties(value, acc)
        elif isinstance(node, list):
            for value in node:
                properties(value, acc)
        return acc

    cli = set()
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                for option in sub._actions:
                    cli.update(o for o in option.option_strings if o not in ("-h", "--help"))
    hooks = _hooks_module()
    from pytest_retrieval_checks import plugin

    recorder = hooks._Options()
    plugin.pytest_addoption(recorder)
    return {
        "evaluation options (retrieval_checks.options.OPTIONS)": set(OPTIONS),
        "gate fields (GATE_FIELDS)": set(GATE_FIELDS),
        "metrics (retrieval_checks.metrics.FAMILIES)": {f.template for f in FAMILIES.values()}
        | {f.name for f in FAMILIES.values()},
        "suite fields (the JSON schema)": set(properties(suite_json_schema(), {})),
        "retrieval-checks options (the CLI's parser)": cli,
        "the plugin's options": {n for names, _ in recorder.options for n in names}
        | set(recorder.ini),
    }


def _hooks_module():
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import _hooks
    finally:
        sys.path.remove(str(ROOT / "docs"))
    return _hooks


def _markdown_tables(text: str):
    """(line, header, [first-column names of each row]) of each table outside code blocks;
    a row's names are the code spans of its first cell (and their first words: `--limit N`)."""
    lines, fence, table = text.split("\n"), False, []
    for number, line in enumerate([*lines, ""], 1):
        if line.startswith("```"):
            fence = not fence
        if not fence and line.startswith("|"):
            table.append((number, line))
            continue
        if len(table) > 2:
            rows = []
            for _, row in table[2:]:
                spans = re.findall(r"`([^`]+)`", row.strip("|").split("|")[0])
                rows.append({s for s in spans} | {s.split(" ")[0] for s in spans})
            yield table[0][0], table[0][1].strip(), rows
        table = []


def hand_listed(text: str, registries: dict[str, set[str]]) -> list[tuple[int, str, str]]:
    """Tables of ``text`` whose first column lists entries of a registry: at least 3 rows,
    and at least half of the rows, name one. Returns (line, header, registry) of each."""
    found = []
    for line, header, rows in _markdown_tables(text):
        for registry, names in registries.items():
            hits = sum(bool(row & names) for row in rows)
            if hits >= 3 and 2 * hits >= len(rows):
                found.append((line, header, registry))
                break
    return found


def _hand_written_pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_no_page_lists_options_fields_metrics_or_flags_by_hand():
    registries = _registries()
    offenders, allowed_seen = [], set()
    for page in _hand_written_pages():
        rel = page.relative_to(ROOT).as_posix()
        for line, header, registry in hand_listed(page.read_text(), registries):
            if (rel, header) in HAND_TABLES:
                allowed_seen.add((rel, header))
            else:
                offenders.append(f"{rel}:{line} lists {registry} by hand")
    assert not offenders, (
        "insert the generated table (<!-- rc-generated: NAME -->, docs/_hooks.py GENERATED) "
        "or link to the reference instead:\n" + "\n".join(offenders)
    )
    stale = set(HAND_TABLES) - allowed_seen
    assert not stale, f"HAND_TABLES names tables that no longer list registry entries: {stale}"


def test_the_hand_listing_check_finds_a_hand_written_table():
    registries = _registries()
    table = (
        "Options:\n\n| option | meaning |\n|---|---|\n| `similarity` | how to score |\n"
        "| `ties` | tie policy |\n| `confidence` | of intervals |\n| `seed` | the seed |\n"
    )
    assert [r for _, _, r in hand_listed(table, registries)] == [
        "evaluation options (retrieval_checks.options.OPTIONS)"
    ]
    flags = "| flag | meaning |\n|---|---|\n" + "".join(
        f"| `{f} X` | ... |\n" for f in ("--max-drop", "--limit", "--commit")
    )
    assert hand_listed(flags, registries)
    # a table of three rows, one of which names an option, is prose, not a listing
    assert not hand_listed(table.replace("`ties`", "ties").replace("`seed`", "seed"), registries)


def test_generated_tables_are_inserted_into_how_to_pages(site):
    from retrieval_checks.options import OPTIONS

    hooks = _hooks_module()
    suites = _text(site / "suites.html")
    assert all(name in suites for name, o in OPTIONS.items() if o.applies_to)
    assert "<!-- rc-generated" not in (site / "suites.html").read_text()
    plugin = _text(site / "plugin.html")
    assert "--rc-correction" in plugin and "rc_suite_files" in plugin and "rc_*.yaml" in plugin
    cli = _text(site / "cli.html")
    assert "--max-relative-drop" in cli and "--full-only" in cli and "--format" in cli
    with pytest.raises(ValueError, match="unknown rc-generated table 'nope'"):
        hooks.expand_generated("<!-- rc-generated: nope -->\n", "page.md")
    with pytest.raises(RuntimeError, match="no command 'nope'"):
        hooks.expand_generated("<!-- rc-generated: cli-help nope -->\n", "page.md")
