"""MkDocs hooks: the Reference section, generated from the code at build time.

Nothing in the reference is written twice by hand. Each page below is made from the one
place the code keeps that knowledge:

- ``reference/api/*.md``: one page per public subpackage, a mkdocstrings directive
  (``::: retrieval_checks.engine.evaluate``) for every name in its ``__all__``; the
  top-level names link to them;
- ``reference/metrics.md``: the capability registry ``retrieval_checks.metrics.FAMILIES``;
- ``reference/options.md``: the option table ``retrieval_checks.options.OPTIONS``;
- ``reference/gate-fields.md``: the gate-field table ``retrieval_checks.gates.GATE_FIELDS``
  (read from ``retrieval_checks.gates._spec``);
- ``reference/yaml-schema.md``: the suites' JSON schema (``retrieval-checks schema``);
- ``reference/cli.md``: the ``retrieval-checks`` argparse parser and the pytest plugin's
  ``--rc-*`` options (from its ``pytest_addoption``);
- ``reference/errors.md``: the exception hierarchy of ``retrieval_checks.errors``.

Links from a docs page to a repository file outside ``docs/`` (an example, a test) are
checked here: the file must exist (a missing one is a warning, so ``--strict`` fails),
and the page shows its repository path.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import logging
import os
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.retrieval_checks")
ROOT = Path(__file__).resolve().parents[1]


def _load_roles():
    """docs/_griffe_roles.py (beside this file; mkdocs loads hooks by path, not as a package)."""
    spec = importlib.util.spec_from_file_location(
        "_griffe_roles", Path(__file__).with_name("_griffe_roles.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_roles = _load_roles()

#: The public subpackages, in the order of the layers (pyproject's import-linter contract),
#: top to bottom, then the shared modules.
API = (
    "suites",
    "gates",
    "integrations",
    "tracking",
    "classifiers",
    "experiments",
    "stats",
    "engine",
    "models",
    "data",
    "metrics",
    "options",
    "errors",
)
API_DIR = "reference/api"


def _cell(value) -> str:
    """A value in a markdown table cell: pipes escaped, newlines joined."""
    text = value if isinstance(value, str) else repr(value)
    return " ".join(text.replace("|", "\\|").split())


def _code(value) -> str:
    return f"`{value}`" if value not in (None, "", ()) else ""


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _generated_note(source: str) -> str:
    return (
        f'!!! note "Generated"\n    This page is generated at build time from {source}; '
        "edit the code, not this page.\n\n"
    )


# ---------------------------------------------------------------- public API


def _first_line(doc: str | None) -> str:
    return _roles.plain(inspect.cleandoc(doc or "").split("\n\n")[0]).replace("\n", " ")


def _api_page(name: str) -> str:
    mod = importlib.import_module(f"retrieval_checks.{name}")
    out = [
        f"# `retrieval_checks.{name}`\n",
        _generated_note(f"the docstrings of `retrieval_checks.{name}`"),
    ]
    out.append(_roles.plain(inspect.cleandoc(mod.__doc__ or "")) + "\n")
    for member in mod.__all__:
        out.append(f"::: {_path(mod, member)}\n")
    return "\n".join(out)


def _path(mod, member: str) -> str:
    """Where mkdocstrings finds ``member`` of ``mod``: its public path, or, for a name the
    package loads lazily (``_LAZY``: a training library is imported on first access), the
    module that defines it, read without importing that library."""
    lazy = getattr(mod, "_LAZY", {})
    if member in lazy:
        return importlib.util.resolve_name(lazy[member], mod.__name__) + "." + member
    return f"{mod.__name__}.{member}"


def _api_index() -> str:
    import retrieval_checks as rc

    home = {}
    for name in API:
        for member in importlib.import_module(f"retrieval_checks.{name}").__all__:
            home.setdefault(member, name)
    out = [
        "# Public API\n",
        _generated_note("`retrieval_checks.__all__` and each subpackage's `__all__`"),
    ]
    out.append(
        "Everything below is importable from its subpackage; the names of the table are also "
        "importable from the top level (`import retrieval_checks as rc; rc.evaluate(...)`). "
        "Modules and names with a leading underscore are private.\n"
    )
    rows = []
    for member in rc.__all__:
        if member.startswith("__"):  # __version__
            continue
        sub = home.get(member)
        if sub is None:
            log.warning("rc.%s is exported by retrieval_checks but by none of %s", member, API)
            continue
        obj = getattr(rc, member)
        link = f"[`rc.{member}`](../api/{sub}.md#retrieval_checks.{sub}.{member})"
        rows.append(
            [
                link,
                f"`retrieval_checks.{sub}`",
                _first_line(getattr(obj, "__doc__", ""))
                if inspect.isclass(obj) or callable(obj)
                else "",
            ]
        )
    out.append(_table(["name", "documented in", "summary"], rows))
    out.append("\n## Subpackages\n")
    for name in API:
        mod = importlib.import_module(f"retrieval_checks.{name}")
        out.append(f"- [`retrieval_checks.{name}`](../api/{name}.md): {_first_line(mod.__doc__)}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- tables


def _metrics_page() -> str:
    from retrieval_checks.metrics import FAMILIES

    rows = []
    for f in FAMILIES.values():
        high = "inf" if f.high == float("inf") else f"{f.high:g}"
        rows.append(
            [
                f"`{f.template}`",
                f.summary,
                f.kind,
                f.unit,
                f"[{f.low:g}, {high}]",
                "higher" if f.higher_is_better else "lower",
                "yes" if f.per_query else "",
                f.interval or "",
                "yes" if f.gap else "",
                "yes" if f.compare else "",
                f"`{f.entry}`",
                f.dataset,
                f"`{f.gate}`",
            ]
        )
    return (
        "# Metrics: the registry\n\n"
        + _generated_note("the capability registry `retrieval_checks.metrics.FAMILIES`")
        + "One row per metric family. The definitions, conventions and the names other "
        "libraries use are in [the metric contract](../metrics.md).\n\n"
        "Columns: the template a user writes; what it measures; its kind of data; unit and "
        "attainable range; which direction is better; whether per-query values are kept "
        "(intervals, paired comparisons, per-class baselines); where its interval comes from; "
        "whether a generalization gap and a paired comparison are defined; the function that "
        "computes it and on which kind of dataset; the gate for a lower bound.\n\n"
        + _table(
            [
                "template",
                "summary",
                "kind",
                "unit",
                "range",
                "better",
                "per query",
                "interval",
                "gap",
                "compare",
                "computed by",
                "dataset",
                "gate",
            ],
            rows,
        )
    )


def _options_table(only_datasets: bool = False) -> str:
    """The option table as markdown; ``only_datasets``: the options a suite or a check may
    set (those that apply to a dataset type), not the session's."""
    from retrieval_checks.options import OPTIONS

    rows = []
    for o in OPTIONS.values():
        if only_datasets and not o.applies_to:
            continue
        aliases = ", ".join(f"`{k}` = `{v}`" for k, v in o.aliases.items())
        rows.append(
            [
                f"`{o.name}`",
                o.help + (f" (aliases: {aliases})" if aliases else ""),
                o.expected + (" or null" if o.optional else ""),
                _code(repr(o.default)),
                ", ".join(o.applies_to) or "session",
            ]
        )
    return _table(["option", "meaning", "accepts", "default", "applies to"], rows)


