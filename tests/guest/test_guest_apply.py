"""Guest access in plan, apply and rollback, against the simulator's guest agent: the guest's
cmdline is read, its /etc/default/grub edited and update-grub run, and all of it undone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pvefix.executor.options import ApplyOptions, RollbackOptions
from pvefix.executor.snapshot import list_snapshots
from pvefix.executor.transaction import ApplyFailed
from pvefix.flow.apply import apply_phase
from pvefix.flow.rollback import run_rollback
from pvefix.main import main
from pvefix.sim.guest_tree import FAIL_UPDATE_GRUB
from pvefix.target.open import open_guest
from tests.executor.conftest import Captured, Node
from tests.guest.conftest import AGENT, VMID, guest_root


def guest_files(node: Node) -> dict[str, bytes]:
    """The guest's files on disk (the same text the agent reads)."""
    root = guest_root(node)
    channel = open_guest(node.conn(), AGENT, VMID)
    try:
        seen = channel.read_file("/etc/default/grub")
    finally:
        channel.close()
    assert seen is not None and seen.encode() == (root / "etc/default/grub").read_bytes()
    return {name: (root / name).read_bytes()
            for name in ("etc/default/grub", "boot/grub/grub.cfg", "proc/cmdline")}


def apply(node: Node, captured: Captured | None = None, **options: object) -> object:
    opts = ApplyOptions(phase=1, state_dir=node.state_dir, yes=True, task_timeout=10,
                        **options)  # type: ignore[arg-type]
    return apply_phase(node.conn(), VMID, opts, (captured or Captured()).console(),
                       guest=AGENT)


def test_plan_with_the_guest_agent_plans_the_guest_cmdline_from_the_real_guest(
    shared_node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["plan", str(VMID), "--guest-agent", "--connection",
                 str(shared_node.ready_file), "--format", "json"])
    out = capsys.readouterr().out
    assert code == 2
    changes = [c for p in json.loads(out)["plans"][0]["phases"] for c in p["changes"]]
    guest = next(c for c in changes if c["id"] == "guest.cmdline.pci_realloc")
    running = (guest_root(shared_node) / "proc/cmdline").read_text().strip()
    assert guest["target"] == "guest-cmdline"
    assert guest["before"] == running
    assert guest["after"] == running + " pci=realloc"
    assert any("can't assign; no space" in e for e in guest["evidence"])


