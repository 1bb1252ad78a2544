"""One walk over an exception's causes (pvefix.errors.exception_chain), for the unreachable
hint and the API client's "the node is away" test."""

from __future__ import annotations

import errno
import ssl

import pytest

from pvefix.errors import exception_chain, os_error_in
from pvefix.target.api import _node_away


class Wrapped(Exception):
    """As urllib3's MaxRetryError: the cause kept in `reason`."""

    def __init__(self, message: str, reason: BaseException | None = None) -> None:
        super().__init__(message)
        self.reason = reason


def _chain(inner: BaseException) -> BaseException:
    try:
        try:
            raise Wrapped("max retries", inner)
        except Wrapped as exc:
            raise RuntimeError("request failed", exc) from exc
    except RuntimeError as outer:
        return outer


def test_the_chain_holds_causes_reasons_and_arguments_each_once() -> None:
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    outer = _chain(refused)
    found = list(exception_chain(outer))
    assert found[0] is outer and refused in found
    assert len(found) == len({id(e) for e in found}) == 3


def test_the_socket_error_behind_a_library_error() -> None:
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    assert os_error_in(_chain(refused)) is refused
    assert os_error_in(_chain(ValueError("no socket here"))) is None


def test_a_reset_is_a_node_away_and_a_certificate_failure_is_not() -> None:
    assert _node_away(_chain(ConnectionResetError(errno.ECONNRESET, "Connection reset")))
    bad_cert = ssl.SSLCertVerificationError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate "
                                            "verify failed")
    assert not _node_away(_chain(bad_cert))
    assert not _node_away(_chain(ValueError("something else")))


class _Flaky:
    """A proxmoxer resource whose first call fails as `first` and whose next ones answer."""

    def __init__(self, first: BaseException) -> None:
        self.first: BaseException | None = first
        self.calls = 0

    def _call(self, **params: object) -> object:
        self.calls += 1
        if self.first is not None:
            exc, self.first = self.first, None
            raise exc
        return {"ok": params}

    get = post = put = _call


def test_a_read_whose_connection_was_reset_is_asked_once_more() -> None:
    """pveproxy closes its kept-alive connections when a worker ends: a GET is repeated once
    on a fresh connection; any other failure, and a second reset, are not hidden."""
    import requests

    from pvefix.target.api import ApiClient

    reset = requests.exceptions.ConnectionError(ConnectionResetError(104, "Connection reset"))
    flaky = _Flaky(reset)
    assert ApiClient._get(flaky, {"full": "1"}) == {"ok": {"full": "1"}} and flaky.calls == 2
    timeout = _Flaky(requests.exceptions.ReadTimeout("read timed out"))
    with pytest.raises(requests.exceptions.ReadTimeout):
        ApiClient._get(timeout, {})
    assert timeout.calls == 1
