"""Every relative link in the root's and docs/'s Markdown resolves, #anchors included, and
every `python -m MODULE` they name is a module of this repository that runs.

Anchors are GitHub's heading slugs: the heading's text as rendered (code spans and link
targets dropped, their text kept), lowercased, punctuation dropped, spaces -> '-', and a
repeated slug numbered -1, -2, ... Links inside fenced code blocks and code spans are text.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) and ![alt](target); the target stops at whitespace or ')' (a title follows).
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
# `python -m X`, `python3 -m X`, `.venv/bin/python -m X`, in prose and in code blocks alike.
PYTHON_M = re.compile(r"\bpython[0-9.]* -m ([A-Za-z_][\w.]*)")
# Modules from outside the repository that the docs may run.
OUTSIDE_MODULES = frozenset({"pip", "pytest", "venv"})


@dataclass(frozen=True)
class Link:
    source: Path
    line: int
    target: str


def markdown_files() -> list[Path]:
    return sorted([*ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md")])


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading: str) -> str:
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> Iterator[Link]:
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            target = match.group(1)
            if not EXTERNAL.match(target):
                yield Link(path, number, target)


def broken(link: Link) -> str | None:
    """Why the link does not resolve, or None when it does."""
    file_part, _, anchor = link.target.partition("#")
    target = (link.source.parent / file_part).resolve() if file_part else link.source
    if not target.exists():
        return f"no file {file_part}"
    if anchor and target.suffix == ".md" and anchor not in anchors(target):
        return f"no heading #{anchor} in {target.name}"
    return None


def all_links() -> list[Link]:
    return [link for path in markdown_files() for link in links(path)]


def test_the_docs_exist_and_have_links():
    names = {path.relative_to(ROOT).as_posix() for path in markdown_files()}
    assert {"README.md", "ARCHITECTURE.md"} <= names
    assert len([n for n in names if n.startswith("docs/")]) >= 3
    assert len(all_links()) > 20


def test_every_relative_link_resolves():
    problems = [
        f"{link.source.relative_to(ROOT)}:{link.line}: ({link.target}) {why}"
        for link in all_links()
        if (why := broken(link))
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("The main job: `make demo`", "the-main-job-make-demo"),
        ("Play: a UCI engine and tournaments", "play-a-uci-engine-and-tournaments"),
        ("Benchmarks (this machine: 2 cores, no GPU)", "benchmarks-this-machine-2-cores-no-gpu"),
        ("What Elo is it: `make elo`", "what-elo-is-it-make-elo"),
    ],
)
def test_slug_follows_github(heading, expected):
    assert slug(heading) == expected


def test_a_broken_anchor_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n## A part\n\n[ok](#a-part) [bad](#gone) [file](other.md)\n")
    found = [broken(link) for link in links(page)]
    assert found == [None, "no heading #gone in page.md", "no file other.md"]


@dataclass(frozen=True)
class ModuleRun:
    source: Path
    line: int
    module: str


def module_runs(path: Path) -> Iterator[ModuleRun]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for match in PYTHON_M.finditer(line):
            yield ModuleRun(path, number, match.group(1).rstrip("."))


def runnable(module: str, root: Path = ROOT) -> bool:
    """Whether `python -m module` finds something to run here: a module file, or a package
    with a __main__.py, in the repository; or one of OUTSIDE_MODULES."""
    if module in OUTSIDE_MODULES:
        return True
    where = root.joinpath(*module.split("."))
    return where.with_suffix(".py").is_file() or (where / "__main__.py").is_file()


def test_every_python_m_module_exists():
    runs = [run for path in markdown_files() for run in module_runs(path)]
    assert len(runs) > 20
    problems = [
        f"{run.source.relative_to(ROOT)}:{run.line}: python -m {run.module}: no such module"
        for run in runs
        if not runnable(run.module)
    ]
    assert not problems, "\n".join(problems)


def test_a_missing_python_m_module_is_found(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "tool.py").write_text("")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__main__.py").write_text("")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("")
    page = tmp_path / "page.md"
    page.write_text(
        "Run `python -m pkg.tool` or `python -m pkg.gone`.\n"
        "```sh\n.venv/bin/python -m app\npython3 -m lib\npython -m pytest -q\n```\n"
    )
    found = {run.module: runnable(run.module, tmp_path) for run in module_runs(page)}
    assert found == {"pkg.tool": True, "pkg.gone": False, "app": True, "lib": False, "pytest": True}
