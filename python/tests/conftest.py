"""The plugin's own suite: real servers (testdata/servers/asyncio_lines.py), the installed
wheel's binary. Run from the repository (python/tests), or anywhere with TCPDOCTOR_REPO set."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO = Path(os.environ.get("TCPDOCTOR_REPO", Path(__file__).resolve().parents[2]))
SERVER = REPO / "testdata" / "servers" / "asyncio_lines.py"

#: `run --preset line` parameters for asyncio_lines.py: one request line, 12 rows and a "."
LINE = {"request": "ROWS", "terminator": "\\n", "until_line": r"^\.\r?$"}


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def lines_server() -> Path:
    assert SERVER.is_file(), f"no {SERVER}: set TCPDOCTOR_REPO to the checkout"
    return SERVER
