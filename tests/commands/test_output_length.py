"""Short enough to read at 80 columns, with every fact still there: the kpro6 plan in at most
150 lines (each evidence line once; details behind --verbose), and each command's -h in at most
100 lines, its options in panels, its usage line and defaults readable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pvefix.planner import plan as make_plan
from pvefix.planner.model import Plan, PlanOptions
from pvefix.sources.bundle import read_bundle
from tests.ptyterm import on_pty

SCENARIOS = Path(__file__).resolve().parents[2] / "pvefix" / "scenarios"
KPRO6 = str(SCENARIOS / "kpro6")
# The most lines at 80 columns: the kpro6 plan (issue 36: 236 lines before), and with the P2P
# phase (325 before), whose clique `args` value alone fills eight lines.
MOST = {(): 150, ("--p2p",): 180}


def _flat(text: str) -> str:
    """Text with its wrapping undone: every run of white space one blank."""
    return " ".join(text.split())


def _plan(extra: tuple[str, ...]) -> Plan:
    return make_plan(read_bundle(SCENARIOS / "kpro6", 100),
                     PlanOptions(p2p="--p2p" in extra))


@pytest.mark.parametrize("extra", list(MOST), ids=lambda e: " ".join(e) or "plain")
def test_the_kpro6_plan_fits_its_line_budget_with_every_fact(extra: tuple[str, ...]) -> None:
    code, text = on_pty(["plan", "100", "--bundle", KPRO6, *extra], columns=80)
    assert code == 2, text
    lines = text.splitlines()
    assert len(lines) <= MOST[extra], f"{len(lines)} lines:\n{text}"
    code, verbose = on_pty(["plan", "100", "--bundle", KPRO6, "--verbose", *extra], columns=80)
    assert code == 2, verbose
    assert len(verbose.splitlines()) > len(lines)  # the details are there, behind --verbose
    plan, short, full = _plan(extra), _flat(text), _flat(verbose)
    for finding in plan.findings:  # each finding by its title; its id with --verbose
        assert _flat(finding.title) in short, finding.id
        assert re.search(rf"id: (\S+, )*{re.escape(finding.id)}\b", full), finding.id
    for phase in plan.phases:
        for change in phase.changes:
            assert re.search(rf"\b{re.escape(change.key)}\b", short), change.id
            assert re.search(rf"id: (\S+, )*{re.escape(change.id)}\b", full), change.id
            assert _flat(change.reason) in short, change.id
            assert _flat(change.risk.text) in short, change.id
            if change.effect:
                assert _flat(change.effect) in full, change.id
    evidence = {e for f in plan.findings for e in f.evidence}
    evidence |= {e for p in plan.phases for c in p.changes for e in c.evidence}
    for fact in evidence:
        bullet = f"· {_flat(fact)}"
        # Once at most in either view; the short view and --verbose together hold each one
        # (a group of alike changes leaves out the entry lines its header shows already).
        assert short.count(bullet) <= 1 and full.count(bullet) <= 1, fact
        assert bullet in full or _flat(fact.split(": ", 1)[-1]) in full, fact
    # A finding's evidence (the 9-line block that was printed three times) is in the short view.
    for finding in plan.findings:
        if finding.severity != "info":
            assert all(f"· {_flat(e)}" in short for e in finding.evidence), finding.id


def test_verbose_shows_the_diffs_and_the_plan_ends_with_what_to_run_once() -> None:
    _, text = on_pty(["plan", "100", "--bundle", KPRO6], columns=80)
    _, verbose = on_pty(["plan", "100", "--bundle", KPRO6, "-v"], columns=80)
    assert "--- a/etc/pve/nodes/kpro6/qemu-server/100.conf" not in text
    assert "--- a/etc/pve/nodes/kpro6/qemu-server/100.conf" in verbose
    assert "+machine: q35" in verbose and "-root=ZFS=rpool/ROOT/pve-1 boot=zfs" in verbose
    for shown in (text, verbose):
        assert shown.count("Next, against the live node") == 1
        assert shown.rstrip("\n").endswith("\n  pvefix apply 100 --phase 1 --restart")


def _commands() -> list[str]:
    """Every command and subcommand path, `plan` to `collect import`."""
    from pvefix.cli import build_command

    out: list[str] = []

    def walk(command: object, path: str) -> None:
        if path:
            out.append(path)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(build_command(), "")
    return out


def _params(path: str) -> list[object]:
    from pvefix.cli import build_command

    command: object = build_command()
    for name in path.split():
        command = command.commands[name]  # type: ignore[attr-defined]
    return [p for p in command.params if not getattr(p, "hidden", False)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", ["", *_commands()], ids=lambda p: p or "pvefix")
def test_each_help_fits_100_lines_of_80_columns_and_names_every_option(path: str) -> None:
    code, text = on_pty([*path.split(), "-h"], columns=80)
    assert code == 0, text
    lines = text.rstrip("\n").splitlines()
    assert len(lines) <= 100, f"{path} -h: {len(lines)} lines"
    wide = [line for line in lines if len(line.rstrip()) > 80]
    assert not wide, wide
    usage = next(line for line in lines if "Usage: pvefix" in line)
    assert "{" not in usage and "}" not in usage, usage  # typer's `{VMIDS}`
    assert "…" not in text, text  # nothing cut (rich marks a cut with an ellipsis)
    for param in _params(path):
        names = getattr(param, "opts", [])
        shown = [n for n in names if n.startswith("--")] or names
        assert any(n in text for n in shown) or param.param_type_name == "argument", (
            path, names)


def test_the_usage_line_and_the_default_config_path_are_whole() -> None:
    _, text = on_pty(["plan", "-h"], columns=80)
    assert "Usage: pvefix plan [OPTIONS] VMID..." in text
    assert "~/.config/pvefix/config.toml" in text


def test_the_panel_notes_say_where_each_environment_variable_comes_from() -> None:
    """The Connection and Guest panels say their environment variables once, by a rule; the
    rule is what the settings read."""
    from pvefix.commands import guest_options, options
    from pvefix.target.guest.access import GUEST_ENV_VARS as GUEST_ENV
    from pvefix.target.settings import ENV_CONFIG, ENV_CONNECTION, ENV_PROFILE, ENV_VARS

    read = {*ENV_VARS, ENV_CONFIG, ENV_CONNECTION, ENV_PROFILE}
    for field, (_, option) in options._OPTIONS.items():
        name = option.param_decls[0].split("/")[0].removeprefix("--").replace("-", "_")
        prefix = "PROXMOX_" if field in options.PROXMOX_ENV else "PVEFIX_"
        assert (prefix + name.upper() in read) is (field not in options.NO_ENV), field
        assert "(env " not in (option.help or ""), field  # said once, in the note
    for field, (_, _, option) in guest_options._OPTIONS.items():
        name = option.param_decls[0].removeprefix("--").replace("-", "_")
        assert f"PVEFIX_{name.upper()}" in GUEST_ENV, field
        assert "(env " not in (option.help or ""), field
