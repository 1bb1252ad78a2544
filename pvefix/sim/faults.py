"""Fault injection: latency, a slow drip, a failing Nth write, a concurrent edit, a VM lock,
an SSH drop.

Set from the command line (`--inject latency=50 --inject fail-write=2 ...`), from Python
(`Simulator.faults.update(...)`) or at runtime through `/api2/json/_sim/inject` (root@pam ticket
only). One-shot faults disarm themselves when they fire.
"""

from __future__ import annotations

import threading

from pydantic import BaseModel, ConfigDict, Field

from pvefix.errors import ParseError


class FaultSettings(BaseModel):
    """What is armed. `fail_write` counts writes from the moment it is armed (1 = the next)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    latency_ms: int = Field(0, ge=0)
    drip_ms: int = Field(
        0, ge=0, description="a hostile slow node: every API response and SSH command output is "
        "sent one byte every drip_ms")
    fail_write: int | None = Field(None, ge=1)
    edit_between: bool = False
    lock: dict[int, str] = Field(default_factory=dict)
    config_lock: dict[int, int] = Field(
        default_factory=dict,
        description="VMID -> how many of its next config updates find its config lock held "
                    "(another task: a backup, qmeventd's cleanup after a restart) and fail as "
                    "Proxmox's do after their 10 s wait: `can't lock file ... - got timeout`")
    ssh_disconnect_after: int | None = Field(None, ge=0)
    fail_start: dict[int, str] = Field(
        default_factory=dict, description="vmid -> the error its next start task ends with"
    )
    p2p_blocked: list[int] = Field(
        default_factory=list,
        description="VMs on a host whose GPUs cannot really P2P: the guest reports NS even with"
        " a clique (sim/guest_gpus.py)",
    )


INJECT_HELP = (
    "latency=MS | drip=MS | fail-write=N | edit-between | lock=VMID:NAME | config-lock=VMID:N"
    " | ssh-disconnect=BYTES"
    " | fail-start=VMID[:MESSAGE] | p2p-blocked=VMID"
)


def parse_inject(specs: list[str]) -> dict[str, object]:
    """Turn `--inject` strings into FaultSettings fields; ParseError names the bad spec."""
    out: dict[str, object] = {}
    locks: dict[int, str] = {}
    for spec in specs:
        name, _, value = spec.partition("=")
        name = name.strip().replace("_", "-")
        try:
            if name == "latency":
                out["latency_ms"] = int(value)
            elif name == "drip":
                out["drip_ms"] = int(value)
            elif name == "fail-write":
                out["fail_write"] = int(value)
            elif name == "edit-between":
                out["edit_between"] = value.strip().lower() not in ("0", "false", "no")
            elif name == "lock":
                vmid, _, lock = value.partition(":")
                locks[int(vmid)] = lock or "backup"
            elif name == "config-lock":
                vmid, _, times = value.partition(":")
                held = dict(out.get("config_lock", {}))  # type: ignore[call-overload]
                held[int(vmid)] = int(times or "1")
                out["config_lock"] = held
            elif name == "ssh-disconnect":
                out["ssh_disconnect_after"] = int(value)
            elif name == "fail-start":
                vmid, _, message = value.partition(":")
                starts = dict(out.get("fail_start", {}))  # type: ignore[call-overload]
                starts[int(vmid)] = message or "start failed: QEMU exited with code 1"
                out["fail_start"] = starts
            elif name == "p2p-blocked":
                blocked = list(out.get("p2p_blocked", []))  # type: ignore[call-overload]
                out["p2p_blocked"] = [*blocked, int(value)]
            else:
                raise ValueError("unknown fault")
        except ValueError as exc:
            raise ParseError(
                f"bad --inject {spec!r} ({exc}); expected one of: {INJECT_HELP}",
                source="--inject",
            ) from None
    if locks:
        out["lock"] = locks
    return out


class Faults:
    """The armed faults of one simulator, safe to read and change from any thread."""

    def __init__(self, settings: FaultSettings | None = None) -> None:
        self._lock = threading.Lock()
        self._settings = settings or FaultSettings()
        self._writes = 0

    @property
    def settings(self) -> FaultSettings:
        return self._settings

    def update(self, **changes: object) -> FaultSettings:
        """Arm or change faults; `fail_write` restarts its write count."""
        with self._lock:
            merged = {**self._settings.model_dump(), **changes}
            self._settings = FaultSettings.model_validate(merged)
            if "fail_write" in changes:
                self._writes = 0
            return self._settings

    def clear(self) -> None:
        with self._lock:
            self._settings = FaultSettings()
            self._writes = 0

    @property
    def latency_s(self) -> float:
        return self._settings.latency_ms / 1000.0

    @property
    def drip_s(self) -> float:
        return self._settings.drip_ms / 1000.0

    def count_write(self) -> int | None:
        """Count one write; return its number if it is the one to fail (and disarm)."""
        with self._lock:
            target = self._settings.fail_write
            if target is None:
                return None
            self._writes += 1
            if self._writes < target:
                return None
            number = self._writes
            self._settings = self._settings.model_copy(update={"fail_write": None})
            self._writes = 0
            return number

    def take_edit_between(self) -> bool:
        """True once after `edit_between` was armed."""
        with self._lock:
            if not self._settings.edit_between:
                return False
            self._settings = self._settings.model_copy(update={"edit_between": False})
            return True

    def take_config_lock(self, vmid: int) -> bool:
        """True when this config update of `vmid` finds its config lock held (one of the
        armed number; each use counts down)."""
        with self._lock:
            left = self._settings.config_lock.get(vmid, 0)
            if left <= 0:
                return False
            held = {**self._settings.config_lock, vmid: left - 1}
            self._settings = self._settings.model_copy(update={"config_lock": held})
            return True

    def take_locks(self) -> dict[int, str]:
        """The VM locks to apply now (applied once, then forgotten: the config keeps them)."""
        with self._lock:
            locks = dict(self._settings.lock)
            if locks:
                self._settings = self._settings.model_copy(update={"lock": {}})
            return locks

    def take_fail_start(self, vmid: int) -> str | None:
        """The error VM `vmid`'s start ends with (one-shot), or None."""
        with self._lock:
            message = self._settings.fail_start.get(vmid)
            if message is not None:
                rest = {k: v for k, v in self._settings.fail_start.items() if k != vmid}
                self._settings = self._settings.model_copy(update={"fail_start": rest})
            return message

    def take_ssh_disconnect(self) -> int | None:
        """Bytes after which the next SFTP transfer is cut (one-shot)."""
        with self._lock:
            limit = self._settings.ssh_disconnect_after
            if limit is not None:
                self._settings = self._settings.model_copy(
                    update={"ssh_disconnect_after": None}
                )
            return limit
