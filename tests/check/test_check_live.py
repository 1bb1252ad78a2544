"""`pvefix check` against the simulator over real HTTPS and SSH: no drift right after an
apply-like edit, drift after an edit by another user, a host reboot that lost iommu=pt,
pending-only changes, and a multi-node cluster."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.check.run import check_live
from pvefix.desired import (
    DesiredState,
    HostPciRule,
    VmDesired,
    dumps_desired,
    load_recorded,
    record,
)
from pvefix.main import main
from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.sources.live import read_live
from pvefix.target.settings import Connection, resolve_connection
from tests.simkit import api, grant, run, ssh, ssh_when_back

Sim = Callable[..., ReadyInfo]


def connection(info: ReadyInfo, tmp_path: Path) -> tuple[Connection, Path]:
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    return resolve_connection(connection_file=ready, env={}), ready


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["check", *args])
    return code, capsys.readouterr().out


def test_no_drift_right_after_an_apply_like_edit(
    fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = fresh_sim()
    conn, ready = connection(info, tmp_path)
    vm = api(info, "ticket").nodes(info.node).qemu(101).config
    vm.put(machine="q35", cpu="host", digest=vm.get()["digest"])  # stopped: applied at once
    record(tmp_path / "state", read_live(conn, 101))  # what apply does after its last step
    code, out = check(capsys, "101", "--connection", str(ready),
                      "--state-dir", str(tmp_path / "state"))
    assert code == 0, out
    assert "VM 101 (node kpro6): no drift" in out
    assert "node kpro6: no drift" in out


def test_an_edit_by_another_user_through_the_api_is_drift(
    fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = fresh_sim()
    conn, ready = connection(info, tmp_path)
    record(tmp_path / "state", read_live(conn, 101))
    token = api(info, "token").nodes(info.node).qemu(101).config
    token.put(cpu="kvm64", tags="by-colleague")  # a colleague's token, out of band
    code, out = check(capsys, "101", "--connection", str(ready),
                      "--state-dir", str(tmp_path / "state"), "--format", "json")
    assert code == 2
    drifted = {i["property"]: i for i in json.loads(out)["items"] if i["status"] == "drift"}
    assert set(drifted) == {"cpu"}  # tags are free
    assert (drifted["cpu"]["expected"], drifted["cpu"]["actual"]) == ("x86-64-v2-AES", "kvm64")


def test_a_fix_still_in_pending_is_labelled_and_counts_as_drift(
    fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = fresh_sim()
    _, ready = connection(info, tmp_path)
    desired = DesiredState(vms={100: VmDesired(
        hostpci={f"hostpci{i}": HostPciRule(mapping="pro6000", pcie=True) for i in range(8)},
    )})
    (tmp_path / "desired.toml").write_text(dumps_desired(desired))
    vm = api(info, "ticket").nodes(info.node).qemu(100).config
    changes = {f"hostpci{i}": "mapping=pro6000,pcie=1" for i in range(8)}
    vm.put(digest=vm.get()["digest"], **changes)  # VM 100 runs: the change waits in [PENDING]
    code, out = check(capsys, "100", "--connection", str(ready),
                      "--desired", str(tmp_path / "desired.toml"))
    assert code == 2
    assert out.count("(only in [PENDING]: takes effect at the next cold start)") == 8
    assert "- pcie=0 (pending: pcie=1)\n" in out


def _reboot(info: ReadyInfo, before: str) -> None:
    code, _, err = run(ssh(info), before + " && reboot")
    assert code == 0, err
    time.sleep(0.5)
    ssh_when_back(info)


CMDLINE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs"


def test_a_host_reboot_that_lost_iommu_pt_is_drift_on_the_host(
    fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = fresh_sim()
    conn, ready = connection(info, tmp_path)
    state_dir = tmp_path / "state"
    _reboot(info, f"echo {CMDLINE} iommu=pt > /etc/kernel/cmdline && proxmox-boot-tool refresh")
    record(state_dir, read_live(conn, 100))  # the fix, applied and booted
    assert load_recorded(state_dir, [100]).nodes["kpro6"].cmdline.required == ("iommu=pt",)
    args = ("100", "--connection", str(ready), "--state-dir", str(state_dir))
    assert check(capsys, *args)[0] == 0

    # An upgrade rewrites the cmdline without iommu=pt: drift before the reboot already...
    run(ssh(info), f"echo {CMDLINE} > /etc/kernel/cmdline && proxmox-boot-tool refresh")
    code, out = check(capsys, *args)
    assert code == 2
    assert "the booted kernel still complies; the configuration does not: takes effect at " \
           "the next host reboot" in out
    # ... and after it, the running kernel has lost it too.
    _reboot(info, "true")
    code, out = check(capsys, *args)
    assert code == 2
    assert "node kpro6\n  DRIFT   cmdline iommu=pt (required)\n" \
           "          - configured: absent; booted: absent\n          + iommu=pt\n" in out


def test_a_host_configured_but_not_rebooted_is_drift_labelled_for_the_reboot(
    fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = fresh_sim()
    _, ready = connection(info, tmp_path)
    (tmp_path / "d.toml").write_text(
        'schema = "pvefix.desired/v1"\n[nodes.kpro6.cmdline]\nrequired = ["iommu=pt"]\n'
        "forbidden = []\n[vms.100]\n")
    run(ssh(info), f"echo {CMDLINE} iommu=pt > /etc/kernel/cmdline && proxmox-boot-tool refresh")
    code, out = check(capsys, "100", "--connection", str(ready), "--desired",
                      str(tmp_path / "d.toml"))
    assert code == 2
    assert "(configured, not booted yet: takes effect at the next host reboot)" in out


@pytest.mark.parametrize("source", ["ssh", "bundle"])
def test_a_grub_drop_in_is_part_of_the_configured_line_as_the_planner_reads_it(
    source: str, fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """grub-dropin's iommu=pt is in /etc/default/grub.d/iommu.cfg, which update-grub sources
    after /etc/default/grub: check read the main file only and called the configured line
    drift (configured: absent) where the plan saw nothing to do. Then the drop-in goes and the
    host is not rebooted: the configuration drifts, the booted kernel still complies."""
    info = fresh_sim("grub-dropin")
    grant(info.root, info.token_id)  # its token is privilege-separated
    _, ready = connection(info, tmp_path)
    (tmp_path / "d.toml").write_text(
        'schema = "pvefix.desired/v1"\n[nodes.xeon7.cmdline]\nrequired = ["iommu=pt"]\n'
        "forbidden = []\n[vms.210]\n")
    where = (["--connection", str(ready)] if source == "ssh"
             else ["--bundle", str(info.root)])
    args = ("210", *where, "--desired", str(tmp_path / "d.toml"))
    code, out = check(capsys, *args)
    assert code == 0 and "node xeon7: no drift" in out, out
    # A later drop-in (sourced after iommu.cfg: sorted by name) sets the line again without
    # building on it: update-grub's line loses iommu=pt, as the planner evaluates it too.
    later = Path(info.root) / "etc/default/grub.d/zz-reset.cfg"
    later.write_text('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n')
    code, out = check(capsys, *args)
    assert code == 2 and "- configured: absent; booted: iommu=pt" in out, out
    later.unlink()
    assert check(capsys, *args)[0] == 0
    (Path(info.root) / "etc/default/grub.d/iommu.cfg").unlink()
    code, out = check(capsys, *args)
    assert code == 2, out
    assert "- configured: absent; booted: iommu=pt" in out, out


def test_all_vms_of_a_multi_node_cluster_in_one_pass(
    fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = fresh_sim("large")
    conn, ready = connection(info, tmp_path)
    listed = api(info, "token").cluster.resources.get(type="vm")
    picks = {}
    for item in listed:  # one VM on each of three nodes
        picks.setdefault(item["node"], item["vmid"])
    chosen = [picks[n] for n in ("node1", "node2", "node3")]
    desired = DesiredState(vms={v: VmDesired(keys={"scsihw": "virtio-scsi-single"})
                                for v in chosen})
    report = check_live(conn, desired, [], all_vms=True)
    assert report.exit_code == 0
    assert sorted({i.vmid for i in report.items}) == sorted(chosen)

    # --all without a file: every VM; the 999 without a recorded desired state fail the
    # check (exit 1, an error each in JUnit), named, so CI cannot stay green by omission.
    state_dir = tmp_path / "state"
    record(state_dir, read_live(conn, chosen[0]))
    code, out = check(capsys, "--all", "--connection", str(ready), "--state-dir",
                      str(state_dir), "--format", "junit")
    root = ET.fromstring(out.encode())  # noqa: S314 (our own output)
    assert code == 1
    assert root.get("errors") == str(len(listed) - 1) and root.get("failures") == "0"
    code, out = check(capsys, "--all", "--connection", str(ready), "--state-dir",
                      str(state_dir))
    assert code == 1 and f"UNKNOWN: {len(listed) - 1} VM(s) without a desired state" in out
    # --only-desired: the recorded one only.
    code, out = check(capsys, "--all", "--only-desired", "--connection", str(ready),
                      "--state-dir", str(state_dir), "--format", "junit")
    root = ET.fromstring(out.encode())  # noqa: S314 (our own output)
    assert code == 0, out
    assert root.get("errors") == "0" and root.get("failures") == "0"
    assert root.get("skipped") == "0"


def test_a_node_that_ssh_does_not_reach_is_unknown_and_fails_the_check(
    fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = fresh_sim("large")
    # No SSH address for node2 (the simulator's /cluster/status gives node1's): unread.
    others = {name: where for name, where in info.ssh_nodes.items() if name != "node2"}
    _, ready = connection(info.model_copy(update={"ssh_nodes": others}), tmp_path)
    (tmp_path / "d.toml").write_text(
        'schema = "pvefix.desired/v1"\n[nodes.node1.cmdline]\nrequired = []\n'
        'forbidden = ["amd_iommu=on"]\n[nodes.node2.cmdline]\nrequired = ["iommu=pt"]\n')
    code, out = check(capsys, "--all", "--connection", str(ready), "--desired",
                      str(tmp_path / "d.toml"))
    assert code == 1
    assert "node node1: no drift" in out
    assert "node node2\n  UNKNOWN cmdline iommu=pt (required)" in out
    assert "SSH reaches node node1" in out


def test_every_node_with_rules_is_read_through_its_own_ssh_session(
    fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = fresh_sim("large")
    _, ready = connection(info, tmp_path)
    (tmp_path / "d.toml").write_text(
        'schema = "pvefix.desired/v1"\n[nodes.node1.cmdline]\nrequired = []\n'
        '[nodes.node2.cmdline]\nrequired = ["iommu=pt"]\n')
    code, out = check(capsys, "--all", "--connection", str(ready), "--desired",
                      str(tmp_path / "d.toml"))
    assert code == 2  # node2's own cmdline was read: iommu=pt is not on it
    assert "node node2\n  DRIFT   cmdline iommu=pt (required)" in out
    assert "host cmdlines of 1 more node(s) through their own SSH sessions" in out


def test_github_annotations_appear_when_running_in_github_actions(
    fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    info = fresh_sim()
    conn, ready = connection(info, tmp_path)
    record(tmp_path / "state", read_live(conn, 101))
    api(info, "token").nodes(info.node).qemu(101).config.put(ostype="win11")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, out = check(capsys, "101", "--connection", str(ready), "--state-dir",
                      str(tmp_path / "state"), "--format", "junit", "-o",
                      str(tmp_path / "junit.xml"))
    assert code == 2
    # The annotation points at the rule: the recorded desired-state file and its line (an
    # unkeyed file, as earlier versions wrote it: the host claimed it, under its identity).
    from tests.simkit import state_key

    rules = tmp_path / "state" / "desired" / state_key(info, "node-kpro6") / "101.toml"
    assert not (tmp_path / "state" / "desired" / "101.toml").exists()
    line = rules.read_text().splitlines().index('ostype = "l26"') + 1
    assert (f"::error file={rules},line={line},title=pvefix drift%3A VM 101 ostype::wanted l26,"
            " found win11\n") in out
    junit = ET.parse(tmp_path / "junit.xml")  # noqa: S314 (our own output)
    assert junit.getroot().get("failures") == "1"


def test_a_named_vm_without_a_recorded_state_is_an_error_that_says_what_to_do(
    fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    info = fresh_sim()
    _, ready = connection(info, tmp_path)
    code = main(["check", "101", "--connection", str(ready), "--state-dir",
                 str(tmp_path / "empty")])
    assert code == 1
    assert "no desired state recorded for VM 101" in capsys.readouterr().err




@pytest.mark.timeout(90)
@pytest.mark.parametrize("workers", ["1", "2"])
def test_few_workers_still_finish_a_cluster_read(
    workers: str, fresh_sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cluster read's coordinating tasks (host facts, other nodes, run states) wait on API
    reads queued on the same pool: with --workers 1 they once took the only worker and waited
    forever. Now --workers bounds the API reads, never the coordination."""
    info = fresh_sim("cluster3")
    conn, ready = connection(info, tmp_path)
    state_dir = tmp_path / "state"
    vmids = sorted({item["vmid"] for item in api(info, "token").cluster.resources.get(type="vm")})
    for vmid in vmids:
        record(state_dir, read_live(conn, vmid))
    code, out = check(capsys, "--all", "--only-desired", "--workers", workers, "--connection",
                      str(ready), "--state-dir", str(state_dir))
    assert code == 0, out
