"""The error the simulated API answers with, shaped like Proxmox's (status, message, errors),
and an answer with attributes beside `data` in its envelope."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Enveloped:
    """A handler's answer whose envelope carries more than `data` (e.g. the task index's
    `total`, set by Proxmox's `set_result_attrib`)."""

    data: object
    attrs: dict[str, object] = field(default_factory=dict)


class ApiError(Exception):
    """An API failure: HTTP status, the message Proxmox puts in the reason phrase, and per-field
    parameter errors (`{"errors": {...}}`) when Proxmox raises a parameter exception."""

    def __init__(
        self, status: int, message: str, errors: dict[str, str] | None = None,
        *, empty_body: bool = False,
    ) -> None:
        self.status = status
        self.message = message.rstrip("\n")
        self.errors = errors
        self.empty_body = empty_body  # pve-http-server's own 401s: the reason phrase only
        super().__init__(self.message)


def param_error(errors: dict[str, str]) -> ApiError:
    """Proxmox's raise_param_exc: 400 `Parameter verification failed.` with per-field text."""
    return ApiError(400, "Parameter verification failed.", errors)


def unauthorized(reason: str = "Authentication failed!") -> ApiError:
    """A request pve-http-server refuses before any handler: 401, empty body."""
    return ApiError(401, reason, empty_body=True)


def die(message: str) -> ApiError:
    """Perl's `die "...\\n"` inside an API handler: HTTP 500 carrying the message."""
    return ApiError(500, message)