def _options_page() -> str:
    from retrieval_checks.options import DATASET_TYPES

    return (
        "# Evaluation options\n\n"
        + _generated_note("the option table `retrieval_checks.options.OPTIONS`")
        + "Every option is validated against this one table wherever it is written: a keyword "
        "argument of `rc.evaluate` and its siblings, a suite's `options:` (or a check's field), "
        "a `--rc-...` flag of the pytest plugin. A bad value fails the same way everywhere, naming "
        "the option and what it expects, before any work starts.\n\n"
        f"Dataset types: {', '.join(f'`{t}`' for t in DATASET_TYPES)} (`session`: set for the "
        "whole run, not per dataset).\n\n" + _options_table()
    )


def _gate_fields_rows() -> list[list]:
    from retrieval_checks.gates._spec import GATE_FIELDS

    rows = []
    for g in GATE_FIELDS.values():
        if g.kind == "choice":
            ch = g.choices
            if isinstance(ch, dict):
                accepts = "; ".join(f"{k}: " + ", ".join(map(str, v)) for k, v in ch.items())
            else:
                accepts = ", ".join(map(str, ch))
        elif g.kind == "value" and g.value is not None:
            accepts = g.value.expected
        elif g.kind == "flag":
            accepts = "true or false"
        else:
            accepts = f"a number ({g.scale})"
        # where each check kind writes it: the check itself, or its compare: / baseline: mapping
        checks = ", ".join(
            (f"{k} (in `{g.section_for(k)}:`)" if g.section_for(k) else k) for k in g.checks
        )
        rows.append(
            [
                f"`{g.name}`",
                g.help + (f" ({g.meaning})" if g.meaning else ""),
                g.kind,
                accepts,
                checks,
                ", ".join(f"`{p}`" for p in g.python),
                "yes" if g.integration else "",
                _code(repr(g.default)) if g.default is not None else "",
            ]
        )
    return rows


