"""The VM's next start (pvefix.vmconfig.nextstart): the main section with [PENDING] applied,
from a file or from the API's rows, one coercion of values to text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pvefix.sim.vmview import api_pending
from pvefix.vmconfig.config import VMConfig
from pvefix.vmconfig.nextstart import NextStart, as_text, stage

STAGED = """#GPU box
cpu: x86-64-v2-AES
hostpci0: 0000:17:00
hostpci1: 0000:31:00.0
hostpci2: 0000:9a:00.0
memory: 8192
onboot: 1

[PENDING]
cpu: host
delete: hostpci2,!memory
hostpci1: 0000:9b:00.0
"""


def test_pending_values_count_and_deletes_are_honoured() -> None:
    ns = NextStart.from_text(STAGED)
    assert ns.values == {"description": "GPU box", "cpu": "host", "hostpci0": "0000:17:00",
                         "hostpci1": "0000:9b:00.0", "onboot": "1"}
    assert ns.value("hostpci2") is None and ns.value("memory") is None
    assert ns.current["hostpci2"] == "0000:9a:00.0"
    assert ns.deletes == {"hostpci2": False, "memory": True}
    assert ns.delete_list() == ["hostpci2", "!memory"]
    assert [s.describe() for s in ns.staged()] == [
        "cpu: host", "hostpci1: 0000:9b:00.0", "delete: hostpci2", "delete: !memory"]


def test_a_pending_value_wins_over_a_pending_delete_of_the_same_key() -> None:
    # vmconfig_apply_pending: the deletes first, then the pending values.
    ns = NextStart.from_text("cpu: kvm64\n\n[PENDING]\ncpu: host\ndelete: cpu\n")
    assert ns.value("cpu") == "host"


def test_the_api_rows_give_the_same_model_as_the_file() -> None:
    cfg = VMConfig.parse(STAGED)
    from_file = NextStart.from_config(cfg, "d1")
    from_api = NextStart.from_rows(api_pending(cfg, "d1"))
    assert from_api == from_file


def test_one_coercion_booleans_as_proxmox_writes_them() -> None:
    assert (as_text(True), as_text(False), as_text(1), as_text(2.0), as_text("x")) == (
        "1", "0", "1", "2", "x")
    rows = [{"key": "onboot", "value": True, "pending": False}, {"key": "digest", "value": "d"}]
    ns = NextStart.from_rows(rows)
    assert (ns.current, ns.pending, ns.digest) == ({"onboot": "1"}, {"onboot": "0"}, "d")


def test_writing_a_staged_delete_takes_it_off_the_list_as_proxmox_does() -> None:
    cfg = VMConfig.parse(STAGED)
    stage(cfg, "hostpci2", "0000:9a:00.0,pcie=1")
    assert NextStart.from_config(cfg).value("hostpci2") == "0000:9a:00.0,pcie=1"
    assert NextStart.from_config(cfg).deletes == {"memory": True}
    stage(cfg, "hostpci1", None)
    ns = NextStart.from_config(cfg)
    assert "hostpci1" not in ns.pending and ns.deletes["hostpci1"] is False


KEYS = st.sampled_from(["cpu", "memory", "hostpci0", "hostpci1", "name"])
VALUES = st.sampled_from(["1", "0", "host", "4096", "0000:17:00.0", "a-b"])


@settings(max_examples=60, deadline=None)
@given(main=st.dictionaries(KEYS, VALUES), pending=st.dictionaries(KEYS, VALUES),
       deletes=st.dictionaries(KEYS, st.booleans()))
def test_file_and_rows_agree_for_any_staged_changes(
    main: dict[str, str], pending: dict[str, str], deletes: dict[str, bool]
) -> None:
    cfg = VMConfig.from_dicts(main, pending=pending or None,
                              pending_deletes=[("!" if f else "") + k
                                               for k, f in deletes.items()] or None)
    from_file = NextStart.from_config(cfg, "d")
    assert NextStart.from_rows(api_pending(cfg, "d")) == from_file
    expected = {k: v for k, v in main.items() if k not in deletes} | pending
    assert from_file.values == expected
