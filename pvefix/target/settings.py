"""Connection settings: where the target is and how to authenticate, from four layers.

Precedence, lowest first: a TOML config file profile, environment variables, command-line flags,
and `--connection FILE` (a simulator's ready file, which describes one target completely).
Secrets are `SecretStr` everywhere: they never show in a repr, a log line or an error message.
A config file may name secrets indirectly (`password_command`, `token_secret_file`,
`password_env`, ...), so the file itself can be shared.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import pydantic
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from pvefix.errors import ParseError, PvefixError, plain_words

DEFAULT_TIMEOUT = 30.0
DEFAULT_API_PORT = 8006
DEFAULT_CONFIG = Path("~/.config/pvefix/config.toml")  # $XDG_CONFIG_HOME/pvefix/... when set
SECRET_FIELDS = ("password", "token_secret", "ssh_password")
SECRET_SOURCES = ("file", "command", "env")

# Environment variables: PROXMOX_* as Ansible's community.proxmox reads them, PVEFIX_* for the
# rest. Each maps to a Connection field.
ENV_VARS: dict[str, str] = {
    "PROXMOX_HOST": "host",
    "PROXMOX_PORT": "port",
    "PROXMOX_USER": "user",
    "PROXMOX_PASSWORD": "password",
    "PROXMOX_TOKEN_ID": "token_id",
    "PROXMOX_TOKEN_SECRET": "token_secret",
    "PVEFIX_NODE": "node",
    "PVEFIX_BACKEND": "backend",
    "PVEFIX_AUTH": "auth",
    "PVEFIX_CA_CERT": "ca_cert",
    "PVEFIX_FINGERPRINT": "fingerprint",
    "PVEFIX_INSECURE": "insecure",
    "PVEFIX_TIMEOUT": "timeout",
    "PVEFIX_SSH": "ssh",
    "PVEFIX_SSH_HOST": "ssh_host",
    "PVEFIX_SSH_PORT": "ssh_port",
    "PVEFIX_SSH_USER": "ssh_user",
    "PVEFIX_SSH_KEY": "ssh_key",
    "PVEFIX_SSH_PASSWORD": "ssh_password",
    "PVEFIX_SSH_AGENT": "ssh_agent",
    "PVEFIX_KNOWN_HOSTS": "known_hosts",
    "PVEFIX_ACCEPT_NEW_HOST_KEY": "accept_new_host_key",
    "PVEFIX_LOCAL_ROOT": "local_root",
}
# Peers' names, read when pvefix's own are not set (docs/connection.md, precedence):
# community.proxmox's PROXMOX_VALIDATE_CERTS, and bpg's Terraform provider's PROXMOX_VE_*.
ENV_VALIDATE_CERTS = "PROXMOX_VALIDATE_CERTS"
ENV_BPG_ENDPOINT = "PROXMOX_VE_ENDPOINT"  # https://host:8006/
ENV_BPG_TOKEN = "PROXMOX_VE_API_TOKEN"  # noqa: S105 (a variable name: user@realm!name=secret)
ENV_BPG_VARS: dict[str, str] = {
    "PROXMOX_VE_USERNAME": "user",
    "PROXMOX_VE_PASSWORD": "password",
    "PROXMOX_VE_INSECURE": "insecure",
}
ENV_PROFILE = "PVEFIX_PROFILE"
ENV_CONFIG = "PVEFIX_CONFIG"
ENV_CONNECTION = "PVEFIX_CONNECTION"


class Connection(BaseModel):
    """Everything needed to reach one Proxmox node: API, TLS, SSH, timeouts.

    `backend="api"`: the HTTPS API (proxmoxer) plus SSH (paramiko) for what the API lacks.
    `backend="local"`: pvefix runs on the node itself (files read directly, `pvesh` for the API).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: str | None = None
    backend: Literal["api", "local"] = "api"
    host: str | None = Field(default=None, description="API host name or address")
    port: int = Field(default=DEFAULT_API_PORT, ge=1, le=65535)
    node: str | None = Field(default=None, description="node name, when known (saves a wave)")
    user: str | None = Field(default=None, description="user@realm, e.g. root@pam")
    auth: Literal["auto", "token", "password"] = "auto"
    password: SecretStr | None = None
    token_id: str | None = Field(default=None, description="token name, or user@realm!name")
    token_secret: SecretStr | None = None
    ca_cert: Path | None = None
    fingerprint: str | None = Field(default=None, description="pinned SHA-256, hex")
    insecure: bool = False
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    ssh: bool = True
    ssh_host: str | None = None
    ssh_port: int = Field(default=22, ge=1, le=65535)
    ssh_user: str = "root"
    ssh_key: Path | None = None
    ssh_password: SecretStr | None = None
    ssh_agent: bool = True
    known_hosts: Path = Path("~/.ssh/known_hosts")
    accept_new_host_key: bool = False
    local_root: Path = Path("/")
    ssh_nodes: dict[str, str] = Field(
        default_factory=dict,
        description="node name -> SSH address (host, host:port or [v6]:port;"
        " `[profiles.NAME.ssh.nodes]`), as Terraform's bpg provider maps nodes")

    @field_validator("user", "token_id", "host", "ssh_user", "ssh_host")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        # The user and token id go into the same header as the secret (PVEAPIToken=...).
        if value is not None and any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ValueError("holds a line break or control character")
        return value

    @field_validator("fingerprint")
    @classmethod
    def _sha256(cls, value: str | None) -> str | None:
        if value is None:
            return None
        hexed = value.strip().lower().removeprefix("sha256:").replace(":", "")
        if len(hexed) != 64 or any(c not in "0123456789abcdef" for c in hexed):
            raise ValueError("expected a SHA-256 fingerprint: 64 hex digits (colons allowed)")
        return hexed

    @property
    def token_user(self) -> str | None:
        """The token's user (root@pam of root@pam!pvefix)."""
        if self.token_id and "!" in self.token_id:
            return self.token_id.split("!", 1)[0]
        return self.user

    @property
    def token_name(self) -> str | None:
        """The token's own name (pvefix of root@pam!pvefix)."""
        if self.token_id is None:
            return None
        return self.token_id.split("!", 1)[1] if "!" in self.token_id else self.token_id

    @property
    def auth_method(self) -> Literal["token", "password"]:
        """Which credentials will be used (auto: a token if one is complete, else password)."""
        if self.auth != "auto":
            return self.auth
        if self.token_id and self.token_secret is not None:
            return "token"
        return "password"

    @property
    def api_user(self) -> str | None:
        """Who the API sees: user@realm!name for a token, user@realm for a ticket."""
        if self.auth_method == "token":
            return f"{self.token_user}!{self.token_name}" if self.token_name else None
        return self.user

    @property
    def effective_ssh_host(self) -> str | None:
        return self.ssh_host or self.host

    @property
    def reaches_node(self) -> bool:
        """Host files and commands are reachable: this host with --local, else SSH."""
        return self.backend == "local" or self.ssh

    @property
    def on_this_host(self) -> bool:
        """pvefix runs on the node it reads and changes (--local)."""
        return self.backend == "local"

    @property
    def label(self) -> str:
        """The target, for reports: the API host, or "local node" with --local."""
        return (self.host or "") if self.backend == "api" else "local node"

    def for_node(self, node: str) -> Connection:
        """The settings for SSH to `node`: its address (and port) from `ssh_nodes` when one
        is given."""
        address = self.ssh_nodes.get(node)
        if address is None:
            return self
        from pvefix.target.nodes import split_address

        host, port = split_address(address, self.ssh_port)
        return self.model_copy(update={"ssh_host": host, "ssh_port": port})

    def expanded(self, path: Path) -> Path:
        return Path(os.path.expanduser(str(path)))

    def check_ready(self) -> None:
        """Raise a PvefixError naming what is missing before any network traffic."""
        if self.backend == "local":
            return
        missing = []
        if not self.host:
            missing.append("host (--host, PROXMOX_HOST, or `host` in the profile)")
        method = self.auth_method
        if method == "token" and (not self.token_id or self.token_secret is None):
            missing.append("token_id and token_secret")
        if method == "token" and not self.token_user:
            missing.append("user (the token's user@realm) or a token_id of user@realm!name")
        if method == "password" and (not self.user or self.password is None):
            missing.append("user and password, or token_id and token_secret")
        if missing:
            raise PvefixError("connection incomplete: missing " + "; ".join(missing))


