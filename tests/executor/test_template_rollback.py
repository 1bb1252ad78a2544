"""`pvefix rollback --restart/--start` on a template is refused by pvefix itself, before any
write (Proxmox never starts a template: qemu-server QemuServer.pm vm_start); without them the
rollback restores the config as always."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pvefix.errors import RefusedError
from tests.executor.conftest import Captured, Node


def _make_template(n: Node, vmid: int) -> None:
    """`template: 1` in the main section (Proxmox writes it there; [PENDING] never holds it)."""
    path = n.sim.state.tree.vm_config_path(vmid)
    path.write_text(path.read_text().replace("\nbios:", "\ntemplate: 1\nbios:", 1))
    assert "\ntemplate: 1\nbios:" in path.read_text()


@pytest.mark.parametrize("asked", [{"restart": True}, {"restart": True, "start": True},
                                   {"start": True}])
def test_rollback_with_a_start_of_a_template_is_refused_before_any_write(
        node: Callable[..., Node], asked: dict[str, bool]) -> None:
    n = node("kpro6")
    n.apply(100, 1)
    _make_template(n, 100)
    before = n.fingerprint(100)
    cap = Captured()
    with pytest.raises(RefusedError, match="is a template") as err:
        n.rollback(100, captured=cap, force=True, **asked)
    assert "nothing was written" in str(err.value)
    assert n.fingerprint(100) == before, "the refusal wrote nothing"


def test_a_templates_rollback_without_a_start_restores_the_config(
        node: Callable[..., Node]) -> None:
    n = node("kpro6")
    original = n.conf(100)
    n.apply(100, 1)
    _make_template(n, 100)
    n.rollback(100, force=True)
    assert n.conf(100) == original, "restored as the snapshot holds it"
