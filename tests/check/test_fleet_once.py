"""A fleet's repeated rules and judgements are worked out once, and nothing else changes: the
desired-state file validates each distinct VM table once, and build_report judges each
distinct (rule, value read) pair once, yet says exactly what judging every VM alone says."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pvefix.desired.model as model
from pvefix.check.compare import build_report, compare_vm
from pvefix.desired import DesiredState, HostPciRule, MachineRule, VmDesired, loads_desired
from pvefix.errors import ParseError
from pvefix.observed import ObservedVm

HEAD = 'schema = "pvefix.desired/v1"\n'

# VM tables (the text under [vms.N]; {n} is the VMID): valid and invalid ones, and ones that
# are equal as Python values but not as TOML (1, 1.0 and true; "1" and 1).
TABLES = [
    'closed = true\n[vms.{n}.machine]\nfamily = "q35"\n',
    'closed = true\nnode = "pve2"\n[vms.{n}.machine]\nfamily = "q35"\n',
    '[vms.{n}.hostpci.hostpci0]\npcie = true\n',
    '[vms.{n}.hostpci.hostpci0]\npcie = 1\n',
    '[vms.{n}.hostpci.hostpci0]\npcie = 1.0\n',
    '[vms.{n}.keys]\ncores = 1\n',
    '[vms.{n}.keys]\ncores = "1"\n',
    '[vms.{n}.keys]\ncores = 1.0\n',
    '[vms.{n}.keys]\ncores = true\n',
    '[vms.{n}.machine]\nfamily = "q36"\n',
    'absent = ["cores"]\n[vms.{n}.keys]\ncores = "2"\n',
    'free = ["net*"]\nclosed = true\n',
    'free = ["NET!"]\n',
]


def _file(tables: list[int]) -> str:
    return HEAD + "".join(f"\n[vms.{100 + i}]\n" + TABLES[t].format(n=100 + i)
                          for i, t in enumerate(tables))


def _each_alone(text: str) -> DesiredState | str:
    """The file read with every VM table validated on its own (the reading before sharing)."""
    with mock.patch.object(model, "_shared_rules", lambda vms: vms):
        try:
            return loads_desired(text, "fleet.toml")
        except ParseError as exc:
            return str(exc)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, len(TABLES) - 1), min_size=1, max_size=12))
def test_a_file_reads_the_same_as_with_every_vm_table_validated_on_its_own(
    tables: list[int],
) -> None:
    text = _file(tables)
    try:
        got: DesiredState | str = loads_desired(text, "fleet.toml")
    except ParseError as exc:
        got = str(exc)
    assert got == _each_alone(text)  # the same state, or the same error at the same line
    if isinstance(got, DesiredState):  # and one rule per distinct table, shared
        by_table = {t: got.vms[100 + i] for i, t in enumerate(tables)}
        for i, t in enumerate(tables):
            assert got.vms[100 + i] is by_table[t]


def test_a_fleet_of_equal_tables_is_validated_once_per_distinct_table() -> None:
    tables = [0, 1, 2, 3, 5, 6] * 50
    validated: list[object] = []
    real = VmDesired.model_validate

    def counting(data: object) -> VmDesired:
        validated.append(data)
        return real(data)

    checked: list[tuple[str, ...]] = []  # the rule-wide check (pinned, absent, free)
    real_matcher = model._free_matcher

    def matcher(free: tuple[str, ...]) -> object:
        checked.append(free)
        return real_matcher(free)

    with mock.patch.object(VmDesired, "model_validate", counting), \
            mock.patch.object(model, "_free_matcher", matcher):
        state = loads_desired(_file(tables))
    assert len(state.vms) == 300
    assert len(validated) == 6  # pcie = true and pcie = 1, "1" and 1: different tables
    assert len(checked) == 6  # not again for each VM given the shared rule
    assert state.vms[100].machine == MachineRule(family="q35")


def test_an_invalid_table_among_shared_ones_is_named_where_the_file_has_it() -> None:
    text = _file([0, 0, 9, 0])
    with pytest.raises(ParseError) as caught:
        loads_desired(text, "fleet.toml")
    assert "vms.102.machine.family" in caught.value.message
    assert caught.value.line == text.splitlines().index('family = "q36"') + 1


# -- the comparison ----------------------------------------------------------------------------

RULES = [
    VmDesired(closed=True, machine=MachineRule(family="q35"), keys={"cpu": "host"},
              free=("name", "net*")),
    VmDesired(node="pve2", closed=True, machine=MachineRule(exact="pc-q35-9.2+pve1"),
              keys={"cpu": "host"}, free=("name",)),
    VmDesired(hostpci={"hostpci0": HostPciRule(mapping="gpu", pcie=True, x_vga=False)},
              absent=("tablet",), keys={"args": "-set device.hostpci0.x-nv-gpudirect-clique=1"}),
    VmDesired(hostpci={"hostpci1": HostPciRule(host="0000:41:00.0")}, closed=True),
]
VALUES = {
    "machine": [None, "q35", "pc-q35-9.2+pve1", "pc-i440fx-9.2", "bogus,,"],
    "cpu": [None, "host", "kvm64"],
    "hostpci0": [None, "mapping=gpu,pcie=1", "pcie=1,mapping=gpu,x-vga=1", "mapping=gpu"],
    "hostpci1": [None, "41:00.0", "0000:41:00.0;0000:42:00.0", "host=,,"],
    "args": [None, "-set device.hostpci0.x-nv-gpudirect-clique=1", "-x"],
    "tablet": [None, "1"],
    "name": [None, "web"],
    "net0": [None, "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr0"],
    "hookscript": [None, "local:snippets/a.pl"],
}
_CONFIG = st.fixed_dictionaries({k: st.sampled_from(v) for k, v in VALUES.items()}).map(
    lambda c: {k: v for k, v in c.items() if v is not None})
_VM = st.tuples(st.integers(0, len(RULES) - 1), _CONFIG, st.none() | _CONFIG,
                st.sampled_from([None, "pc-q35-9.2+pve1", "pc-i440fx-8.1", "nonsense"]))


@settings(max_examples=150, deadline=None)
@given(st.lists(_VM, min_size=1, max_size=12))
def test_a_fleet_is_judged_as_each_vm_alone_would_be(
    fleet: list[tuple[int, dict[str, str], dict[str, str] | None, str | None]],
) -> None:
    vms: dict[int, ObservedVm | str] = {}
    rules = {}
    for i, (rule, now, after, running) in enumerate(fleet):
        vmid = 100 + i
        vms[vmid] = ObservedVm(vmid=vmid, node=f"pve{i % 3}", current=now,
                               next=now if after is None else after,
                               status="running" if running else "stopped",
                               running_machine=running)
        rules[vmid] = RULES[rule]
    report = build_report(DesiredState(vms=rules), vms, {})
    alone = [item for vmid, observed in sorted(vms.items()) if isinstance(observed, ObservedVm)
             for item in compare_vm(rules[vmid], observed)]
    assert report.items == alone
    assert [i.vmid for i in report.items] == [i.vmid for i in alone]  # each names its own VM


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["ok", "drift", "unknown", "skipped"]), max_size=30))
def test_the_counts_and_the_exit_code_follow_the_items(statuses: list[str]) -> None:
    from pvefix.check.report import CheckItem, CheckReport

    report = CheckReport(items=[CheckItem(target="node", node="n", property=f"p{i}",
                                          status=s) for i, s in enumerate(statuses)])
    counts = report.counts()
    assert counts == {s: statuses.count(s) for s in ("ok", "drift", "unknown", "skipped")}
    assert list(counts) == ["ok", "drift", "unknown", "skipped"]  # the JSON summary's order
    assert report.exit_code == (1 if "unknown" in statuses else 2 if "drift" in statuses
                                else 0)
    assert report.json_fields()["summary"] == counts