def _gate_fields_table() -> str:
    return _table(
        [
            "field",
            "meaning",
            "kind",
            "accepts",
            "YAML checks",
            "Python gates",
            "training loops",
            "default",
        ],
        _gate_fields_rows(),
    )


def _gate_fields_page() -> str:
    return (
        "# Gate fields\n\n"
        + _generated_note("the gate-field table `GATE_FIELDS` (`retrieval_checks/gates/_spec.py`)")
        + "A gate field is what a check writes beside its metric: a threshold, a rule, a "
        "tolerance. One row of the table declares it, and the YAML loader, the JSON schema, the "
        "suite runner, the Python gates and the training-loop integrations all read that row.\n\n"
        "Columns: the field; its meaning; its kind (`threshold`: a number on the metric's scale, "
        "checked against the metric's attainable range; `choice`; `flag`; `value`: a number "
        "checked by an option); the values it accepts; the YAML check kinds that take it (and the "
        "mapping it is written in); the Python gates that take it as a keyword; whether a "
        "training-loop integration's `gates={metric: {...}}` takes it; its default.\n\n"
        + _gate_fields_table()
    )


def _schema_resolve(schema: dict, spec):
    """The definition a ``$ref`` points to (``#/$defs/...`` paths), else ``spec`` itself."""
    if isinstance(spec, dict) and "$ref" in spec:
        node = schema
        for part in spec["$ref"].lstrip("#/").split("/"):
            node = node[part]
        return node
    return spec


def _schema_description(schema: dict, spec) -> str:
    if not isinstance(spec, dict):
        return ""
    if spec.get("description"):
        return spec["description"]
    target = _schema_resolve(schema, spec)
    if target is not spec:
        return _schema_description(schema, target)
    return ""


def _schema_kind(spec) -> str:
    if not isinstance(spec, dict):
        return ""
    if "const" in spec:
        return f"`{spec['const']}`"
    if "enum" in spec:
        return "one of " + ", ".join(map(str, spec["enum"]))
    if "type" in spec:
        return spec["type"] if isinstance(spec["type"], str) else " or ".join(spec["type"])
    if "$ref" in spec:
        ref = spec["$ref"].rsplit("/", 1)[-1]
        return "option" if "/options/" in spec["$ref"] else ref
    if "anyOf" in spec:
        kinds = [_schema_kind(s) for s in spec["anyOf"]]
        return " or ".join(k for k in dict.fromkeys(kinds) if k)
    return ""


def _schema_props(schema: dict, props: dict, required=()) -> list[list]:
    rows = []
    for key, spec in props.items():
        rows.append(
            [
                f"`{key}`" + (" (required)" if key in required else ""),
                _schema_kind(spec),
                _schema_description(schema, spec),
            ]
        )
    return rows


#: The sections of the suites' schema a page can show (``<!-- rc-generated: schema NAME -->``).
SCHEMA_SECTIONS = ("suite", "source", "dataset", "model", "check", "options")


