"""No text from a host can act as a CI workflow command in what pvefix writes (render/inert.py):
GitHub's `::command::` at a line start (after whitespace, lines split at LF and CR) and the older
`##[command]` anywhere, GitLab's `section_start:`/`section_end:` markers with CR and ESC[0K;
the JSON and JUnit outputs keep every value exact."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pvefix.check.junit import _clean, render_junit
from pvefix.check.render import github_annotations, render_json, render_text
from pvefix.check.report import CheckItem, CheckReport
from pvefix.render.inert import inert_json, inert_text, inert_xml

_HOSTILE = st.lists(st.sampled_from(["::", "stop-commands", "\n", "\r", " ", "\t", "\x1b", "[0K",
                                    "##[", "error]", "section_start:", "section_end:", "1:x",
                                    "\u2028", "\x85", "\x1c", "a", "`", "<b>", "%0A", ":"]),
                    max_size=30).map("".join)


def _commands(output: str) -> list[str]:
    """The lines a CI runner would take as a command: as GitHub's runner splits and reads them
    (LF and CR end a line; `::` after leading whitespace; `##[` anywhere), and GitLab's
    markers (section_start:/section_end:, CR, ESC)."""
    found = []
    for line in re.split("\r\n|\r|\n", output):
        if line.lstrip().startswith("::") or "##[" in line:
            found.append(line)
        if re.search("section_(start|end):", line) or "\x1b" in line:
            found.append(line)
    return found


@settings(max_examples=300)
@given(_HOSTILE, st.booleans())
@example("notes\n::stop-commands::x", False)
@example("x\r::error::y", False)
@example("\x1b[0Ksection_start:1:evil\r\x1b[0Kheader", True)
def test_inert_text_leaves_no_command_and_no_control_character(text: str, color: bool) -> None:
    out = inert_text(text, color=color)
    assert _commands(out) == []
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]", out)


def test_inert_text_keeps_pvefix_colours_and_shows_what_it_changed() -> None:
    assert inert_text("\x1b[1;31mred\x1b[0m", color=True) == "\x1b[1;31mred\x1b[0m"
    assert inert_text("\x1b[1;31mred\x1b[0m") == "\\x1b[1;31mred\\x1b[0m"
    assert inert_text("notes\n  ::stop-commands::x\n") == "notes\n  \\::stop-commands::x\n"
    assert inert_text("a ##[error]b section_end:1:s") == "a ##\\[error]b section_end\\:1:s"
    assert inert_text("a\rb\tc") == "a\\rb\tc"


@settings(max_examples=200)
@given(st.recursive(_HOSTILE | st.integers(), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(_HOSTILE, inner, max_size=3), max_leaves=8))
def test_inert_json_keeps_every_value(value: object) -> None:
    for ascii_only in (True, False):
        out = inert_json(json.dumps(value, indent=2, ensure_ascii=ascii_only))
        assert json.loads(out) == value
        assert _commands(out) == []


def _report(text: str) -> CheckReport:
    return CheckReport(source="test", items=[
        CheckItem(target="vm", vmid=100, node="pve1", property="description", status="drift",
                  expected=f"wanted {text}", actual=text),
        CheckItem(target="vm", vmid=101, node="pve1", property="read", status="unknown",
                  detail=text)])


@settings(max_examples=150, deadline=None)
@given(_HOSTILE)
@example("notes\n::stop-commands::x")
def test_every_check_output_is_inert_and_json_and_junit_keep_the_values(text: str) -> None:
    report = _report(text)
    assert _commands(render_text(report, verbose=True)) == []
    data = render_json(report)
    assert _commands(data) == []
    assert json.loads(data)["items"][0]["actual"] == text
    xml_text = render_junit(report)
    assert _commands(xml_text) == []
    plain = ET.fromstring(xml_text.encode())  # noqa: S314 (our own output)
    failure = plain.find(".//failure")
    assert failure is not None
    assert failure.text == _clean(f"- {text}\n+ wanted {text}\n")  # CR kept as &#13;


def test_only_pvefix_annotations_are_commands_in_a_github_log() -> None:
    report = _report("notes\n::stop-commands::x")
    log = render_text(report) + github_annotations(report)
    commands = [line for line in log.splitlines() if line.lstrip().startswith("::")]
    assert len(commands) == 2 and all(c.startswith("::error ") for c in commands)
    assert "\\::stop-commands::x" in log


def test_xml_character_references_keep_the_values() -> None:
    doc = "<a>x\n::stop-commands::t\r##[error]y section_start:1:z</a>"
    out = inert_xml(doc)
    assert _commands(out) == []
    assert ET.fromstring(out).text == ET.fromstring(doc.replace("\r", "&#13;")).text  # noqa: S314


@pytest.mark.skipif(os.name != "posix", reason="POSIX only")
def test_error_messages_are_inert(capsys: pytest.CaptureFixture[str]) -> None:
    from pvefix.commands.run import run_app
    from pvefix.errors import PvefixError

    def boom() -> None:
        raise PvefixError("node said:\n::stop-commands::x\r##[error]y")

    import typer

    app = typer.Typer()
    app.command()(boom)
    assert run_app(app, []) == 1
    assert _commands(capsys.readouterr().err) == []


def test_a_description_from_the_node_cannot_stop_pvefix_annotations(
        fresh_sim: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's case, over real HTTPS and SSH: `description` pinned, the node's description
    holds `notes` then `::stop-commands::x`, GITHUB_ACTIONS=true."""
    from pvefix.main import main
    from pvefix.sim.serve import write_ready_file
    from tests.simkit import api

    info = fresh_sim()
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    desired = tmp_path / "desired.toml"
    desired.write_text('schema = "pvefix.desired/v1"\n[vms.101.keys]\ndescription = "notes"\n')
    vm = api(info, "ticket").nodes(info.node).qemu(101).config
    vm.put(description="notes\n::stop-commands::x\n##[error]y", digest=vm.get()["digest"])
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code = main(["check", "101", "--desired", str(desired), "--connection", str(ready)])
    out = capsys.readouterr()
    assert code == 2, out
    log = out.out + out.err
    commands = [line for line in re.split("\r\n|\r|\n", log) if line.lstrip().startswith("::")]
    assert commands and all(c.startswith("::error ") for c in commands), commands
    # pvefix's own ::error lines are read as GitHub's newer commands before the runner looks
    # for `##[` in them; every other line holds none
    assert not [line for line in log.splitlines() if "##[" in line and line not in commands]
    assert "\\::stop-commands::x" in out.out  # shown, inert
