"""Stand-ins for a Proxmox node's own tools, for `pvefix --local` tests: `pvesh`, `qm`,
`proxmox-boot-tool`, `update-grub` and `hostname`, put first on PATH. Each forwards to a running
simulator (PVEFIX_FAKE_READY: its ready file), so what Proxmox decides (digests, pending, tasks,
start checks, what a boot-loader refresh does) is decided in one place, the simulator.

`pvesh get|create|set PATH --k v ... --output-format json` behaves as pvesh does: a call that
starts a worker task runs it in the foreground (PVE::RESTEnvironment fork_worker is `sync` for
the CLI), so the task has ended when the command returns; the UPID is printed last. An API
error goes to stderr with a non-zero exit.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

# Standard library only: each call is a new process, and a node's tools start fast.


def _ready() -> dict[str, Any]:
    return dict(json.loads(Path(os.environ["PVEFIX_FAKE_READY"]).read_text()))


class _Api:
    """root@pam with a password ticket, as pvesh acts (it runs as root@pam)."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.base = info["api_url"] + "/api2/json/"
        self.ctx = ssl.create_default_context(cafile=info["ca_cert"])
        login = self._send("POST", "access/ticket",
                           {"username": info["user"], "password": info["password"]}, {})
        self.headers = {"Cookie": f"PVEAuthCookie={login['ticket']}",
                        "CSRFPreventionToken": login["CSRFPreventionToken"]}

    def _send(self, method: str, path: str, data: dict[str, str],
              headers: dict[str, str]) -> Any:
        url = self.base + path.strip("/")
        body = None
        if method == "GET" and data:
            url += "?" + urllib.parse.urlencode(data)
        elif method != "GET":
            body = urllib.parse.urlencode(data).encode()
        # The simulator's own https:// URL from its ready file, never a user-given scheme.
        request = urllib.request.Request(url, data=body, method=method,  # noqa: S310
                                         headers=headers)
        with urllib.request.urlopen(request, context=self.ctx, timeout=20) as answer:  # noqa: S310
            return json.loads(answer.read() or b"{}").get("data")

    def call(self, method: str, path: str, data: dict[str, str] | None = None) -> Any:
        return self._send(method, path, data or {}, self.headers)


def _options(args: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        out[args[i].removeprefix("--")] = args[i + 1] if i + 1 < len(args) else ""
        i += 2
    return out


def pvesh(argv: list[str]) -> int:
    verb, path = argv[0], argv[1].strip("/")
    options = _options(argv[2:])
    options.pop("output-format", None)
    method = {"get": "GET", "create": "POST", "set": "PUT"}.get(verb)
    if method is None:
        print(f"unknown command 'pvesh {verb}'", file=sys.stderr)
        return 255
    try:
        api = _Api(_ready())
        result = api.call(method, path, options)
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")
        print(f"{exc.code} {exc.reason}", file=sys.stderr)
        try:
            errors = json.loads(body).get("errors") or {}
        except ValueError:
            errors = {}
        for key, value in errors.items():
            print(f"{key}: {value}", file=sys.stderr)
        return 255
    if isinstance(result, str) and result.startswith("UPID:"):
        node = result.split(":")[1]
        task = f"nodes/{node}/tasks/{urllib.parse.quote(result, safe=':@!')}"
        while (api.call("GET", f"{task}/status") or {}).get("status") != "stopped":
            time.sleep(0.02)  # the foreground worker: pvesh returns when the task has ended
        log = api.call("GET", f"{task}/log", {"limit": "1000"}) or []
        for line in log:
            print(line.get("t", ""))
    print(json.dumps(result))
    return 0


def over_ssh(argv: list[str]) -> int:
    """A command the simulator's node runs itself (qm, proxmox-boot-tool, readlink, ...)."""
    info = _ready()
    # Without an OpenSSH client (or asked to), paramiko, as pvefix itself uses.
    if shutil.which("ssh") is None or os.environ.get("FAKE_NODE_TOOLS_PARAMIKO"):
        return _over_paramiko(info, argv)
    done = subprocess.run(
        ["ssh", "-p", str(info["ssh_port"]), "-i", info["ssh_key"],
         "-o", f"UserKnownHostsFile={info['known_hosts']}", "-o", "StrictHostKeyChecking=yes",
         "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
         f"{info['ssh_user']}@{info['ssh_host']}", "--", shlex.join(argv)],
        capture_output=True, text=True, check=False, timeout=60,
    )
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


def _over_paramiko(info: dict[str, Any], argv: list[str]) -> int:
    import paramiko

    client = paramiko.SSHClient()
    client.load_host_keys(info["known_hosts"])
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(info["ssh_host"], port=int(info["ssh_port"]), username=info["ssh_user"],
                   key_filename=info["ssh_key"], look_for_keys=False, allow_agent=False,
                   timeout=20)
    try:
        _, out, err = client.exec_command(shlex.join(argv), timeout=60)
        code = out.channel.recv_exit_status()
        sys.stdout.write(out.read().decode())
        sys.stderr.write(err.read().decode())
    finally:
        client.close()
    return code


def main() -> int:
    name = Path(sys.argv[0]).name
    log = os.environ.get("PVEFIX_FAKE_ENV_LOG")
    if log:  # the names in each tool's environment, for the test that no secret reaches it
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"tool": name, "env": sorted(os.environ)}) + "\n")
    if name == "pvesh":
        return pvesh(sys.argv[1:])
    if name == "hostname":
        print(_ready()["node"])
        return 0
    slow = os.environ.get("PVEFIX_FAKE_SLOW_REFRESH")
    if slow and [name, *sys.argv[1:2]] in (["proxmox-boot-tool", "refresh"], ["update-grub"]):
        time.sleep(float(slow))  # a boot loader refresh that scans many kernels
    return over_ssh([name, *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
