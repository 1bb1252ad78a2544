"""SSH exec and SFTP with strict host key checking, and a host reboot."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import paramiko
import pytest

from pvefix.sim.serve import ReadyInfo
from tests.simkit import run, ssh, ssh_when_back


def test_an_unknown_host_key_is_rejected(kpro6_sim: ReadyInfo, tmp_path: Path) -> None:
    other = tmp_path / "known_hosts"
    other.write_text(f"[127.0.0.1]:{kpro6_sim.ssh_port} ssh-ed25519 "
                     "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
    client = paramiko.SSHClient()
    client.load_host_keys(str(other))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.SSHException):
        client.connect(kpro6_sim.ssh_host, port=kpro6_sim.ssh_port, username="root",
                       key_filename=kpro6_sim.ssh_key, look_for_keys=False, allow_agent=False)


def test_cat_prints_host_files(kpro6_sim: ReadyInfo) -> None:
    client = ssh(kpro6_sim)
    code, out, _ = run(client, "cat /etc/kernel/cmdline")
    assert code == 0
    assert out == "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"
    code, _, err = run(client, "cat /etc/nothing")
    assert code == 1 and err == "cat: /etc/nothing: No such file or directory\n"


def test_password_login_works_too(kpro6_sim: ReadyInfo) -> None:
    assert run(ssh(kpro6_sim, password=True), "uname -r") == (0, "6.17.2-1-pve\n", "")


def test_boot_tool_status_gives_its_output_and_exit_code(kpro6_sim: ReadyInfo) -> None:
    client = ssh(kpro6_sim)
    code, out, _ = run(client, "proxmox-boot-tool status")
    assert code == 0 and "is configured with: uefi" in out
    assert run(client, "proxmox-boot-tool status --quiet") == (0, "", "")


def test_boot_tool_on_plain_grub_exits_2(fresh_sim: Callable[..., ReadyInfo]) -> None:
    info = fresh_sim("intel-grub")
    code, _, err = run(ssh(info), "proxmox-boot-tool status")
    assert code == 2 and err.startswith("E: /etc/kernel/proxmox-boot-uuids does not exist.")


def test_an_unknown_command_is_127(kpro6_sim: ReadyInfo) -> None:
    assert run(ssh(kpro6_sim), "nvidia-smi -L") == (
        127, "", "bash: nvidia-smi: command not found\n"
    )


def test_chains_stop_at_the_first_failure(kpro6_sim: ReadyInfo) -> None:
    code, out, _ = run(ssh(kpro6_sim), "test -e /etc/none && echo yes || echo no")
    assert (code, out) == (0, "no\n")


def test_sftp_write_then_atomic_rename(fresh_sim: Callable[..., ReadyInfo]) -> None:
    info = fresh_sim()
    client = ssh(info)
    sftp = client.open_sftp()
    with sftp.open("/etc/kernel/cmdline.pvefix-tmp", "w") as fh:
        fh.write("root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n")
    with pytest.raises(OSError):
        sftp.rename("/etc/kernel/cmdline.pvefix-tmp", "/etc/kernel/cmdline")  # target exists
    sftp.posix_rename("/etc/kernel/cmdline.pvefix-tmp", "/etc/kernel/cmdline")
    assert run(client, "cat /etc/kernel/cmdline")[1].endswith("iommu=pt\n")
    assert "cmdline.pvefix-tmp" not in sftp.listdir("/etc/kernel")


def test_sftp_refuses_the_simulators_own_files(kpro6_sim: ReadyInfo) -> None:
    sftp = ssh(kpro6_sim).open_sftp()
    assert ".pvefix-sim" not in sftp.listdir("/")
    with pytest.raises(PermissionError):
        sftp.listdir("/.pvefix-sim")
    with pytest.raises(PermissionError):
        sftp.stat("/root/../.pvefix-sim/secrets.json")


def test_qm_set_over_ssh_is_root_pam(fresh_sim: Callable[..., ReadyInfo]) -> None:
    info = fresh_sim()
    client = ssh(info)
    assert run(client, "qm set 101 --hostpci0 0000:41:00.0")[0] == 0
    code, out, _ = run(client, "qm config 101")
    assert code == 0 and "hostpci0: 0000:41:00.0\n" in out


def _proc_cmdline_after_reboot(info: ReadyInfo, before_reboot: str) -> str:
    client = ssh(info)
    code, _, _ = run(client, before_reboot + " && reboot")
    assert code == 0
    time.sleep(0.3)
    with pytest.raises((OSError, paramiko.SSHException)):
        ssh(info)  # the node is down
    return run(ssh_when_back(info), "cat /proc/cmdline")[1]


def test_reboot_after_refresh_boots_the_new_cmdline(fresh_sim: Callable[..., ReadyInfo]) -> None:
    info = fresh_sim()
    after = _proc_cmdline_after_reboot(
        info, "echo root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt > /etc/kernel/cmdline"
        " && proxmox-boot-tool refresh"
    )
    assert after == (
        "initrd=\\EFI\\proxmox\\6.17.2-1-pve\\initrd.img-6.17.2-1-pve "
        "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n"
    )


def test_reboot_without_refresh_keeps_the_old_cmdline(fresh_sim: Callable[..., ReadyInfo]) -> None:
    info = fresh_sim()
    after = _proc_cmdline_after_reboot(info, "echo root=ZFS=x iommu=pt > /etc/kernel/cmdline")
    assert "iommu=pt" not in after


def test_update_grub_then_reboot_on_plain_grub(fresh_sim: Callable[..., ReadyInfo]) -> None:
    info = fresh_sim("intel-grub")
    client = ssh(info)
    text = run(client, "cat /etc/default/grub")[1].replace(
        'GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on"',
        'GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on iommu=pt"',
    )
    with client.open_sftp().open("/etc/default/grub", "w") as fh:
        fh.write(text)
    after = _proc_cmdline_after_reboot(info, "update-grub")
    assert after == (
        "BOOT_IMAGE=/boot/vmlinuz-6.8.12-11-pve root=/dev/mapper/pve-root ro quiet "
        "intel_iommu=on iommu=pt\n"
    )


def test_onboot_vms_run_again_after_a_host_reboot(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    from tests.simkit import api

    info = fresh_sim()
    token = api(info)
    token.nodes(info.node).qemu(100).config.put(onboot=1)
    _proc_cmdline_after_reboot(info, "true")
    deadline = time.monotonic() + 10
    while token.nodes(info.node).qemu(100).status.current.get()["status"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert token.nodes(info.node).qemu(101).status.current.get()["status"] == "stopped"


def test_cat_and_cp_never_follow_a_link_out_of_the_tree(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    info = fresh_sim("kpro6")
    outside = tmp_path / "outside-secret"
    outside.write_text("not the node's\n")
    (Path(info.root) / "etc" / "evil").symlink_to(outside)
    client = ssh(info)
    for command in ("cat /etc/evil", "cp /etc/evil /etc/copied"):
        _, stdout, stderr = client.exec_command(command)
        assert stdout.channel.recv_exit_status() != 0, command
        assert "Permission denied" in stderr.read().decode()
    assert not (Path(info.root) / "etc" / "copied").exists()
    client.close()
