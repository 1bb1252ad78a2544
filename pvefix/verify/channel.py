"""Deliver the probe into a guest, run it, read its report back, clean up.

The probe needs two things of a guest channel (pvefix.target.guest.channel): `upload(path,
data)` and `run(argv, timeout)`; SSH (SFTP + exec) and the QEMU guest agent (file-write +
exec) give both.
"""

from __future__ import annotations

import secrets

from pvefix.errors import PvefixError
from pvefix.probe.report import Report
from pvefix.target.guest.channel import GuestChannel, remove_quietly
from pvefix.target.result import CommandResult
from pvefix.verify.zipapp import build_probe_zipapp

__all__ = ["CommandResult", "GuestChannel", "parse_report", "probe_argv", "probe_path",
           "remove_quietly", "run_probe"]

#: Where the probe lands in the guest: /tmp/pvefix-probe-<id>.pyz.
GUEST_DIR = "/tmp"  # noqa: S108 - a fresh random name, removed afterwards
QUICK_BUDGET_S = 28.0
FULL_BUDGET_S = 600.0
#: Time on top of the probe's own budget: start-up, nvidia-smi, output transfer.
MARGIN_S = 60.0


def probe_path(token: str | None = None) -> str:
    """A fresh guest path for the probe zipapp."""
    return f"{GUEST_DIR}/pvefix-probe-{token or secrets.token_hex(6)}.pyz"


def probe_argv(python: str, path: str, quick: bool, budget: float) -> list[str]:
    argv = [python, path, "--format", "json", "--timeout", f"{budget:g}"]
    if quick:
        argv.append("--quick")
    return argv


def parse_report(result: CommandResult, where: str) -> Report:
    """The probe's JSON from stdout, validated by pydantic; PvefixError says what went wrong."""
    if result.timed_out:
        raise PvefixError(f"the probe did not finish in time in the guest ({where})")
    if result.exit_code != 0:
        tail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-3:]
        detail = " | ".join(tail) or "no output"
        raise PvefixError(f"the probe failed in the guest ({where}): exit status "
                          f"{result.exit_code}: {detail[:600]}")
    try:
        return Report.model_validate_json(result.stdout)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        first = str(exc).splitlines()[0][:300]
        raise PvefixError(f"the probe's output from the guest ({where}) is not a "
                          f"pvefix.probe/v1 report: {first}") from None


def run_probe(channel: GuestChannel, *, quick: bool, python: str = "python3",
              budget: float | None = None, zipapp: bytes | None = None) -> Report:
    """Upload the probe zipapp, run it with a time budget, parse its report, remove it."""
    seconds = budget if budget is not None else (QUICK_BUDGET_S if quick else FULL_BUDGET_S)
    path = probe_path()
    channel.upload(path, zipapp if zipapp is not None else build_probe_zipapp())
    try:
        result = channel.run(probe_argv(python, path, quick, seconds), seconds + MARGIN_S)
    finally:
        remove_quietly(channel, [path])
    return parse_report(result, channel.where)

