"""docs/ci.md's CI jobs run in their shapes against the simulator (issue 36 item 3): the GitLab
job's script lines in one shell, with its File-type variables written as GitLab writes them
(0644: pvefix, like OpenSSH, refuses such a key, so the job copies it to a file of its own);
the GitHub workflow's `credentials` and `pvefix check` steps as `bash -e` with their `env:`
(secrets and vars filled in, RUNNER_TEMP, GITHUB_OUTPUT, GITHUB_ACTIONS=true). The simulated
cluster is not fixed: each must report drift (exit 2, a JUnit report naming it), never a broken
check. Only the pip install line is left out: the pvefix under test is on PATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.sim.serve import ReadyInfo, write_ready_file
from tests.docs.test_ci_examples import GITHUB, GITLAB, _block

app = build_command()
BIN = str(Path(sys.executable).parent)


def _yaml(text: str) -> Any:
    yaml = pytest.importorskip("ruamel.yaml", reason="needs ruamel.yaml (check-jsonschema's)")
    return yaml.YAML(typ="safe").load(text)


def _repo(info: ReadyInfo, tmp_path: Path) -> Path:
    """The admin's repository: plans/desired.toml (pvefix desired) and ci/known_hosts."""
    repo = tmp_path / "repo"
    (repo / "ci").mkdir(parents=True)
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    desired = repo / "plans" / "desired.toml"
    desired.parent.mkdir()
    assert run_app(app, ["desired", "100", "--connection", str(ready), "-o", str(desired)]) == 0
    (repo / "ci" / "known_hosts").write_text(Path(info.known_hosts).read_text())
    return repo


def _env(info: ReadyInfo, home: Path, **more: str) -> dict[str, str]:
    """A runner's environment: no pvefix settings of this machine's, pvefix on PATH, and the
    simulator's ports (a real cluster listens on 8006 and 22, the job's defaults)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PROXMOX_", "PVEFIX_", "PYTEST_", "GITHUB_", "XDG_"))}
    env.update(PATH=f"{BIN}:{env.get('PATH', '')}", HOME=str(home), COLUMNS="80",
               PROXMOX_PORT=str(info.api_port), PVEFIX_SSH_PORT=str(info.ssh_port), **more)
    return env


def _gitlab_script(job: dict[str, Any]) -> str:
    lines = [line for line in job["script"] if "pip install" not in line]
    assert len(lines) == len(job["script"]) - 1, job["script"]
    return "\n".join(lines) + "\n"


def _drift_reported(rc: int, out: str, report: Path) -> None:
    assert rc == 2, out
    xml = report.read_text()
    assert "<failure" in xml and "machine" in xml, xml[:2000]
    assert "--ssh-host" not in xml and "<error" not in xml, xml[:2000]


def test_the_gitlab_job_reports_drift_with_its_file_variables_as_gitlab_writes_them(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    info = fresh_sim("kpro6")
    repo = _repo(info, tmp_path)
    job = _yaml(_block(GITLAB))["passthrough-drift"]
    files = tmp_path / "gitlab-files"
    files.mkdir()
    variables: dict[str, str] = {}
    for name, source in (("PROXMOX_CA_PEM", info.ca_cert), ("PROXMOX_SSH_KEY", info.ssh_key)):
        path = files / name
        path.write_text(Path(source).read_text())
        path.chmod(0o644)  # GitLab's File variables: readable by all
        variables[name] = str(path)
    env = _env(info, tmp_path / "home", PROXMOX_HOST="127.0.0.1",
               PROXMOX_TOKEN_ID=info.token_id, PROXMOX_TOKEN_SECRET=info.token_secret,
               **{k: str(v) for k, v in job["variables"].items()}, **variables)
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", _gitlab_script(job)],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    out = done.stdout + done.stderr
    _drift_reported(done.returncode, out, repo / "drift-report.xml")
    assert "DRIFT: the cluster drifted" in out and "BROKEN" not in out, out


def test_a_key_readable_by_all_is_a_broken_check_that_says_so_not_an_ssh_host_hint(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    """The job as it was (the File variable's path as the key): the refusal is named in the
    JUnit report and the output, and the check counts as broken (exit 1), not as drift."""
    info = fresh_sim("kpro6")
    repo = _repo(info, tmp_path)
    key = tmp_path / "PROXMOX_SSH_KEY"
    key.write_text(Path(info.ssh_key).read_text())
    key.chmod(0o644)
    env = _env(info, tmp_path / "home", PROXMOX_HOST="127.0.0.1",
               PROXMOX_TOKEN_ID=info.token_id, PROXMOX_TOKEN_SECRET=info.token_secret,
               PVEFIX_KNOWN_HOSTS="ci/known_hosts", PVEFIX_CA_CERT=info.ca_cert,
               PVEFIX_SSH_KEY=str(key))
    done = subprocess.run(["pvefix", "check", "--all", "--desired", "plans/desired.toml",
                           "--format", "junit", "-o", "drift-report.xml"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    xml = (repo / "drift-report.xml").read_text()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "open to others" in xml and "chmod 600" in xml, xml[:3000]
    assert "--ssh-host" not in xml, xml[:3000]


_EXPR = re.compile(r"\$\{\{\s*([\w.]+)\s*\}\}")


def test_the_github_workflow_reports_drift_step_by_step(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    info = fresh_sim("kpro6")
    repo = _repo(info, tmp_path)
    steps = {s.get("name"): s for s in _yaml(_block(GITHUB))["jobs"]["check"]["steps"]}
    temp, output = tmp_path / "runner-temp", tmp_path / "github-output"
    temp.mkdir()
    output.write_text("")
    context = {"secrets.PROXMOX_CA_PEM": Path(info.ca_cert).read_text(),
               "secrets.PROXMOX_SSH_KEY": Path(info.ssh_key).read_text(),
               "secrets.PROXMOX_TOKEN_ID": info.token_id,
               "secrets.PROXMOX_TOKEN_SECRET": info.token_secret,
               "vars.PROXMOX_HOST": "127.0.0.1", "runner.temp": str(temp)}
    base = _env(info, tmp_path / "home", RUNNER_TEMP=str(temp), GITHUB_OUTPUT=str(output),
                GITHUB_ACTIONS="true")
    results = []
    for name in ("credentials", "pvefix check"):
        step = steps[name]
        env = {**base, **{k: _EXPR.sub(lambda m: context[m.group(1)], str(v))
                          for k, v in step.get("env", {}).items()}}
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               step["run"]], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        results.append(done)
    assert results[0].returncode == 0, results[0].stderr
    check = results[1]
    out = check.stdout + check.stderr
    _drift_reported(check.returncode, out, repo / "drift-report.xml")
    assert "::error title=passthrough drift::" in out and "drift check broken" not in out, out
    assert "code=2" in output.read_text()
