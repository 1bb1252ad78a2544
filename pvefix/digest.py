"""The one place text becomes a digest. Text read from a host keeps undecodable bytes as
surrogates (errors="surrogateescape"), so every digest here encodes them back to the exact bytes:
Proxmox's config digest (SHA-1 of the raw file) and pvefix's file hashes (SHA-256) round-trip any
file, UTF-8 or not."""

from __future__ import annotations

import hashlib


def raw_bytes(text: str) -> bytes:
    """The bytes a text read with surrogateescape came from."""
    return text.encode("utf-8", "surrogateescape")


def sha1_text(text: str) -> str:
    """Proxmox's digest of a VM config: SHA-1 hex of the raw file."""
    return hashlib.sha1(raw_bytes(text), usedforsecurity=False).hexdigest()


def sha256_text(text: str) -> str:
    """pvefix's hash of a host or guest file."""
    return hashlib.sha256(raw_bytes(text)).hexdigest()


def text_of(data: bytes) -> str:
    """Any bytes as text that `raw_bytes` turns back into exactly those bytes."""
    return data.decode("utf-8", "surrogateescape")


def short_sha(sha: str | None) -> str:
    """A hash as messages show it: its first 12 digits, or "(absent)" for a missing file."""
    return sha[:12] if sha else "(absent)"
