"""A failure at any step boundary (raised by pvefix's own journal hook, by the API, or by a
dropped SSH connection) leaves the target exactly as before: the same config bytes, the same
host files, the same boot loader entry, the same run state."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pvefix.errors import PvefixError
from pvefix.executor.journal import Record
from pvefix.executor.snapshot import list_snapshots
from pvefix.executor.transaction import ApplyFailed
from tests.executor.conftest import Captured, Node

BOUNDARY_EVENTS = {"apply-start", "step-begin", "step-end", "verified", "activation-begin"}


class Injected(RuntimeError):
    """The failure a test injects at a step boundary."""


def fail_at(seq: int) -> tuple[Callable[[Record], None], list[Record]]:
    fired: list[Record] = []

    def hook(record: Record) -> None:
        if record["seq"] == seq and record["event"] in BOUNDARY_EVENTS and not fired:
            fired.append(record)
            raise Injected(f"injected at {record['event']} #{seq}")

    return hook, fired


@pytest.mark.parametrize(("scenario", "vmid", "phase", "restart"), [
    ("windows-igd", 300, 1, True),
    ("kpro6", 100, 2, False),
    ("intel-grub", 200, 2, False),
], ids=["windows-igd-vm-phase", "kpro6-systemd-boot", "intel-grub-plain-grub"])
def test_a_failure_at_every_step_boundary_leaves_the_target_as_before(
    node: Callable[..., Node], scenario: str, vmid: int, phase: int, restart: bool
) -> None:
    n = node(scenario)
    before = n.fingerprint(vmid)
    boundaries = 0
    for seq in range(1, 100):
        hook, fired = fail_at(seq)
        cap = Captured()
        try:
            n.apply(vmid, phase, hook=hook, restart=restart, captured=cap)
        except (ApplyFailed, Injected) as exc:
            assert fired, f"failed without the injection: {exc}"
            boundaries += 1
            assert n.fingerprint(vmid) == before, f"after a failure at {fired[0]}"
            if fired[0]["event"] != "apply-start":  # the report, in the error, said once
                assert "undone, in reverse order" in str(exc)
                assert "undone, in reverse order" not in cap.err.getvalue()
            continue
        assert not fired
        break
    else:
        pytest.fail("the apply never completed")
    assert boundaries >= 6
    undone = list_snapshots(n.state_dir)[-2].records()
    assert undone[-1]["event"] == "apply-end" and undone[-1]["status"] == "undone"
    assert sum(r["event"] == "undo-end" for r in undone) == sum(
        r["event"] == "step-begin" for r in undone), "every started step was undone"


@pytest.mark.parametrize("write", [1, 2, 5, 10])
def test_an_api_write_failing_on_the_server_undoes_the_writes_before_it(
    node: Callable[..., Node], write: int
) -> None:
    n = node("kpro6")
    before = n.fingerprint(100)
    n.sim.faults.update(fail_write=write)
    with pytest.raises(ApplyFailed) as caught:
        n.apply(100, 1)
    assert f"simulated failure of write #{write}" in str(caught.value)
    if write > 1:
        assert "VM config machine back to (absent)" in str(caught.value)
    assert n.fingerprint(100) == before


def test_a_dropped_ssh_connection_while_writing_a_host_file_is_undone(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6")
    before = n.fingerprint(100)
    n.sim.faults.update(ssh_disconnect_after=8)
    with pytest.raises(PvefixError, match="cannot write"):
        n.apply(100, 2)
    assert n.fingerprint(100) == before
    tmp_left = list(n.sim.state.tree.host_path("/etc/kernel/cmdline").parent.glob("*pvefix-tmp*"))
    assert tmp_left == [], "the temporary file is removed over a new connection"
