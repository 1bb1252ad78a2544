"""The API: routes, authentication and Proxmox's envelope, independent of HTTP.

`Api.handle(method, path, params, headers)` returns (status, reason, body). Answers are
`{"data": ...}`; failures carry the message in the reason phrase and in the body
(`{"data": null, "message": "...\\n"}`), with `errors` for parameter errors, as pve-http-server
sends them.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pvefix.errors import PvefixError
from pvefix.sim import api_agent, api_cluster, api_node, api_qemu
from pvefix.sim.auth import Authenticator, Identity
from pvefix.sim.errors import ApiError
from pvefix.sim.state import NodeState

Handler = Callable[["Call"], object]


@dataclass
class Call:
    """One authenticated request, with the path's captured parts."""

    state: NodeState
    method: str
    path: str
    params: dict[str, str]
    ident: Identity
    parts: dict[str, str]
    lists: dict[str, list[str]] = field(default_factory=dict)  # repeated form keys (arrays)


_ROUTES: list[tuple[str, re.Pattern[str], Handler]] = []


def route(method: str, pattern: str, handler: Handler) -> None:
    regex = re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern) + "$")
    _ROUTES.append((method, regex, handler))


route("GET", "/version", api_node.version)
route("GET", "/nodes", api_node.nodes)
route("GET", "/cluster/status", api_node.cluster_status)
route("GET", "/cluster/mapping/pci", api_node.mapping_pci)
route("GET", "/cluster/resources", api_cluster.cluster_resources)
route("GET", "/nodes/{node}/status", api_node.node_status)
route("GET", "/nodes/{node}/hardware/pci", api_node.hardware_pci)
route("GET", "/nodes/{node}/tasks", api_node.task_list)
route("GET", "/nodes/{node}/tasks/{upid}/status", api_node.task_status)
route("GET", "/nodes/{node}/tasks/{upid}/log", api_node.task_log)
route("GET", "/nodes/{node}/qemu", api_qemu.vm_list)
route("GET", "/nodes/{node}/qemu/{vmid}/config", api_qemu.get_config)
route("PUT", "/nodes/{node}/qemu/{vmid}/config", api_qemu.put_config)
route("POST", "/nodes/{node}/qemu/{vmid}/config", api_qemu.post_config)
route("GET", "/nodes/{node}/qemu/{vmid}/pending", api_qemu.get_pending)
route("GET", "/nodes/{node}/qemu/{vmid}/status/current", api_qemu.status_current)
route("POST", "/nodes/{node}/qemu/{vmid}/status/{action}", api_qemu.power_action)
route("GET", "/nodes/{node}/qemu/{vmid}/snapshot", api_qemu.snapshot_list)
route("POST", "/nodes/{node}/qemu/{vmid}/snapshot", api_qemu.snapshot_create)
route("POST", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback", api_qemu.rollback)
api_agent.register(route)
route("GET", "/_sim/inject", api_node.inject_get)
route("POST", "/_sim/inject", api_node.inject_set)
route("PUT", "/_sim/inject", api_node.inject_set)
route("DELETE", "/_sim/inject", api_node.inject_clear)

_NOT_WRITES = ("/access/ticket", "/_sim/")


class Api:
    """Routes requests to handlers; maps every failure to Proxmox's answer."""

    def __init__(self, state: NodeState, auth: Authenticator,
                 nodes: Mapping[str, NodeState] | None = None) -> None:
        self.state = state
        self.auth = auth
        self.nodes = dict(nodes or {state.node: state})

    def node_state(self, parts: Mapping[str, str]) -> NodeState:
        """The state of the node a path names (`/nodes/{node}/...`); the API's own node
        otherwise. A node that is down answers as pveproxy's proxy does: 595."""
        name = parts.get("node")
        state = self.nodes.get(name, self.state) if name else self.state
        if state is not self.state and state.is_down():
            raise ApiError(595, f"Connection refused ({name} is not reachable)")
        return state

    def handle(
        self, method: str, path: str, params: dict[str, str], headers: Mapping[str, str],
        lists: dict[str, list[str]] | None = None,
    ) -> tuple[int, str, bytes]:
        latency = self.state.faults.latency_s
        if latency:
            time.sleep(latency)
        try:
            data = self._dispatch(method, path, params, headers, lists or {})
        except ApiError as exc:
            return error_response(exc)
        except PvefixError as exc:  # e.g. a host tree file the simulator cannot read
            return error_response(ApiError(500, str(exc)))
        except Exception as exc:  # a simulator bug must not look like a dropped connection
            return error_response(
                ApiError(500, f"internal error in the pvefix simulator ({type(exc).__name__})")
            )
        return 200, "OK", json.dumps({"data": data}, separators=(",", ":")).encode()

    def _dispatch(
        self, method: str, path: str, params: dict[str, str], headers: Mapping[str, str],
        lists: dict[str, list[str]],
    ) -> object:
        path = path.rstrip("/") or "/"
        if path == "/access/ticket":
            if method == "POST":
                try:
                    return self.auth.login(
                        params.get("username", ""), params.get("password", ""),
                        params.get("realm"),
                    )
                except ApiError:
                    raise ApiError(401, "authentication failure") from None
            if method == "GET":
                return None
        ident = self.auth.identify(
            method,
            _cookie(headers.get("cookie"), "PVEAuthCookie"),
            headers.get("csrfpreventiontoken"),
            headers.get("authorization"),
        )
        for meth, regex, handler in _ROUTES:
            match = regex.match(path)
            if match is None or meth != method:
                continue
            if method != "GET" and not path.startswith(_NOT_WRITES):
                number = self.state.faults.count_write()
                if number is not None:
                    raise ApiError(
                        500, f"simulated failure of write #{number} (injected by pvefix sim)"
                    )
            self.state.apply_injected_locks()
            parts = match.groupdict()
            return handler(
                Call(self.node_state(parts), method, path, params, ident, parts, lists)
            )
        raise ApiError(501, f"Method '{method} {path}' not implemented")


def error_response(exc: ApiError) -> tuple[int, str, bytes]:
    body: dict[str, object] = {"data": None}
    if exc.errors:
        body["errors"] = exc.errors
    if exc.status != 401:
        body["message"] = exc.message + "\n"
    reason = exc.message.replace("\r", " ").replace("\n", " ")
    return exc.status, reason, json.dumps(body, separators=(",", ":")).encode()


def _cookie(header: str | None, name: str) -> str | None:
    if not header:
        return None
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return None
