"""What the rehearsal leaves out that can move a BAR makes its verdict not established
(pvefix/rehearse/unmodelled.py): the closed world's bar-space inputs of the rehearsed config,
less what the rehearsal boots as the VM would. Pure, on kpro6's story VM."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pvefix.closedworld.args_words import INPUTS as ARGS_WORDS
from pvefix.hosttree import resolve_scenario
from pvefix.planner import plan as make_plan
from pvefix.rehearse.command import args_of
from pvefix.rehearse.flow import _context, planned_config
from pvefix.rehearse.unmodelled import left_out
from pvefix.sources.bundle import read_bundle

STATE = read_bundle(resolve_scenario("kpro6"), 100)
PHASE_1, _ = planned_config(STATE, make_plan(STATE), 1)


def _left_out(**extra: str) -> list[str]:
    return left_out(_context(STATE, {**PHASE_1, **extra}))


def test_the_story_vms_phase_1_leaves_nothing_out() -> None:
    assert _left_out() == []


@pytest.mark.parametrize("args", [
    "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=262144",
    "-global q35-pcihost.pci-hole64-size=2048G",
    "-cpu host,phys-bits=48",
    "-name gpu-vm -no-hpet",  # inert words
])
def test_args_words_the_rehearsal_boots_or_the_registry_knows_inert(args: str) -> None:
    assert _left_out(args=args) == []


@pytest.mark.parametrize(("args", "word"), [
    ("-device ivshmem-plain,memdev=shm,id=shm0", "args-word -device (args: -device ivshmem"),
    ("-m 65536,slots=4,maxmem=512G", "args-word -m (args: -m 65536"),
    ("-global ICH9-LPC.disable_s3=1", "args-word -global (args: -global ICH9-LPC"),
    ("-machine pci-hole64-size=8T", "args-word -machine"),
    ("--cpu host,phys-bits=48", "args-word -cpu (args: -cpu host"),  # QEMU's, not booted
    ("-fw_cfg name=opt/other,string=1", "args-word -fw_cfg:other"),
])
def test_args_words_that_can_move_a_bar_and_are_not_booted(args: str, word: str) -> None:
    got = _left_out(args=args)
    assert len(got) == 1 and got[0].startswith(word), got


def test_config_keys_and_vgpus_that_can_move_a_bar() -> None:
    assert [x.split(" (")[0] for x in _left_out(ivshmem="size=64,name=shm")] == [
        "config-key ivshmem"]
    assert [x.split(" (")[0] for x in _left_out(kvm="0")] == ["config-key kvm"]
    vgpu = _left_out(hostpci0="0000:01:00.0,mdev=nvidia-1073,pcie=1")
    assert len(vgpu) == 1 and vgpu[0].startswith("hostpci-option mdev (hostpci0: 0000:01:00.0")
    assert "not the physical GPU's" in vgpu[0]


def test_memory_hotplug_is_booted_not_left_out() -> None:
    assert _left_out(hotplug="disk,network,usb,memory", numa="1") == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([w.name for w in ARGS_WORDS if not w.name.count(":")]),
                min_size=1, max_size=4),
       st.sampled_from(["1", "x", "name=opt/ovmf/X-PciMmio64Mb,string=1024"]))
def test_every_word_left_out_that_can_move_a_bar_is_named(names: list[str], value: str) -> None:
    """Against the rehearsal's own argument builder: each word it does not boot whose registry
    entry is not inert and touches bar-space is named; a word it boots never is."""
    from pvefix.closedworld.args_words import classify, options
    from pvefix.vmconfig.args import qemu_words

    args = " ".join(f"{n} {value}" for n in names)
    booted = args_of(args)
    kept = set(zip(booted.kept[::2], booted.kept[1::2], strict=True))
    expected = set()
    for opt in options(qemu_words(args)):
        item = classify(opt)
        is_booted = (opt.name, opt.value) in kept or (
            opt.name == "-cpu" and opt.value == booted.cpu)
        if not is_booted and item.status != "inert" and "bar-space" in item.claims:
            expected.add(f"args: {opt.name}" + (f" {opt.value}" if opt.value is not None else ""))
    got = {line.split(" (", 1)[1].split("): ", 1)[0] for line in _left_out(args=args)}
    assert got == expected, args
