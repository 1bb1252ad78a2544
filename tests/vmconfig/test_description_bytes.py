"""A description line with bytes that are not UTF-8: pvefix reads it without a traceback and
writes it back as Proxmox's own writer does (PVE::Tools::decode_text turns the bad byte into
U+FFFD, encode_text escapes that as %EF%BF%BD), checked against Proxmox's code."""

from __future__ import annotations

import json
import subprocess

import pytest

from pvefix.digest import text_of
from pvefix.vmconfig.config import VMConfig
from tests.oracle import SCRIPT, oracle_missing
from tests.shared import NEEDS_SHARED

RAW = b"#caf\xe9 au lait\n#100%25 ok\ncores: 1\n"


def test_a_non_utf8_description_byte_is_written_back_as_proxmox_writes_it() -> None:
    cfg = VMConfig.parse(text_of(RAW), "100.conf")
    assert cfg.render() == text_of(RAW), "unchanged, the file is kept byte for byte"
    assert cfg.render_proxmox().startswith("#caf%EF%BF%BD au lait\n#100%25 ok\n")


def test_the_same_as_proxmoxs_own_writer() -> None:
    if (why := oracle_missing()) is not None:
        pytest.skip(f"{NEEDS_SHARED}: {why}")
    done = subprocess.run(["perl", str(SCRIPT), "config", "-"], input=RAW,
                          capture_output=True, check=True, timeout=60)
    written = json.loads(done.stdout)["written"]
    assert VMConfig.parse(text_of(RAW), "100.conf").render_proxmox() == written
