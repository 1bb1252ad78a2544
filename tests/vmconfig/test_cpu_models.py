"""cpu-models.conf (the cluster's custom CPU models): what pvefix reads of each model, and
never an error from any text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pvefix.planner import mmio
from pvefix.vmconfig.cpu_models import parse_cpu_models

CONF = """cpu-model: gpu46
    flags +pdpe1gb;-aes
    phys-bits 46
    hidden 1
    hv-vendor-id proxmox
    reported-model EPYC-v4
    level 13

cpu-model: plain
    reported-model kvm64
"""


def test_each_model_keeps_what_qemu_server_reads_and_the_rest_as_text() -> None:
    models = parse_cpu_models(CONF)
    gpu = models["gpu46"]
    assert (gpu.reported_model, gpu.phys_bits, gpu.flags, gpu.hidden, gpu.hv_vendor_id) == (
        "EPYC-v4", "46", ("+pdpe1gb", "-aes"), True, "proxmox")
    assert gpu.other == {"level": "13"}
    assert (models["plain"].phys_bits, models["plain"].hidden) == (None, None)


def test_the_vm_line_overrides_the_model_and_an_unknown_model_stays_unknown() -> None:
    """CPUConfig.pm get_cpu_options: the VM's phys-bits, hidden and flags win over the model's."""
    models = parse_cpu_models(CONF)
    cpu = mmio.read_cpu("custom-gpu46,phys-bits=host,hidden=0,flags=-pdpe1gb", models)
    assert (cpu.reported, cpu.phys, cpu.hidden, cpu.flag("pdpe1gb"), cpu.flag("aes")) == (
        "EPYC-v4", "host", False, "-", "-")
    plain = mmio.read_cpu("custom-plain", models)
    assert plain.qemu64_family and plain.phys is None and not plain.hidden
    assert mmio.read_cpu("custom-gone", models).custom_unknown


def test_a_line_that_changes_nothing_of_qemus_cpu_is_seen_as_the_same() -> None:
    models = parse_cpu_models("cpu-model: wide\n    phys-bits host\n    flags +pdpe1gb\n")
    now = mmio.read_cpu("custom-wide", models)
    same = mmio.read_cpu("custom-wide,phys-bits=host,flags=+pdpe1gb", models)
    other = mmio.read_cpu("custom-wide,phys-bits=46", models)
    assert now.qemu_cpu() == same.qemu_cpu() != other.qemu_cpu()


LINE = st.one_of(
    st.builds(lambda n: f"cpu-model: {n}", st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)),
    st.builds(lambda k, v: f"    {k} {v}", st.sampled_from(
        ["flags", "phys-bits", "hidden", "reported-model", "hv-vendor-id", "x"]),
        st.text(st.characters(blacklist_categories=["Cc", "Cs"]), max_size=12)),
    st.text(max_size=30),
)


@given(st.lists(LINE, max_size=12))
def test_any_text_parses_without_error(lines: list[str]) -> None:
    models = parse_cpu_models("\n".join(lines))
    for name, model in models.items():
        assert model.name == name and model.reported_model
        mmio.read_cpu(f"custom-{name}", models).qemu_cpu()
