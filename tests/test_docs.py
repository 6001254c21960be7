"""The README is a user's guide that points into docs/: its links resolve, its commands exist.

Every relative markdown link in README.md and docs/*.md must name an existing file (and,
with a #fragment into a markdown file, an existing heading there); the README must show
the two main commands and list every stage `./run.sh` knows, and stay short enough to
read as a guide.
"""

import re
import subprocess
from pathlib import Path

import pytest

from submission.variants import VARIANTS

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README] + sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def outside_code(text):
    """The lines of a markdown text outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(path):
    """GitHub's ids of a markdown file's headings: lower case, punctuation dropped, spaces to hyphens."""
    ids = set()
    for line in outside_code(path.read_text(encoding="utf-8")):
        m = re.match(r"#{1,6} (.*)", line)
        if m:
            ids.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return ids


def relative_links(path):
    links = []
    for line in outside_code(path.read_text(encoding="utf-8")):
        links += [t for t in LINK.findall(line) if not re.match(r"[a-z]+:", t)]  # http:, https:, mailto:
    return links


def test_docs_pages_exist_and_the_readme_links_each():
    names = {p.name for p in PAGES[1:]}
    assert {"quick-preset.md", "speed.md", "design.md", "variants.md", "when-things-go-wrong.md"} <= names
    linked = {(README.parent / t.split("#")[0]).resolve() for t in relative_links(README) if not t.startswith("#")}
    assert set(p.resolve() for p in PAGES[1:]) <= linked, "a docs page the README does not link"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page):
    for target in relative_links(page):
        file, _, fragment = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        assert dest.exists(), f"{page.relative_to(ROOT)}: link to {target}: no such file"
        if fragment and dest.suffix == ".md":
            assert fragment in anchors(dest), f"{page.relative_to(ROOT)}: link to {target}: no such heading"


def test_anchors_follow_github_rules():
    """The checker's own slugs, on headings whose ids GitHub is known to give."""
    assert {"the-whole-course-table-runsh-reproduce", "using-the-courses-files",
            "recipes-and-the-truncation-cap"} <= anchors(README)


def test_readme_shows_the_two_main_commands():
    text = README.read_text(encoding="utf-8")
    block = text.split("```")[1]  # the first code block: what a newcomer types
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["./run.sh quickstart", "./run.sh test"]


def run_sh_stages():
    """The stages in `./run.sh`'s usage (an unknown stage prints it), aliases included."""
    r = subprocess.run(["bash", str(ROOT / "run.sh")], capture_output=True, text=True, timeout=60)
    stages = set()
    for line in r.stderr.splitlines():
        m = re.match(r"  ([a-z_]+)\b", line)  # a stage starts its line after two spaces
        if m:
            stages.add(m.group(1))
        stages.update(re.findall(r"\(also: ([a-z_]+)\)", line))
    return stages


def expand(token):
    """`<variant>_eval_{dev,test}_with_pretrain [FLAGS]` -> every stage name it stands for."""
    name = token.split()[0] if token.strip() else ""
    names = [name.replace("<variant>", v) for v in VARIANTS] if "<variant>" in name else [name]
    out = set()
    for n in names:
        m = re.search(r"\{([^}]*)\}", n)
        out |= {n[:m.start()] + c + n[m.end():] for c in m.group(1).split(",")} if m else {n}
    return out


def test_readme_lists_every_stage_of_run_sh():
    stages = run_sh_stages()
    assert {"quickstart", "test", "reproduce", "vanilla_pretrain", "perceiver_eval_test_with_pretrain",
            "vanilla_finetime_without_pretrain", "plot"} <= stages  # the usage was read
    mentioned = set()
    for line in outside_code(README.read_text(encoding="utf-8")):
        for token in re.findall(r"`([^`]+)`", line):
            mentioned |= expand(token)
    assert not stages - mentioned, f"stages the README does not mention: {sorted(stages - mentioned)}"


def test_readme_is_a_short_guide():
    """About 150 lines: measurements and history belong in docs/."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 160