# -- layers -----------------------------------------------------------------------------------

_FIELDS = set(Connection.model_fields)
# Which layer a setting came from, by rank (the config file's own name ranks lowest).
_LAYER_RANK = {"environment": 1, "command line": 2}
_BOOL_FIELDS = {"insecure", "ssh", "ssh_agent", "accept_new_host_key"}


def parse_bool(name: str, value: object, source: str = "settings") -> bool:
    """A setting's boolean (the one parser of connection and guest settings): a bool, or
    1/true/yes/on, 0/false/no/off or empty, in any case; anything else names the setting."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ParseError(f"{name}: expected a boolean, got {text!r}", source=source)


def first_line(text: str, where: str, source: str) -> str:
    """A secret from a file or a command: its first line (`pass show` prints more lines after
    the password). Refused when that line is empty; the error never carries the value."""
    line = text.split("\n", 1)[0].rstrip("\r")
    if not line.strip():
        raise ParseError(f"{where}: the first line is empty (expected the secret there)",
                         source=source)
    if any(ord(c) < 32 or ord(c) == 127 for c in line):
        raise ParseError(f"{where}: the first line holds control characters", source=source)
    return line


def single_line(name: str, value: str, source: str) -> str:
    """A secret given directly (flag, environment, file field): one line, or refused."""
    if "\n" in value or "\r" in value or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ParseError(f"{name}: holds a line break or control characters (a secret is one"
                         " line)", source=source)
    return value


def _secret_from(name: str, kind: str, ref: str, source: str, env: Mapping[str, str]) -> str:
    """Resolve `NAME_file`, `NAME_command` or `NAME_env`; errors never carry the secret."""
    where = f"{name}_{kind}"
    if kind == "file":
        path = Path(os.path.expanduser(ref))
        try:
            data = _read_settings_file(path, 64 * 1024)  # bounded; a FIFO cannot hang it
        except PvefixError as exc:
            raise ParseError(f"{where}: {exc}", source=source) from None
        if data is None:
            raise ParseError(f"{where}: cannot read {path}: No such file or directory",
                             source=source)
        warn_open_secret(path, f"a secret ({where})")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ParseError(f"{where}: {path} is not UTF-8 text", source=source) from None
        return first_line(text, where, source)
    if kind == "env":
        if ref not in env:
            raise ParseError(f"{where}: environment variable {ref} is not set", source=source)
        return single_line(where, env[ref], source)
    try:
        argv = shlex.split(ref)
        from pvefix.target.process import run_process_bytes

        done = run_process_bytes(argv, 60)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        message = f"{where}: cannot run the command: {type(exc).__name__}"
        raise ParseError(message, source=source) from None
    if done.returncode != 0:
        # The command line is not repeated: people put secrets in them too.
        raise ParseError(f"{where}: the command exited with {done.returncode}", source=source)
    try:
        out = done.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise ParseError(f"{where}: the command's output is not UTF-8", source=source) from None
    return first_line(out, where, source)


def _profile_table(path: Path, profile: str | None, *,
                   required: bool) -> tuple[dict[str, Any], str | None]:
    """The `[profiles.NAME]` table of a TOML config file, and the profile's name."""
    source = str(path)
    raw = _read_settings_file(path)
    if raw is None:
        if required:
            raise ParseError("config file not found", source=source)
        return {}, profile
    from pvefix.tomltext import parse_toml

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(f"not UTF-8 (byte {exc.start})", source=source) from None
    data = parse_toml(text, source)
    unknown = set(data) - {"default_profile", "profiles"}
    if unknown:
        raise ParseError(f"unknown top-level key(s): {', '.join(sorted(unknown))}", source=source)
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict):
        raise ParseError("profiles: expected [profiles.NAME] tables", source=source)
    name = profile or data.get("default_profile")
    if name is None:
        if len(profiles) == 1:
            name = next(iter(profiles))
        else:
            return {}, None
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise ParseError(f"no profile '{name}' (profiles: {known})", source=source)
    table = profiles[name]
    if not isinstance(table, dict):
        raise ParseError(f"profiles.{name}: expected a table", source=source)
    return table, str(name)


