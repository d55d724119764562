"""Shared test setup: the oracles (``reference.py``, a dense brute-force implementation)
are importable from every layer's tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
