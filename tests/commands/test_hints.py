"""The one builder of printed pvefix commands (pvefix/hints.py): the options a command was
given come back, parsed by the CLI itself from the printed line (by a real bash), exactly as they
were given, whatever their text; and the `Next:` line of a plan asks for the activation the
phase needs."""

from __future__ import annotations

import shlex
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.cli import build_command
from pvefix.commands.guest_options import GuestOptions
from pvefix.commands.options import ConnectionOptions, hint_context
from pvefix.hints import Context, apply_words, next_line
from pvefix.hosttree.scenarios import SCENARIOS_DIR as SCENARIOS
from pvefix.planner import plan as make_plan
from pvefix.planner.model import PlanOptions
from pvefix.sources.bundle import read_bundle
from tests.commands.test_hint_quoting import _as_bash_runs_it

ROLLBACK = build_command().commands["rollback"]

# Any text a shell word can hold (no NUL), spaces, quotes and leading dashes included.
_text = st.text(st.characters(codec="utf-8", exclude_characters="\0"),
                min_size=1, max_size=12)
_path = _text.filter(lambda t: t.strip("/.") != "").map(Path)
_port = st.integers(1, 65535)


def _maybe(strategy: Any) -> Any:
    return st.none() | strategy


_connection = st.builds(
    ConnectionOptions, connection=_maybe(_path), config=_maybe(_path), profile=_maybe(_text),
    bundle=_maybe(_path), local=_maybe(st.just(True)), host=_maybe(_text), port=_maybe(_port),
    node=_maybe(_text), user=_maybe(_text), token_id=_maybe(_text), auth=_maybe(_text),
    insecure=_maybe(st.just(True)), ca_cert=_maybe(_path), fingerprint=_maybe(_text),
    timeout=_maybe(st.floats(0.1, 1e4)), ssh=_maybe(st.booleans()), ssh_host=_maybe(_text),
    ssh_port=_maybe(_port), ssh_user=_maybe(_text), ssh_key=_maybe(_path),
    known_hosts=_maybe(_path), accept_new_host_key=_maybe(st.just(True)))
_guest = st.builds(
    GuestOptions, agent=_maybe(st.just(True)), ssh_host=_maybe(_text), ssh_port=_maybe(_port),
    ssh_user=_maybe(_text), ssh_key=_maybe(_path), known_hosts=_maybe(_path),
    accept_new_host_key=_maybe(st.just(True)), python=_maybe(_text))


@given(_connection, _guest, _maybe(_path))
def test_a_printed_command_gives_the_cli_the_same_options(
    opts: ConnectionOptions, guest: GuestOptions, state_dir: Path | None
) -> None:
    line = hint_context(opts, state_dir, guest).command(["rollback", "100"])
    argv = ["pvefix", *(w.decode("utf-8", "surrogateescape") for w in _as_bash_runs_it(line))]
    assert argv[:3] == ["pvefix", "rollback", "100"]
    params = ROLLBACK.make_context("rollback", argv[2:]).params
    given_ = {**asdict(opts), "bundle": None}  # never --bundle: apply cannot write to one
    assert {k: params[k] for k in given_} == given_
    assert {k: params[f"guest_{k}"] for k in asdict(guest)} == asdict(guest)
    assert params["state_dir"] == state_dir


def test_no_option_is_a_secret() -> None:
    """Passwords and token secrets come from the environment or a profile, never an option: a
    printed command cannot carry one."""
    names = [p.name for p in ROLLBACK.params]
    assert not [n for n in names if "secret" in n or "password" in n], names


