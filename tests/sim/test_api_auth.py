"""Authentication and the envelope, through proxmoxer as users' tools use it."""

from __future__ import annotations

from typing import Any

import pytest
from proxmoxer import ProxmoxAPI
from proxmoxer.core import AuthenticationError, ResourceException

from pvefix.sim.serve import ReadyInfo


def test_a_password_ticket_reads_the_version(kpro6_ticket: Any) -> None:
    assert kpro6_ticket.version.get()["version"] == "9.1.1"


def test_the_api_token_reads_the_node_list(kpro6_token: Any, node: str) -> None:
    assert [n["node"] for n in kpro6_token.nodes.get()] == [node]


def test_a_wrong_password_is_an_authentication_failure(kpro6_sim: ReadyInfo) -> None:
    with pytest.raises(AuthenticationError):
        ProxmoxAPI(kpro6_sim.api_url.removeprefix("https://"), user="root@pam",
                   password="not-the-password", verify_ssl=kpro6_sim.ca_cert)


def test_a_wrong_token_secret_answers_401(kpro6_sim: ReadyInfo) -> None:
    prox = ProxmoxAPI(kpro6_sim.api_url.removeprefix("https://"), user="root@pam",
                      token_name="pvefix", token_value="00000000-0000-0000-0000-000000000000",
                      verify_ssl=kpro6_sim.ca_cert)
    with pytest.raises(ResourceException) as err:
        prox.version.get()
    assert err.value.status_code == 401
    assert err.value.content == "Authentication failed!"  # pve-http-server's reason, empty body


def test_an_unknown_path_answers_501_naming_method_and_path(kpro6_token: Any, node: str) -> None:
    with pytest.raises(ResourceException) as err:
        kpro6_token.nodes(node).nonsense.get()
    assert err.value.status_code == 501
    assert err.value.content == f"Method 'GET /nodes/{node}/nonsense' not implemented"


def test_node_status_has_kernel_boot_mode_and_cpu(kpro6_token: Any, node: str) -> None:
    status = kpro6_token.nodes(node).status.get()
    assert status["current-kernel"]["release"] == "6.17.2-1-pve"
    assert status["kversion"].startswith("Linux 6.17.2-1-pve ")
    assert status["boot-info"] == {"mode": "efi", "secureboot": 0}
    assert status["cpuinfo"]["sockets"] == 2
    assert status["pveversion"].startswith("pve-manager/9.1.1/")


def test_the_injection_endpoint_refuses_a_token(kpro6_token: Any) -> None:
    with pytest.raises(ResourceException) as err:
        kpro6_token("_sim/inject").get()
    assert err.value.status_code == 403
    assert err.value.content.startswith("Permission check failed")