def test_plan_shows_the_guest_grub_diff_in_text_markdown_and_json(
    shared_node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    grub = (guest_root(shared_node) / "etc/default/grub").read_text()
    args = ["plan", str(VMID), "--guest-agent", "--connection", str(shared_node.ready_file)]
    main([*args, "--format", "json"])
    plan = json.loads(capsys.readouterr().out)["plans"][0]
    assert plan["guest_files_before"] == {"/etc/default/grub": grub}
    after = plan["guest_files_after"]["/etc/default/grub"]
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet pci=realloc"' in after
    assert after.replace(" pci=realloc", "") == grub  # only the one option, the rest kept
    for fmt in ("text", "markdown"):
        main([*args, "--format", fmt, *(["--verbose"] if fmt == "text" else [])])
        out = capsys.readouterr().out
        assert "--- a/etc/default/grub (in the guest)" in out, out
        assert '+GRUB_CMDLINE_LINUX_DEFAULT="quiet pci=realloc"' in out, out
        assert '-GRUB_CMDLINE_LINUX_DEFAULT="quiet"' in out, out


def test_plan_without_guest_access_leaves_the_guest_to_the_admin(
    shared_node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["plan", str(VMID), "--connection", str(shared_node.ready_file), "--format", "json"])
    (plan,) = json.loads(capsys.readouterr().out)["plans"]
    changes = [c for p in plan["phases"] for c in p["changes"]]
    guest = next(c for c in changes if c["id"] == "guest.cmdline.pci_realloc")
    assert guest["target"] == "manual"


def test_apply_edits_the_guest_grub_and_rollback_restores_it_byte_for_byte(
    shared_node: Node,
) -> None:
    before = guest_files(shared_node)
    conf_before = shared_node.conf(VMID)
    result = apply(shared_node)
    after = guest_files(shared_node)
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet pci=realloc"' in after["etc/default/grub"].decode()
    assert b"pci=realloc" in after["boot/grub/grub.cfg"]  # update-grub ran
    assert not any("pci=realloc" in line for line in result.manual)  # type: ignore[attr-defined]
    backups = list((guest_root(shared_node) / "etc/default").glob("grub.pvefix-*"))
    assert [b.read_bytes() for b in backups] == [before["etc/default/grub"]]
    snap = list_snapshots(shared_node.state_dir, VMID)[-1].path  # snapshots/<cluster>/<id>
    meta = json.loads((snap / "meta.json").read_text())
    grub = next(f for f in meta["guest_files"] if f["path"] == "/etc/default/grub")
    kept = snap / "files" / grub["stored_as"]
    assert kept.read_bytes() == before["etc/default/grub"]

    run_rollback(shared_node.conn(), shared_node.state_dir, VMID, None,
                 RollbackOptions(yes=True, task_timeout=10), Captured().console())
    restored = guest_files(shared_node)
    assert restored["etc/default/grub"] == before["etc/default/grub"]
    assert b"pci=realloc" not in restored["boot/grub/grub.cfg"]  # update-grub ran again
    assert shared_node.conf(VMID) == conf_before


def test_a_failing_update_grub_undoes_the_guest_edit_and_the_vm_config(
    shared_node: Node,
) -> None:
    before = guest_files(shared_node)
    conf_before = shared_node.conf(VMID)
    fail = guest_root(shared_node) / FAIL_UPDATE_GRUB
    fail.touch()  # a one-shot fault: the next update-grub fails, the one of the undo works
    with pytest.raises(ApplyFailed, match="update-grub` exited with 1") as failed:
        apply(shared_node)
    assert not fail.exists()
    assert "guest file /etc/default/grub restored" in str(failed.value)
    assert guest_files(shared_node)["etc/default/grub"] == before["etc/default/grub"]
    assert shared_node.conf(VMID) == conf_before


def test_apply_refuses_a_guest_change_without_a_way_into_the_guest(shared_node: Node) -> None:
    from pvefix.errors import RefusedError
    from pvefix.planner import plan as make_plan
    from pvefix.sources.live import read_live

    plan = make_plan(read_live(shared_node.conn(), VMID, guest=AGENT))
    conf_before = shared_node.conf(VMID)
    opts = ApplyOptions(phase=1, state_dir=shared_node.state_dir, yes=True, task_timeout=10)
    with pytest.raises(RefusedError, match="--guest-agent or --guest-ssh-host"):
        apply_phase(shared_node.conn(), VMID, opts, Captured().console(), plan=plan)
    assert shared_node.conf(VMID) == conf_before


def test_a_saved_plan_whose_guest_file_text_was_edited_is_refused_and_an_older_one_applies(
    shared_node: Node, tmp_path: Path,
) -> None:
    from pvefix.errors import RefusedError
    from pvefix.flow.planfile import load_plan_file, save_plan
    from pvefix.planner import plan as make_plan
    from pvefix.sources.live import read_live

    data = make_plan(read_live(shared_node.conn(), VMID, guest=AGENT)).to_json_dict()
    texts: Any = data["guest_files_after"]
    texts["/etc/default/grub"] += "GRUB_INIT_TUNE=1\n"
    before = guest_files(shared_node)
    opts = ApplyOptions(phase=1, state_dir=shared_node.state_dir, yes=True, task_timeout=10)
    tampered = load_plan_file(save_plan(data, str(tmp_path / "tampered.json")))
    with pytest.raises(RefusedError, match="guest /etc/default/grub: the saved plan writes"):
        apply_phase(shared_node.conn(), VMID, opts, Captured().console(), plan=tampered,
                    guest=AGENT)
    assert guest_files(shared_node) == before

    del data["guest_files_before"], data["guest_files_after"]  # as written before they were
    older = load_plan_file(save_plan(data, str(tmp_path / "older.json")))
    result = apply_phase(shared_node.conn(), VMID, opts, Captured().console(), plan=older,
                         guest=AGENT)
    assert b"pci=realloc" in guest_files(shared_node)["etc/default/grub"]
    run_rollback(shared_node.conn(), shared_node.state_dir, VMID, result.snapshot_id,
                 RollbackOptions(yes=True, task_timeout=10), Captured().console())
    assert guest_files(shared_node) == before


def test_apply_verify_without_guest_options_is_refused_before_anything(
    shared_node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["apply", str(VMID), "--phase", "1", "--yes", "--verify", "--connection",
                 str(shared_node.ready_file), "--state-dir", str(tmp_path / "s")])
    assert code == 1
    assert "--verify runs the probe inside the guest" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_apply_verify_keeps_two_reports_and_prints_the_comparison(
    own_node: Callable[..., Node], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = own_node()
    state = tmp_path / "verify-state"
    code = main(["apply", str(VMID), "--phase", "1", "--yes", "--restart", "--guest-agent",
                 "--verify", "--connection", str(node.ready_file), "--state-dir", str(state)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    (folder,) = (state / "probes").glob(f"node-*@*/{VMID}")  # under the node's identity
    kept = sorted(folder.iterdir())
    assert len(kept) == 2
    assert f"compared with {kept[0].stem}:" in captured.out
    assert "P2P: no regression" in captured.out
    # After the cold start the guest booted the new line.
    assert "pci=realloc" in (guest_root(node) / "proc/cmdline").read_text()


def test_auto_rollback_after_a_failed_start_says_the_guest_files_it_could_not_restore(
    own_node: Callable[..., Node],
) -> None:
    # The one restore body: the failed start left the VM down, so its guest is out of reach;
    # the auto-rollback restores the config and says which guest files it left, and how.
    guest_node = own_node()
    before = guest_files(guest_node)
    conf_before = guest_node.conf(VMID)
    guest_node.sim.state.faults.update(fail_start={VMID: "start failed: QEMU exited with 1"})
    with pytest.raises(ApplyFailed) as failed:
        apply(guest_node, restart=True, auto_rollback=True)
    message = str(failed.value)
    assert "rolled back (--auto-rollback)" in message
    assert guest_node.conf(VMID) == conf_before
    line = next(x for x in message.splitlines() if x.startswith("NOT restored: "))
    assert "/etc/default/grub" in line and "pvefix rollback 100 --snapshot" in line
    assert b"pci=realloc" in guest_files(guest_node)["etc/default/grub"]
    snapshot_id = line.split("--snapshot ", 1)[1].split()[0]
    run_rollback(guest_node.conn(), guest_node.state_dir, VMID, snapshot_id,
                 RollbackOptions(yes=True, task_timeout=10), Captured().console(), AGENT)
    assert guest_files(guest_node)["etc/default/grub"] == before["etc/default/grub"]
