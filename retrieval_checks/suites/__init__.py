"""YAML suites: safe line-tracking loading, the schema (``load_suite`` with
file:line:field errors, ``suite_errors`` with every error of a file) and running their
cases (``SuiteRunner``)."""

from ._run import SuiteRunner
from ._schema import Case, Check, Dataset, Model, Source, Suite, load_suite, suite_errors
from ._yaml import Node, NodeList, load_yaml

__all__ = [
    "load_suite",
    "suite_errors",
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
