"""JUnit XML for a check report: a testsuite per VM or node, a testcase per property.

The shape CI systems read (GitLab's `artifacts:reports:junit`, GitHub test reporters, Jenkins):
`<testsuites>` with `tests`/`failures`/`errors`/`skipped` counts, `<testsuite name=...>`, and
`<testcase classname=... name=...>` holding `<failure>` (drift; `type="rehearsal"` for a failing
`check --rehearse` verdict), `<error>` (could not be checked) or `<skipped>`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from pvefix.check.report import CheckItem, CheckReport
from pvefix.render.inert import inert_xml

# Characters XML 1.0 cannot hold at all (a config value may carry them): replaced, not dropped.
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _message(item: CheckItem) -> str:
    if item.status == "drift":
        text = f"wanted {item.expected}, found {item.actual}"
    else:
        text = item.detail or item.status
    return _clean(f"{text} ({item.when})" if item.when else text)


def _counts(items: list[CheckItem]) -> dict[str, str]:
    return {
        "tests": str(len(items)),
        "failures": str(sum(1 for i in items if i.status == "drift")),
        "errors": str(sum(1 for i in items if i.status == "unknown")),
        "skipped": str(sum(1 for i in items if i.status == "skipped")),
    }


def render_junit(report: CheckReport) -> str:
    """The report as a JUnit XML document (UTF-8 text with an XML declaration)."""
    root = ET.Element("testsuites", {"name": "pvefix check", **_counts(report.items)})
    for subject, items in report.subjects():
        first = items[0]
        classname = (f"pvefix.vm.{first.vmid}" if first.target == "vm"
                     else f"pvefix.node.{first.node}")
        suite = ET.SubElement(root, "testsuite", {"name": subject, **_counts(items)})
        for item in items:
            case = ET.SubElement(suite, "testcase", {"classname": classname,
                                                     "name": _clean(item.property), "time": "0"})
            if item.status == "drift" and item.where == "rehearsal":
                failure = ET.SubElement(case, "failure", {"message": _clean(item.actual),
                                                          "type": "rehearsal"})
                failure.text = _clean(item.detail + "\n")
            elif item.status == "drift":
                failure = ET.SubElement(case, "failure",
                                        {"message": _message(item), "type": "drift"})
                failure.text = _clean(f"- {item.actual}\n+ {item.expected}\n")
            elif item.status == "unknown":
                ET.SubElement(case, "error", {"message": _message(item), "type": "unknown"})
            elif item.status == "skipped":
                ET.SubElement(case, "skipped", {"message": _message(item)})
    ET.indent(root)
    return inert_xml('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode")
                     + "\n")
