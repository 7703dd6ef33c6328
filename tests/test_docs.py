"""The docs site builds with --strict (what scripts/docs runs), so that a broken
link or anchor, a page left out of the nav, or a reference page naming an
API that is gone fails the suite; and the README stays a landing page."""

import os
import re
import shutil
import subprocess
import sys

import pytest
from doc_pages import ROOT, page_text, pages

LINK = re.compile(r"\]\(([^)\s]+)\)")
#: A path of the repository in backticks: `tests/test_x.py`, `redflow/core/keys.py`, `store/lua/x.lua` (under redflow/).
REPO_PATH = re.compile(r"`((?:tests|redflow|bench|examples|scripts|docs|store|engine|core|ops)/[\w./-]*[\w/])(?:::[\w\[\]-]+)?`")


def build(site_dir, root=ROOT):
    """``mkdocs build --strict`` of ``root``'s mkdocs.yml, as scripts/docs runs it."""
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(root / "mkdocs.yml"), "--site-dir", str(site_dir)]
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONWARNINGS="ignore")  # warnings are mkdocs's to report
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # 8-20 s: started first (tests/parallel.py), so that it does not run alone at the end
def test_the_docs_site_builds_strictly(tmp_path):
    done = build(tmp_path / "site")
    assert done.returncode == 0, done.stderr
    reference = (tmp_path / "site" / "reference" / "client" / "index.html").read_text()
    assert 'id="redflow.client.RedflowClient.run"' in reference  # generated from the docstrings


BREAKAGES = {
    "guide/steps.md": ("[a page that is not there](gone.md)", "'gone.md'"),
    "guide/client.md": ("[a section that is not there](#gone)", "'#gone'"),
    "guide/waits.md": ("[`client.gone`][redflow.client.RedflowClient.gone]", "'redflow.client.RedflowClient.gone'"),
}


@pytest.mark.slow  # 8-20 s: started first (tests/parallel.py), so that it does not run alone at the end
def test_a_broken_link_anchor_or_api_reference_fails_the_build(tmp_path):
    """The same config on a copy of the docs with three things broken: each is reported, and the build fails."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "redflow").symlink_to(ROOT / "redflow")
    for page, (text, _) in BREAKAGES.items():
        with (tmp_path / "docs" / page).open("a") as out:
            out.write(f"\n{text}\n")
    done = build(tmp_path / "site", root=tmp_path)
    assert done.returncode != 0
    assert [complaint for _, complaint in BREAKAGES.values() if complaint not in done.stderr] == [], done.stderr


def test_the_readme_is_a_landing_page():
    readme = page_text("README.md")
    assert len(readme.splitlines()) <= 300
    assert "scripts/demo" in readme and "scripts/test" in readme and "<!-- suite-time -->" in readme


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub and mkdocs's toc make it (for the headings here)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_links_to_pages_and_sections_that_exist():
    """The README is not part of the site, so mkdocs does not check its links: this does."""
    broken = []
    for target in LINK.findall(page_text("README.md")):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        page = ROOT / path
        headings = [line.lstrip("#") for line in page.read_text().splitlines() if line.startswith("#")] if page.is_file() else []
        if not page.exists() or (anchor and anchor not in [slug(h) for h in headings]):
            broken.append(target)
    assert broken == []


def test_the_files_the_pages_name_exist():
    """Code moves (redflow/ops was reorganized): a page naming a file that is gone fails here."""
    missing = [
        f"{page.relative_to(ROOT)}: {path}"
        for page in pages()
        for path in REPO_PATH.findall(page.read_text())
        if not (ROOT / path).exists() and not (ROOT / "redflow" / path).exists()
    ]
    assert missing == []
