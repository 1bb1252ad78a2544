"""`--p2p` and `--clique-map` on the command line."""

from __future__ import annotations

import json

import pytest

from pvefix.hosttree import resolve_scenario
from pvefix.main import main


def _plan(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["plan", "--bundle", str(resolve_scenario("intel-grub")), "200", *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_p2p_adds_phase_3_and_the_plan_file_remembers_the_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _plan(capsys, "--p2p", "--clique-map", "hostpci0=0,hostpci1=0", "-f", "json")
    (plan,) = json.loads(out)["plans"]
    assert code == 2
    assert [p["number"] for p in plan["phases"]] == [1, 2, 3]
    assert plan["options"] == {"p2p": True, "clique_map": {"hostpci0": 0, "hostpci1": 0},
                               "p2p_from": "flag --p2p", "clique_map_from": "flag --clique-map"}
    args = next(c for c in plan["phases"][2]["changes"] if c["key"] == "args")
    assert args["after"] == ("-set device.hostpci0.x-nv-gpudirect-clique=0"
                             " -set device.hostpci1.x-nv-gpudirect-clique=0")


@pytest.mark.parametrize(("extra", "message"), [
    (["--clique-map", "hostpci0=0"], "--clique-map needs --p2p"),
    (["--p2p", "--clique-map", "hostpci0:0"], "is not hostpciN=CLIQUE"),
    (["--p2p", "--clique-map", "hostpci0=16"], "not in 0..15"),
    (["--p2p", "--clique-map", "hostpci9=0"], "pass no NVIDIA GPU"),
])
def test_a_bad_clique_map_is_refused_with_the_reason(
    capsys: pytest.CaptureFixture[str], extra: list[str], message: str,
) -> None:
    code, out, err = _plan(capsys, *extra)
    assert code == 1
    assert message in out + err
