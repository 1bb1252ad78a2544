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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from pvefix.errors import PvefixError
from pvefix.sim import api_agent, api_cluster, api_node, api_qemu, perms
from pvefix.sim.auth import Authenticator, Identity
from pvefix.sim.errors import ApiError, Enveloped, param_error
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


Perm = tuple[str, tuple[str, ...], bool]  # ACL path template, privileges, any of them


@dataclass(frozen=True)
class Route:
    method: str
    regex: re.Pattern[str]
    handler: Handler
    perm: Perm | None  # None: any authenticated user (the handler filters what it shows)
    params: frozenset[str] | None  # GET query parameters the schema defines; None: unchecked


_ROUTES: list[Route] = []
VM_AUDIT: Perm = ("/vms/{vmid}", ("VM.Audit",), False)
VM_POWER: Perm = ("/vms/{vmid}", ("VM.PowerMgmt",), False)
NODE_AUDIT: Perm = ("/nodes/{node}", ("Sys.Audit",), False)


def route(method: str, pattern: str, handler: Handler, perm: Perm | None = None,
          params: Iterable[str] | None = None) -> None:
    """Register a handler; `perm` is the endpoint's schema `permissions` check, `params` the
    query parameters a GET accepts (others are 400, as Proxmox's schema validation says)."""
    regex = re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern) + "$")
    known = frozenset(params) if params is not None else None
    _ROUTES.append(Route(method, regex, handler, perm, known))


route("GET", "/version", api_node.version, params=())
route("GET", "/nodes", api_node.nodes, params=())
route("GET", "/cluster/status", api_node.cluster_status, ("/", ("Sys.Audit",), False), ())
route("GET", "/cluster/mapping/pci", api_node.mapping_pci, params=("check-node",))
route("GET", "/cluster/resources", api_cluster.cluster_resources, params=("type",))
route("GET", "/access/permissions", api_cluster.access_permissions, params=("userid", "path"))
route("GET", "/nodes/{node}/status", api_node.node_status, NODE_AUDIT, ())
route("GET", "/nodes/{node}/hardware/pci", api_node.hardware_pci,
      ("/", ("Sys.Audit", "Sys.Modify"), True), ("pci-class-blacklist", "verbose"))
route("GET", "/nodes/{node}/capabilities/qemu/cpu", api_node.cpu_models, params=())
route("GET", "/nodes/{node}/tasks", api_node.task_list,
      params=("start", "limit", "vmid", "typefilter", "userfilter", "errors", "source",
              "statusfilter", "since", "until"))
route("GET", "/nodes/{node}/tasks/{upid}/status", api_node.task_status, params=())
route("GET", "/nodes/{node}/tasks/{upid}/log", api_node.task_log,
      params=("start", "limit", "download"))
route("GET", "/nodes/{node}/qemu", api_qemu.vm_list, params=("full",))
route("GET", "/nodes/{node}/qemu/{vmid}/config", api_qemu.get_config, VM_AUDIT,
      ("current", "snapshot"))
_CONFIG_WRITE: Perm = ("/vms/{vmid}", perms.CONFIG_PRIVS, True)
route("PUT", "/nodes/{node}/qemu/{vmid}/config", api_qemu.put_config, _CONFIG_WRITE)
route("POST", "/nodes/{node}/qemu/{vmid}/config", api_qemu.post_config, _CONFIG_WRITE)
route("GET", "/nodes/{node}/qemu/{vmid}/pending", api_qemu.get_pending, VM_AUDIT, ())
route("GET", "/nodes/{node}/qemu/{vmid}/status/current", api_qemu.status_current, VM_AUDIT, ())
route("POST", "/nodes/{node}/qemu/{vmid}/status/{action}", api_qemu.power_action, VM_POWER)
route("GET", "/nodes/{node}/qemu/{vmid}/snapshot", api_qemu.snapshot_list, VM_AUDIT, ())
route("POST", "/nodes/{node}/qemu/{vmid}/snapshot", api_qemu.snapshot_create,
      ("/vms/{vmid}", ("VM.Snapshot",), False))
