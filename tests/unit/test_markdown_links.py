"""README.md and ARCHITECTURE.md link only to files that exist in the repository (the documentation
under docs/ is checked by `mkdocs build --strict` in scripts/test; these two files are outside it)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def relative_links(text: str) -> list[str]:
    """The targets of the Markdown links and images outside fenced code, without their #anchor;
    absolute URLs (scheme:...) and links within the page (#...) are left out."""
    targets, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
                continue
            targets.append(target.split("#", 1)[0])
    return targets


def test_the_link_parser() -> None:
    text = ("see [docs](docs/index.md#top), ![chart](bench/charts/a.png \"title\"), [web](https://x.org),\n"
            "[here](#anchor), `[not](code.md)`\n```\n[not](fenced.md)\n```\n")
    assert relative_links(text) == ["docs/index.md", "bench/charts/a.png"]


@pytest.mark.parametrize("name", ["README.md", "ARCHITECTURE.md"])
def test_relative_links_point_at_existing_files(name: str) -> None:
    page = ROOT / name
    missing = [t for t in relative_links(page.read_text()) if not (page.parent / t).exists()]
    assert not missing, f"{name} links to files that do not exist: {missing}"


def test_the_readme_links_into_every_documentation_page() -> None:
    """The landing page leads to every page of the documentation's nav."""
    import yaml

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in pages(item)]
        if isinstance(nav, dict):
            return [p for value in nav.values() for p in pages(value)]
        return []

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    linked = set(relative_links((ROOT / "README.md").read_text()))
    assert {f"docs/{p}" for p in pages(config["nav"])} <= linked
