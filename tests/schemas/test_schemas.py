"""The JSON Schemas of pvefix's files are current (package and docs copies) and every file
pvefix writes validates against its schema: plan (printed and saved, with created_at), check
report, desired state, snapshot meta.json."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pvefix.desired import dumps_desired
from pvefix.desired.tree import desired_from_tree
from pvefix.executor.snapshot import META_FILE, take_snapshot
from pvefix.flow.planfile import save_plan
from pvefix.hosttree import load_tree, materialize_scenario
from pvefix.main import main
from pvefix.planner import plan as make_plan
from pvefix.schemas import SCHEMAS, schema_text, shipped
from pvefix.sources.bundle import read_bundle

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "pvefix" / "scenarios"


def _valid(name: str, document: Any) -> None:
    schema = shipped(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(document)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_committed_schemas_are_current(name: str) -> None:
    for folder in (ROOT / "pvefix" / "schemas", ROOT / "docs" / "schemas"):
        assert (folder / f"{name}.schema.json").read_text() == schema_text(name), (
            f"{folder}/{name}.schema.json is stale: run `python -m pvefix.schemas`")


@pytest.mark.parametrize("scenario", ["kpro6", "intel-grub", "grub-dropin", "windows-igd"])
def test_plans_printed_and_saved_validate(scenario: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    tree = SCENARIOS / scenario
    for conf in sorted((tree / "etc/pve/qemu-server").glob("*.conf")):
        main(["plan", conf.stem, "--bundle", str(tree), "--format", "json"])
        document = json.loads(capsys.readouterr().out)
        _valid("plans", document)
        (printed,) = document["plans"]
        _valid("plan", printed)
        saved = save_plan(printed, str(tmp_path / f"{conf.stem}.json"))
        data = json.loads(saved.read_text())
        assert "created_at" in data
        _valid("plan", data)


def test_plan_json_has_one_shape_for_one_vm_and_for_two(
        capsys: pytest.CaptureFixture[str]) -> None:
    tree = str(SCENARIOS / "kpro6")
    shapes = []
    for vmids in (["100"], ["100", "101"]):
        main(["plan", *vmids, "--bundle", tree, "--format", "json"])
        document = json.loads(capsys.readouterr().out)
        _valid("plans", document)
        shapes.append((sorted(document), [p["target"]["vmid"] for p in document["plans"]]))
    assert shapes == [(["plans", "schema"], [100]), (["plans", "schema"], [100, 101])]
    with pytest.raises(jsonschema.ValidationError):  # each plan is checked against plan's schema
        _valid("plans", {**document, "plans": [{**document["plans"][0], "surprise": 1}]})


def test_a_plan_with_an_unknown_field_is_rejected() -> None:
    plan = make_plan(read_bundle(SCENARIOS / "kpro6", 100)).to_json_dict()
    with pytest.raises(jsonschema.ValidationError):
        _valid("plan", {**plan, "surprise": 1})


def test_check_reports_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = SCENARIOS / "kpro6"
    main(["check", "100", "101", "--bundle", str(tree), "--desired",
          str(ROOT / "plans" / "desired-kpro6.toml"), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["drift"] and report["summary"]["unknown"]  # 101: no rule
    _valid("check", report)


def test_desired_files_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _valid("desired", tomllib.loads((ROOT / "plans" / "desired-kpro6.toml").read_text()))
    for source in ("goal", "current"):
        out = tmp_path / f"{source}.toml"
        assert main(["desired", "100", "--bundle", str(SCENARIOS / "kpro6"), "--from", source,
                     "-o", str(out)]) == 0
        _valid("desired", tomllib.loads(out.read_text()))
    with pytest.raises(jsonschema.ValidationError):
        _valid("desired", {"schema": "pvefix.desired/v1", "vms": {"12": {}}})
    # Several VMs sharing a `free` list: written once under [defaults], which the schema knows.
    tree = tmp_path / "large"
    materialize_scenario("large", tree, vms=12)
    text = dumps_desired(desired_from_tree(load_tree(tree)))
    assert "[defaults]" in text
    _valid("desired", tomllib.loads(text))
    with pytest.raises(jsonschema.ValidationError):
        _valid("desired", {"schema": "pvefix.desired/v1", "defaults": {"frees": []}})


def test_snapshot_meta_validates(tmp_path: Path) -> None:
    materialize_scenario("kpro6", tmp_path / "tree")
    state = read_bundle(tmp_path / "tree", 100)
    snap = take_snapshot(tmp_path / "state", state, make_plan(state), 1,
                         {"node": "kpro6", "vmid": 100, "api": None})
    _valid("snapshot", json.loads((snap.path / META_FILE).read_text()))