def _schema_table(section: str) -> str:
    """One section of the suites' JSON schema as a markdown table: its fields, their kinds
    and meanings (the ``description`` of each field, or of the definition it refers to)."""
    from retrieval_checks.suites._jsonschema import suite_json_schema

    schema = suite_json_schema()
    defs = schema["$defs"]
    header = ["field", "kind", "meaning"]
    if section == "suite":
        return _table(header, _schema_props(schema, schema["properties"], schema["required"]))
    if section == "source":
        obj = next(v for v in defs["source"]["anyOf"] if "properties" in v)
        return _table(header, _schema_props(schema, obj["properties"], obj.get("required", ())))
    if section in ("model", "check", "options"):
        d = defs[section]
        return _table(header, _schema_props(schema, d["properties"], d.get("required", ())))
    if section == "dataset":
        merged: dict = {}  # (field, kind, meaning) -> the types that have it
        for variant in defs["dataset"]["anyOf"]:
            kind = variant["properties"]["type"]["const"]
            required = variant.get("required", ())
            for row in _schema_props(schema, variant["properties"], required):
                if row[0].startswith("`type`"):  # required but for retrieval, its default
                    row[0] = "`type`"
                    row[1] = "one of " + ", ".join(
                        v["properties"]["type"]["const"] for v in defs["dataset"]["anyOf"]
                    )
                merged.setdefault(tuple(row), []).append(kind)
        rows = [[f, ", ".join(types), k, m] for (f, k, m), types in merged.items()]
        rows[0][1] = "all"  # type: every dataset's
        return _table(["field", "dataset types", "kind", "meaning"], rows)
    raise ValueError(f"no schema section {section!r}: {SCHEMA_SECTIONS}")


def _yaml_schema_page() -> str:
    from retrieval_checks.suites._jsonschema import suite_json_schema

    schema = suite_json_schema()
    out = [
        "# YAML suite fields (the JSON schema)\n",
        _generated_note("the suites' JSON schema (`retrieval-checks schema`)"),
        "A suite is a YAML file named `rc_*.yaml` that pytest collects. `retrieval-checks schema` "
        "prints this schema (point your editor's YAML language server at it); `retrieval-checks "
        "validate` checks suites without running a model. How to write one: [YAML suites](../suites.md).\n",
    ]
    titles = {
        "suite": "Top level",
        "source": "A source (a file of arrays)",
        "dataset": "A dataset",
        "model": "A model",
        "check": "A check",
        "options": "Evaluation options (`options:`, or a check's or a model's own)",
    }
    for section in SCHEMA_SECTIONS:
        out.append(f"## {titles[section]}\n")
        out.append(_schema_table(section))
    out.append(
        '\n??? info "The whole schema (JSON)"\n\n    ```json\n'
        + "\n".join("    " + line for line in json.dumps(schema, indent=2).splitlines())
        + "\n    ```\n"
    )
    return "\n".join(out)


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:  # argparse keeps its subcommands here
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


class _Options:
    """Records a pytest_addoption hook's options (a stand-in for pytest's parser)."""

    def __init__(self):
        self.options, self.ini, self.ini_defaults = [], {}, {}

    def getgroup(self, *args, **kwargs):
        return self

    def addoption(self, *names, **kwargs):
        self.options.append((names, kwargs))

    def addini(self, name, help="", *args, **kwargs):  # noqa: A002 - pytest's keyword
        self.ini[name] = help
        self.ini_defaults[name] = kwargs.get("default")


def _cli_page() -> str:
    from pytest_retrieval_checks import plugin
    from retrieval_checks.tracking._cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser = build_parser()
        out = [
            "# Command line\n",
            _generated_note(
                "the `retrieval-checks` argparse parser and the plugin's `pytest_addoption`"
            ),
            "How to use them: [the command line, history and baselines](../cli.md).\n",
            "## `retrieval-checks`\n",
            "```text\n" + parser.format_help() + "```\n",
        ]
        for name, help_text, sub in _subcommands(parser):
            out.append(f"### `retrieval-checks {name}`\n")
            if help_text:
                out.append(help_text[0].upper() + help_text[1:] + ".\n")
            out.append("```text\n" + sub.format_help() + "```\n")
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    out.append("## The pytest plugin's options\n")
    out.append(
        "The plugin registers itself (a `pytest11` entry point). Each option may also be set in "
        "the pytest configuration under its ini name (`[tool.pytest.ini_options]`), where one "
        "is listed.\n"
    )
    out.append(_plugin_options_table())
    out.append("## The pytest plugin's fixtures\n")
    out.append(
        "How tests use them: [the pytest plugin](../plugin.md). The gates themselves are "
        "re-exported: `from pytest_retrieval_checks import assert_map_at_least, ...`.\n"
    )
    out.append(_table(["fixture", "what it gives"], _fixtures(plugin)))
    return "\n".join(out)


