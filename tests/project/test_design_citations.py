"""Code and tests cite the repository's own design (docs/design.md) and decision records
(docs/decisions/), never a file outside the repository, and only sections and records that
exist there."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"docs/design\.md sections? (\d+)(?:(?:-| and |, )(\d+))?")


RECORD = re.compile(r"docs/decisions/([0-9]{4}-[a-z0-9-]+\.md)")
RETIRED = re.compile(r"docs/decisions\.md")


def _sources() -> list[Path]:
    return [p for d in ("placet", "tests", "bench", "examples") for p in (REPO / d).rglob("*.py")]


def _texts() -> list[Path]:
    """Every file that may cite a decision: the sources, the Makefile and the docs."""
    docs = [*(REPO / "docs").rglob("*.md"), REPO / "README.md", REPO / "Makefile"]
    changelog = REPO / "CHANGELOG.md"
    return [*_sources(), *docs, *([changelog] if changelog.exists() else [])]


def test_code_cites_only_existing_sections_of_the_design_in_the_repository() -> None:
    design = (REPO / "docs" / "design.md").read_text()
    sections = {int(n) for n in re.findall(r"^## (\d+)\.", design, flags=re.M)}
    assert sections == set(range(1, max(sections) + 1))
    outside, unknown = [], []
    for path in _sources():
        if path.name == Path(__file__).name:
            continue
        text = path.read_text()
        if re.search(r"(?<!docs/)DESIGN\.md|\.\./shared/", text):
            outside.append(str(path.relative_to(REPO)))
        for m in CITATION.finditer(text):
            cited = {int(g) for g in m.groups() if g}
            if not cited <= sections:
                unknown.append(f"{path.relative_to(REPO)}: {m.group(0)}")
    assert outside == [], f"cite docs/design.md, not a file outside the repository: {outside}"
    assert unknown == [], f"no such section in docs/design.md: {unknown}"


NAMED = re.compile(CITATION.pattern + r', "([^"]+)"')


def test_a_cited_rule_name_is_a_rule_of_the_cited_section() -> None:
    """`docs/design.md section 9, "Digest choice"` names a bold rule (`- **Digest choice**`)
    of section 9; case and a shortened name ("Risk flags") are fine."""
    design = (REPO / "docs" / "design.md").read_text()
    parts = re.split(r"^## (\d+)\.", design, flags=re.M)
    rules = {
        int(n): re.findall(r"\*\*([^*]+)\*\*", body.lower())
        for n, body in zip(parts[1::2], parts[2::2], strict=True)
    }
    missing = []
    for path in _sources():
        for m in NAMED.finditer(path.read_text()):
            *numbers, quoted = m.groups()
            name = " ".join(quoted.split())
            cited = [int(g) for g in numbers if g]
            names = [r for n in cited for r in rules.get(n, [])]
            if not any(r.startswith(name.lower()) for r in names):
                missing.append(f"{path.relative_to(REPO)}: {' '.join(m.group(0).split())}")
    assert missing == [], f"no such rule in the cited section of docs/design.md: {missing}"


def test_a_cited_decision_record_exists_and_the_retired_file_is_not_cited() -> None:
    """`docs/decisions/0015-reply-budget.md` names a record in docs/decisions/; the single
    decisions file it replaced is cited nowhere."""
    records = {p.name for p in (REPO / "docs" / "decisions").glob("[0-9]*.md")}
    missing, retired = [], []
    for path in _texts():
        if path.name == Path(__file__).name:
            continue
        text = path.read_text()
        where = str(path.relative_to(REPO))
        missing += [
            f"{where}: {m.group(1)}" for m in RECORD.finditer(text) if m.group(1) not in records
        ]
        if RETIRED.search(text):
            retired.append(where)
    assert missing == [], f"no such record in docs/decisions/: {missing}"
    assert retired == [], f"cite a record in docs/decisions/, not docs/decisions.md: {retired}"


def test_the_decision_index_lists_every_record() -> None:
    folder = REPO / "docs" / "decisions"
    index = (folder / "README.md").read_text()
    records = sorted(p.name for p in folder.glob("[0-9]*.md"))
    assert records, "docs/decisions/ holds no record"
    assert [r for r in records if f"]({r})" not in index] == []
    numbers = [r[:4] for r in records]
    assert len(set(numbers)) == len(numbers), f"two records share a number: {numbers}"
