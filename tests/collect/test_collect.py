"""The real collect script, run with `sh` on a fake kpro6, imports into the same host state."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from pvefix.collect import import_bundle, render_script
from pvefix.collect.facts import FACTS_DIR
from pvefix.errors import ParseError, PvefixError, RefusedError
from pvefix.hosttree import load_tree, resolve_scenario
from pvefix.planner.plan import plan
from pvefix.sources.bundle import read_bundle
from tests.collect.fakehost import SECRET, FakeHost, make_fake_host

# tarfile's extraction filters came in Python 3.11.4 (Debian 12 has 3.11.2); these tarballs
# are the tests' own.
EXTRACT = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


def _run_script(host: FakeHost, vmids: tuple[int, ...] = ()) -> subprocess.CompletedProcess[str]:
    script = render_script(vmids)
    return subprocess.run(
        ["sh", "-s"], input=script, env=host.env(), capture_output=True, text=True, timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> tuple[FakeHost, Path, str]:
    base = tmp_path_factory.mktemp("collect")
    host = make_fake_host(base)
    result = _run_script(host)
    assert result.returncode == 0, result.stderr
    return host, host.root / "root/pvefix-bundle-kpro6.tar.gz", result.stdout


def test_the_script_writes_the_tarball_and_says_how_to_get_it_off(
    collected: tuple[FakeHost, Path, str],
) -> None:
    _host, tarball, stdout = collected
    assert tarball.is_file()
    assert f"bundle written: {tarball}" in stdout
    assert "scp root@kpro6:" in stdout
    assert "pvefix collect import pvefix-bundle-kpro6.tar.gz" in stdout


def test_the_tarball_holds_no_secret_and_no_link(collected: tuple[FakeHost, Path, str]) -> None:
    _host, tarball, _ = collected
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        assert not any("priv" in name for name in names)
        assert all(m.isfile() or m.isdir() for m in tar.getmembers())
        for member in tar.getmembers():
            if member.isfile():
                data = tar.extractfile(member)
                assert data is not None
                assert SECRET.encode() not in data.read()
    assert "./.pvefix-facts/qm-status-100" in names
    assert "./etc/pve/nodes/kpro6/qemu-server/100.conf" in names


def test_the_script_never_names_the_secret_folder() -> None:
    assert "/etc/pve/priv" not in render_script()
    assert "/etc/pve/priv" not in render_script([100, 101])


def test_import_reads_into_the_same_state_and_plan_as_the_scenario(
    collected: tuple[FakeHost, Path, str], tmp_path: Path
) -> None:
    _host, tarball, _ = collected
    dest = tmp_path / "tree"
    summary = import_bundle(tarball, dest)
    scenario = resolve_scenario("kpro6")
    for vmid in (100, 101):
        got, want = read_bundle(dest, vmid), read_bundle(scenario, vmid)
        assert got.node == want.node
        assert got.boot_tool == want.boot_tool
        assert got.files == want.files
        assert got.pci_devices == want.pci_devices
        assert got.acs == want.acs
        assert got.mappings == want.mappings
        assert got.vm == want.vm
        assert got == want
        assert plan(got) == plan(want)
    meta, scenario_meta = load_tree(dest).meta, load_tree(scenario).meta
    assert meta.cpu == scenario_meta.cpu
    assert meta.versions == scenario_meta.versions
    assert meta.proxmox_boot_tool == scenario_meta.proxmox_boot_tool
    assert meta.vms == scenario_meta.vms
    assert summary.node == "kpro6"
    assert summary.vms[100].startswith("kpro6: running (pc-i440fx-10.1+pve0)")
    assert summary.vms[101] == "kpro6: stopped"
    nvidia = [g for g in summary.gpus if g.ids == "10de:2bb5"]
    assert [g.iommu_group for g in nvidia] == [42, 61, 28, 10, 101, 117, 90, 72]
    assert {g.driver for g in nvidia} == {"vfio-pci"}
    assert [g.driver for g in summary.gpus if g not in nvidia] == ["ast"]  # the BMC's VGA


def test_an_unpacked_folder_imports_like_the_tarball(
    collected: tuple[FakeHost, Path, str], tmp_path: Path
) -> None:
    _host, tarball, _ = collected
    unpacked = tmp_path / "unpacked"
    with tarfile.open(tarball) as tar:
        tar.extractall(unpacked, **EXTRACT)  # noqa: S202 (the test's own tarball)
    import_bundle(unpacked, tmp_path / "tree")
    assert read_bundle(tmp_path / "tree", 100) == read_bundle(resolve_scenario("kpro6"), 100)


def test_vmid_limits_the_configs_and_run_states_taken(tmp_path: Path) -> None:
    host = make_fake_host(tmp_path)
    result = _run_script(host, (101,))
    assert result.returncode == 0, result.stderr
    summary = import_bundle(host.root / "root/pvefix-bundle-kpro6.tar.gz", tmp_path / "tree")
    assert list(summary.vms) == [101]


def _tarball(path: Path, name: str) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(name)
        payload = b"evil\n"
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return path


@pytest.mark.parametrize("member", ["../evil", "/etc/evil", "./etc/../../evil"])
def test_import_refuses_members_that_leave_the_tree(tmp_path: Path, member: str) -> None:
    bundle = _tarball(tmp_path / "bad.tar.gz", member)
    with pytest.raises(RefusedError, match=r"absolute path|leaves the tree"):
        import_bundle(bundle, tmp_path / "tree")
    assert not (tmp_path / "tree").exists()
    assert not (tmp_path / "evil").exists()


def test_import_refuses_a_link_member(tmp_path: Path) -> None:
    bundle = tmp_path / "link.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        info = tarfile.TarInfo("etc/kernel/cmdline")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/shadow"
        tar.addfile(info)
    with pytest.raises(RefusedError, match="is a link"):
        import_bundle(bundle, tmp_path / "tree")


def test_a_missing_fact_file_is_an_error_naming_it(
    collected: tuple[FakeHost, Path, str], tmp_path: Path
) -> None:
    _host, tarball, _ = collected
    unpacked = tmp_path / "unpacked"
    with tarfile.open(tarball) as tar:
        tar.extractall(unpacked, **EXTRACT)  # noqa: S202 (the test's own tarball)
    (unpacked / FACTS_DIR / "meminfo").unlink()
    with pytest.raises(ParseError, match=r"\.pvefix-facts/meminfo: missing fact file: expected "
                       r"the MemTotal line"):
        import_bundle(unpacked, tmp_path / "tree")
    assert not (tmp_path / "tree").exists()


def test_import_does_not_write_into_a_folder_that_holds_files(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "keep.txt").write_text("mine")
    with pytest.raises(PvefixError, match="not an empty folder"):
        import_bundle(_tarball(tmp_path / "ok.tar.gz", "x"), tmp_path / "tree")
    assert (tmp_path / "tree" / "keep.txt").read_text() == "mine"
