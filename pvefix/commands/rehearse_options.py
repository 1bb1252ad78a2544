"""`--rehearse` and its settings for plan, apply and check (docs/rehearse.md).

    @rehearse_options
    def plan(..., *, rehearsal: RehearseAsk) -> int: ...
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pvefix.commands.optgroup import REHEARSAL, option_group, unset

if TYPE_CHECKING:
    from pvefix.rehearse.flow import Settings

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class RehearseAsk:
    rehearse: bool | None = None
    accel: str | None = None
    boot_timeout: float | None = None
    firmware_dir: str | None = None

    def settings(self) -> Settings | None:
        """The rehearsal's settings when --rehearse was given, else None."""
        if not self.rehearse:
            return None
        from pvefix.errors import PvefixError
        from pvefix.rehearse.flow import Settings

        accel = self.accel or "auto"
        if accel not in ("auto", "kvm", "tcg"):
            raise PvefixError(f"--rehearse-accel {accel}: say auto, kvm or tcg")
        return Settings(accel=accel, timeout=self.boot_timeout or 120.0,
                        firmware_dir=self.firmware_dir or Settings.firmware_dir,
                        explicit_firmware_dir=self.firmware_dir is not None)


_OPTIONS: dict[str, tuple[str, Any, Any]] = {
    "rehearse": ("rehearse", bool | None, unset(
        "--rehearse", "Also boot its firmware with stand-in BARs: all placed?")),
    "accel": ("rehearse_accel", str | None, unset(
        "--rehearse-accel", "auto (KVM if usable, else TCG), kvm or tcg (default auto).")),
    "boot_timeout": ("rehearse_timeout", float | None, unset(
        "--rehearse-timeout", "Seconds to the boot manager (default 120; TCG: 30 or more).")),
    "firmware_dir": ("rehearse_firmware_dir", str | None, unset(
        "--rehearse-firmware-dir", "Firmware folder (/usr/share/pve-edk2-firmware).")),
}


def rehearse_options(func: F) -> F:
    """Add --rehearse and its settings to a command that takes `rehearsal: RehearseAsk`."""
    return option_group("rehearsal", RehearseAsk, _OPTIONS, REHEARSAL)(func)
