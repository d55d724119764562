"""YAML suites: safe line-tracking loading, the schema (``load_suite`` with
file:line:field errors) and running their cases (``SuiteRunner``)."""

from ._run import SuiteRunner
from ._schema import Case, Check, Dataset, Model, Source, Suite, load_suite
from ._yaml import Node, NodeList, load_yaml

__all__ = [
    "load_suite",
    "Suite",
    "Case",
    "Check",
    "Dataset",
    "Model",
    "Source",
    "SuiteRunner",
    "load_yaml",
    "Node",
    "NodeList",
]
