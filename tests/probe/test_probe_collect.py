"""The whole probe with a fake runner: real captured outputs in, a merged report out; and on a
machine without GPU, tools or PyTorch, a report that says what was not measured and why."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pvefix.commands import probe_cmd
from pvefix.errors import ParseError
from pvefix.probe import allreduce, p2p
from pvefix.probe.collect import ProbeOptions, collect
from pvefix.probe.render import render_text
from pvefix.probe.report import SCHEMA, Report
from pvefix.probe.shell import CommandResult, run_command
from pvefix.probe.sizes import plan_for

REPO = Path(__file__).parents[2]


def capture_runner(folder: Path):
    """A runner that answers nvidia-smi and dmesg from files captured on the H200 machine."""
    files = {
        ("nvidia-smi",): "nvidia_smi.txt",
        ("nvidia-smi", "topo", "-m"): "topo_m.txt",
        **{("nvidia-smi", "topo", "-p2p", m): f"topo_p2p_{m}.txt" for m in "rwnap"},
        ("dmesg",): "dmesg.txt",
    }
    calls: list[list[str]] = []

    def run(argv, timeout, env=None):
        calls.append(list(argv))
        key = tuple(argv)
        if argv[1:2] and argv[1].startswith("--query-gpu="):
            return CommandResult(key, 0, (folder / "query_gpu.csv").read_text())
        if key in files:
            return CommandResult(key, 0, (folder / files[key]).read_text())
        return CommandResult(key, None, missing=True)

    run.calls = calls  # type: ignore[attr-defined]
    return run


def test_the_h200_capture_becomes_one_merged_gpu_with_bars_and_matrices(h200, tmp_path):
    (tmp_path / "cmdline").write_text((h200 / "proc_cmdline.txt").read_text())
    opts = ProbeOptions(nvidia_smi="nvidia-smi", measure=False, sysfs_root=h200 / "sys",
                        proc_root=tmp_path)
    report = collect(opts, capture_runner(h200))
    (gpu,) = report.gpus.gpus
    assert (gpu.index, gpu.name, gpu.pci_address) == (0, "NVIDIA H200", "0000:00:06.0")
    assert gpu.memory_total_mib == 143771
    assert max(b.size for b in gpu.bars) == 256 << 30
    assert report.gpus.driver_version == "580.159.04"
    assert report.gpus.sources == ("sysfs", "nvidia-smi --query-gpu")
    assert report.topology.matrix is not None and report.topology.matrix.rows == ("GPU0",)
    assert sorted(report.p2p_status.modes) == ["a", "n", "p", "r", "w"]
    assert report.kernel_log.source == "dmesg" and report.kernel_log.findings == ()
    assert report.cmdline.cmdline is not None and "pci=realloc=off" in report.cmdline.cmdline
    assert report.p2p.reason == "measurements switched off"
    text = render_text(report)
    assert "BAR2 256 GiB" in text and "32.0 GT/s PCIe x16" in text


def test_nothing_available_gives_reasons_for_every_section_and_no_error(tmp_path):
    def nothing(argv, timeout, env=None):
        return CommandResult(tuple(argv), None, missing=True)

    opts = ProbeOptions(nvidia_smi="/nonexistent/nvidia-smi", python="/nonexistent/python3",
                        sysfs_root=tmp_path, proc_root=tmp_path / "proc", kmsg=tmp_path / "kmsg")
    report = collect(opts, nothing)
    assert report.gpus.reason is not None and "no NVIDIA GPU" in report.gpus.reason
    assert report.topology.reason == "nvidia-smi topo -m: not found"
    assert report.p2p_status.reason is not None and "r: not found" in report.p2p_status.reason
    assert not report.cmdline.measured and not report.kernel_log.measured
    assert report.p2p.reason == "/nonexistent/python3 has no PyTorch"
    assert report.allreduce.reason == "/nonexistent/python3 has no PyTorch"
    assert "not measured" in render_text(report)


def test_the_json_report_is_versioned_and_reads_back_identically(h200):
    report = Report.model_validate_json((h200 / "probe_full.json").read_text())
    data = json.loads(report.to_json())
    assert next(iter(data)) == "schema" and data["schema"] == SCHEMA == "pvefix.probe/v1"
    assert Report.model_validate_json(report.to_json()) == report


def test_the_captured_h200_run_measured_the_host_path_and_skipped_all_reduce(h200):
    report = Report.model_validate_json((h200 / "probe_full.json").read_text())
    (host,) = report.p2p.host_paths
    assert report.p2p.measured and report.p2p.pairs == ()
    assert host.h2d_bandwidth_gbps > 20  # PCIe Gen5 x16: about 55 GB/s were measured
    assert report.allreduce.reason == "1 GPU(s) visible: all-reduce needs at least 2"


def test_worker_output_that_is_not_json_is_reported_not_raised():
    section = p2p.parse_worker_output("Segmentation fault\n")
    assert not section.measured
    assert section.reason is not None and "not understood" in section.reason


def test_a_hung_worker_becomes_a_timeout_reason(tmp_path):
    def hang(argv, timeout, env=None):
        return CommandResult(tuple(argv), -9, timed_out=True)

    section = p2p.measure_p2p("python3", plan_for(True), 12.0, hang)
    assert section.reason == "timeout: P2P check ran past 12 s"


def test_the_real_runner_kills_a_program_at_its_timeout():
    result = run_command([sys.executable, "-c", "import time; time.sleep(30)"], 0.5)
    assert result.timed_out and not result.ok and result.why() == "timed out"


def test_the_real_runner_reports_a_missing_program():
    result = run_command(["/nonexistent/nvidia-smi"], 5)
    assert result.missing and result.why() == "not found"


def test_all_reduce_is_skipped_with_a_reason_below_two_gpus():
    section = allreduce.measure_allreduce("python3", 1, plan_for(True), 30)
    assert section.reason == "1 GPU(s) visible: all-reduce needs at least 2"


def test_the_children_never_get_nvlink_multicast_even_if_asked():
    env = allreduce.child_env({"NCCL_NVLS_ENABLE": "1", "NCCL_P2P_LEVEL": "SYS"},
                              {"NCCL_P2P_DISABLE": "1"})
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert env["NVSHMEM_DISABLE_NVLS"] == "1"
    assert allreduce.recorded_env(env) == {
        "NCCL_NVLS_ENABLE": "0", "NCCL_P2P_DISABLE": "1", "NCCL_P2P_LEVEL": "SYS",
        "NVSHMEM_DISABLE_NVLS": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    }


def test_rank_zero_result_line_is_read_and_garbage_is_none():
    line = allreduce.MARK + json.dumps(
        [{"bytes": 8, "latency_us": 20.5, "bus_bandwidth_gbps": 0.0004, "correct": True}]
    )
    (row,) = allreduce.parse_rank0_output("NCCL INFO chatter\n" + line + "\n")
    assert (row.bytes, row.latency_us, row.correct) == (8, 20.5, True)
    assert allreduce.parse_rank0_output(allreduce.MARK + "{oops") is None
    assert allreduce.parse_rank0_output("") is None


def test_an_explicit_python_without_torch_is_named_in_the_reason():
    def no(argv, timeout, env=None):
        return CommandResult(tuple(argv), 1)

    assert p2p.find_torch_python("/opt/py/bin/python3", no) == (
        None, "/opt/py/bin/python3 has no PyTorch"
    )


def _torch_anywhere() -> bool:
    probe = "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('torch') else 1)"
    return any(
        subprocess.run([py, "-c", probe], check=False).returncode == 0
        for py in {sys.executable, shutil.which("python3") or sys.executable}
    )


@pytest.mark.skipif(
    shutil.which("nvidia-smi") is not None or _torch_anywhere(),
    reason="this machine has nvidia-smi or PyTorch",
)
def test_python_m_pvefix_probe_on_a_cpu_only_machine_exits_0_with_reasons():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "pvefix.probe", "--quick", "--format", "json"],
        capture_output=True, text=True, timeout=60, env=env, cwd=REPO, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = Report.model_validate_json(proc.stdout)
    assert report.quick and report.duration_s < 30
    assert report.p2p.reason is not None and "PyTorch is not importable" in report.p2p.reason
    assert report.topology.reason == "nvidia-smi not found"


def test_pvefix_probe_diff_compares_two_saved_reports(h200, tmp_path):
    result = CliRunner().invoke(
        probe_cmd.app, ["diff", str(h200 / "probe_quick.json"), str(h200 / "probe_full.json")]
    )
    assert result.exit_code == 0, result.output
    assert "GPU0 H2D latency" in result.output


def test_pvefix_probe_diff_names_a_file_that_is_no_report(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ParseError, match=re.escape("bad.json: not a pvefix.probe/v1 report")):
        CliRunner().invoke(probe_cmd.app, ["diff", str(bad), str(bad)], catch_exceptions=False)


def test_the_single_gpu_smoke_run_delivered_data_and_ran_both_sweeps(h200):
    smoke = json.loads((h200 / "smoke.json").read_text())
    pair = smoke["self_pair"]
    assert pair["data_delivered"] and pair["mismatched_bytes"] == 0
    assert pair["peer_error"] == "cuCtxEnablePeerAccess: CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (217)"
    assert [s["label"] for s in smoke["sweeps"]] == ["default", "p2p_disabled"]
    for sweep in smoke["sweeps"]:
        assert sweep["status"] == "measured" and all(r["correct"] for r in sweep["rows"])
        assert sweep["env"]["NCCL_NVLS_ENABLE"] == "0"
    assert smoke["sweeps"][1]["env"]["NCCL_P2P_DISABLE"] == "1"


def test_the_stdlib_zipapp_run_on_the_h200_reads_back_as_a_full_report(h200):
    """Captured on the lent H200 by running `pvefix verify`'s zipapp with a python3 that has no
    pydantic (as in a guest): its JSON is a valid report, with the GPU, its 256 GiB BAR and the
    host-path copies measured through the extracted PyTorch worker."""
    report = Report.model_validate_json((h200 / "probe_zipapp_quick.json").read_text())
    assert report.quick and report.gpus.measured
    (gpu,) = report.gpus.gpus
    assert gpu.name == "NVIDIA H200" and max(b.size for b in gpu.bars) == 256 << 30
    (host,) = report.p2p.host_paths
    assert report.p2p.measured and host.h2d_bandwidth_gbps > 20
