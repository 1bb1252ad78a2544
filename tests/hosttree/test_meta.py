"""pvefix-host.json: strict, and every error names the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvefix.errors import ParseError
from pvefix.hosttree import HostTree, VmState, load_tree, parse_meta


def _meta(tree: HostTree) -> dict:
    return json.loads((tree.root / "pvefix-host.json").read_text())


def _write(tree: HostTree, data: dict) -> None:
    (tree.root / "pvefix-host.json").write_text(json.dumps(data))


def test_an_unknown_top_level_key_is_named_with_the_file(kpro6: HostTree) -> None:
    data = _meta(kpro6)
    data["hostname"] = "kpro6"
    _write(kpro6, data)
    with pytest.raises(ParseError) as err:
        load_tree(kpro6.root)
    assert "pvefix-host.json" in str(err.value)
    assert "unknown key 'hostname'" in str(err.value)


def test_an_unknown_nested_key_is_named_by_its_path(kpro6: HostTree) -> None:
    data = _meta(kpro6)
    data["cpu"]["socket"] = 2
    _write(kpro6, data)
    with pytest.raises(ParseError, match=r"pvefix-host\.json: .*unknown key 'cpu\.socket'"):
        load_tree(kpro6.root)


def test_a_wrong_type_names_the_field(kpro6: HostTree) -> None:
    data = _meta(kpro6)
    data["cpu"]["sockets"] = "two"
    _write(kpro6, data)
    with pytest.raises(ParseError, match=r"pvefix-host\.json: cpu\.sockets: .*integer"):
        load_tree(kpro6.root)


def test_a_bad_vm_state_names_the_vmid(kpro6: HostTree) -> None:
    data = _meta(kpro6)
    data["vms"]["100"]["status"] = "sleeping"
    _write(kpro6, data)
    with pytest.raises(ParseError, match=r"vms\.100\.status"):
        load_tree(kpro6.root)


def test_broken_json_names_the_line() -> None:
    with pytest.raises(ParseError) as err:
        parse_meta('{\n  "schema": "pvefix.host/v1",\n  oops\n}', source="x/pvefix-host.json")
    assert err.value.line == 3
    assert str(err.value).startswith("x/pvefix-host.json:3: not valid JSON")


@pytest.mark.parametrize(
    ("change", "wanted"),
    [
        ({"schema": "pvefix.host/v2"}, "schema"),
        ({"node": "bad_name"}, "node"),
        ({"cluster_nodes": ["other"]}, "not in cluster_nodes"),
        ({"vms": {"42": {"status": "stopped"}}}, "not a VMID"),
        ({"vms": {"101": {"status": "stopped", "running_machine": "pc"}}}, "no running_machine"),
        ({"acs": {"00:01.1": "SrcValid+"}}, "acs"),
        ({"tokens": [{"id": "root@pam"}]}, "tokens.0.id"),
    ],
)
def test_invalid_values_are_refused(kpro6: HostTree, change: dict, wanted: str) -> None:
    data = _meta(kpro6)
    data.update(change)
    with pytest.raises(ParseError, match=wanted):
        parse_meta(json.dumps(data))


def test_cluster_nodes_default_to_the_node(kpro6: HostTree) -> None:
    data = _meta(kpro6)
    del data["cluster_nodes"]
    assert parse_meta(json.dumps(data)).cluster_nodes == ["kpro6"]


def test_a_vm_missing_from_vms_is_stopped(kpro6: HostTree) -> None:
    assert kpro6.vm_state(999).status == "stopped"


def test_save_meta_round_trips_and_refuses_invalid_updates(kpro6: HostTree) -> None:
    kpro6.meta.vms["101"] = VmState(status="running", running_machine="pc-i440fx-10.1+pve0")
    kpro6.save_meta()
    again = load_tree(kpro6.root)
    assert again.vm_state(101).running_machine == "pc-i440fx-10.1+pve0"
    assert again.meta == kpro6.meta
    with pytest.raises(ValueError, match="sockets"):
        kpro6.meta.cpu.sockets = "many"  # type: ignore[assignment]
    leftovers = [p.name for p in Path(kpro6.root).iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
