"""What pvefix says when Proxmox refuses a privilege: the privilege, the path and what to grant.

The texts are Proxmox's own (PVE::RPCEnvironment, as ../shared/pve-api's real daemons answer:
tests/conformance/test_real_api_privileges.py checks them against the daemons)."""

from __future__ import annotations

import pytest

from pvefix.errors import PvefixError
from pvefix.target.open import vm_node
from pvefix.target.privileges import permission_hint


@pytest.mark.parametrize("text,who,privs,path,role", [
    ("Permission check failed (/nodes/kpro6, Sys.Audit)", "root@pam!ro", "Sys.Audit",
     "/nodes/kpro6", "PVEAuditor"),
    ("Permission check failed (/, Sys.Audit|Sys.Modify)", "root@pam!ro", "Sys.Audit|Sys.Modify",
     "/", "PVEAuditor"),
    ("Permission check failed (/vms/100, VM.PowerMgmt)", "ops@pve!ci", "VM.PowerMgmt",
     "/vms/100", "PVEVMUser"),
    ("Permission check failed (/vms/100, VM.Config.HWType)", "ops@pve!ci", "VM.Config.HWType",
     "/vms/100", "PVEVMAdmin"),
    ("Permission check failed (/mapping/pci/pro6000, Mapping.Use)", "ops@pve", "Mapping.Use",
     "/mapping/pci/pro6000", "PVEMappingUser"),
])
def test_a_refused_privilege_names_itself_its_path_and_a_role_to_grant(
    text: str, who: str, privs: str, path: str, role: str,
) -> None:
    hint = permission_hint(text, who)
    assert f"lacks {privs} on {path}" in hint
    assert f"pveum acl modify {path}" in hint and f"--roles {role}" in hint
    flag = "--tokens" if "!" in who else "--users"
    assert f"{flag} '{who}'" in hint


def test_a_403_without_proxmoxs_permission_text_gets_no_invented_hint() -> None:
    assert permission_hint("only root can set 'args' config", "root@pam!pvefix") == ""


def test_a_token_that_sees_no_vm_is_told_what_it_needs_to_see_one() -> None:
    with pytest.raises(PvefixError) as err:
        vm_node([], 200, "root@pam!pvefix")
    text = str(err.value)
    assert "no QEMU VM 200" in text and "VM.Audit on /vms/200" in text
    assert "--tokens 'root@pam!pvefix'" in text


def test_a_password_user_that_sees_no_vm_gets_no_token_hint() -> None:
    with pytest.raises(PvefixError) as err:
        vm_node([{"vmid": 100, "type": "qemu", "node": "pve"}], 200, "root@pam")
    assert "token" not in str(err.value) and "nodes looked at: pve" in str(err.value)


def test_privileges_the_token_lacks_are_named_with_what_to_grant() -> None:
    from pvefix.target.privileges import missing_privileges

    answers = {"/vms/100": {"/vms/100": {"VM.Audit": 1, "VM.Config.HWType": 1}}}
    asked: list[str] = []

    def get(path: str, params: dict[str, str]) -> object:
        assert path == "/access/permissions"
        asked.append(params["path"])
        return answers.get(params["path"], {})

    lacking = missing_privileges(
        get, {"/vms/100": ["VM.Audit", "VM.PowerMgmt", "VM.Config.CPU|VM.Config.HWType"],
              "/mapping/pci/gpu": ["Mapping.Use"]},
        "root@pam!ci")
    assert asked == ["/vms/100", "/mapping/pci/gpu"]
    assert [line.split(" (")[0] for line in lacking] == [
        "VM.PowerMgmt on /vms/100", "Mapping.Use on /mapping/pci/gpu"]
    assert "--tokens 'root@pam!ci' --roles PVEVMUser" in lacking[0]


@pytest.mark.parametrize("key,values,wants", [
    ("machine", ["q35"], {"/vms/7": ["VM.Config.HWType"]}),
    ("cpu", ["host"], {"/vms/7": ["VM.Config.CPU"]}),
    ("memory", ["8192"], {"/vms/7": ["VM.Config.Memory"]}),
    ("description", ["x"], {"/vms/7": ["VM.Config.Options"]}),
    ("startup", ["order=1"], {"/vms/7": ["VM.Config.Options"], "/": ["Sys.Modify"]}),
    ("hostpci0", ["mapping=gpu,pcie=1", "mapping=old"],
     {"/vms/7": ["VM.Config.HWType"], "/mapping/pci/gpu": ["Mapping.Use"],
      "/mapping/pci/old": ["Mapping.Use"]}),
    ("scsi0", ["local:1"], {"/vms/7": ["VM.Config.Disk"]}),
    ("args", ["-x"], {}),
])
def test_each_config_key_names_the_privileges_proxmox_checks(
    key: str, values: list[str], wants: dict[str, list[str]],
) -> None:
    from pvefix.target.privileges import key_privileges

    assert key_privileges(7, key, values) == wants


def test_an_unreadable_permissions_answer_lacks_nothing_proxmox_still_checks_the_write() -> None:
    from pvefix.target.api import ApiError
    from pvefix.target.privileges import missing_privileges

    def get(path: str, params: dict[str, str]) -> object:
        raise ApiError("GET /access/permissions: 501 not implemented", status=501)

    assert missing_privileges(get, {"/vms/100": ["VM.PowerMgmt"]}, "root@pam!ci") == []


def test_a_privilege_held_through_a_non_propagating_acl_is_held() -> None:
    """GET /access/permissions maps each privilege to Proxmox's propagate flag: 0 for one that
    an entry on the path itself gives without propagation. It is held all the same."""
    from pvefix.target.privileges import agent_exec_refusal, missing_privileges

    answer = {"/vms/100": {"VM.Audit": 0, "VM.PowerMgmt": 0, "VM.GuestAgent.Unrestricted": 0}}

    def get(path: str, params: dict[str, str]) -> object:
        return answer if params["path"] == "/vms/100" else {}

    assert missing_privileges(get, {"/vms/100": ["VM.Audit", "VM.PowerMgmt"]}, "a@pve!t") == []
    assert agent_exec_refusal(get, 100, "a@pve!t") is None
    answer["/vms/100"] = {"VM.Audit": 1, "VM.GuestAgent.FileWrite": 1}
    refusal = agent_exec_refusal(get, 100, "a@pve!t")
    assert refusal and "VM.GuestAgent.Unrestricted on /vms/100" in refusal
    assert "--tokens 'a@pve!t' --roles PVEVMAdmin" in refusal
    assert agent_exec_refusal(get, 100, "a@pve") is None  # a ticket's user: Proxmox decides


def test_the_simulator_answers_proxmoxs_propagate_flag() -> None:
    from pvefix.sim.perms import AccessControl, AclEntry

    access = AccessControl([AclEntry("/vms/100", "a@pve!t", "PVEVMUser", propagate=False),
                            AclEntry("/vms", "a@pve!t", "PVEAuditor")], {"a@pve!t"})
    access.fixed.append(AclEntry("/", "a@pve", "Administrator"))
    here = access.effective("a@pve!t", "/vms/100")
    assert here["VM.PowerMgmt"] == 0 and here["VM.Audit"] == 0
    below = access.effective("a@pve!t", "/vms/101")  # PVEAuditor from /vms, propagated
    assert below["VM.Audit"] == 1 and "VM.PowerMgmt" not in below and set(below.values()) == {1}
