"""The verdict per BAR and for the VM, from what the node script read over QMP."""

from __future__ import annotations

from typing import Any

import pytest

from pvefix.commands.rehearse_cmd import exit_code
from pvefix.errors import PvefixError
from pvefix.rehearse.build import Job, StandIn
from pvefix.rehearse.verdict import Verdict, bar_verdicts, judge, render_text

G = 1 << 30
T = 1 << 40


def _dev(qid: str, addr: int, size: int = 128 * G) -> dict[str, Any]:
    return {"qdev_id": qid, "regions": [{"bar": 0, "address": 0x8000_0000, "size": 4096},
                                        {"bar": 2, "address": addr, "size": size}]}


def _port(child: dict[str, Any]) -> dict[str, Any]:
    return {"qdev_id": "ich9-pcie-port-1", "regions": [],
            "pci_bridge": {"bus": {}, "devices": [child]}}


def _pci(*devices: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"bus": 0, "devices": [{"qdev_id": "", "regions": []}, *devices]}]


STANDS = [StandIn(f"hostpci{i}", f"0000:0{i}:00.0", 128 * G, "ich9-pcie-port-1")
          for i in range(4)]


def test_each_bar_is_placed_not_placed_beyond_reach_or_over_ram() -> None:
    pci = _pci(_port(_dev("hostpci0", 56 * T)),          # placed, behind a root port
               _dev("hostpci1", -1),                      # QMP: unmapped
               _dev("hostpci2", 2 * T),                   # ends above 2^40
               _dev("hostpci3", 512 * G))                 # inside RAM 0.5T-1T
    bars = bar_verdicts(pci, STANDS, 57, [[0, 2 * G], [512 * G, T]])
    assert [b.status for b in bars] == ["placed", "not-placed", "placed", "overlaps-ram"]
    assert bars[0].address == 56 * T and bars[0].end == 56 * T + 128 * G
    bars = bar_verdicts(pci, STANDS, 40, [])
    assert bars[2].status == "beyond-reach" and bars[0].status == "beyond-reach"


def test_a_stand_in_missing_from_query_pci_is_not_placed() -> None:
    assert bar_verdicts(_pci(), STANDS[:1], 52, [])[0].status == "not-placed"
    assert bar_verdicts(_pci(_dev("hostpci0", 0)), STANDS[:1], 52, [])[0].status == "not-placed"
    wrapped = _dev("hostpci0", (1 << 64) - (4 * G))
    assert bar_verdicts(_pci(wrapped), STANDS[:1], 52, [])[0].status == "not-placed"


def _job(n: int = 1) -> Job:
    return Job(argv=[], accel="tcg", machine="q35", cpu="qemu64", ram_mb=4096,
               firmware="ovmf", vars_template=None, stand_ins=STANDS[:n], phys_bits=46)


def test_the_vm_outcome_and_its_message() -> None:
    booted = {"outcome": "booted", "query_pci": _pci(_dev("hostpci0", 56 * T)), "phys-bits": 45,
              "ram": []}
    assert judge(booted, _job())[:2] == ("not-placed", "1 of 1 BARs not usable (beyond-reach)")
    booted["phys-bits"] = 52
    assert judge(booted, _job())[:2] == ("placed", "all 1 BARs placed below 2^52")
    outcome, message, _ = judge({"outcome": "timeout", "boot_s": 45.0}, _job())
    assert outcome == "no-boot" and message.startswith(
        "the firmware did not reach its boot manager in 45 s: this VM would not boot (under TCG")
    refused = {"outcome": "refused", "qemu_output":
               "kvm: Address space limit 0xffffffffff < 0x27fbfffffff phys-bits too low (40)"}
    assert judge(refused, _job()) == ("qemu-refused", refused["qemu_output"], [])
    assert judge({"outcome": "stopped", "why": "interrupted by signal 2"}, _job())[:2] == (
        "error", "interrupted by signal 2")


def _verdict(outcome: str) -> Verdict:
    booted = {"outcome": "booted", "query_pci": _pci(_dev("hostpci0", 56 * T)), "phys-bits": 52}
    _, message, bars = judge(booted, _job())
    return Verdict(vmid=100, node="kpro6", config="phase 1", outcome=outcome,  # type: ignore[arg-type]
                   message=message, accel="tcg", qemu="QEMU 9.2.0", machine="q35",
                   cpu="qemu64", ram_mb=4096, firmware="ovmf", bars=bars, phys_bits=52,
                   vendor="AuthenticAMD", boot_s=2.5, peak_rss_mb=260)


def test_exit_codes_and_the_text_and_json_views() -> None:
    assert [exit_code(_verdict(o)) for o in
            ("placed", "not-placed", "no-boot", "qemu-refused", "error")] == [0, 2, 2, 2, 1]
    text = render_text(_verdict("placed"))
    assert "hostpci0 (0000:00:00.0, 128 GiB): placed at 0x380000000000-0x382000000000" in text
    assert "ALL PLACED: all 1 BARs placed below 2^52 (2.5 s, peak 260 MiB)" in text
    data = _verdict("placed").to_json()
    assert data["ok"] is True and data["schema"] == "pvefix.rehearse/v1"
    assert data["bars"][0]["address"] == "0x380000000000"


def test_the_json_verdict_validates_against_its_shipped_schema() -> None:
    import jsonschema

    from pvefix.schemas import shipped

    schema = shipped("rehearse")
    jsonschema.Draft202012Validator.check_schema(schema)
    for outcome in ("placed", "not-placed", "no-boot"):
        data = _verdict(outcome).to_json()
        data["command"] = "/usr/bin/kvm -accel tcg"
        jsonschema.Draft202012Validator(schema).validate(data)
    data["bars"][0]["status"] = "maybe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(data)


def test_a_verdict_resting_on_what_the_rehearsal_left_out_is_not_established() -> None:
    """An input of the next start that can move a BAR and that the rehearsal did not boot
    (pvefix/rehearse/unmodelled.py): never a pass (exit 1), nor a failing verdict; the text
    says what the firmware did without it, and names it."""
    import jsonschema

    from pvefix.flow.rehearsal import refuse_failed
    from pvefix.schemas import shipped

    left = "args-word -device (args: -device ivshmem-plain,memdev=m): another device"
    for outcome in ("placed", "not-placed"):
        v = _verdict(outcome)
        v.not_established = [left]
        assert not v.ok and exit_code(v) == 1
        text = render_text(v)
        assert "NOT ESTABLISHED: without what the rehearsal left out (below), the firmware says" \
            in text and f"  not booted: {left}" in text
        data = v.to_json()
        assert data["ok"] is False and data["not_established"] == [left]
        data["command"] = "/usr/bin/kvm"
        jsonschema.Draft202012Validator(shipped("rehearse")).validate(data)
        with pytest.raises(PvefixError, match="the rehearsal of phase 1 is not established"):
            refuse_failed(v, 1)
    assert _verdict("placed").ok and exit_code(_verdict("placed")) == 0