def _plugin_options_table() -> str:
    """The plugin's ``--rc-*`` options and ini-only settings, from its ``pytest_addoption``."""
    from pytest_retrieval_checks import plugin

    rec = _Options()
    plugin.pytest_addoption(rec)
    rows, seen = [], set()
    for names, kw in rec.options:
        dest = kw.get("dest") or names[0].lstrip("-").replace("-", "_")
        ini = f"`{dest}`" if dest in rec.ini else ""
        seen.add(dest)
        rows.append([", ".join(f"`{n}`" for n in names), kw.get("help", ""), ini])
    for name, help_text in rec.ini.items():
        if name not in seen:  # set in the configuration only
            default = rec.ini_defaults.get(name)
            if isinstance(default, list | tuple):
                default = " ".join(map(str, default))
            tail = f" (default: `{default}`)" if default not in (None, "", []) else ""
            rows.append(["(ini only)", help_text + tail, f"`{name}`"])
    return _table(["option", "meaning", "ini"], rows)


def _cli_help(command: str) -> str:
    """``retrieval-checks COMMAND --help`` (or the main parser's, for ``-``) as a text block."""
    from retrieval_checks.tracking._cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser = build_parser()
        if command == "-":
            text = parser.format_help()
        else:
            subs = {name: sub for name, _, sub in _subcommands(parser)}
            if command not in subs:
                raise ValueError(f"retrieval-checks has no command {command!r}: {sorted(subs)}")
            text = subs[command].format_help()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return "```text\n" + text + "```\n"


def _fixtures(plugin) -> list[list]:
    """The plugin's fixtures (functions pytest.fixture wrapped) with their docstrings."""
    import _pytest.fixtures

    wrapped = getattr(_pytest.fixtures, "FixtureFunctionDefinition", ())  # pytest >= 8.4

    def is_fixture(obj) -> bool:  # older pytest marks the function itself
        return isinstance(obj, wrapped) or hasattr(obj, "_pytestfixturefunction")

    rows = []
    for name, obj in vars(plugin).items():
        if is_fixture(obj):
            # a table cell holds the prose before the numpy sections (Parameters, Examples...)
            prose = re.split(r"^\w[\w ]*\n-{3,}$", inspect.getdoc(obj) or "", flags=re.M)[0]
            rows.append([f"`{name}`", _roles.plain(" ".join(prose.split()))])
    if not rows:
        log.warning("no fixture found in the pytest plugin: the reference would list none")
    return rows


def _errors_page() -> str:
    from retrieval_checks import errors

    out = [
        "# Errors and warnings\n",
        _generated_note("`retrieval_checks.errors`"),
        _roles.plain(inspect.cleandoc(errors.__doc__ or "")) + "\n",
    ]
    rows = []
    for name in errors.__all__:
        cls = getattr(errors, name)
        bases = ", ".join(f"`{b.__name__}`" for b in cls.__bases__)
        rows.append(
            [
                f"[`{name}`](api/errors.md#retrieval_checks.errors.{name})",
                bases,
                _first_line(cls.__doc__),
            ]
        )
    out.append(_table(["class", "derives from", "raised or issued when"], rows))
    return "\n".join(out)


def _reference_index() -> str:
    return (
        "# Reference\n\n"
        + _generated_note("the code (this hook: `docs/_hooks.py`)")
        + "Every page of this section is generated when the site is built, from the one place "
        "the code keeps that knowledge, so it cannot drift from the code:\n\n"
        "- [Public API](api/index.md): the docstrings of every name in each subpackage's `__all__`;\n"
        "- [Metrics](metrics.md): the capability registry `retrieval_checks.metrics.FAMILIES`;\n"
        "- [Evaluation options](options.md): the option table `retrieval_checks.options.OPTIONS`;\n"
        "- [Gate fields](gate-fields.md): the gate-field table `GATE_FIELDS`;\n"
        "- [YAML suite fields](yaml-schema.md): the JSON schema `retrieval-checks schema` prints;\n"
        "- [Command line](cli.md): the `retrieval-checks` parser and the pytest plugin's options;\n"
        "- [Errors](errors.md): the exception hierarchy.\n"
    )