def profile_layer(path: Path, profile: str | None, env: Mapping[str, str], *,
                  required: bool) -> tuple[dict[str, Any], str | None]:
    """The settings of one profile of a TOML config file, and the profile's name."""
    source = str(path)
    table, name = _profile_table(path, profile, required=required)
    held = sorted(set(table) & set(SECRET_FIELDS))
    if held:
        warn_open_secret(path, " and ".join(held))
    out: dict[str, Any] = {}
    for key, value in table.items():
        field = f"profiles.{name}.{key}"
        base, _, kind = key.rpartition("_")
        if base in SECRET_FIELDS and kind in SECRET_SOURCES:
            out[base] = _secret_from(base, kind, str(value), f"{source}: {field}", env)
        elif key == "ssh" and isinstance(value, dict):
            out["ssh_nodes"] = _ssh_nodes(value, field, source)
        elif key in PLAN_KEYS:
            _plan_value(key, value, f"{source}: {field}")  # checked here, used by plan_defaults
        elif key in _FIELDS and key not in ("profile", "ssh_nodes"):
            out[key] = value
        else:
            raise ParseError(f"unknown key '{field}'", source=source)
    return out, name


# -- what a profile asks the planner for ------------------------------------------------------

# Keys of a profile that are not about reaching the target but about what to plan for it.
PLAN_KEYS = ("p2p", "clique_map")


