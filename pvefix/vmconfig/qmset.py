"""`qm set VMID --key value ... --digest D`: the command root runs on the node, as an argument
list (pvefix runs it over SSH: pvefix.executor.vmwrite.QmVmWriter) and as one quoted shell line
(what a refusal tells the admin to run)."""

from __future__ import annotations

import shlex


def qm_set_argv(vmid: int, params: dict[str, str], digest: str | None) -> list[str]:
    """`qm set VMID --key value ... --digest D` as an argument list."""
    argv = ["qm", "set", str(vmid)]
    for key, value in params.items():
        argv += [f"--{key}", value]
    if digest:
        argv += ["--digest", digest]
    return argv


def qm_set_command(vmid: int, params: dict[str, str], digest: str | None = None) -> str:
    """The same command as one shell line, every argument quoted."""
    return shlex.join(qm_set_argv(vmid, params, digest))