PAGES = {
    "reference/metrics.md": _metrics_page,
    "reference/options.md": _options_page,
    "reference/gate-fields.md": _gate_fields_page,
    "reference/yaml-schema.md": _yaml_schema_page,
    "reference/cli.md": _cli_page,
    "reference/errors.md": _errors_page,
    "reference/index.md": _reference_index,
    f"{API_DIR}/index.md": _api_index,
    **{f"{API_DIR}/{name}.md": (lambda name=name: _api_page(name)) for name in API},
}


# ---------------------------------------------------------------- hooks


def on_config(config):
    """Put the generated API pages in the nav, under the entry "Public API"."""
    pages = [f"{API_DIR}/index.md"] + [{f"retrieval_checks.{n}": f"{API_DIR}/{n}.md"} for n in API]

    def expand(items):
        for i, item in enumerate(items):
            if isinstance(item, dict):
                for key, value in item.items():
                    if value == f"{API_DIR}/":
                        items[i] = {key: pages}
                    elif isinstance(value, list):
                        expand(value)

    expand(config["nav"] or [])
    return config


def on_files(files, config):
    for path, make in PAGES.items():
        try:
            content = make()
        except Exception as exc:  # a page that cannot be generated fails the build, named
            raise RuntimeError(f"docs/_hooks.py could not generate {path}: {exc!r}") from exc
        files.append(File.generated(config, path, content=content))
    return files


_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")

#: What a how-to page may ask the hook to insert, in place, with a line
#: ``<!-- rc-generated: NAME [ARGUMENT] -->``: the same tables as the Reference section,
#: made from the same code, so a how-to page never lists options, fields or flags by hand
#: (tests/test_docs_site.py fails on a hand-written one).
GENERATED = {
    "options": lambda arg: _options_table(only_datasets=arg == "suite"),
    "plugin-options": lambda arg: _plugin_options_table(),
    "cli-help": lambda arg: _cli_help(arg or "-"),
    "gate-fields": lambda arg: _gate_fields_table(),
    "schema": lambda arg: _schema_table(arg),
}
_GENERATED = re.compile(r"^<!-- rc-generated: ([\w-]+)(?: (\S+))? -->$", re.M)


def expand_generated(markdown: str, where: str) -> str:
    """Replace each ``<!-- rc-generated: NAME [ARGUMENT] -->`` line by its generated table;
    an unknown name, or one that cannot be generated, fails the build naming the page."""

    def insert(m):
        name, arg = m.group(1), m.group(2)
        if name not in GENERATED:
            raise ValueError(f"{where}: unknown rc-generated table {name!r}: {sorted(GENERATED)}")
        try:
            return GENERATED[name](arg).rstrip("\n") + "\n"
        except Exception as exc:
            raise RuntimeError(f"{where}: could not generate {m.group(0)}: {exc!r}") from exc

    return _GENERATED.sub(insert, markdown)


def on_page_markdown(markdown, page, config, files):
    """Generated tables are inserted (``expand_generated``), and links to repository files
    outside docs/ become their repository path, once the file is shown to exist (a missing
    one warns: --strict fails)."""
    markdown = expand_generated(markdown, page.file.src_uri)
    docs = Path(config["docs_dir"]).resolve()
    here = posixpath.dirname(page.file.src_uri)

    def rewrite(m):
        text, target = m.group(1), m.group(2)
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            return m.group(0)
        path = target.split("#", 1)[0]
        resolved = (docs / here / path).resolve()
        try:
            resolved.relative_to(docs)
            return m.group(0)  # a docs page: mkdocs checks it
        except ValueError:
            pass
        if not resolved.exists():
            log.warning(
                "%s links to %s, which does not exist in the repository", page.file.src_uri, target
            )
            return m.group(0)
        rel = resolved.relative_to(ROOT).as_posix()
        return text if text.strip("`") == rel else f"{text} (`{rel}`)"

    # code blocks keep their text
    parts = re.split(r"(^```.*?^```)", markdown, flags=re.M | re.S)
    return "".join(p if p.startswith("```") else _LINK.sub(rewrite, p) for p in parts)
