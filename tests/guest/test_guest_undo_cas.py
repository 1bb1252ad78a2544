"""Undo in the guest is compare-and-swap too: a guest /etc/default/grub another admin edited
after pvefix wrote it is left as they wrote it, and the apply says so (exit 3)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pvefix.errors import EXIT_REFUSED, RefusedError
from pvefix.executor.journal import Record
from pvefix.executor.options import ApplyOptions
from pvefix.flow.apply import apply_phase
from tests.executor.conftest import Captured, Node
from tests.guest.conftest import AGENT, VMID, guest_root

THEIRS = b'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\n'


class Injected(Exception):
    """A failure after pvefix's guest write, so that its undo runs."""


def test_a_guest_file_edited_after_pvefixs_write_is_left_as_they_wrote_it(
    own_node: Callable[..., Node]
) -> None:
    node = own_node()
    grub = guest_root(node) / "etc" / "default" / "grub"

    def other_admin_then_failure(record: Record) -> None:
        if record["event"] == "step-end" and record["step"] == "guest-file:/etc/default/grub":
            grub.write_bytes(THEIRS)
        if record["event"] == "step-begin" and str(record["step"]).startswith("guest-refresh"):
            raise Injected("update-grub could not start")

    opts = ApplyOptions(phase=1, state_dir=node.state_dir, yes=True, task_timeout=10)
    with pytest.raises(RefusedError) as caught:
        apply_phase(node.conn(), VMID, opts, Captured().console(), guest=AGENT,
                    hook=other_admin_then_failure)
    assert caught.value.exit_code == EXIT_REFUSED
    assert "guest /etc/default/grub: holds neither what pvefix wrote" in str(caught.value)
    assert "--force" in str(caught.value)
    assert grub.read_bytes() == THEIRS, "their edit stands"
