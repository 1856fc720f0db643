"""Run the lit + FileCheck suite in test_ir/ from pytest, one pytest test per lit file."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TEST_IR = Path(__file__).resolve().parents[1] / "test_ir"
LIT_FILES = sorted(
    p
    for p in TEST_IR.rglob("*.mlir")
    if not {"corpus", "Inputs", "Output"} & set(p.relative_to(TEST_IR).parts)
)


def test_lit_suite_found():
    assert len(LIT_FILES) >= 4
    assert shutil.which("filecheck"), "filecheck (PyPI) must be installed: pip install -e '.[test]'"


@pytest.mark.parametrize("path", LIT_FILES, ids=lambda p: str(p.relative_to(TEST_IR)))
def test_lit(path: Path):
    proc = subprocess.run(
        [sys.executable, "-c", "from lit.main import main; main()", "-v", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "Passed: 1" in proc.stdout
