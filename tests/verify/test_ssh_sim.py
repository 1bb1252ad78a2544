"""The SSH path: SFTP upload, `python3 /tmp/pvefix-probe-ID.pyz` over exec, strict host keys.

The simulator's SSH server stands in for the guest's sshd; it runs only uploaded zipapps in
its /tmp (for real, isolated, without site-packages)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvefix.sim.serve import ReadyInfo
from pvefix.target.ssh import HostKeyUnknown
from pvefix.verify.take import take_probe
from tests.simkit import run, ssh
from tests.verify.conftest import ssh_guest


def test_the_probe_runs_over_ssh_and_comes_back_as_a_valid_report(kpro6_sim: ReadyInfo) -> None:
    report = take_probe(None, ssh_guest(kpro6_sim), 100, quick=True)
    assert report.quick and report.schema_ == "pvefix.probe/v1"
    assert not report.gpus.measured  # no GPU on this machine, and the probe says so
    leftovers = list((Path(kpro6_sim.root) / "tmp").glob("pvefix-probe-*"))
    assert leftovers == []


def test_an_unknown_guest_host_key_is_refused_with_the_guests_flag(
    kpro6_sim: ReadyInfo, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyUnknown, match="--guest-accept-new-host-key") as caught:
        take_probe(None, ssh_guest(kpro6_sim, known_hosts=empty), 100, quick=True)
    assert "SHA256:" in str(caught.value)
    assert empty.read_text() == ""  # never added silently


def test_trust_on_first_use_saves_the_guest_key(kpro6_sim: ReadyInfo, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    guest = ssh_guest(kpro6_sim, known_hosts=known, accept_new_host_key=True)
    take_probe(None, guest, 100, quick=True)
    assert f"[127.0.0.1]:{kpro6_sim.ssh_port} ssh-ed25519 " in known.read_text()


def test_the_simulators_python3_runs_only_uploaded_zipapps(kpro6_sim: ReadyInfo) -> None:
    client = ssh(kpro6_sim)
    try:
        for command in ("python3 -c 'print(1)'", "python3 /etc/pve/x.pyz",
                        "python3 /tmp/missing.pyz"):
            code, _, err = run(client, command)
            assert code == 2 and "python3:" in err, command
    finally:
        client.close()
