"""Safe YAML loading that remembers where every value came from.

Suites are read with PyYAML's ``SafeLoader`` (no Python objects are ever built from
tags). Mappings come back as :class:`Node` dicts and sequences as :class:`NodeList`
lists that carry the 1-based line of themselves and of each key or item, so schema
errors can name the line. A key given twice in one mapping is an error (PyYAML would
silently keep the last one).

A suite is data, so loading it is bounded: nesting deeper than :data:`MAX_DEPTH`
levels, aliases that expand to more than :data:`MAX_NODES` values (a "billion laughs"
alias bomb: ten aliases of ten aliases of ...), an alias inside its own anchor and
integers longer than :data:`MAX_DIGITS` digits are refused with a :class:`SuiteError`
at their line while the document is composed, before anything is expanded, copied or
printed.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ..errors import SuiteError

__all__ = [
    "Node",
    "NodeList",
    "load_yaml",
    "short",
    "describe_value",
    "join_field",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_DIGITS",
    "MAX_BYTES",
]

#: Deepest nesting of mappings and lists a suite may have (aliases expanded).
MAX_DEPTH = 64
#: Most values (scalars, mappings, lists) a suite may hold once its aliases are expanded.
MAX_NODES = 100_000
#: Longest integer (in digits) a suite may write.
MAX_DIGITS = 100
#: Largest suite file read (bytes): a suite is a page of text, not data.
MAX_BYTES = 8 * 2**20
#: Longest rendering of a value inside an error message.
SHOWN = 80


def short(value, limit: int = SHOWN) -> str:
    """``repr(value)`` cut to ``limit`` characters, without ever rendering a big
    container in full (messages show a value, never a whole tree)."""
    if isinstance(value, (dict, list, tuple, set)):
        kind = "mapping" if isinstance(value, dict) else "list"
        n = len(value)
        return f"a {kind} of {n} item{'s' if n != 1 else ''}"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    cut = isinstance(value, str) and len(value) > limit
    text = repr(
        value[:limit] if cut else value
    )  # never repr a megabyte to show 80 characters of it
    if cut:
        return f"{text[: limit - 4]}...' ({len(value)} characters)"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Node(dict):
    """A YAML mapping; ``line`` is where it starts, ``key_lines[key]`` where each key is."""

    line: int | None = None
    key_lines: dict

    def line_of(self, key) -> int | None:
        return getattr(self, "key_lines", {}).get(key, self.line)


class NodeList(list):
    """A YAML sequence; ``line`` is where it starts, ``item_lines[i]`` where item i is."""

    line: int | None = None
    item_lines: list

    def line_of(self, index: int) -> int | None:
        lines = getattr(self, "item_lines", [])
        return lines[index] if 0 <= index < len(lines) else self.line


try:
    from yaml.cyaml import CParser as _CParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _CParser = None

if _CParser is not None:

    class _Base(
        yaml.composer.Composer, _CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver
    ):
        """PyYAML's safe loader with libyaml's scanner and parser (its C extension, where
        PyYAML has it) under PyYAML's own composer, so that the composer's hooks below
        (lines, depth and alias bounds) run as they do on the pure-Python parser: the
        same nodes, marks and errors, about 8x less CPU per suite read."""

        def __init__(self, stream):
            _CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

else:  # pragma: no cover - PyYAML built without libyaml
    _Base = yaml.SafeLoader


class _Loader(_Base):
    """SafeLoader that records lines, refuses duplicate keys and bounds what the
    document can expand to (depth, values behind aliases, digits).

    Booleans and numbers follow YAML 1.2's core schema: only true/false are booleans
    (YAML 1.1 also reads on, off, yes and no, which would turn a field named ``on``
    into True); ``1e-3`` is a float, ``010`` is ten and ``1:30`` a string.
    """

    def __init__(self, stream):
        super().__init__(stream)
        self._level = 0
        self._total = 0
        self._sizes: dict = {}  # id(node) -> (values once expanded, depth once expanded)

    def _refuse(self, message: str, mark) -> SuiteError:
        return SuiteError(message, path=self.name, line=mark.line + 1 if mark is not None else None)

    def construct_object(self, node, deep=False):
        """A value that its tag cannot read (``!!int abc``, ``!!timestamp 2020-13-45``,
        ``!!binary #``) is a SuiteError at its line, not the constructor's exception."""
        try:
            return super().construct_object(node, deep=deep)
        except (SuiteError, yaml.YAMLError):
            raise
        except (ValueError, TypeError, AttributeError, ArithmeticError, LookupError) as exc:
            tag = node.tag.rpartition(":")[2]
            shown = short(node.value) if isinstance(node, yaml.ScalarNode) else f"a {node.id}"
            raise SuiteError(
                f"cannot read {shown} as a YAML {tag} ({type(exc).__name__}); remove the '!!{tag}' tag "
                "or write a valid value.",
                path=self.name,
                line=node.start_mark.line + 1,
            ) from None

    def compose_node(self, parent, index):
        event = self.peek_event()
        mark = event.start_mark
        alias = isinstance(event, yaml.AliasEvent)
        if not alias:
            self._level += 1
            if self._level > MAX_DEPTH:
                raise self._refuse(
                    f"nesting deeper than {MAX_DEPTH} levels; a suite is a few levels deep "
                    "(flatten the value, or read big data from a file).",
                    mark,
                )
        try:
            node = super().compose_node(parent, index)
        finally:
            if not alias:
                self._level -= 1
        if alias:
            if id(node) not in self._sizes:  # its anchor is still open: the alias is inside it
                raise self._refuse(
                    f"alias *{event.anchor} is inside its own anchor &{event.anchor} (a value that "
                    "contains itself); write the value out.",
                    mark,
                )
            size, depth = self._sizes[id(node)]
            if self._level + depth > MAX_DEPTH:
                raise self._refuse(
                    f"alias *{event.anchor} nests values deeper than {MAX_DEPTH} levels once "
                    "expanded; a suite is a few levels deep.",
                    mark,
                )
        else:
            if isinstance(node, yaml.ScalarNode):
                size, depth = 1, 0
            else:
                children = (
                    node.value
                    if isinstance(node, yaml.SequenceNode)
                    else [c for pair in node.value for c in pair]
                )
                measured = [self._sizes[id(c)] for c in children]
                size = 1 + sum(m[0] for m in measured)
                depth = 1 + max((m[1] for m in measured), default=0)
            self._sizes[id(node)] = (size, depth)
        self._total += size if alias else 1
        if size > MAX_NODES or self._total > MAX_NODES:
            what = (
                f"alias *{event.anchor} expands to {size} values"
                if alias and size > MAX_NODES
                else "the aliases of this file expand to more than " + str(MAX_NODES) + " values"
            )
            raise self._refuse(
                f"{what}; a suite holds at most {MAX_NODES} (aliases of aliases multiply: an alias "
                "bomb?). Write the values out, or read big data from a file.",
                mark,
            )
        return node


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.yaml_implicit_resolvers = {
    first: [
        (tag, regexp)
        for tag, regexp in resolvers
        if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
    ]
    for first, resolvers in _Loader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
# YAML 1.2 core schema numbers: 1e-3 is a float, 010 is ten, 1:30 is a string
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)


def _int12(loader, node):
    text = loader.construct_scalar(node)
    digits = len(text.lstrip("+-"))
    if digits > MAX_DIGITS:
        raise SuiteError(
            f"an integer of {digits} digits; numbers in a suite have at most {MAX_DIGITS} "
            "(is it a threshold, a seed or a count? write a plausible value).",
            path=loader.name,
            line=node.start_mark.line + 1,
        )
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)