class PlanDefaults(BaseModel):
    """What a profile asks the planner for (`p2p = true`, `clique_map = "hostpci0=0,..."`):
    defaults below a command's flags and a VM's desired state (docs/p2p.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: str | None = None
    source: str = Field(default="", description="the config file it was read from")
    p2p: bool | None = None
    clique_map: str | None = Field(default=None, description="hostpciN=C,... as --clique-map")


def _plan_value(key: str, value: object, source: str) -> bool | str:
    if key == "p2p":
        return parse_bool(key, value, source)
    if not isinstance(value, str):
        raise ParseError(f"{key}: expected text like \"hostpci0=0,hostpci1=0\"", source=source)
    return value


def _config_choice(config: Path | None, profile: str | None,
                   environ: Mapping[str, str]) -> tuple[Path, str | None, bool]:
    """The config file, the profile asked for and whether both must exist (named ones)."""
    profile = profile or environ.get(ENV_PROFILE) or None
    explicit = config or (Path(environ[ENV_CONFIG]) if environ.get(ENV_CONFIG) else None)
    path = Path(os.path.expanduser(str(explicit or default_config(environ))))
    return path, profile, explicit is not None or profile is not None


def plan_defaults(config: Path | None = None, profile: str | None = None,
                  env: Mapping[str, str] | None = None) -> PlanDefaults:
    """The profile's `p2p` and `clique_map`, chosen as `resolve_connection` chooses the
    profile; no secret is resolved for it (no password command runs)."""
    environ = dict(os.environ if env is None else env)
    path, asked, required = _config_choice(config, profile, environ)
    table, name = _profile_table(path, asked, required=required)
    found = {k: _plan_value(k, table[k], f"{path}: profiles.{name}.{k}")
             for k in PLAN_KEYS if k in table}
    return PlanDefaults(profile=name, source=str(path), **found)


def _ssh_nodes(table: dict[str, Any], field: str, source: str) -> dict[str, str]:
    """`[profiles.NAME.ssh.nodes]`: node name = "address"."""
    unknown = [k for k in table if k != "nodes"]
    if unknown:
        raise ParseError(f"unknown key '{field}.{unknown[0]}'", source=source)
    nodes = table.get("nodes", {})
    if not isinstance(nodes, dict):
        raise ParseError(f"{field}.nodes: expected a table of node = \"address\"", source=source)
    out: dict[str, str] = {}
    for node, address in nodes.items():
        if not isinstance(address, str) or not address.strip():
            raise ParseError(f"{field}.nodes.{node}: expected an address (a string)",
                             source=source)
        out[str(node)] = address.strip()
    return out


def peer_env_layer(env: Mapping[str, str]) -> dict[str, Any]:
    """Settings from the peers' names (bpg's PROXMOX_VE_*, community.proxmox's
    PROXMOX_VALIDATE_CERTS): below pvefix's own names, which override them field by field."""
    out: dict[str, Any] = {field: env[var] for var, field in ENV_BPG_VARS.items() if env.get(var)}
    if env.get(ENV_BPG_ENDPOINT):
        out["host"] = env[ENV_BPG_ENDPOINT]  # a URL: split_host takes its host and port
    token = env.get(ENV_BPG_TOKEN)
    if token:
        token_id, sep, secret = token.partition("=")
        if not sep or "!" not in token_id or not secret:
            raise ParseError(f"{ENV_BPG_TOKEN}: expected user@realm!name=secret",
                             source="environment")
        out["token_id"], out["token_secret"] = token_id, secret
    validate = env.get(ENV_VALIDATE_CERTS)
    if validate:
        out["insecure"] = not parse_bool(ENV_VALIDATE_CERTS, validate, "environment")
    return out


