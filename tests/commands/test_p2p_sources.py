"""Where the P2P request comes from: the flag, the VM's desired state, the connection profile
(in that order, each setting from the first that gives it), and the plan says which."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvefix.commands.p2p_options import P2PAsk, resolve_plan_options
from pvefix.desired import P2PRule, dumps_desired, loads_desired
from pvefix.desired.model import DesiredState, VmDesired
from pvefix.errors import ParseError, PvefixError
from pvefix.hosttree import resolve_scenario
from pvefix.main import main
from pvefix.target.settings import PlanDefaults, plan_defaults, resolve_connection

PROFILE = PlanDefaults(profile="lab", source="/cfg.toml", p2p=True, clique_map="hostpci0=1")
WANTS = P2PRule(wanted=True, clique_map="hostpci0=0,hostpci1=0")


@pytest.mark.parametrize(("ask", "desired", "profile", "p2p", "cliques", "p2p_from", "map_from"), [
    (P2PAsk(), None, None, False, {}, None, None),
    (P2PAsk(), None, PROFILE, True, {"hostpci0": 1}, "profile lab (/cfg.toml)",
     "profile lab (/cfg.toml)"),
    (P2PAsk(), WANTS, PROFILE, True, {"hostpci0": 0, "hostpci1": 0}, "desired state d.toml",
     "desired state d.toml"),
    # The desired state says P2P without a map: the profile's map fills in, and says so.
    (P2PAsk(), P2PRule(), PROFILE, True, {"hostpci0": 1}, "desired state d.toml",
     "profile lab (/cfg.toml)"),
    (P2PAsk(p2p=True), None, PROFILE, True, {"hostpci0": 1}, "flag --p2p",
     "profile lab (/cfg.toml)"),
    (P2PAsk(p2p=True, clique_map="hostpci2=3"), WANTS, PROFILE, True, {"hostpci2": 3},
     "flag --p2p", "flag --clique-map"),
    (P2PAsk(p2p=False), WANTS, PROFILE, False, {}, "flag --no-p2p", None),
    (P2PAsk(), P2PRule(wanted=False), PROFILE, False, {}, "desired state d.toml", None),
])
def test_each_setting_comes_from_the_first_place_that_gives_it(
    ask: P2PAsk, desired: P2PRule | None, profile: PlanDefaults | None, p2p: bool,
    cliques: dict[str, int], p2p_from: str | None, map_from: str | None,
) -> None:
    got = resolve_plan_options(ask, desired=desired, desired_file=Path("d.toml"),
                               profile=profile)
    assert (got.p2p, got.clique_map, got.p2p_from, got.clique_map_from) == (
        p2p, cliques, p2p_from, map_from)


def test_a_clique_map_flag_while_p2p_is_off_is_refused_naming_why() -> None:
    with pytest.raises(PvefixError, match=r"needs --p2p \(P2P is off: desired state"):
        resolve_plan_options(P2PAsk(clique_map="hostpci0=0"), desired=P2PRule(wanted=False))


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text('[profiles.lab]\nhost = "127.0.0.1"\n' + body)
    return path


def test_a_profile_says_p2p_and_clique_map_without_running_its_password_command(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    path = _config(tmp_path, f'p2p = true\nclique_map = "hostpci0=0,hostpci1=0"\n'
                             f'password_command = "sh -c \'touch {marker}; echo s3cret\'"\n')
    got = plan_defaults(path, "lab", env={})
    assert (got.profile, got.p2p, got.clique_map) == ("lab", True, "hostpci0=0,hostpci1=0")
    assert not marker.exists()
    # The connection layer accepts the keys and keeps them out of the Connection.
    conn = resolve_connection(config=path, profile="lab", env={}, flags={"user": "root@pam"})
    assert conn.host == "127.0.0.1" and "p2p" not in conn.model_dump()
    assert marker.exists()  # the connection does resolve the secret


@pytest.mark.parametrize(("body", "message"), [
    ('p2p = "maybe"\n', "p2p: expected a boolean"),
    ("clique_map = 3\n", "clique_map: expected text"),
    ("p2p_phase = true\n", "unknown key 'profiles.lab.p2p_phase'"),
])
def test_a_bad_profile_setting_is_refused_with_its_place(
    tmp_path: Path, body: str, message: str,
) -> None:
    path = _config(tmp_path, body)
    with pytest.raises(ParseError, match=message):
        resolve_connection(config=path, profile="lab", env={})


def test_the_desired_state_round_trips_the_p2p_request_and_refuses_a_bad_map() -> None:
    state = DesiredState(vms={200: VmDesired(p2p=WANTS)})
    text = dumps_desired(state)
    assert '[vms.200.p2p]\nwanted = true\nclique_map = "hostpci0=0,hostpci1=0"\n' in text
    assert loads_desired(text) == state
    with pytest.raises(ParseError, match=r"<desired>:4: vms.200.p2p.clique_map: .*hostpci0:0"):
        loads_desired('schema = "pvefix.desired/v1"\n[vms.200.p2p]\nwanted = true\n'
                      'clique_map = "hostpci0:0"\n')
    with pytest.raises(ParseError, match="needs wanted = true"):
        loads_desired('schema = "pvefix.desired/v1"\n[vms.100.p2p]\nwanted = false\n'
                      'clique_map = "hostpci0=0"\n')


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _asked(plan: dict[str, object]) -> str:
    findings = plan["findings"]
    assert isinstance(findings, list)
    return str(next(f["title"] for f in findings if f["id"] == "p2p.asked"))


def test_plan_takes_p2p_from_the_profile_then_the_desired_state_and_the_flag_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    bundle = str(resolve_scenario("kpro6"))
    config = str(_config(tmp_path, "p2p = true\n"))
    state_dir = str(tmp_path / "state")
    base = ["--bundle", bundle, "--state-dir", state_dir, "-f", "json"]

    # A bundle reads no profile unless --profile names one.
    code, out, _ = _run(capsys, "plan", "100", *base)
    assert [p["number"] for p in json.loads(out)["plans"][0]["phases"]] == [1, 2]
    code, out, _ = _run(capsys, "plan", "100", *base, "--config", config, "--profile", "lab")
    (plan,) = json.loads(out)["plans"]
    assert [p["number"] for p in plan["phases"]] == [1, 2, 3]
    assert _asked(plan) == f"P2P phase asked for by profile lab ({config})"

    # `pvefix desired --no-p2p --record` records the admin's no: above the profile.
    code, _, err = _run(capsys, "desired", "100", "--bundle", bundle, "--no-p2p", "--record",
                        "--state-dir", state_dir)
    assert code == 0, err
    recorded = Path(state_dir) / "desired" / "node-kpro6" / "100.toml"
    assert "[vms.100.p2p]\nwanted = false\n" in recorded.read_text()
    code, out, _ = _run(capsys, "plan", "100", *base, "--config", config, "--profile", "lab")
    (plan,) = json.loads(out)["plans"]
    assert [p["number"] for p in plan["phases"]] == [1, 2]
    assert _asked(plan) == f"P2P phase not asked for: desired state {recorded}"

    # `pvefix desired --p2p --clique-map ... --record`: the goal includes phase 3.
    code, _, err = _run(capsys, "desired", "100", "--bundle", bundle, "--p2p", "--clique-map",
                        "hostpci0=0,hostpci1=0", "--record", "--state-dir", state_dir)
    assert code == 0, err
    text = recorded.read_text()
    assert '[vms.100.p2p]\nwanted = true\nclique_map = "hostpci0=0,hostpci1=0"\n' in text
    assert "x-nv-gpudirect-clique=0" in text  # the goal pins args with the cliques
    code, out, _ = _run(capsys, "plan", "100", *base)
    (plan,) = json.loads(out)["plans"]
    assert plan["options"]["clique_map"] == {"hostpci0": 0, "hostpci1": 0}
    assert plan["options"]["p2p_from"] == f"desired state {recorded}"
    args = next(c for c in plan["phases"][2]["changes"] if c["key"] == "args")
    assert args["after"] == ("-set device.hostpci0.x-nv-gpudirect-clique=0"
                             " -set device.hostpci1.x-nv-gpudirect-clique=0")

    # --no-p2p overrides it, and the plan says so.
    code, out, _ = _run(capsys, "plan", "100", *base, "--no-p2p")
    (plan,) = json.loads(out)["plans"]
    assert [p["number"] for p in plan["phases"]] == [1, 2]
    assert _asked(plan) == "P2P phase not asked for: flag --no-p2p"


def test_no_p2p_with_a_clique_map_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "plan", "100", "--bundle", str(resolve_scenario("intel-grub")),
                          "--no-p2p", "--clique-map", "hostpci0=0")
    assert code == 1
    assert "--clique-map with --no-p2p" in out + err
