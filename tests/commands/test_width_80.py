"""At 80 columns on a terminal (a pseudo-terminal of that size, COLUMNS=80) nothing pvefix
prints is wider than the screen but what is copied whole: a command, or one word (a path, a
value, an address). Prose is filled at spaces, never inside a word: the apply confirmation's
`Activation:` paragraph, rehearse's BAR addresses, `snapshots`, `check`, `rollback`, an
error; the node's VMs before a host reboot are listed once."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.sim.serve import ReadyInfo, write_ready_file
from tests.ptyterm import on_pty

COLUMNS = 80
SCENARIOS = Path(__file__).resolve().parents[2] / "pvefix" / "scenarios"
# A command to copy (`Next:`, `to undo:`, a step), as printed: whole, however wide.
COMMAND = re.compile(r"^\s*(?:(?:Next|to undo)[^:]*:\s*)?pvefix ")


def _too_wide(text: str) -> list[str]:
    """The lines wider than the terminal that are neither a command nor one word (a value
    or a path, on a line of its own, or a command in backticks)."""
    out = []
    for line in text.splitlines():
        # The question and the reply to it share a line only because the typed answer is
        # not echoed here: the question itself is short.
        for part in line.split("[y/N] "):
            words = part.split()
            if (len(part) > COLUMNS and not COMMAND.match(part) and len(words) > 1
                    and not re.fullmatch(r"\s*`[^`]+`[;,.)]*", part)):
                out.append(part)
    return out


def _ready(info: ReadyInfo, tmp_path: Path) -> Path:
    path = tmp_path / f"ready-{info.api_port}.json"
    write_ready_file(info, path)
    return path


def test_plan_live_and_from_a_bundle(kpro6_ready: Path, tmp_path: Path) -> None:
    for argv in (["plan", "100", "--connection", str(kpro6_ready), "--p2p"],
                 ["plan", "100", "--bundle", str(SCENARIOS / "kpro6")]):
        code, text = on_pty(argv, columns=COLUMNS, cwd=tmp_path)
        assert code == 2, text
        assert not _too_wide(text), _too_wide(text)


def test_the_apply_confirmation_fills_its_prose_and_keeps_values_whole(
        kpro6_ready: Path, tmp_path: Path) -> None:
    code, text = on_pty(["apply", "100", "--phase", "1", "--restart", "--connection",
                         str(kpro6_ready), "--state-dir", str(tmp_path / "state")],
                        columns=COLUMNS, answers=b"n\n", cwd=tmp_path)
    assert code == 3 and "not confirmed: nothing was written" in text, text
    assert not _too_wide(text), _too_wide(text)
    activation = text.split("Activation: ", 1)[1].split("Apply phase 1", 1)[0]
    assert len(activation.splitlines()) >= 2  # about 220 columns of prose, filled
    # Each value whole, as a word: the cpu value (95 columns beside its change) on its own.
    words = text.split()
    assert "x86-64-v2-AES,phys-bits=host,flags=+pdpe1gb" in words
    assert words.count("mapping=pro6000,pcie=1") == 8


def test_apply_snapshots_check_and_rollback_after_it(
        fresh_sim: Callable[..., ReadyInfo], tmp_path: Path) -> None:
    ready = _ready(fresh_sim("kpro6"), tmp_path)
    target = ["--connection", str(ready), "--state-dir", str(tmp_path / "state")]
    code, text = on_pty(["apply", "100", "--phase", "1", "--restart", "--yes", *target],
                        columns=COLUMNS, cwd=tmp_path)
    assert code == 0, text
    assert not _too_wide(text), _too_wide(text)
    code, text = on_pty(["snapshots", "--state-dir", str(tmp_path / "state")],
                        columns=COLUMNS, cwd=tmp_path)
    assert code == 0 and "phase 1  applied" in text, text
    assert all(len(line) <= COLUMNS for line in text.splitlines()), text
    code, text = on_pty(["check", "100", *target], columns=COLUMNS, cwd=tmp_path)
    assert code in (0, 2), text
    assert not _too_wide(text), _too_wide(text)
    code, text = on_pty(["rollback", "100", "--yes", *target], columns=COLUMNS, cwd=tmp_path)
    assert code == 0 and "restored: VM 100 config restored byte for byte" in text, text
    assert not _too_wide(text), _too_wide(text)


def test_the_node_s_vms_are_listed_once_before_a_refused_host_reboot(
        fresh_sim: Callable[..., ReadyInfo], tmp_path: Path) -> None:
    ready = _ready(fresh_sim("kpro6", inject=["lock=101:backup"]), tmp_path)
    code, text = on_pty(["apply", "100", "--phase", "2", "--reboot-host", "--connection",
                         str(ready), "--state-dir", str(tmp_path / "state")],
                        columns=COLUMNS, cwd=tmp_path)
    assert code == 3 and "locked VMs: VM 101 (lock backup)" in text, text
    assert text.count("A host reboot stops every VM on kpro6:") == 1
    listed = [line for line in text.splitlines() if line.startswith("  VM 101 (")]
    assert len(listed) == 1, text  # once, not again under the refusal
    assert not _too_wide(text), _too_wide(text)


def test_an_error_is_filled_without_breaking_a_word(kpro6_ready: Path, tmp_path: Path) -> None:
    argv = ["plan", "999", "--connection", str(kpro6_ready)]
    code, text = on_pty(argv, columns=COLUMNS, cwd=tmp_path)
    assert code == 1 and text.startswith("pvefix: error: no QEMU VM 999"), text
    assert len(text.splitlines()) > 1 and not _too_wide(text), text
    # The same words, in the same order, as the one line a log gets.
    import subprocess
    import sys

    logged = subprocess.run([sys.executable, "-m", "pvefix", *argv], capture_output=True,
                            text=True, check=False, cwd=tmp_path, timeout=120).stderr
    assert len(logged.strip().splitlines()) == 1
    assert text.split() == logged.split()


@pytest.mark.conformance
def test_rehearse_keeps_each_bar_address_whole(kpro6_ready: Path, tmp_path: Path) -> None:
    from tests.shared import FWLAB_EDK2, fwlab_edk2_and_qemu

    fwlab_edk2_and_qemu()
    code, text = on_pty(["rehearse", "100", "--phase", "1", "--connection", str(kpro6_ready),
                         "--firmware-dir", str(FWLAB_EDK2), "--accel", "tcg"],
                        columns=COLUMNS, cwd=tmp_path, timeout=300)
    assert code == 0 and "ALL PLACED" in text, text
    assert not _too_wide(text), _too_wide(text)
    ranges = re.findall(r"(?<!\S)0x[0-9a-f]+-0x[0-9a-f]+(?!\S)", text)
    assert len(ranges) == 16, text  # each BAR1 and BAR3 range one word, none split
