"""Whatever a plan file or a host holds, what pvefix shows acts on nothing: no control, bidi or
zero-width character reaches the terminal, a CI log or the ticket raw, and the Markdown ticket
holds no raw HTML (read back with a CommonMark parser). Every string field of a plan file goes
into `show` (text and Markdown); host strings (a VM's description, `name`, `args`, a desired
state's pinned description) go into `plan` (text and Markdown) and `check`."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.hosttree import resolve_scenario
from pvefix.planner import plan as make_plan
from pvefix.sources.bundle import read_bundle

markdown_it = pytest.importorskip("markdown_it")
app = build_command()

# Written here, not taken from render/inert.py: C0 but tab and LF, DEL, C1, the line and
# paragraph separators, the bidi embeddings/overrides/isolates and marks, the zero-width ones.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                       "\u200b-\u200f\u061c\ufeff]")
PIECES = ["\u202e", "\u202a", "\u2066", "\u2069", "\u200b", "\u200d", "\u200f", "\u061c",
          "\ufeff", "\x1b[31m", "\x1b]0;t\x07", "\r", "\x9b", "\u2028", "\x00", "<script>",
          "</td>", "<!--", "```", "~~~", "`", "|", "\n", "::stop-commands::x", "##[", "a", " ",
          "&", "\\"]
HOSTILE = st.lists(st.sampled_from(PIECES), min_size=1, max_size=10).map("".join)
SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _run(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_app(app, list(args))
    return code, out.getvalue() + err.getvalue()


def _no_html(markdown: str) -> list[str]:
    parser = markdown_it.MarkdownIt("commonmark").enable("table")
    found = []
    for token in parser.parse(markdown):
        for t in [token, *(token.children or [])]:
            if t.type.startswith("html"):
                found.append(t.content)
    return found


def _shown_ok(code: int, shown: str, markdown: bool) -> None:
    assert not FORBIDDEN.findall(shown), (code, [m for m in FORBIDDEN.findall(shown)])
    assert not re.search(r"^\s*::", shown, re.MULTILINE)
    if markdown and code == 0:
        assert _no_html(shown) == []


def _strings(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every string value in a JSON document."""
    if isinstance(data, str):
        return [path]
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in _strings(v, (*path, k))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in _strings(v, (*path, i))]
    return []


PLAN = make_plan(read_bundle(resolve_scenario("kpro6"), 100)).to_json_dict()
FIELDS = _strings(PLAN)


def _set(data: Any, path: tuple[Any, ...], value: str) -> None:
    for step in path[:-1]:
        data = data[step]
    data[path[-1]] = value


def test_the_plan_has_many_string_fields() -> None:
    assert len(FIELDS) > 100 and ("observed", "vm_status") in FIELDS


@SETTINGS
@given(field=st.sampled_from(FIELDS), text=HOSTILE, fmt=st.sampled_from(["text", "markdown"]))
def test_any_string_field_of_a_plan_file_is_shown_inert(
    field: tuple[Any, ...], text: str, fmt: str, tmp_path: Path,
) -> None:
    data = json.loads(json.dumps(PLAN))
    _set(data, field, text)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    code, shown = _run("show", str(path), "--format", fmt, "--color", "never")
    _shown_ok(code, shown, fmt == "markdown")


@pytest.mark.parametrize("field", [("observed", "config_source"), ("noops", 0, "rule"),
                                   ("pvefix_version",), ("phases", 0, "activation")])
def test_a_fence_in_a_plan_field_opens_no_html_in_the_ticket(
    field: tuple[Any, ...], tmp_path: Path,
) -> None:
    data = json.loads(json.dumps(PLAN))
    _set(data, field, "```html <img src=x onerror=alert(1)>")
    _set(data, ("noops", 0, "reason") if data["noops"] else ("phases", 0, "changes", 0, "reason"),
         "<script>alert(2)</script>")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    code, shown = _run("show", str(path), "--format", "markdown")
    assert code == 0 and _no_html(shown) == []


def _bundle(tmp_path: Path, description: str, name: str, args: str) -> Path:
    bundle = tmp_path / "kpro6"
    if bundle.exists():
        shutil.rmtree(bundle)
    shutil.copytree(resolve_scenario("kpro6"), bundle)
    conf = bundle / "etc/pve/qemu-server/100.conf"
    lines = [ln for ln in conf.read_text().splitlines() if not ln.startswith(("#", "name:"))]
    head = [f"#{part}" for part in description.split("\n")]
    conf.write_text("\n".join([*head, *lines, f"name: {name}", f"args: {args}"]) + "\n")
    return bundle


ONE_LINE = HOSTILE.map(lambda s: s.replace("\n", " ").replace("\x00", "").strip() or "x")


@SETTINGS
@given(description=HOSTILE.map(lambda s: s.replace("\x00", "")), name=ONE_LINE,
       args=ONE_LINE, pinned=HOSTILE)
def test_host_strings_are_shown_inert_by_plan_and_check(
    description: str, name: str, args: str, pinned: str, tmp_path: Path,
) -> None:
    bundle = _bundle(tmp_path, description, name, args)
    for fmt in ("text", "markdown"):
        code, shown = _run("plan", "100", "--bundle", str(bundle), "--format", fmt,
                           "--color", "never")
        _shown_ok(0 if code == 2 else code, shown, fmt == "markdown")
    desired = tmp_path / "desired.toml"
    desired.write_text('schema = "pvefix.desired/v1"\n[vms.100]\nnode = "kpro6"\n'
                       f"[vms.100.keys]\ndescription = {json.dumps(pinned)}\n"
                       f"name = {json.dumps(name + pinned)}\n")
    code, shown = _run("check", "100", "--bundle", str(bundle), "--desired", str(desired))
    _shown_ok(code, shown, False)


@settings(max_examples=200, deadline=None)
@given(text=HOSTILE)
def test_what_apply_and_rollback_say_is_inert(text: str) -> None:
    from pvefix.executor.console import Console

    out, err = io.StringIO(), io.StringIO()
    console = Console(out, err, answer=lambda _q: False)
    console.say(f"done: VM config description: {text}")
    console.progress(text)
    console.say_wrapped(text)
    _shown_ok(0, out.getvalue() + err.getvalue(), False)
