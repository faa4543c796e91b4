"""The README's Python examples run as written (so the README cannot drift from the code)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code: str) -> None:
    exec(compile(code, str(README), "exec"), {})


def test_readme_starts_with_the_two_commands() -> None:
    first = re.search(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    assert first is not None
    commands = first.group(1).strip().splitlines()
    assert commands == [
        "pip install -e . && agentledger demo",
        'pip install -e ".[dev]" && python -m pytest',
    ]
