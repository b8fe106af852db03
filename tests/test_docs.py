"""The documentation holds together: README.md is a short front page, and docs/ is the manual it links to.

* README.md has at most 300 lines;
* every relative link in README.md and docs/*.md points to a file that exists, and a link with an #anchor to a
  heading of that page (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens);
* every page docs/*.md is linked from README.md.

Links and headings inside fenced code blocks and inline code do not count. The checker is tested too, on a
small tree with each kind of mistake.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

README_MAX_LINES = 300

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
INLINE_CODE = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:, ...


def prose_lines(text: str) -> list[str]:
    """The lines of a markdown text outside fenced code blocks."""
    lines, fence = [], None
    for line in text.splitlines():
        match = FENCE.match(line)
        if fence is None:
            # A backtick fence's info string may not contain a backtick: "```` ```python ```` block" is prose.
            if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                fence = match.group(1)
                continue
            lines.append(line)
        elif (
            match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) and not match.group(2).strip()
        ):
            fence = None
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text, lower case, without punctuation, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors on its text
    text = re.sub(r"[^\w\- ]", "", text.replace("`", "").lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page has, numbered as GitHub numbers repeated headings (x, x-1, x-2, ...)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(path.read_text()):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    """The targets of a page's links and images, leaving out those inside code."""
    lines = (INLINE_CODE.sub("", line) for line in prose_lines(path.read_text()))
    return [match.group(1) for line in lines for match in LINK.finditer(line)]


def broken_links(path: Path) -> list[str]:
    """The relative links of a markdown file whose target file, or heading, does not exist."""
    broken = []
    for target in links(path):
        if EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {resolved.name}")
    return broken


def pages_not_linked(readme: Path, docs: Path) -> list[str]:
    linked = {(readme.parent / target.partition("#")[0]).resolve() for target in links(readme)}
    return sorted(page.name for page in docs.glob("*.md") if page.resolve() not in linked)


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_the_readme_is_a_front_page():
    lines = len((REPO / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference text into docs/"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_resolves(path):
    broken = broken_links(path)
    assert not broken, f"broken links in {path.relative_to(REPO)}:\n" + "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    pages = sorted((REPO / "docs").glob("*.md"))
    assert pages, "docs/ has no pages"
    missing = pages_not_linked(REPO / "README.md", REPO / "docs")
    assert not missing, f"docs pages the README does not link to: {missing}"


def test_the_checker_finds_each_kind_of_mistake(tmp_path):
    """A missing file, a missing heading and an unlinked page are found; code, external links and fine links
    are not."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "img").mkdir()
    (docs / "img" / "plot.png").write_bytes(b"")
    (docs / "guide.md").write_text(
        "# The guide\n\n## Where a GRPO step's time goes\n\n## `make demo`: what it shows\n\n## Setup\n\n## Setup\n\n"
        "![plot](img/plot.png) [back](../README.md) [self](#setup-1) [gone](#nowhere)\n"
    )
    (docs / "orphan.md").write_text("# Nobody links here\n")
    (tmp_path / "README.md").write_text(
        "# Project\n\n"
        "[guide](docs/guide.md#where-a-grpo-steps-time-goes) [demo](docs/guide.md#make-demo-what-it-shows)\n"
        "[web](https://example.org/missing.md) [missing](docs/missing.md) [bad anchor](docs/guide.md#layout)\n"
        "`[in code](docs/nothing.md)`\n\n"
        "```bash\n# not a heading\n[in a block](docs/nothing.md)\n```\n\n"
        "```` ```python ```` is inline code, not a fence: [after it](docs/guide.md#setup)\n"
    )
    assert "make-demo-what-it-shows" in anchors(docs / "guide.md")
    assert {"setup", "setup-1"} <= anchors(docs / "guide.md")
    readme_broken = broken_links(tmp_path / "README.md")
    assert [line.split(":")[0] for line in readme_broken] == ["docs/missing.md", "docs/guide.md#layout"]
    assert [line.split(":")[0] for line in broken_links(docs / "guide.md")] == ["#nowhere"]
    assert pages_not_linked(tmp_path / "README.md", docs) == ["orphan.md"]
