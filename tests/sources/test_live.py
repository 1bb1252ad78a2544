"""read_live against the simulator over real HTTPS and SSH: same state as the bundle, checked
TLS and host keys, and the round-trip budget."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from cryptography import x509

from pvefix.errors import PvefixError
from pvefix.sim.serve import write_ready_file
from pvefix.sources.bundle import read_bundle
from pvefix.sources.common import bridges_above, vm_device_addresses
from pvefix.sources.live import LiveTrace, read_live, same_mappings
from pvefix.state import HostState
from pvefix.target.api import count_waves
from pvefix.target.settings import Connection, resolve_connection
from pvefix.target.ssh import HostKeyUnknown, SshShell
from pvefix.vmconfig.config import VMConfig
from tests.simkit import grant

if TYPE_CHECKING:
    from pvefix.sim.serve import ReadyInfo

BASIC = ("address", "vendor", "device", "class_", "subsystem_vendor", "subsystem_device",
         "iommu_group", "parent_path")


def connection(info: ReadyInfo, tmp_path: Path, **changes: Any) -> Connection:
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    return resolve_connection(connection_file=ready, env={}).model_copy(update=changes)


def assert_same_for_planner(live: HostState, bundle: HostState) -> None:
    """Every field the planner reads is the same, whichever way the host was read."""
    assert live.vm == bundle.vm
    assert live.files == bundle.files
    assert live.boot_tool == bundle.boot_tool
    skip = set() if live.vm.status == "running" else {"qemu_version"}  # API: running-qemu
    assert live.node.model_dump(exclude=skip) == bundle.node.model_dump(exclude=skip)
    assert same_mappings(live.mappings, bundle.mappings)
    assert live.acs == bundle.acs
    cfg = VMConfig.parse(bundle.vm.config_text)
    known = [d.address for d in bundle.pci_devices]
    vm_devs = vm_device_addresses(cfg, bundle.vm.node, bundle.mappings, known)
    full = set(vm_devs) | set(bridges_above(d for d in bundle.pci_devices if d.address in vm_devs))
    assert [d.address for d in live.pci_devices] == known
    for got, want in zip(live.pci_devices, bundle.pci_devices, strict=True):
        if got.address in full:
            assert got == want, got.address
        else:
            assert got.model_dump(include=set(BASIC)) == want.model_dump(include=set(BASIC))


@pytest.mark.parametrize("auth", ["token", "password"])
def test_live_read_equals_the_bundle_of_the_same_tree(
    kpro6_sim: ReadyInfo, tmp_path: Path, auth: str,
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    conn = connection(kpro6_sim, tmp_path, auth=auth)
    live = read_live(conn, 100)
    assert_same_for_planner(live, read_bundle(kpro6_sim.root, 100))
    assert live.access.auth == ("token" if auth == "token" else "ticket")
    assert live.access.user == ("root@pam!pvefix" if auth == "token" else "root@pam")
    assert live.access.is_root_pam_ticket is (auth == "password")
    assert live.notes == []
    out = capsys.readouterr()
    for secret in (kpro6_sim.password, kpro6_sim.token_secret):
        assert secret not in caplog.text + out.out + out.err


def test_a_stopped_vm_and_unknown_node_read_the_same_too(
    kpro6_sim: ReadyInfo, tmp_path: Path
) -> None:
    live = read_live(connection(kpro6_sim, tmp_path, node=None), 101)
    assert_same_for_planner(live, read_bundle(kpro6_sim.root, 101))


@pytest.mark.parametrize(("scenario", "vmid"), [("intel-grub", 200), ("windows-igd", 300)])
def test_other_scenarios_read_the_same_live_and_from_the_bundle(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path, scenario: str, vmid: int
) -> None:
    info = fresh_sim(scenario)
    grant(info.root, info.token_id)  # intel-grub's token is privilege-separated
    assert_same_for_planner(read_live(connection(info, tmp_path), vmid),
                            read_bundle(info.root, vmid))


def test_without_ssh_the_config_is_rebuilt_from_the_api_and_says_so(
    kpro6_sim: ReadyInfo, tmp_path: Path
) -> None:
    live = read_live(connection(kpro6_sim, tmp_path, ssh=False), 100)
    bundle = read_bundle(kpro6_sim.root, 100)
    assert live.vm.config_source == "api"
    assert live.vm.digest == bundle.vm.digest  # the API's digest: what writes must send
    assert VMConfig.parse(live.vm.config_text).main.as_dict() == (
        VMConfig.parse(bundle.vm.config_text).main.as_dict()
    )
    assert any("rebuilt from the API" in note for note in live.notes)
    assert any("no SSH" in note for note in live.notes)
    assert all(fact.text is None for fact in live.files.values())
    assert live.boot_tool.exit_code is None
    assert live.access.ssh is False


def test_the_reads_take_one_api_wave_when_the_node_is_known_and_two_when_not(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path
) -> None:
    # Waves are told apart by timing: 100 ms per answer keeps a request that a loaded machine
    # starts late still inside its own wave.
    info = fresh_sim("kpro6", latency_ms=100)
    for node, waves in (("kpro6", 1), (None, 2)):
        trace = LiveTrace(record_api=True)
        state = read_live(connection(info, tmp_path, node=node), 100, trace=trace)
        assert state.vm.vmid == 100
        assert trace.api is not None
        assert count_waves(trace.api.records) == waves, trace.api.records
        assert len(trace.ssh_rounds) <= 3


def test_an_unknown_host_key_is_refused_with_its_fingerprint(
    kpro6_sim: ReadyInfo, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    conn = connection(kpro6_sim, tmp_path, known_hosts=empty)
    with pytest.raises(HostKeyUnknown) as err:
        SshShell(conn)
    message = str(err.value)
    assert "SHA256:" in message and "--accept-new-host-key" in message
    assert _host_key_fingerprint(kpro6_sim) in message
    assert not empty.exists()


def test_accept_new_host_key_saves_it_and_the_next_connection_needs_no_flag(
    kpro6_sim: ReadyInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    known = tmp_path / "kh" / "known_hosts"
    SshShell(connection(kpro6_sim, tmp_path, known_hosts=known,
                        accept_new_host_key=True)).close()
    assert f"[127.0.0.1]:{kpro6_sim.ssh_port} ssh-ed25519 " in known.read_text()
    assert "trusting new SSH host key" in capsys.readouterr().err
    shell = SshShell(connection(kpro6_sim, tmp_path, known_hosts=known))
    assert shell.run(["uname", "-r"]).ok
    shell.close()


def test_a_changed_host_key_is_refused_even_with_accept_new(
    kpro6_sim: ReadyInfo, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    other = "AAAAC3NzaC1lZDI1NTE5AAAAIGb8mPGBR6WyA8WrVbZ8wG7PqXkq5cDk2HnAWqA8FKtU"
    known.write_text(f"[127.0.0.1]:{kpro6_sim.ssh_port} ssh-ed25519 {other}\n")
    with pytest.raises(PvefixError, match="CHANGED"):
        SshShell(connection(kpro6_sim, tmp_path, known_hosts=known, accept_new_host_key=True))


def test_a_wrong_ca_is_refused_and_the_error_shows_the_certificate(
    kpro6_sim: ReadyInfo, tmp_path: Path
) -> None:
    wrong = tmp_path / "other-ca.pem"
    wrong.write_bytes(_self_signed_pem())
    with pytest.raises(PvefixError) as err:
        read_live(connection(kpro6_sim, tmp_path, ca_cert=wrong, ssh=False), 100)
    assert "not trusted" in str(err.value)
    assert _api_fingerprint(kpro6_sim) in str(err.value)


def test_a_pinned_fingerprint_is_accepted_without_a_ca(
    kpro6_sim: ReadyInfo, tmp_path: Path
) -> None:
    pin = _api_fingerprint(kpro6_sim)
    conn = connection(kpro6_sim, tmp_path, ca_cert=None, fingerprint=pin, ssh=False)
    assert read_live(conn, 100).vm.vmid == 100
    conn = connection(kpro6_sim, tmp_path, ca_cert=None, fingerprint=pin, ssh=False,
                      auth="password")
    assert read_live(conn, 100).access.auth == "ticket"


def test_a_wrong_pinned_fingerprint_is_refused_before_the_password_is_sent(
    kpro6_sim: ReadyInfo, tmp_path: Path
) -> None:
    conn = connection(kpro6_sim, tmp_path, ca_cert=None, fingerprint="00" * 32, ssh=False,
                      auth="password")
    with pytest.raises(PvefixError, match="pinned fingerprint mismatch"):
        read_live(conn, 100)


def test_insecure_works_and_warns_loudly(
    kpro6_sim: ReadyInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = connection(kpro6_sim, tmp_path, ca_cert=None, insecure=True, ssh=False)
    assert read_live(conn, 100).vm.vmid == 100
    assert "WARNING: TLS certificate checking is OFF" in capsys.readouterr().err


# -- helpers ----------------------------------------------------------------------------------


def _api_fingerprint(info: ReadyInfo) -> str:
    from cryptography.hazmat.primitives import serialization

    pem = (Path(info.root) / ".pvefix-sim" / "server.pem").read_bytes()
    der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, 64, 2))


def _host_key_fingerprint(info: ReadyInfo) -> str:
    import base64

    line = Path(info.known_hosts).read_text().split()
    blob = base64.b64decode(line[2])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _self_signed_pem() -> bytes:
    import datetime

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "Other CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(1)
        .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)
