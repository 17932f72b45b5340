"""The documentation site builds with ``mkdocs build --strict``: a broken link, a missing anchor,
a page left out of the nav or a nav entry with no page fails the build, and so this test.
mkdocs comes with the test extra; without it the test skips on a developer machine and fails in
CI (``CI=true``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.support.prerequisites import REPO, require_module


def _build(site_dir) -> subprocess.CompletedProcess:
    require_module("mkdocs")
    require_module("material")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_docs_build_strict(tmp_path):
    result = _build(tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    # every page of docs/ is in the nav and was built
    pages = sorted(p.stem for p in (REPO / "docs").glob("*.md"))
    assert len(pages) >= 15
    for stem in pages:
        built = tmp_path / "site" / ("index.html" if stem == "index" else f"{stem}/index.html")
        assert built.exists(), f"docs/{stem}.md was not built"


def test_a_broken_link_fails_the_build(tmp_path):
    """The strict build is able to fail: the same configuration with one page linking to a page
    that does not exist is refused."""
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copy(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    page = copy / "docs" / "concepts.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [nowhere](no-such-page.md).\n", encoding="utf-8")
    require_module("mkdocs")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=copy, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert re.search(r"no-such-page\.md", result.stdout + result.stderr)
    # a page nobody can reach from the nav fails too
    page.write_text(page.read_text(encoding="utf-8").replace("\nSee [nowhere](no-such-page.md).\n", ""), encoding="utf-8")
    (copy / "docs" / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=copy, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "orphan.md" in result.stdout + result.stderr


def test_readme_links_and_images_resolve():
    """mkdocs does not read the README: its relative links and images are checked here, and its
    screenshots stay small."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert len(local) >= 15
    for target in local:
        path = (REPO / target.split("#", 1)[0])
        assert path.exists(), f"README links to {target}, which does not exist"
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert 2 <= len(images) <= 3
    for image in images:
        assert (REPO / image).stat().st_size < 150_000, f"{image} is over 150 KB"
    assert len(text.splitlines()) <= 200, "README.md is over 200 lines: move the detail to docs/"
