"""Style is checked by ruff, not by review: `ruff check` (pyflakes, pycodestyle, import order,
a few bugbear rules) and `ruff format --check`, configured in pyproject.toml. Cost: ~1 s."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (pip install -e .[test] installs it)")
    return [found]


@pytest.mark.parametrize(
    "args", [["check", "."], ["format", "--check", "."]], ids=["check", "format"]
)
def test_ruff_passes(args):
    done = subprocess.run([*_ruff(), *args], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, (
        f"ruff {' '.join(args)} failed; run `ruff format . && ruff check --fix .` and review:\n"
        + done.stdout[-4000:]
        + done.stderr[-2000:]
    )