route("POST", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback", api_qemu.rollback,
      ("/vms/{vmid}", ("VM.Snapshot", "VM.Snapshot.Rollback"), True))
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
            if exc.status == 401 and self.auth.fail_delay_s:
                time.sleep(self.auth.fail_delay_s)  # pve-http-server delays failed logins
            return error_response(exc)
        except PvefixError as exc:  # e.g. a host tree file the simulator cannot read
            return error_response(ApiError(500, str(exc)))
        except Exception as exc:  # a simulator bug must not look like a dropped connection
            return error_response(
                ApiError(500, f"internal error in the pvefix simulator ({type(exc).__name__})")
            )
        body = {"data": data.data, **data.attrs} if isinstance(data, Enveloped) else {"data": data}
        return 200, "OK", json.dumps(body, separators=(",", ":")).encode()

    def _dispatch(
        self, method: str, path: str, params: dict[str, str], headers: Mapping[str, str],
        lists: dict[str, list[str]],
    ) -> object:
        path = path.rstrip("/") or "/"
        if path == "/access/ticket":
            if method == "POST":
                return self.auth.login(
                    params.get("username", ""), params.get("password", ""),
                    params.get("realm"),
                )
            if method == "GET":
                return None
        ident = self.auth.identify(
            method,
            _cookie(headers.get("cookie"), "PVEAuthCookie"),
            headers.get("csrfpreventiontoken"),
            headers.get("authorization"),
        )
        for entry in _ROUTES:
            match = entry.regex.match(path)
            if match is None or entry.method != method:
                continue
            if method != "GET" and not path.startswith(_NOT_WRITES):
                number = self.state.faults.count_write()
                if number is not None:
                    raise ApiError(
                        500, f"simulated failure of write #{number} (injected by pvefix sim)"
                    )
            self.state.apply_injected_locks()
            parts = match.groupdict()
            if entry.perm is not None:  # pve-http-server checks before it validates
                where, privs, any_ = entry.perm
                self.state.access.check(ident.authuser, where.format(**parts), privs, any_)
            if entry.params is not None:
                check_query(entry.params, params)
            return entry.handler(
                Call(self.node_state(parts), method, path, params, ident, parts, lists)
            )
        raise ApiError(501, f"Method '{method} {path}' not implemented")


_BOOLEAN_PARAMS = frozenset({"current", "full", "verbose", "download", "errors"})
_INTEGER_PARAMS = frozenset({"start", "limit", "vmid", "since", "until", "pid"})


def check_query(known: frozenset[str], params: Mapping[str, str]) -> None:
    """Proxmox validates GET parameters against the method's schema: an unknown one is 400,
    and so is a boolean other than 0/1 or an integer that is not one."""
    errors: dict[str, str] = {}
    for key, value in params.items():
        if key not in known:
            errors[key] = ("property is not defined in schema and the schema does not allow "
                           "additional properties")
        elif key in _BOOLEAN_PARAMS and value not in ("0", "1"):
            errors[key] = f"type check ('boolean') failed - got '{value}'"
        elif key in _INTEGER_PARAMS and re.fullmatch(r"[+-]?\d+", value) is None:
            errors[key] = f"type check ('integer') failed - got '{value}'"
    if errors:
        raise param_error(errors)


def error_response(exc: ApiError) -> tuple[int, str, bytes]:
    reason = exc.message.replace("\r", " ").replace("\n", " ")
    if exc.empty_body:
        return exc.status, reason, b""
    body: dict[str, object] = {"data": None}
    if exc.errors:
        body["errors"] = exc.errors
    body["message"] = exc.message + "\n"
    return exc.status, reason, json.dumps(body, separators=(",", ":")).encode()


def _cookie(header: str | None, name: str) -> str | None:
    if not header:
        return None
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return None
