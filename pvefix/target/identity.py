"""The identity pvefix keeps a host's state under: one two hosts cannot share.

A name alone is not one: two standalone hosts both called `pve` (the installer's default), or
two clusters both called `prod`, would read each other's recorded desired states, P2P wishes,
snapshots and probe baselines. So the name (`node-NAME` standalone, `cluster-NAME` in a
cluster) gets the key of the certificate authority behind the API:

    node-pve@3f9c0a81b2d4        cluster-prod@77e0c1d2a9b3

Each Proxmox VE installation makes its own CA (`/etc/pve/pve-root-ca.pem`, "PVE Cluster Manager
CA"); a node that joins a cluster takes the cluster's, so every node of a cluster shares it and
no two installations do, and it outlives certificate renewals. The key is the first 12 hex
digits of the SHA-256 of that CA's key identifier, as the API's certificate names it
(Authority Key Identifier). An API whose certificate comes from elsewhere (ACME, a company
CA) is keyed by that certificate's own SHA-256 instead: per node, and new after a renewal.
With `--local` the CA file is read directly. Without any (an offline bundle) the name alone.
"""

from __future__ import annotations

import hashlib

PVE_CA_ORGANIZATION = "PVE Cluster Manager CA"
KEY_DIGITS = 12
SEPARATOR = "@"


def keyed(name: str, key: str | None) -> str:
    """`node-pve` + key -> `node-pve@KEY` (the name alone when there is no key)."""
    return f"{name}{SEPARATOR}{key}" if key else name


def name_of(identity: str) -> str:
    """`node-pve@KEY` -> `node-pve`."""
    return identity.split(SEPARATOR, 1)[0]


def _digest(material: bytes) -> str:
    return hashlib.sha256(material).hexdigest()[:KEY_DIGITS]


def certificate_key(der: bytes) -> str | None:
    """The key of the API's certificate (DER): its Proxmox CA's key identifier, else the
    certificate itself (see the module doc). None: not a certificate."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    try:
        cert = x509.load_der_x509_certificate(der)
    except ValueError:
        return None
    organizations = cert.issuer.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    if any(o.value == PVE_CA_ORGANIZATION for o in organizations):
        try:
            aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
        except x509.ExtensionNotFound:
            aki = None
        if aki is not None and aki.key_identifier:
            return _digest(aki.key_identifier)
    return _digest(der)


def ca_file_key(pem: bytes) -> str | None:
    """The key of a Proxmox CA file (`/etc/pve/pve-root-ca.pem`): the same as its nodes'
    certificates give (its Subject Key Identifier). None: unreadable."""
    from cryptography import x509

    try:
        ca = x509.load_pem_x509_certificate(pem)
        ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except (ValueError, x509.ExtensionNotFound):
        return None
    return _digest(ski.digest)


def presented_certificate(host: str, port: int, timeout: float) -> bytes | None:
    """The certificate (DER) the server at host:port presents, unverified (for a fingerprint
    in an error message, or the key above once the API session itself was verified)."""
    import socket
    import ssl

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:
            return tls.getpeercert(binary_form=True) or None
    except OSError:
        return None
