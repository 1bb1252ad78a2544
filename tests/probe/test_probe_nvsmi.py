"""nvidia-smi parsers on real output (shared guest capture and our own H200 capture)."""

from __future__ import annotations

import pytest

from pvefix.errors import ParseError
from pvefix.probe import nvsmi
from pvefix.probe.report import P2P_LEGEND, P2P_MODES

# An 8-GPU PCIe box as nvidia-smi prints it: tabs, underlined header, NS everywhere off-diagonal.
EIGHT_NS = (
    " \t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\t\x1b[0m\n"
    + "".join(
        f" GPU{i}\t" + "\t".join("X" if i == j else "NS" for j in range(8)) + "\t\n"
        for i in range(8)
    )
    + "\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n  NS   = Not supported\n"
)
TOPO_TWO = (
    "\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tSYS\tPHB\t0-47,96-143\t0\t\tN/A\n"
    "GPU1\tSYS\t X \tSYS\t48-95,144-191\t1\t\tN/A\n"
    "NIC0\tPHB\tSYS\t X \t\t\t\t\n"
    "\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n"
)


def test_the_shared_guest_csv_query_with_header_gives_the_h200(shared_guest):
    csv = shared_guest("nvidia_smi.txt")["csv"]
    fields = (
        "index", "name", "pci.bus_id", "pci.device_id", "pci.sub_device_id", "driver_version",
        "memory.total", "pcie.link.gen.current", "pcie.link.width.current",
    )
    (gpu,) = nvsmi.parse_query_csv(csv, fields)
    assert (gpu.index, gpu.name, gpu.pci_address) == (0, "NVIDIA H200", "0000:00:06.0")
    assert gpu.memory_total_mib == 143771
    assert (gpu.link_gen_current, gpu.link_width_current) == (5, 16)


def test_our_capture_of_the_csv_query_matches_the_fields_we_ask_for(h200):
    (gpu,) = nvsmi.parse_query_csv((h200 / "query_gpu.csv").read_text())
    assert gpu.pci_address == "0000:00:06.0"
    assert gpu.driver_version == "580.159.04"
    assert (gpu.link_gen_max, gpu.link_width_max) == (5, 16)
    (with_header,) = nvsmi.parse_query_csv((h200 / "query_gpu_header.csv").read_text())
    assert with_header == gpu


def test_the_summary_table_gives_versions_and_the_gpu_row(shared_guest, h200):
    for text in (shared_guest("nvidia_smi.txt")["nvidia-smi"],
                 (h200 / "nvidia_smi.txt").read_text()):
        summary = nvsmi.parse_smi_table(text)
        assert (summary.driver_version, summary.cuda_version) == ("580.159.04", "13.0")
        (gpu,) = summary.gpus
        assert (gpu.index, gpu.name, gpu.pci_address) == (0, "NVIDIA H200", "0000:00:06.0")
        assert gpu.memory_total_mib == 143771


def test_topo_m_of_one_gpu_strips_the_underline_and_reads_the_affinity(shared_guest, h200):
    for text in (shared_guest("nvidia_smi.txt")["topo -m"], (h200 / "topo_m.txt").read_text()):
        matrix, affinity = nvsmi.parse_topo_matrix(text)
        assert matrix.columns == ("GPU0",) and matrix.rows == ("GPU0",)
        assert matrix.cell("GPU0", "GPU0") == "X"
        assert affinity["GPU0"].cpu_affinity == "0-15"
        assert affinity["GPU0"].numa_affinity == "0"
        assert affinity["GPU0"].gpu_numa_id == "N/A"


def test_topo_m_with_two_gpus_and_a_nic_keeps_every_row():
    matrix, affinity = nvsmi.parse_topo_matrix(TOPO_TWO)
    assert matrix.columns == ("GPU0", "GPU1", "NIC0")
    assert matrix.cell("GPU0", "GPU1") == "SYS"
    assert matrix.cell("NIC0", "GPU0") == "PHB"
    assert affinity["GPU1"].cpu_affinity == "48-95,144-191"
    assert affinity["NIC0"].cpu_affinity is None


@pytest.mark.parametrize("mode", list(P2P_MODES))
def test_every_p2p_mode_of_the_real_guests_is_a_one_by_one_self_matrix(shared_guest, h200, mode):
    for text in (shared_guest("nvidia_smi.txt")[f"topo -p2p {mode}"],
                 (h200 / f"topo_p2p_{mode}.txt").read_text()):
        m = nvsmi.parse_topo_p2p(text)
        assert (m.columns, m.rows, m.cells) == (("GPU0",), ("GPU0",), (("X",),))


def test_an_eight_gpu_p2p_matrix_reads_ns_off_the_diagonal():
    m = nvsmi.parse_topo_p2p(EIGHT_NS)
    assert len(m.rows) == 8
    assert m.cell("GPU3", "GPU5") == "NS"
    assert m.cell("GPU7", "GPU7") == "X"
    assert {c for row in m.cells for c in row} <= set(P2P_LEGEND)


def test_unknown_p2p_codes_are_kept_not_dropped():
    m = nvsmi.parse_topo_p2p(" \tGPU0\tGPU1\t\n GPU0\tX\tZZ\t\n GPU1\tZZ\tX\t\n")
    assert m.cell("GPU0", "GPU1") == "ZZ"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Failed to parse --display/-d flags\n",
        " \tGPU0\tGPU1\t\n GPU0\tX\t\n",  # a short row
        " \tGPU0\t\n GPU9\tX\t\n",  # a row label that is no column
    ],
)
def test_broken_p2p_output_is_a_parse_error(text):
    with pytest.raises(ParseError):
        nvsmi.parse_topo_p2p(text)


def test_a_csv_row_with_a_missing_field_names_its_line():
    with pytest.raises(ParseError, match=r":2: expected 9 fields"):
        nvsmi.parse_query_csv(
            "0, NVIDIA H200, 00000000:00:06.0, 143771, 580.159.04, 5, 16, 5, 16\n1, x\n"
        )


@pytest.mark.parametrize(
    ("raw", "want"),
    [("00000000:00:06.0", "0000:00:06.0"), ("0000:C1:00.0", "0000:c1:00.0"),
     ("41:00.0", "0000:41:00.0")],
)
def test_bus_ids_are_written_the_way_sysfs_names_devices(raw, want):
    assert nvsmi.normalize_bus_id(raw) == want


def test_not_available_values_become_none():
    (gpu,) = nvsmi.parse_query_csv("0, NVIDIA H200, 00000000:00:06.0, [N/A], 580, [N/A], 16, 5, 16")
    assert gpu.memory_total_mib is None and gpu.link_gen_current is None
