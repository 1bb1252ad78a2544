"""`/nodes/{node}/qemu/{vmid}/agent/...`: the QEMU guest agent endpoints pvefix uses.

Shapes and checks follow qemu-server (API2/Qemu/Agent.pm, QemuServer/Agent.pm): the VM's
config must have `agent` ("No QEMU guest agent configured"), the VM must run ("VM 100 is not
running"), and the agent must be enabled in it (`agent: 0` means QEMU has no agent channel:
"QEMU guest agent is not running"). `exec` answers `{"pid": N}`; `exec-status` answers
`exited` 0/1 and, once exited, `exitcode` and the decoded `out-data`/`err-data`; `file-write`
takes at most 60 KiB of `content` (base64 when `encode=0`) and replaces the file;
`file-read` returns up to 16 MiB as `content`. The guest behind them is `pvefix.sim.guest`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import TYPE_CHECKING

from pvefix.sim.api_node import check_node
from pvefix.sim.errors import ApiError, die, param_error
from pvefix.sim.guest import GuestRefused, GuestSandbox, sandbox
from pvefix.vmconfig.schema import parse_bool

if TYPE_CHECKING:
    from pvefix.sim.api import Call

MAX_WRITE = 60 * 1024  # file-write's maxLength for `content`
MAX_READ = 16 * 1024 * 1024  # file-read's limit


def agent_enabled(value: str) -> bool:
    """The `enabled` flag of an `agent:` property string (its default key; default off)."""
    for item in value.split(","):
        key, sep, raw = item.partition("=")
        if not sep:
            return bool(parse_bool(key.strip()))
        if key.strip() == "enabled":
            return bool(parse_bool(raw.strip()))
    return False


def _guest(call: Call) -> GuestSandbox:
    """assert_agent_available: the checks every agent call makes, in Proxmox's order."""
    raw = call.parts["vmid"]
    if not raw.isdigit() or not 100 <= int(raw) <= 999_999_999:
        raise param_error({"vmid": "invalid format - value does not look like a valid VM ID"})
    vmid = int(raw)
    state = call.state
    check_node(state, call.parts["node"])
    with state.lock:
        agent = state.load(vmid, call.parts["node"]).parse().main.get("agent")
        running = state.run_state(vmid).status == "running"
    if agent is None:
        raise die("No QEMU guest agent configured")
    if not running:
        raise die(f"VM {vmid} is not running")
    if not agent_enabled(agent):
        raise die("QEMU guest agent is not running")
    return sandbox(state, vmid)


def _refused(exc: GuestRefused) -> ApiError:
    return die(f"Agent error: {exc}")


def ping(call: Call) -> object:
    _guest(call)
    return {"result": {}}


def exec_command(call: Call) -> object:
    guest = _guest(call)
    command = call.lists.get("command") or (
        [call.params["command"]] if call.params.get("command") else []
    )
    if not command:
        raise die("command or input-data (or both) required")
    try:
        return {"pid": guest.start(command)}
    except GuestRefused as exc:
        raise _refused(exc) from None
    except OSError as exc:
        raise die(f"Agent error: Failed to execute child process: {exc.strerror}") from None


def exec_status(call: Call) -> object:
    guest = _guest(call)
    raw = call.params.get("pid", "")
    if not raw.lstrip("-").isdigit():
        raise param_error({"pid": f"type check ('integer') failed - got '{raw}'"})
    entry = guest.status(int(raw))
    if entry is None:
        raise die("Agent error: Invalid parameter 'pid'")
    if not entry.done.is_set():
        return {"exited": 0}
    out: dict[str, object] = {"exited": 1}
    code = entry.exit_code
    if code is not None and code < 0:
        out["signal"] = -code
    else:
        out["exitcode"] = code
    if entry.stdout:
        out["out-data"] = entry.stdout.decode("utf-8", "replace")
    if entry.stderr:
        out["err-data"] = entry.stderr.decode("utf-8", "replace")
    return out


def file_write(call: Call) -> object:
    guest = _guest(call)
    path = call.params.get("file")
    content = call.params.get("content")
    if path is None or content is None:
        missing = {k: "property is missing and it is not optional"
                   for k in ("file", "content") if call.params.get(k) is None}
        raise param_error(missing)
    if len(content) > MAX_WRITE:
        raise param_error({"content": f"value may only be {MAX_WRITE} characters long"})
    encode = parse_bool(call.params.get("encode", "1") or "1")
    if encode:
        data = content.encode("utf-8")
    else:
        try:
            data = base64.b64decode(content, validate=True)
        except binascii.Error:
            raise die("Agent error: guest-file-write: invalid base64 data") from None
    try:
        guest.write(path, data)
    except GuestRefused as exc:
        raise _refused(exc) from None
    except OSError as exc:
        raise die(f"Agent error: failed to open file '{path}': {exc.strerror}") from None
    return None


def file_read(call: Call) -> object:
    guest = _guest(call)
    path = call.params.get("file")
    if path is None:
        raise param_error({"file": "property is missing and it is not optional"})
    try:
        data, truncated = guest.read(path, MAX_READ)
    except GuestRefused as exc:
        raise _refused(exc) from None
    except OSError as exc:
        raise die(f"Agent error: failed to open file '{path}': {exc.strerror}") from None
    out: dict[str, object] = {"content": data.decode("utf-8", "replace"),
                              "bytes-read": len(data)}
    if truncated:
        out["truncated"] = 1
    return out


def register(route: Callable[..., None]) -> None:
    """Add the agent routes to the API's table, with Agent.pm's privileges on /vms/VMID."""
    base = "/nodes/{node}/qemu/{vmid}/agent"
    vm = "/vms/{vmid}"
    unrestricted = "VM.GuestAgent.Unrestricted"
    route("POST", f"{base}/ping", ping, (vm, ("VM.GuestAgent.Audit", unrestricted), True))
    route("POST", f"{base}/exec", exec_command, (vm, (unrestricted,), False))
    route("GET", f"{base}/exec-status", exec_status, (vm, (unrestricted,), False), ("pid",))
    route("POST", f"{base}/file-write", file_write,
          (vm, ("VM.GuestAgent.FileWrite", unrestricted), True))
    route("GET", f"{base}/file-read", file_read,
          (vm, ("VM.GuestAgent.FileRead", unrestricted), True), ("file",))
