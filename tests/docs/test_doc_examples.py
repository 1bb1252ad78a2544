"""Every command example of README.md and docs/*.md works: each is parsed by the CLI, and each
not marked `# real host` runs, as written, against a simulator (tests/docs/examples.py says how
examples are found and marked)."""

from __future__ import annotations

import itertools
import json
import os
import pty
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pvefix.cli import build_command
from pvefix.commands.clihelp import EXAMPLES
from pvefix.commands.run import run_app
from pvefix.hosttree import materialize_scenario
from pvefix.sim.serve import ReadyInfo, write_ready_file
from tests.docs.examples import (
    PAGES,
    PLACEHOLDER,
    ROOT,
    Example,
    all_examples,
    examples,
    placeholders,
)
from tests.simkit import api, wait_task

ALL = all_examples()


def _parse_only(argv: list[str]) -> int:
    """Run the CLI's parsing (commands, options, arguments, choices) with every command's
    body replaced by nothing: 0 when the line parses."""
    command = build_command()

    def stub(group: Any) -> None:
        for sub in getattr(group, "commands", {}).values():
            stub(sub)
        # Every body, a group's too: `pvefix probe` is a group whose own callback runs the probe
        # (and wrote its --out report into the working folder before it was stubbed).
        if getattr(group, "callback", None) is not None:
            group.callback = lambda *a, **k: 0

    stub(command)
    return run_app(command, argv)


def test_examples_are_found() -> None:
    pages = {e.page for e in ALL}
    assert {"README.md", "docs/apply.md", "docs/ci.md", "docs/plan.md"} <= pages
    assert len(ALL) > 40


@pytest.mark.parametrize("example", ALL, ids=str)
def test_every_example_parses(
    example: Example, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # whatever a parse might write lands here, not in the checkout
    code = _parse_only(example.argv)
    assert not any(tmp_path.iterdir()), f"{example}: parsing wrote {list(tmp_path.iterdir())}"
    assert code == 0, f"{example}\n{capsys.readouterr().err}"


@pytest.mark.parametrize("line", [line for lines in EXAMPLES.values() for line in lines])
def test_every_help_example_parses(line: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = line.split(">")[0].split()[1:]
    assert _parse_only(argv) == 0, f"{line}\n{capsys.readouterr().err}"


def _sandbox(tmp_path: Path, info: ReadyInfo, page_examples: list[Example]) -> dict[str, str]:
    """A working directory where the examples' paths exist: the simulator's ready file at every
    --connection path, a host tree at every --bundle path, a profile for --profile."""
    ready = tmp_path / "sim-ready.json"
    write_ready_file(info, ready)
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "pvefix").write_text(f"#!/bin/sh\nexec {sys.executable} -m pvefix \"$@\"\n")
    (shim / "pvefix").chmod(0o755)
    config = tmp_path / "xdg" / "pvefix"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(
        "".join(f'[profiles.{p}]\nhost = "127.0.0.1"\n' for p in ("prod", "kpro6", "lab")))
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    (tmp_path / "plans").mkdir()
    for example in page_examples:
        argv = example.argv
        for flag, value in itertools.pairwise(argv):
            target = tmp_path / value.lstrip("/") if value.startswith("/tmp/") else (
                tmp_path / value)
            if flag == "--connection" and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(ready, target)
            if flag == "--bundle" and not target.exists():
                # pvefix/scenarios/NAME names a built-in scenario; any other path gets kpro6.
                named = Path(value).name if value.startswith("pvefix/scenarios/") else "kpro6"
                materialize_scenario(named, target)
        if any(a.startswith("bundle/") for a in argv) and not (tmp_path / "bundle").exists():
            materialize_scenario("kpro6", tmp_path / "bundle")
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update({
        "PATH": f"{shim}:{env.get('PATH', '')}", "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "PVEFIX_CONNECTION": str(ready), "PVEFIX_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "NO_COLOR": "1",
    })
    return env


RUN_PAGES = sorted({e.page for e in ALL if e.runnable})


@pytest.mark.parametrize("page", RUN_PAGES)
def test_the_examples_of_a_page_run_against_the_simulator(
    page: str, fresh_sim: Callable[..., ReadyInfo], tmp_path: Path,
) -> None:
    page_examples = [e for e in examples(ROOT / page) if e.runnable]
    info = fresh_sim("kpro6")
    env = _sandbox(tmp_path, info, page_examples)
    # What the page tells the admin to do as root on the node first (`qm set N --agent 1`).
    for vmid in sorted(set(re.findall(r"qm set (\d+) --agent 1", (ROOT / page).read_text()))):
        prox = api(info, "ticket")
        vm = prox.nodes(info.node).qemu(int(vmid))
        vm.config.put(agent="1")
        if vm.status.current.get()["status"] == "running":  # it takes effect at the next start
            wait_task(prox, vm.status.stop.post())
            wait_task(prox, vm.status.start.post())
    for vmid in sorted(set(re.findall(r"qm start (\d+)", (ROOT / page).read_text()))):
        vm = api(info, "ticket").nodes(info.node).qemu(int(vmid))
        if vm.status.current.get()["status"] != "running":
            wait_task(api(info, "ticket"), vm.status.start.post())
    for example in page_examples:
        text = example.text.replace(" /tmp/", f" {tmp_path}/tmp/")
        # The admin at a terminal answers "y" when apply or rollback asks.
        leader, follower = pty.openpty()
        os.write(leader, b"y\n" * 4)
        try:
            done = subprocess.run(["bash", "-c", text], cwd=tmp_path, env=env, stdin=follower,
                                  capture_output=True, text=True, timeout=300, check=False)
        finally:
            os.close(follower)
            os.close(leader)
        assert done.returncode in example.exits, (
            f"{example}\nexit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        assert "Traceback" not in done.stderr, f"{example}\n{done.stderr}"


def test_a_path_the_reader_must_supply_is_said_to_be_a_placeholder() -> None:
    """An example that names a profile, ready file or host tree no earlier line of its page
    makes says so in its comment, or a reader copies it and meets "not found" (the suite's
    sandbox quietly makes them: tests/docs/test_doc_examples.py `_sandbox`)."""
    silent = [f"{e} ({value})" for page in PAGES for e, value in placeholders(examples(page))
              if PLACEHOLDER not in e.comment]
    assert silent == [], "\n".join(silent)
    assert placeholders(examples(ROOT / "docs" / "plan.md")), "the check has teeth"


def test_pages_are_the_readme_and_docs() -> None:
    assert PAGES[0].name == "README.md" and all(p.suffix == ".md" for p in PAGES)
    assert json.dumps([str(p.relative_to(ROOT)) for p in PAGES])