def env_layer(env: Mapping[str, str]) -> dict[str, Any]:
    """Settings from PROXMOX_* and PVEFIX_* environment variables (empty ones ignored)."""
    return {field: env[var] for var, field in ENV_VARS.items() if env.get(var)}


def split_host(value: str, source: str) -> tuple[str, int | None]:
    """A host as people write it: `name`, `name:8006`, `[::1]:8006`, `::1` or a URL
    (`https://name:8006/`): the host name and the port it names, if any."""
    text = value.strip()
    if "://" in text or text.startswith("["):
        url = urlsplit(text if "://" in text else f"https://{text}")
        try:
            port = url.port
        except ValueError:
            raise ParseError(f"host {text!r}: the port is not a number from 1 to 65535",
                             source=source) from None
        if not url.hostname:
            raise ParseError(f"host {text!r}: no host name in it", source=source)
        return url.hostname, port
    name, sep, port_text = text.rpartition(":")
    if sep and name and ":" not in name:  # name:port (a bare IPv6 address has more colons)
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise ParseError(f"host {text!r}: the port is not a number from 1 to 65535",
                             source=source)
        return name, int(port_text)
    return text, None


def default_config(env: Mapping[str, str]) -> Path:
    """config.toml under $XDG_CONFIG_HOME (when set to an absolute path) or ~/.config."""
    base = env.get("XDG_CONFIG_HOME", "")
    if base and os.path.isabs(base):
        return Path(base) / "pvefix" / "config.toml"
    return DEFAULT_CONFIG


def ready_file_layer(path: Path) -> dict[str, Any]:
    """Settings from a simulator's ready file (JSON: api_url, node, user, password, ...)."""
    source = str(path)
    raw = _read_settings_file(path)
    if raw is None:
        raise ParseError("connection file not found", source=source)
    try:
        data = json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise ParseError(f"not valid JSON: {exc.msg}", source=source, line=exc.lineno) from None
    except UnicodeDecodeError as exc:
        raise ParseError(f"not UTF-8 (byte {exc.start})", source=source) from None
    except RecursionError:
        raise ParseError("not a ready file: nested too deeply", source=source) from None
    except ValueError as exc:  # a 4,300-digit number
        raise ParseError(f"not valid JSON: {exc}", source=source) from None
    if not isinstance(data, dict) or not isinstance(data.get("api_url"), str):
        raise ParseError("not a ready file: no api_url", source=source)
    try:
        url = urlsplit(data["api_url"])
        out: dict[str, Any] = {"host": url.hostname, "port": url.port or DEFAULT_API_PORT}
    except ValueError as exc:
        raise ParseError(f"api_url: {exc}", source=source) from None
    direct = ("node", "user", "password", "token_id", "token_secret", "ca_cert", "ssh_host",
              "ssh_port", "ssh_user", "ssh_key", "known_hosts")
    nodes = data.get("ssh_nodes")
    if nodes not in (None, {}):
        # Every node's SSH endpoint (a multi-node simulator): node name -> "host:port".
        if not isinstance(nodes, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and v for k, v in nodes.items()):
            raise ParseError('ssh_nodes: expected {"NODE": "HOST:PORT", ...}', source=source)
        out["ssh_nodes"] = dict(nodes)
    for key in direct:
        value = data.get(key)
        if value in (None, ""):
            continue
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise ParseError(f"{key}: expected text or a number", source=source)
        out[key] = value
    return out


