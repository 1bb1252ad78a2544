"""Clients for a simulated node, as users' tools build them: proxmoxer's https backend with the
generated CA, and paramiko with strict host key checking against the generated known_hosts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import paramiko
from proxmoxer import ProxmoxAPI
from proxmoxer.tools import Tasks

from pvefix.sim.serve import ReadyInfo


def grant(root: str | Path, ugid: str, role: str = "Administrator", path: str = "/") -> None:
    """An ACL entry in the node's user.cfg, as `pveum acl modify PATH --tokens UGID --roles
    ROLE` writes it: a privilege-separated token (intel-grub's and grub-dropin's
    root@pam!pvefix) has no rights until an admin grants some."""
    cfg = Path(root) / "etc" / "pve" / "user.cfg"
    old = cfg.read_text() if cfg.exists() else ""
    cfg.write_text(old + f"acl:1:{path}:{ugid}:{role}:\n")


def api(info: ReadyInfo, auth: str = "token") -> Any:
    """A proxmoxer client; `auth` is "token" (root@pam!pvefix) or "ticket" (root@pam password)."""
    host = info.api_url.removeprefix("https://")
    if auth == "token":
        user, _, name = info.token_id.partition("!")
        return ProxmoxAPI(host, user=user, token_name=name, token_value=info.token_secret,
                          verify_ssl=info.ca_cert, timeout=10)
    return ProxmoxAPI(host, user=info.user, password=info.password, verify_ssl=info.ca_cert,
                      timeout=10)


def ssh(info: ReadyInfo, *, password: bool = False) -> paramiko.SSHClient:
    """A paramiko client that only trusts the simulator's generated host key."""
    client = paramiko.SSHClient()
    client.load_host_keys(info.known_hosts)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    if password:
        client.connect(info.ssh_host, port=info.ssh_port, username=info.ssh_user,
                       password=info.password, look_for_keys=False, allow_agent=False,
                       timeout=10)
    else:
        client.connect(info.ssh_host, port=info.ssh_port, username=info.ssh_user,
                       key_filename=info.ssh_key, look_for_keys=False, allow_agent=False,
                       timeout=10)
    return client


def run(client: paramiko.SSHClient, command: str) -> tuple[int, str, str]:
    """Run one command: (exit status, stdout, stderr)."""
    _, out, err = client.exec_command(command, timeout=20)
    code = out.channel.recv_exit_status()
    return code, out.read().decode(), err.read().decode()


def wait_task(prox: Any, upid: str) -> dict[str, Any]:
    """Poll a task until it stops; fail loudly instead of returning None on timeout."""
    status = Tasks.blocking_status(prox, upid, timeout=20, polling_interval=0.02)
    assert status is not None, f"task {upid} did not finish"
    return dict(status)


def ssh_when_back(info: ReadyInfo, timeout: float = 20) -> paramiko.SSHClient:
    """An SSH client once the node answers again (after a simulated reboot)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return ssh(info)
        except (OSError, paramiko.SSHException):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def state_key(info: ReadyInfo, name: str) -> str:
    """The identity pvefix keeps a simulated host's state under (`node-kpro6@KEY`), worked out
    from the simulator's CA file as Proxmox keeps it (pve-root-ca.pem): the first 12 hex digits
    of the SHA-256 of its Subject Key Identifier."""
    import hashlib
    from pathlib import Path

    from cryptography import x509

    ca = x509.load_pem_x509_certificate(Path(info.ca_cert).read_bytes())
    ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    return f"{name}@{hashlib.sha256(ski).hexdigest()[:12]}"
