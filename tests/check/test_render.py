"""Check output: JUnit XML that CI systems parse, GitHub annotations, JSON, the text diff."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pvefix.check.junit import render_junit
from pvefix.check.render import github_annotations, item_json, render_json, render_text
from pvefix.check.report import CheckItem, CheckReport


def _report() -> CheckReport:
    def vm(vmid: int, prop: str, status: str, **kw: str) -> CheckItem:
        return CheckItem(target="vm", vmid=vmid, node="pve1", property=prop,
                         status=status, **kw)  # type: ignore[arg-type]

    return CheckReport(source="test", items=[
        CheckItem(target="node", node="pve1", property="cmdline iommu=pt (required)",
                  status="drift", expected="iommu=pt", actual="configured: iommu=pt; booted: "
                  "absent", when="configured, not booted yet: takes effect at the next host "
                  "reboot"),
        vm(100, "machine", "ok", expected="family q35", actual="q35 [q35]"),
        vm(100, "hostpci0.pcie", "drift", expected="pcie=1", actual="pcie=0",
           when="only in [PENDING]: takes effect at the next cold start"),
        vm(100, "args (absent)", "drift", expected="(absent)",
           actual="-set a=b,c\x01 <&>"),
        vm(101, "read", "unknown", detail="not a QEMU VM of this cluster"),
        vm(102, "desired state", "skipped", detail="no desired state for this VM"),
    ])


def test_junit_parses_with_one_testcase_per_vm_and_property_and_the_right_counts() -> None:
    root = ET.fromstring(render_junit(_report()).encode("utf-8"))  # noqa: S314 (our own output)
    assert root.tag == "testsuites"
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "6", "failures": "3", "errors": "1", "skipped": "1"}
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["node pve1", "VM 100", "VM 101", "VM 102"]
    vm100 = suites[1]
    assert (vm100.get("tests"), vm100.get("failures")) == ("3", "2")
    cases = vm100.findall("testcase")
    assert [c.get("name") for c in cases] == ["machine", "hostpci0.pcie", "args (absent)"]
    assert {c.get("classname") for c in cases} == {"pvefix.vm.100"}
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("type") == "drift"
    assert "pcie=1" in (failure.get("message") or "")
    assert "cold start" in (failure.get("message") or "")
    assert suites[2].find("testcase/error") is not None
    assert suites[3].find("testcase/skipped") is not None


def test_junit_keeps_characters_xml_cannot_hold_visible_instead_of_breaking() -> None:
    text = render_junit(_report())
    failure = ET.fromstring(text.encode()).findall(".//failure")[2]  # noqa: S314 (our own output)
    assert "\ufffd <&>" in (failure.text or "")


def test_github_annotations_are_error_commands_with_escaped_properties() -> None:
    lines = github_annotations(_report()).splitlines()
    assert len(lines) == 4  # three drifts, one unknown; ok and skipped say nothing
    assert lines[1] == ("::error title=pvefix drift%3A VM 100 hostpci0.pcie::wanted pcie=1, "
                        "found pcie=0 (only in [PENDING]: takes effect at the next cold start)")
    assert lines[2].startswith("::error title=pvefix drift%3A VM 100 args (absent)::")
    assert lines[3].startswith("::error title=pvefix not checked%3A VM 101 read::")
    for line in lines:
        title = line.split("::")[1]
        assert "," not in title.removeprefix("error title=") and "\n" not in line


def test_json_is_versioned_and_carries_every_item_and_the_exit_code() -> None:
    data = json.loads(render_json(_report()))
    assert data["schema"] == "pvefix.check/v1"
    assert data["exit_code"] == 1  # something could not be checked
    assert data["summary"] == {"ok": 1, "drift": 3, "unknown": 1, "skipped": 1}
    assert data["items"][2]["property"] == "hostpci0.pcie"


def test_json_holds_one_item_per_line_and_the_same_data_as_any_json_encoder() -> None:
    report = _report()
    text = render_json(report)
    lines = text.splitlines()
    start = lines.index('  "items": [')
    item_lines = lines[start + 1:start + 1 + len(report.items)]
    assert [json.loads(line.strip().removesuffix(",")) for line in item_lines] == \
        [item.model_dump() for item in report.items]
    assert lines[start + 1 + len(report.items)] == "  ],"
    assert json.loads(text) == json.loads(report.model_dump_json()) | {
        "schema": "pvefix.check/v1", "exit_code": 1,
        "summary": {"ok": 1, "drift": 3, "unknown": 1, "skipped": 1}}
    assert text.endswith("}\n")
    assert list(json.loads(text)) == ["schema", "source", "read_path", "exit_code", "summary",
                                      "items", "notes"]


# Text as a config can hold it: any code point, lone surrogates (bytes that are not UTF-8,
# decoded with surrogateescape), control characters, line separators.
_TEXT = st.text(alphabet=st.characters(codec=None, min_codepoint=0), max_size=12)


@settings(max_examples=300, deadline=None)
@given(actual=_TEXT, detail=_TEXT, node=_TEXT, vmid=st.none() | st.integers(0, 2**40),
       when=st.none() | _TEXT)
@example(actual="\x7f", detail="\x00\x1f\"\\/", node="\u2028\udcff", vmid=None, when="\xe9")
def test_an_item_is_one_ascii_line_holding_exactly_its_data(
        actual: str, detail: str, node: str, vmid: int | None, when: str | None) -> None:
    item = CheckItem(target="vm", vmid=vmid, node=node, property="p", status="drift",
                     actual=actual, detail=detail, when=when)
    line = item_json(item)
    assert line.isascii() and "\n" not in line and "\r" not in line
    assert json.loads(line) == item.model_dump()
    # The serializer and the json module agree, byte for byte, where both can write it.
    assert line == json.dumps(item.model_dump(), separators=(",", ":"))


def test_json_of_an_empty_report_is_valid() -> None:
    data = json.loads(render_json(CheckReport()))
    assert data["items"] == [] and data["exit_code"] == 0


def test_text_shows_a_diff_per_drifted_property_with_its_label() -> None:
    text = render_text(_report())
    assert "VM 100 (node pve1)\n  DRIFT   hostpci0.pcie\n" in text
    assert "          (only in [PENDING]: takes effect at the next cold start)\n" in text
    assert "          - pcie=0\n          + pcie=1\n" in text
    assert "VM 102 (node pve1): skipped (no desired state for this VM)" in text
    assert text.endswith("result: check incomplete (see UNKNOWN) (exit 1)\n")
