"""The Python examples of docs/api.md run as written, top to bottom in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


@pytest.mark.slow
def test_api_examples_run(tmp_path, monkeypatch, capsys):
    blocks = python_blocks(DOCS / "api.md")
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)  # the examples write runs/ here
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/api.md block {i + 1}", "exec"), namespace)
    assert (tmp_path / "runs" / "h2-api" / "summary.json").is_file()
    assert "-8.070548" in capsys.readouterr().out
