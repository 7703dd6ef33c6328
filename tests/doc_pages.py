"""The Python examples of README.md and docs/, found by the marker before each.

Every ```python block carries, on the line before it, one of:

- ``<!-- runnable: NAME -->`` or ``<!-- runnable: NAME after OTHER -->``: a
  script that runs as written (after the block named OTHER, in one script);
- ``<!-- excerpt: PATH -->``: lines of the file PATH (which its own test runs);
- ``<!-- fragment -->`` (with an optional note): a piece of a program, not run.

tests/test_docs_examples.py runs the runnable ones and checks the others.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MARKER = re.compile(r"^\s*<!--\s*(runnable|excerpt|fragment)\b:?\s*(.*?)\s*-->\s*$")
FENCE_OPEN = re.compile(r"^(\s*)```(?:python|py|pycon)\s*$")


@dataclass(frozen=True)
class Block:
    """One ```python block: where it is, its marker (kind None: unmarked) and its code."""

    page: Path
    line: int
    kind: str | None
    argument: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def name(self) -> str:
        return self.argument.split()[0] if self.kind == "runnable" and self.argument else ""

    @property
    def after(self) -> str | None:
        words = self.argument.split()
        return words[2] if self.kind == "runnable" and len(words) == 3 and words[1] == "after" else None


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def page_text(relative: str) -> str:
    return (ROOT / relative).read_text(encoding="utf-8")


def blocks_of(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    index = 0
    while index < len(lines):
        opening = FENCE_OPEN.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
        marker = MARKER.match(lines[index - 1]) if index > 0 else None
        code = textwrap.dedent("\n".join(lines[index + 1 : end])) + "\n"
        kind, argument = (marker.group(1), marker.group(2)) if marker else (None, "")
        found.append(Block(page, index + 1, kind, argument, code))
        index = end + 1
    return found


def python_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks_of(page)]


def runnable_blocks() -> dict[str, Block]:
    return {block.name: block for block in python_blocks() if block.kind == "runnable"}


def script_of(block: Block, runnable: dict[str, Block]) -> str:
    """The block's code, after the code of the block it runs after (and so on)."""
    before = script_of(runnable[block.after], runnable) if block.after else ""
    return before + block.code
