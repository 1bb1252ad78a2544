"""The model against Proxmox's own test data (../shared/corpus)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvefix.errors import ParseError, ValidationError
from pvefix.vmconfig import HostPci, Machine, VMConfig
from pvefix.vmconfig.values import validate
from tests.shared import NEEDS_SHARED

from .conftest import CORPUS, SHARED

pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"{NEEDS_SHARED}: the Proxmox corpus is absent at {CORPUS}"
)

CONFS = sorted(CORPUS.rglob("*.conf")) if CORPUS.is_dir() else []


def _id(p: Path) -> str:
    return str(p.relative_to(CORPUS))


def test_the_corpus_is_all_there() -> None:
    assert len(CONFS) == 229


@pytest.mark.parametrize("path", CONFS, ids=_id)
def test_every_corpus_config_round_trips_byte_identically(path: Path) -> None:
    raw = path.read_bytes()
    cfg = VMConfig.parse(raw.decode("utf-8"), str(path))
    assert cfg.render().encode("utf-8") == raw
    import hashlib

    assert cfg.digest == hashlib.sha1(raw).hexdigest()


PARSE_INPUTS = sorted((CORPUS / "parse-config-input").glob("*.conf")) if CORPUS.is_dir() else []


@pytest.mark.parametrize("path", PARSE_INPUTS, ids=_id)
def test_proxmox_writer_output_is_reproduced(path: Path) -> None:
    expected = CORPUS / "parse-config-expected" / path.name
    want = (expected if expected.exists() else path).read_text()
    assert VMConfig.parse(path.read_text(), str(path)).render_proxmox() == want


@pytest.mark.parametrize(
    "path", sorted((CORPUS / "parse-config-expected").glob("*.strict.error")), ids=_id
)
def test_configs_proxmox_refuses_strictly_are_refused_by_pvefix(path: Path) -> None:
    source = CORPUS / "parse-config-input" / path.name.removesuffix(".strict.error")
    proxmox_says = path.read_text()
    with pytest.raises(ParseError) as err:
        VMConfig.parse(source.read_text(), str(source), strict=True)
    assert err.value.source == str(source)
    assert err.value.line is not None and err.value.line > 0
    # Same cause, pvefix's own words: the key or section Proxmox names appears in ours.
    if "numa" in proxmox_says:
        assert "numa" in err.value.message and "boolean" in err.value.message
    elif "duplicate section" in proxmox_says:
        assert "duplicate section [PENDING]" in err.value.message
    else:
        assert "unknown section [special:unknown123]" in err.value.message


def _cfg2cmd_cases(*, builds: bool) -> list[Path]:
    d = CORPUS / "cfg2cmd"
    cases = sorted(d.glob("*.conf")) if d.is_dir() else []
    return [p for p in cases if Path(f"{p}.cmd").exists() == builds]


@pytest.mark.parametrize("path", _cfg2cmd_cases(builds=True), ids=_id)
def test_configs_proxmox_builds_a_command_for_parse_strictly(path: Path) -> None:
    cfg = VMConfig.parse(path.read_text(), str(path), strict=True)
    for key, value in cfg.main.as_dict().items():
        if key.startswith("hostpci"):
            HostPci.parse(value, key)
        if key == "machine":
            Machine.parse(value)


@pytest.mark.parametrize("path", _cfg2cmd_cases(builds=False), ids=_id)
def test_configs_proxmox_fails_to_start_are_judged_like_proxmox(path: Path) -> None:
    cfg = VMConfig.parse(path.read_text(), str(path))
    expect = next(
        line.split("EXPECT_ERROR:", 1)[1].strip()
        for line in cfg.description.splitlines()
        if "EXPECT_ERROR:" in line
    )
    if "vIOMMU" in expect:
        # A property of the machine value itself: pvefix reports it, with Proxmox's reason.
        assert any(expect in p.message for p in cfg.problems), cfg.problems
        with pytest.raises(ParseError):
            VMConfig.parse(path.read_text(), str(path), strict=True)
    else:
        # Depends on the node (QEMU version, storage, USB rules), not on the file's syntax:
        # the file itself is valid.
        assert cfg.problems == [], cfg.problems


def test_every_hostpci_and_machine_value_in_the_corpus_is_understood() -> None:
    seen = 0
    for path in CONFS:
        cfg = VMConfig.parse(path.read_text(), str(path))
        for sec in [cfg.main, *cfg.snapshots.values()]:
            for key, value in sec.as_dict().items():
                if key.startswith("hostpci"):
                    HostPci.parse(value, key)
                    seen += 1
                elif key == "machine" and "viommu=intel" not in value and "aw-bits" not in value:
                    Machine.parse(value)
                    seen += 1
    assert seen > 20


_VERDICTS_FILE = SHARED / "corpus" / "proxmox-verdicts.json"
VERDICTS = json.loads(_VERDICTS_FILE.read_text()) if _VERDICTS_FILE.is_file() else []


@pytest.mark.parametrize(
    "verdict", VERDICTS, ids=[f"{v['key']}={v['value']}" for v in VERDICTS]
)
def test_pvefix_accepts_and_rejects_what_proxmox_does(verdict: dict[str, object]) -> None:
    key, value = str(verdict["key"]), str(verdict["value"]).strip()
    if verdict["config_accepted"]:
        validate(key, value)
    else:
        with pytest.raises(ValidationError) as err:
            validate(key, value)
        proxmox_error = str(verdict["config_error"]).splitlines()[-1]
        # Proxmox's reason ("pcie: type check ('boolean') failed - got '2'") is in ours,
        # together with the key and the value.
        assert proxmox_error.split(": ", 1)[-1] in err.value.message
        assert err.value.message.startswith(f"{key}: ")
        assert value in err.value.message


def test_start_errors_proxmox_reports_are_known() -> None:
    for verdict in VERDICTS:
        if verdict["key"] == "hostpci0" and verdict["start_error"]:
            entry = HostPci.parse(str(verdict["value"]))
            assert str(verdict["start_error"]) in entry.start_errors()
