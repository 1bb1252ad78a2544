"""A plan file is one thing: the VM config `show` draws and `rehearse --plan` boots is the one
its phases write (what `apply` writes), or the file is refused, naming each difference. An
edited `config_after` (+memory, a hidden cpu change, an `args: -fw_cfg ...,file=` line) never
reaches a reviewer's screen or the node's QEMU command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.errors import EXIT_ERROR, EXIT_OK, PvefixError
from pvefix.flow.planfile import load_plan_file
from pvefix.hosttree import resolve_scenario
from pvefix.rehearse.command import args_of
from pvefix.rehearse.flow import planned_config
from pvefix.sources.bundle import read_bundle

app = build_command()
FW_CFG = "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,file=/etc/shadow"


def _saved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "plan.json"
    run_app(app, ["plan", "100", "--bundle", str(resolve_scenario("kpro6")), "--out", str(path)])
    capsys.readouterr()
    return path


def _edit(path: Path, edit: Callable[[str], str]) -> Path:
    data: dict[str, Any] = json.loads(path.read_text())
    data["config_after"] = edit(data["config_after"])
    path.write_text(json.dumps(data))
    return path


def _plus_memory(text: str) -> str:
    return text.replace("[PENDING]\n", "[PENDING]\nmemory: 8192\n")


def _hide_cpu(text: str) -> str:
    return "\n".join(ln for ln in text.split("\n") if not ln.startswith("cpu: x86-64-v2-AES,"))


def _add_args(text: str) -> str:
    return text.replace("[PENDING]\n", f"[PENDING]\nargs: {FW_CFG}\n")


@pytest.mark.parametrize("edit,named", [
    (_plus_memory, "[PENDING] memory is '8192' there, the phases give absent"),
    (_hide_cpu, "[PENDING] cpu is absent there, the phases give 'x86-64-v2-AES,phys-bits=host"),
    (_add_args, f"[PENDING] args is '{FW_CFG}' there, the phases give absent"),
], ids=["plus-memory", "hidden-cpu", "args-fw-cfg"])
@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_show_refuses_an_edited_config_after_naming_the_difference(
    edit: Callable[[str], str], named: str, fmt: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _edit(_saved(tmp_path, capsys), edit)
    assert run_app(app, ["show", str(path), "--format", fmt]) == EXIT_ERROR
    out, err = capsys.readouterr()
    assert named in err
    assert "8192" not in out and "fw_cfg" not in out


def test_both_edits_at_once_are_each_named(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _edit(_saved(tmp_path, capsys), lambda t: _hide_cpu(_plus_memory(t)))
    with pytest.raises(PvefixError) as caught:
        load_plan_file(path)
    assert "memory is '8192'" in str(caught.value) and "cpu is absent" in str(caught.value)


def test_an_untouched_plan_file_shows_and_loads(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _saved(tmp_path, capsys)
    assert run_app(app, ["show", str(path)]) == EXIT_OK
    assert load_plan_file(path).config_after.count("pcie=1") == 8


def test_rehearse_boots_the_phases_on_todays_config_never_the_files_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    plan = load_plan_file(_saved(tmp_path, capsys))
    lying = plan.model_copy(update={"config_after": _add_args(_plus_memory(plan.config_after))})
    state = read_bundle(resolve_scenario("kpro6"), 100)
    config, label = planned_config(state, lying, None)
    assert label == "the plan's end"
    assert "args" not in config and config["memory"] == "1572864"
    assert config["cpu"] == "x86-64-v2-AES,phys-bits=host,flags=+pdpe1gb"
    assert config == planned_config(state, plan, max(p.number for p in plan.phases))[0]


@pytest.mark.parametrize("args,kept", [
    ("-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=65536",
     ["-fw_cfg", "name=opt/ovmf/X-PciMmio64Mb,string=65536"]),
    (FW_CFG, []),
    ("-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=1,file=/etc/shadow", []),
    ("-global q35-pcihost.pci-hole64-size=2048G", ["-global", "q35-pcihost.pci-hole64-size=2048G"]),
    ("-global q35-pcihost.pci-hole64-size=1G,x=/etc/shadow", []),
])
def test_the_rehearsal_keeps_only_a_window_size_from_args(args: str, kept: list[str]) -> None:
    assert args_of(args).kept == kept
