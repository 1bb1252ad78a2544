"""Parsers, fed arbitrary text, either return or raise pvefix's ParseError: nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.errors import ParseError
from pvefix.probe import kernel, nvsmi, sysfs
from pvefix.probe.p2p import parse_worker_output
from pvefix.probe.report import Matrix

# Text built from the pieces real outputs are made of, so the parsers get past their first line.
PIECES = st.sampled_from([
    "\t", " ", "\n", "GPU0", "GPU1", "X", "OK", "NS", "CNS", "\x1b[4m", "\x1b[0m", "Legend:",
    "CPU Affinity", "NUMA Affinity", "GPU NUMA ID", "0-15", "N/A", ",", "00000000:00:06.0",
    "NVIDIA H200", "| ", " |", "MiB", "143771", "On", "Off", "Driver Version: 580",
    "CUDA Version: 13.0", "0x0000104002000000", "0x0", "[N/A]", "index", "-1", "0x10de",
])
TEXT = st.one_of(st.text(), st.lists(PIECES, max_size=60).map("".join))


def only_parse_errors(fn, text):
    try:
        fn(text)
    except ParseError:
        pass


@given(TEXT)
def test_topo_p2p_parser_raises_only_parse_error(text):
    only_parse_errors(nvsmi.parse_topo_p2p, text)


@given(TEXT)
def test_topo_matrix_parser_raises_only_parse_error(text):
    only_parse_errors(nvsmi.parse_topo_matrix, text)


@given(TEXT)
def test_csv_query_parser_raises_only_parse_error(text):
    only_parse_errors(nvsmi.parse_query_csv, text)


@given(TEXT)
def test_summary_table_parser_raises_only_parse_error(text):
    only_parse_errors(nvsmi.parse_smi_table, text)


@given(TEXT)
def test_resource_parser_raises_only_parse_error(text):
    only_parse_errors(sysfs.parse_resource, text)


@given(TEXT)
def test_bus_id_normaliser_raises_only_parse_error(text):
    only_parse_errors(nvsmi.normalize_bus_id, text)


@given(st.lists(TEXT, max_size=20))
def test_kernel_log_scan_never_raises_and_counts_every_line(lines):
    count, findings = kernel.scan_kernel_log(lines)
    assert count == len(lines) and len(findings) <= count


@given(TEXT)
def test_worker_output_never_raises(text):
    parse_worker_output(text)


@given(st.lists(st.lists(st.sampled_from(["X", "OK", "NS", "TNS", "U", "DR"]), min_size=3,
                         max_size=3), min_size=3, max_size=3))
def test_a_p2p_matrix_printed_like_nvidia_smi_parses_back(cells):
    labels = [f"GPU{i}" for i in range(3)]
    text = " \t\x1b[4m" + "\t".join(labels) + "\t\x1b[0m\n" + "".join(
        f" {label}\t" + "\t".join(row) + "\t\n" for label, row in zip(labels, cells, strict=True)
    ) + "\nLegend:\n\n  X    = Self\n"
    assert nvsmi.parse_topo_p2p(text) == Matrix(
        columns=tuple(labels), rows=tuple(labels), cells=tuple(tuple(r) for r in cells)
    )


@pytest.mark.parametrize("text", ["0, a, 00000000:00:06.0\n", "x"])
def test_short_or_wrong_csv_is_a_parse_error(text):
    with pytest.raises(ParseError):
        nvsmi.parse_query_csv(text)
