"""Shared fixtures. A simulator starts only in tests that ask for one of these fixtures."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from pvefix.sim.serve import ReadyInfo

# Hypothesis profiles, chosen with HYPOTHESIS_PROFILE (default "default"): property tests carry
# no settings of their own. "thorough" for a nightly run, "quick" while editing a parser.
for _name, _examples in (("default", 200), ("quick", 30), ("thorough", 2000)):
    settings.register_profile(_name, max_examples=_examples, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def _private_state_dir(monkeypatch: pytest.MonkeyPatch,
                       tmp_path_factory: pytest.TempPathFactory) -> None:
    """pvefix's default state directory is the user's own (~/.local/state/pvefix), and `plan`
    reads recorded desired states there (a VM's may ask for the P2P phase): every test gets an
    empty one of its own, so nothing of the user's or of another test leaks in."""
    monkeypatch.delenv("PVEFIX_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))


class SimLauncher:
    """Starts in-process simulators in temporary directories and stops them all at the end."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._stops: list[Callable[[], None]] = []
        self._count = 0

    def launch(
        self, scenario: str = "kpro6", **options: Any
    ) -> tuple[ReadyInfo, Callable[[], None]]:
        """Start one in its own directory; returns its ReadyInfo and its stop function."""
        from pvefix.sim.serve import Simulator

        self._count += 1
        root = self.base / f"{scenario.replace('/', '_')}-{self._count}"
        options.setdefault("task_seconds", 0.05)
        sim = Simulator(scenario, root, **options)
        return sim.start(), sim.stop

    def start(self, scenario: str = "kpro6", **options: Any) -> ReadyInfo:
        """Start one that lives until the end of the session."""
        info, stop = self.launch(scenario, **options)
        self._stops.append(stop)
        return info

    def stop_all(self) -> None:
        while self._stops:
            self._stops.pop()()


@pytest.fixture(scope="session")
def sim_launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimLauncher]:
    """Session-wide launcher: `sim_launcher.start("kpro6")` -> ReadyInfo."""
    launcher = SimLauncher(tmp_path_factory.mktemp("sim"))
    yield launcher
    launcher.stop_all()


@pytest.fixture(scope="session")
def kpro6_sim(sim_launcher: SimLauncher) -> ReadyInfo:
    """One kpro6 simulator for the whole session: read from it, do not change it."""
    return sim_launcher.start("kpro6")


@pytest.fixture
def kpro6_ready(kpro6_sim: ReadyInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The session's kpro6 simulator as a ready file (`--connection FILE`), with a config home
    of the test's own (no profile of the machine's is read)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "ready.json"
    from pvefix.sim.serve import write_ready_file

    write_ready_file(kpro6_sim, path)
    return path


@pytest.fixture
def fresh_sim(sim_launcher: SimLauncher) -> Iterator[Callable[..., ReadyInfo]]:
    """A factory for simulators of one's own (for tests that change the node); they stop when
    the test ends."""
    stops: list[Callable[[], None]] = []

    def start(scenario: str = "kpro6", **options: Any) -> ReadyInfo:
        info, stop = sim_launcher.launch(scenario, **options)
        stops.append(stop)
        return info

    yield start
    for stop in stops:
        stop()


@pytest.fixture(scope="session")
def kpro6_token(kpro6_sim: ReadyInfo) -> Any:
    """proxmoxer client of the shared kpro6 simulator, with the root@pam!pvefix token."""
    from tests.simkit import api

    return api(kpro6_sim, "token")


@pytest.fixture(scope="session")
def kpro6_ticket(kpro6_sim: ReadyInfo) -> Any:
    """proxmoxer client of the shared kpro6 simulator, logged in as root@pam (ticket)."""
    from tests.simkit import api

    return api(kpro6_sim, "ticket")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say how many tests skipped because ../shared is absent (a user's clone): they run in CI."""
    from tests.shared import NEEDS_SHARED, SHARED

    skipped = terminalreporter.stats.get("skipped", [])
    count = sum(1 for rep in skipped if NEEDS_SHARED in str(getattr(rep, "longrepr", "")))
    if count:
        terminalreporter.write_line(
            f"{count} test(s) skipped because {SHARED} is absent or a judge in it cannot run"
            " here (each skip says why; `make conformance` sets the judges up, as root); CI"
            " runs them."
        )


@pytest.fixture(scope="session")
def oracle() -> Iterator[Any]:
    """Proxmox VE's own code (tests/oracle.py); skips, saying why, where the oracle does not
    answer a trivial question here (absent, no perl, its Debian Perl packages missing)."""
    from tests.oracle import Oracle, oracle_missing
    from tests.shared import NEEDS_SHARED

    why = oracle_missing()
    if why:
        pytest.skip(f"{NEEDS_SHARED}: {why}")
    o = Oracle()
    yield o
    o.close()


# `make conformance` runs the judges in two processes (pytest-xdist, --dist loadgroup). Tests
# that share a judge's machine-wide state keep to one process, in collection order:
# - "pve-api": Proxmox's own daemons, one node per scenario for the session (tests/realapi.py)
#   started once, in that process only;
# - "qemu": real QEMU (fw-lab, the rehearsals, the kernel judge): a test that counts the QEMU
#   processes left behind, and the boots' time limits, never meet another group's QEMU.
# Everything else (Proxmox's code through the oracle) goes to whichever process is free.
JUDGE_GROUPS = {
    "pve-api": ("tests/conformance/test_real_api_", "tests/conformance/test_sim_vs_api.py",
                "tests/conformance/test_sim_truth_host_realapi.py"),
    "qemu": ("tests/rehearse/", "tests/check/test_check_rehearse.py",
             "tests/commands/test_width_80.py", "tests/conformance/test_firmware_window.py",
             "tests/conformance/test_kernel_judge.py"),
}


def judge_group(nodeid: str) -> str | None:
    """The group a conformance test keeps to (JUDGE_GROUPS), None for any process."""
    return next((name for name, prefixes in JUDGE_GROUPS.items()
                 if nodeid.startswith(prefixes)), None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return  # one process (-p no:xdist): nothing to keep together
    for item in items:
        group = judge_group(item.nodeid) if item.get_closest_marker("conformance") else None
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
