"""One FileStep and one RefreshStep, on the node and in the guest alike: the write keeps a
dated backup beside the file and reads back; undo puts back only what pvefix wrote
(compare-and-swap) and runs the refresh again. Against the simulator's SSH and guest agent."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pvefix.errors import RefusedError
from pvefix.executor.steps import FileStep, RefreshStep, Side, StepContext, UndoConflict
from pvefix.executor.vmwrite import ApiVmWriter
from pvefix.target.open import open_guest
from pvefix.target.sessions import Sessions
from tests.executor.conftest import Node
from tests.guest.conftest import AGENT, VMID, guest_root

PATHS: dict[Side, str] = {"host": "/etc/kernel/cmdline", "guest": "/etc/default/grub"}
REFRESH: dict[Side, list[str]] = {"host": ["proxmox-boot-tool", "refresh"],
                                  "guest": ["update-grub"]}


@pytest.fixture
def ctx(own_node: Callable[..., Node]) -> Iterator[tuple[Node, StepContext]]:
    node = own_node()
    conn = node.conn()
    sessions = Sessions(conn)
    name = node.info.node
    channel = open_guest(conn, AGENT, VMID)
    try:
        yield node, StepContext(sessions=sessions, vmid=VMID,
                                writer=ApiVmWriter(sessions, name, VMID, 10), vm_digest="",
                                backup_suffix="20260101T000000Z", node=sessions.at(name),
                                guest=channel)
    finally:
        channel.close()
        sessions.close()


def on_disk(node: Node, side: Side, path: str) -> Path:
    if side == "host":
        return node.sim.state.tree.host_path(path)
    return guest_root(node) / path.lstrip("/")


@pytest.mark.parametrize("side", ["host", "guest"])
def test_a_file_step_writes_keeps_a_backup_and_undoes_with_the_refresh_again(
    ctx: tuple[Node, StepContext], side: Side
) -> None:
    node, c = ctx
    path = PATHS[side]
    before = on_disk(node, side, path).read_text()
    after = before.rstrip("\n") + " # pvefix test\n"
    step = FileStep(side, path, before, after, ["test.change"])
    step.do(c)
    RefreshStep(side, REFRESH[side], [path]).do(c)
    assert on_disk(node, side, path).read_text() == after
    assert on_disk(node, side, f"{path}.pvefix-20260101T000000Z").read_text() == before
    assert step.verify(c) is None
    what = step.undo(c)
    assert what == f"{side} file {path} restored, then `{' '.join(REFRESH[side])}` again"
    assert on_disk(node, side, path).read_text() == before
    assert step.undo(c) is None, "a second undo finds nothing to do"


@pytest.mark.parametrize("side", ["host", "guest"])
def test_a_file_step_leaves_another_writers_edit_and_refuses_to_write_over_one(
    ctx: tuple[Node, StepContext], side: Side
) -> None:
    node, c = ctx
    path = PATHS[side]
    real = on_disk(node, side, path)
    before = real.read_text()
    step = FileStep(side, path, before, before + "# ours\n", ["test.change"])
    step.do(c)
    real.write_text(before + "# theirs\n")
    with pytest.raises(UndoConflict, match="another writer changed it"):
        step.undo(c)
    assert real.read_text() == before + "# theirs\n", "their edit stands"
    again = FileStep(side, path, before, before + "# ours\n", ["test.change"])
    with pytest.raises(RefusedError, match="does not write over someone else's edit"):
        again.do(c)
    assert real.read_text() == before + "# theirs\n"
