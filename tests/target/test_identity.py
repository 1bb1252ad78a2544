"""The key of a host's identity: its Proxmox CA's key identifier (shared by every node of a
cluster, new with every installation, kept through certificate renewals); the certificate's
own digest when another CA issued it (ACME, a company CA)."""

from __future__ import annotations

import datetime as dt
import hashlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pvefix.target.identity import ca_file_key, certificate_key, keyed, name_of


def _ca(org: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256()))
    return key, cert


def _leaf(ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate, node: str) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, node)]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


def test_every_node_of_one_proxmox_ca_shares_a_key_and_no_two_cas_do() -> None:
    key, ca = _ca("PVE Cluster Manager CA")
    node1, node1_renewed, node2 = _leaf(key, ca, "n1"), _leaf(key, ca, "n1"), _leaf(key, ca, "n2")
    assert certificate_key(node1) == certificate_key(node1_renewed) == certificate_key(node2)
    other_key, other_ca = _ca("PVE Cluster Manager CA")
    assert certificate_key(_leaf(other_key, other_ca, "n1")) != certificate_key(node1)
    # --local reads the CA file itself: the same key as its nodes' certificates give.
    assert ca_file_key(ca.public_bytes(serialization.Encoding.PEM)) == certificate_key(node1)


def test_a_certificate_from_another_ca_is_keyed_by_itself() -> None:
    key, ca = _ca("Let's Encrypt")
    one, two = _leaf(key, ca, "n1"), _leaf(key, ca, "n2")  # one CA, many customers
    assert certificate_key(one) == hashlib.sha256(one).hexdigest()[:12]
    assert certificate_key(one) != certificate_key(two)
    assert certificate_key(b"not a certificate") is None
    assert ca_file_key(b"not a pem") is None


def test_identities_read_back() -> None:
    assert keyed("node-pve", "abc") == "node-pve@abc" and keyed("node-pve", None) == "node-pve"
    assert name_of("node-pve@abc") == "node-pve" == name_of("node-pve")
