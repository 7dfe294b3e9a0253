"""The guide as a user reads it: every relative link (and its #anchor) in README.md and docs/
resolves, and every code block marked runnable runs.

A block is marked by an HTML comment on the line before its fence:

- ``<!-- runnable -->`` before ```sh (run with bash -euo pipefail), ```sql (psql with
  ON_ERROR_STOP) or ```python (the venv's python);
- ``<!-- file: NAME -->`` before any block: written to NAME for later blocks to use.

The blocks of one page run in order, in one scratch directory, against one fresh database
(``$DATABASE_URL``), with the ``remuda`` binary of this checkout first on ``PATH``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = re.compile(r"^<!--\s*(runnable|file:\s*(?P<name>[^\s]+))\s*-->\s*$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
TIMEOUT = 180


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    text: str
    runnable: bool
    file: str | None


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of `page` that carry a mark."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = lines[i].strip()
        if fence.startswith("```"):
            lang = fence[3:].strip().split(" ")[0].split(",")[0]
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith("```"):
                end += 1
            mark = MARK.match(lines[i - 1].strip()) if i > 0 else None
            if mark:
                found.append(
                    Block(
                        page=page,
                        line=i + 1,
                        lang=lang,
                        text="\n".join(lines[i + 1 : end]) + "\n",
                        runnable=mark.group(1) == "runnable",
                        file=mark.group("name"),
                    )
                )
            i = end + 1
        else:
            i += 1
    return found


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`|\*|_(?=\w)|(?<=\w)_", "", heading.strip()).lower()
    kept: list[str] = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LN":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    in_fence = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    in_fence = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            out.append((number, target))
    return out


def test_every_relative_link_and_anchor_resolves() -> None:
    broken: list[str] = []
    for page in PAGES:
        for number, target in links(page):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}:{number}: {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where} (no heading with that anchor)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_guide_marks_examples_that_run() -> None:
    marked = [b for page in PAGES for b in blocks(page) if b.runnable]
    assert len(marked) >= 20, f"only {len(marked)} runnable blocks: the guide lost its examples"
    assert all(b.lang in ("sh", "sql", "python") for b in marked), [
        (str(b.page), b.line, b.lang) for b in marked if b.lang not in ("sh", "sql", "python")
    ]


def remuda_binary() -> Path:
    given = os.environ.get("REMUDA_BIN")
    if given:
        return Path(given)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "remuda"


RUNNABLE = [p for p in PAGES if any(b.runnable for b in blocks(p))]


@pytest.mark.parametrize("page", RUNNABLE, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE])
def test_the_runnable_examples_of_a_page_run(
    page: Path, database_url: str, tmp_path: Path
) -> None:
    binary = remuda_binary()
    if not binary.exists():
        pytest.fail(f"no remuda binary at {binary}: build it (cargo build -p remuda-cli)")
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(
        [str(binary.parent), str(Path(sys.executable).parent), env.get("PATH", "")]
    )
    env["DATABASE_URL"] = database_url
    env.pop("REMUDA_HOME", None)
    for block in blocks(page):
        where = f"{page.relative_to(ROOT)}:{block.line} ({block.lang})"
        if block.file:
            (tmp_path / block.file).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / block.file).write_text(block.text, encoding="utf-8")
            continue
        if block.lang == "sh":
            argv = ["bash", "-euo", "pipefail", "-c", block.text]
        elif block.lang == "sql":
            argv = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", libpq(database_url), "-c", block.text]
        else:
            script = tmp_path / f"block_{block.line}.py"
            script.write_text(block.text, encoding="utf-8")
            argv = [sys.executable, str(script)]
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT
        )
        assert done.returncode == 0, (
            f"{where} exited {done.returncode}\n--- block\n{block.text}"
            f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        )


def libpq(url: str) -> str:
    from conftest import libpq as plain

    return plain(url)