_WARNED: set[str] = set()


def warn_open_secret(path: Path, what: str) -> None:
    """Warn (once a run) that a file holding a secret may be read by group or others, naming
    the chmod that fixes it; the secret itself is never shown. OpenSSH refuses a private key
    in such a file (pvefix does too: target/ssh.py); a settings file is warned about, so an
    existing setup keeps working while it says what to fix."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return
    if not mode & 0o077 or str(path) in _WARNED:
        return
    _WARNED.add(str(path))
    print(f"pvefix: warning: {path} holds {what} and group or others may read it (mode "
          f"{mode:04o}): run `chmod 600 {shlex.quote(str(path))}`", file=sys.stderr, flush=True)


def _read_settings_file(path: Path, cap: int = 1 << 20) -> bytes | None:
    """A settings or secret file's bytes (None: it does not exist): bounded, and a regular
    file, so a FIFO or a device cannot hang pvefix. Links are the user's own: followed."""
    from pvefix.hosttree import safe

    return safe.read_local(path, cap)


def _validated(values: dict[str, Any], sources: dict[str, str]) -> Connection:
    if isinstance(values.get("host"), str):
        host, port = split_host(values["host"], sources.get("host", "settings"))
        values["host"] = host
        # A port written with the host counts unless a later layer gave one itself.
        if port is not None and _LAYER_RANK.get(sources.get("port", ""), -1) <= _LAYER_RANK.get(
                sources.get("host", ""), -1):
            values["port"] = port
            sources["port"] = sources.get("host", "settings")
    for name in SECRET_FIELDS:
        if isinstance(values.get(name), str):
            values[name] = single_line(name, values[name], sources.get(name, "settings"))
    token = values.get("token_secret")
    if isinstance(token, str) and not token.isascii():
        # It goes into an HTTP header (PVEAPIToken=...), which only carries ASCII safely.
        raise ParseError("token_secret: holds non-ASCII characters",
                         source=sources.get("token_secret", "settings"))
    for name in _BOOL_FIELDS & set(values):
        values[name] = parse_bool(name, values[name], sources.get(name, "settings"))
    try:
        return Connection.model_validate(values)
    except pydantic.ValidationError as exc:
        # Only the field and the reason: pydantic's own text would echo the input (a secret?).
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"])
            problems.append(
                f"{field} (from {sources.get(field, 'settings')}): {plain_words(err)}")
        raise ParseError("invalid connection settings: " + "; ".join(problems)) from None


def resolve_connection(
    *,
    flags: Mapping[str, Any] | None = None,
    config: Path | None = None,
    profile: str | None = None,
    connection_file: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Connection:
    """Merge the layers (config file < environment < flags < connection file) into one
    Connection. `flags` holds only the options given on the command line (None = not given).
    """
    environ = dict(os.environ if env is None else env)
    config_path, profile, required = _config_choice(config, profile, environ)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def layer(items: Mapping[str, Any], name: str) -> None:
        for key, value in items.items():
            if value is not None:
                values[key] = value
                sources[key] = name

    file_values, chosen = profile_layer(config_path, profile, environ, required=required)
    layer(file_values, str(config_path))
    layer(peer_env_layer(environ), "environment")
    layer(env_layer(environ), "environment")
    ready = connection_file or (
        Path(environ[ENV_CONNECTION]) if environ.get(ENV_CONNECTION) else None
    )
    ready_values = (
        ready_file_layer(Path(os.path.expanduser(str(ready)))) if ready is not None else {})
    # The file's node is the node its API runs on: a default, below an explicit --node (the
    # reader finds the VM's own node in the cluster either way).
    if "node" in ready_values:
        layer({"node": ready_values.pop("node")}, str(ready))
    layer(dict(flags or {}), "command line")
    if ready is not None:
        layer(ready_values, str(ready))
    values["profile"] = chosen
    return _validated(values, sources)