@pytest.mark.parametrize(("scenario", "vmid", "first"), [
    ("kpro6", 100, ["apply", "100", "--phase", "1", "--restart"]),  # running: a cold start
    ("genoa-l40s-pool", 400, ["apply", "400", "--phase", "1"]),  # stopped: nothing to restart
])
def test_the_next_phase_asks_for_its_activation(scenario: str, vmid: int,
                                                first: list[str]) -> None:
    plan = make_plan(read_bundle(SCENARIOS / scenario, vmid), PlanOptions())
    assert apply_words(plan, plan.phases[0].number) == first
    host = next((p for p in plan.phases if p.disruption == "host-reboot"), None)
    if host is not None:
        assert "--reboot-host" in apply_words(plan, host.number)
    last = plan.phases[-1].number
    context = Context(("--connection", "my node.json"))
    assert next_line(plan, last, context) == (
        f"Next: pvefix check {vmid} --connection 'my node.json'")
    assert next_line(plan, 0, context, live=False).startswith(
        "Next, against the live node (a bundle is read-only): pvefix apply ")


def _with_access(plan: Any, access: str, ssh: bool) -> Any:
    return plan.model_copy(update={"observed": plan.observed.model_copy(
        update={"access": access, "ssh": ssh})})


@pytest.mark.parametrize(("access", "ssh", "words"), [
    ("api:root@pam:ticket", True, []),  # root@pam's password ticket writes them itself
    ("api:root@pam!pvefix:token", True, ["--qm-set"]),  # qm set as root over SSH
    ("api:root@pam!pvefix:token", False, ["--auth", "password"]),
    ("api:ops@pve!ci:token", False, ["--auth", "password", "--user", "root@pam"]),
    ("api:ops@pve:ticket", False, ["--auth", "password", "--user", "root@pam"]),
])
def test_a_root_only_phase_carries_what_lets_it_write(access: str, ssh: bool,
                                                      words: list[str]) -> None:
    """intel-grub's raw host= GPUs (phase 1) and kpro6's P2P args (phase 3) are root@pam's:
    the printed apply carries --qm-set or --auth password, after the options as given."""
    for scenario, vmid, options in (("intel-grub", 200, PlanOptions()),
                                    ("kpro6", 100, PlanOptions(p2p=True))):
        plan = _with_access(make_plan(read_bundle(SCENARIOS / scenario, vmid), options),
                            access, ssh)
        number = next(p.number for p in plan.phases
                      if any(c.needs_root_pam for c in p.changes))
        line = next_line(plan, number - 1, Context(("--auth", "token")))
        argv = shlex.split(line.removeprefix("Next: "))
        assert argv[:5] == ["pvefix", "apply", str(vmid), "--phase", str(number)], line
        assert argv[-len(words):] == words if words else argv[-2:] == ["--auth", "token"]


def test_after_plan_out_the_next_apply_names_the_reviewed_file() -> None:
    """The file carries its P2P options: no --p2p; check still names the VMID."""
    plan = make_plan(read_bundle(SCENARIOS / "kpro6", 100), PlanOptions(p2p=True))
    context = Context(("--connection", "n.json"), plan_file="my plan.json")
    assert next_line(plan, 0, context) == (
        "Next: pvefix apply 'my plan.json' --phase 1 --restart --connection n.json")
    assert "--p2p" not in next_line(plan, 2, context)
    assert next_line(plan, 2, context, unbooted=True).startswith(
        "Next: pvefix apply 'my plan.json' --phase 2 --reboot-host")
    assert next_line(plan, 3, context) == "Next: pvefix check 100 --connection n.json"
    assert "100 --phase 1" in next_line(plan, 0, context, live=False), "a bundle's: VMID"


@pytest.mark.parametrize(("ssh", "flags"), [(True, "--qm-set"), (False, "--auth password")])
def test_the_activation_a_root_only_phase_names_carries_them_too(ssh: bool, flags: str) -> None:
    state = read_bundle(SCENARIOS / "kpro6", 100)
    state = state.model_copy(update={"access": state.access.model_copy(update={
        "method": "api", "user": "root@pam!pvefix", "auth": "token", "ssh": ssh})})
    plan = make_plan(state, PlanOptions(p2p=True))
    p2p = next(p for p in plan.phases if p.number == 3)
    assert f"`pvefix apply 100 --phase 3 --p2p --restart {flags}`" in p2p.activation
    assert flags not in next(p for p in plan.phases if p.number == 1).activation
