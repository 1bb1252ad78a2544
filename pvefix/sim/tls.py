"""The simulator's generated secrets: a CA and server certificate, SSH keys, passwords.

Everything is generated once into `<root>/.pvefix-sim/` (files 0600) and reused on the next start,
so a client that trusted the CA or the host key once keeps trusting it. The host tree format
ignores dot-entries at its root, so the tree stays a valid bundle.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID

SIM_DIR = ".pvefix-sim"
TOKEN_ID = "root@pam!pvefix"  # noqa: S105 (an id, not a secret)


@dataclass(frozen=True)
class SimKeys:
    """Paths and secrets of one simulator root. Secrets never go into logs or messages."""

    dir: Path
    ca_cert: Path
    server_cert: Path
    server_key: Path
    host_key: Path
    root_key: Path
    root_pub: str  # "ssh-ed25519 AAAA..." of root's client key
    known_hosts: Path
    password: str
    token_secrets: dict[str, str]  # token id -> secret
    ticket_key: bytes  # HMAC key for tickets and CSRF tokens

    def host_public_line(self) -> str:
        """The host key as `type base64` (what a known_hosts entry carries after the host)."""
        key = serialization.load_ssh_private_key(self.host_key.read_bytes(), password=None)
        pub = key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        return pub.decode()

    def fingerprint(self) -> str:
        """The server certificate's SHA-256 fingerprint as Proxmox shows it (AA:BB:...)."""
        cert = x509.load_pem_x509_certificate(self.server_cert.read_bytes())
        return cert.fingerprint(hashes.SHA256()).hex(":").upper()

    def write_known_hosts(self, host: str, ports: int | list[int]) -> None:
        """Write the known_hosts entries (one per SSH port: each node of a cluster has its
        own) in OpenSSH's `[host]:port` form for non-22 ports."""
        lines = ""
        for port in [ports] if isinstance(ports, int) else ports:
            name = host if port == 22 else f"[{host}]:{port}"
            lines += f"{name} {self.host_public_line()}\n"
        write_private(self.known_hosts, lines.encode())


def write_private(path: Path, data: bytes) -> None:
    """Write a file readable by its owner only, atomically."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _ed25519_openssh() -> tuple[bytes, str]:
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, public.decode()


def _make_ca_and_server(node: str) -> tuple[bytes, bytes, bytes]:
    """A CA (EC P-256) and a server certificate for 127.0.0.1/localhost signed by it."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    # Named as Proxmox VE names each installation's own CA (/etc/pve/pve-root-ca.pem): its
    # key is what pvefix keys a host's state by (pvefix.target.identity).
    ca_name = x509.Name([
        x509.NameAttribute(NameOID.COMMON_NAME, "Proxmox Virtual Environment"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, _uuid_like()),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "PVE Cluster Manager CA"),
    ])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pvefix simulator"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"{node}.pvefix-sim"),
        ]))
        .issuer_name(ca_name)
        .public_key(srv_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=825))
        .add_extension(
            x509.SubjectAlternativeName([
                x509.DNSName("localhost"),
                x509.DNSName(node),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            ]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return (
        ca_cert.public_bytes(pem),
        srv_cert.public_bytes(pem),
        srv_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def load_or_create_keys(root: Path, node: str, token_ids: list[str]) -> SimKeys:
    """Load the simulator's keys under `root/.pvefix-sim`, generating what is missing."""
    d = root / SIM_DIR
    d.mkdir(mode=0o700, exist_ok=True)
    os.chmod(d, 0o700)
    ca, crt, key = d / "ca.pem", d / "server.pem", d / "server-key.pem"
    if not (ca.exists() and crt.exists() and key.exists()):
        ca_pem, crt_pem, key_pem = _make_ca_and_server(node)
        write_private(ca, ca_pem)
        write_private(crt, crt_pem)
        write_private(key, key_pem)
    host_key = d / "ssh_host_ed25519_key"
    if not host_key.exists():
        write_private(host_key, _ed25519_openssh()[0])
    root_key, root_pub_path = d / "id_ed25519_root", d / "id_ed25519_root.pub"
    if not (root_key.exists() and root_pub_path.exists()):
        private, public = _ed25519_openssh()
        write_private(root_key, private)
        write_private(root_pub_path, (public + " root@pvefix-sim\n").encode())
    secrets_path = d / "secrets.json"
    stored: dict[str, object] = {}
    if secrets_path.exists():
        stored = json.loads(secrets_path.read_text())
    changed = False
    if not isinstance(stored.get("password"), str):
        stored["password"] = secrets.token_urlsafe(18)
        changed = True
    tokens = stored.get("tokens")
    if not isinstance(tokens, dict):
        tokens = {}
        changed = True
    for tid in token_ids:
        if tid not in tokens:
            tokens[tid] = _uuid_like()
            changed = True
    stored["tokens"] = tokens
    if not isinstance(stored.get("ticket_key"), str):
        stored["ticket_key"] = secrets.token_hex(32)
        changed = True
    if changed:
        write_private(secrets_path, json.dumps(stored, indent=2).encode())
    return SimKeys(
        dir=d,
        ca_cert=ca,
        server_cert=crt,
        server_key=key,
        host_key=host_key,
        root_key=root_key,
        root_pub=" ".join(root_pub_path.read_text().split()[:2]),
        known_hosts=d / "known_hosts",
        password=str(stored["password"]),
        token_secrets={str(k): str(v) for k, v in tokens.items()},
        ticket_key=bytes.fromhex(str(stored["ticket_key"])),
    )


def _uuid_like() -> str:
    """Proxmox token secrets are UUIDs; keep the shape so clients that check it are happy."""
    import uuid

    return str(uuid.uuid4())