def _float12(loader, node):
    text = loader.construct_scalar(node).lower()
    if text.endswith(".inf"):
        return float("-inf") if text.startswith("-") else float("inf")
    if text.endswith(".nan"):
        return float("nan")
    return float(text)


_Loader.add_constructor("tag:yaml.org,2002:int", _int12)
_Loader.add_constructor("tag:yaml.org,2002:float", _float12)


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> Node:
    # keys written in this mapping, as opposed to keys merged in from '<<: *anchor'
    explicit = {id(k) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"}
    loader.flatten_mapping(node)  # merged pairs first, then the explicit ones
    out = Node()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    written: set = set()
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        try:
            hash(key)
        except TypeError:
            raise SuiteError(
                "a mapping key must be a scalar (a name), not a list or mapping.",
                path=loader.name,
                line=line,
            ) from None
        is_explicit = id(key_node) in explicit
        if key in out:
            if is_explicit and key in written:
                raise SuiteError(
                    f"key {key!r} appears twice in one mapping (first on line {out.key_lines[key]}); "
                    "remove one of them.",
                    path=loader.name,
                    line=line,
                )
            if not is_explicit:
                continue  # among merged mappings the first one wins, as YAML's merge key specifies
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = line
        if is_explicit:
            written.add(key)
    return out


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> NodeList:
    out = NodeList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def _named_character(problem: str, text: str, mark) -> str:
    """libyaml's "found character that cannot start any token" with the character named,
    as PyYAML's own scanner says it ("found character '\\t' that ..."): a tab is the
    usual one, and the message should say so."""
    if problem != "found character that cannot start any token" or mark is None:
        return problem
    lines = text.splitlines()
    if 0 <= mark.line < len(lines) and 0 <= mark.column < len(lines[mark.line]):
        return f"found character {lines[mark.line][mark.column]!r} that cannot start any token"
    return problem


def load_yaml(path) -> object:
    """Parse one YAML document safely; syntax errors become :class:`SuiteError` with the line."""
    p = Path(path)
    if p.is_dir():
        raise SuiteError(
            "this is a directory, not a suite file; give the path of a .yaml file (pytest collects "
            "rc_*.yaml files in a directory).",
            path=p,
        )
    if p.exists() and not p.is_file():
        raise SuiteError(
            "not a regular file (a device, pipe or socket); give the path of a .yaml file.", path=p
        )
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise SuiteError(
                f"the file is larger than {MAX_BYTES // 2**20} MiB; a suite is a page of text (arrays "
                "belong in .npz/.safetensors files that the suite names).",
                path=p,
            )
        text = raw.decode("utf-8")
    except OSError as exc:
        raise SuiteError(f"cannot read the file ({exc.strerror or exc}).", path=p) from None
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise SuiteError(
            f"the file is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8.",
            path=p,
            line=line,
        ) from None
    loader = None
    try:
        loader = _Loader(text)  # PyYAML's own reader refuses a control character here
        loader.name = str(p)
        data = loader.get_single_data()  # None for an empty file
    except SuiteError:
        raise
    except yaml.reader.ReaderError as exc:  # a control character (libyaml: when it reaches it)
        code = exc.character if isinstance(exc.character, int) else None
        at = text.find(chr(code)) if code is not None else -1
        raise SuiteError(
            (f"the file holds a control character (#x{code:04x}), " if code is not None else "")
            + "which YAML does not allow; remove it (in a double-quoted string, write it as an "
            "escape such as \\x01).",
            path=p,
            line=text.count("\n", 0, at) + 1 if at >= 0 else None,
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = _named_character(exc.problem or "invalid YAML", text, mark)
        context = f" ({exc.context}" if exc.context else ""
        if (
            context
            and exc.context_mark is not None
            and mark is not None
            and exc.context_mark.line != mark.line
        ):
            context += f" that starts on line {exc.context_mark.line + 1}"
        context += ")" if context else ""
        tag_hint = ""
        if "could not determine a constructor" in str(exc):
            tag_hint = "; suites are read with safe YAML: remove the '!' tag (Python objects are never built)"
        raise SuiteError(
            f"YAML syntax error: {problem}{context}{tag_hint}.", path=p, line=line
        ) from None
    except yaml.YAMLError as exc:
        raise SuiteError(f"YAML error: {short(str(exc), 200)}.", path=p) from None
    except RecursionError:  # a safety net: the composer bounds nesting first
        raise SuiteError(
            f"nesting too deep; a suite is a few levels deep (at most {MAX_DEPTH}).", path=p
        ) from None
    finally:
        if loader is not None:
            loader.dispose()
    return data


def join_field(field: str, key) -> str:
    """A field's dotted path: ``join_field("model", "kind")`` is ``model.kind``."""
    return f"{field}.{key}" if field else str(key)


def describe_value(value) -> str:
    """What was found, in a few words (at most ~80 characters of the value itself)."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "an empty mapping ({})" if not value else "a mapping"
    if isinstance(value, list):
        return "an empty list ([])" if not value else "a list"
    return f"{type(value).__name__} {short(value)}"
