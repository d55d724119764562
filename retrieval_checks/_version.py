"""The package's version, in a module that imports nothing: the command line's
``--version`` (``tracking._cli``, which the package imports before it has finished)
reads it at import time, as ``retrieval_checks.__version__`` does."""

__version__ = "0.1.0"
