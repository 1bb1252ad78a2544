"""Long waits speak off a terminal (a CI log, `| tee`): a still-waiting line at least every
STILL_WAITING_S seconds through a host reboot and a slow shutdown task, against the simulator's
slow reboot and slow tasks. The interval is shortened here; 30 s is the default."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from pvefix.console import progress
from tests.executor.conftest import Captured, Node


@pytest.fixture
def every_quarter_second(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(progress, "STILL_WAITING_S", 0.25)
    return 0.25


def _still(err: str, what: str) -> list[int]:
    """The seconds each still-waiting line for `what` reports."""
    return [int(s) for s in re.findall(rf": still waiting for {re.escape(what)}, (\d+) s", err)]


def test_a_host_reboot_off_a_terminal_says_it_still_waits(
    node: Callable[..., Node], every_quarter_second: float,
) -> None:
    n = node("kpro6", reboot_seconds=2.0)
    cap = Captured()  # a StringIO: not a terminal
    n.apply(100, 2, reboot_host=True, captured=cap)
    err = cap.err.getvalue()
    # 2 s of reboot, a line every 0.25 s: several, whatever the load
    assert len(_still(err, "API and SSH to go down and come back")) >= 3, err
    assert re.search(r"still waiting for API and SSH .*\(api (up|down), ssh (up|down)\)", err)
    assert err.index("still waiting") < err.index("host kpro6: back after")


def test_a_slow_shutdown_task_says_it_still_waits(
    node: Callable[..., Node], every_quarter_second: float,
) -> None:
    n = node("kpro6", task_seconds=1.5)  # every Proxmox task takes 1.5 s
    cap = Captured()
    n.apply(100, 1, restart=True, captured=cap)
    err = cap.err.getvalue()
    assert _still(err, "the shutdown task"), err
    assert _still(err, "the start task"), err
    assert _still(err, "the config write task"), err
    # Nothing after the wait: the timer stops with it.
    last = err.rindex("still waiting")
    assert "VM 100: running, running-machine" in err[last:]


def test_the_default_interval_is_at_most_30_seconds() -> None:
    assert 0 < progress.STILL_WAITING_S <= 30
