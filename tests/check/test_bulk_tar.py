"""The bulk read's tar reader: what the standard library's tarfile reads, for every stream.

pvefix reads the common headers itself (10x faster on a cluster's configs) and hands anything
else (pax records, sparse files, odd fields, damage) to tarfile; both must always agree.
"""

from __future__ import annotations

import io
import tarfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pvefix.check.bulk import BULK_COMMAND, _fast_members, _tarfile_members, parse_bulk
from pvefix.errors import PvefixError
from pvefix.target.result import CommandResult

_NODE = st.from_regex(r"[a-z][a-z0-9\-]{0,70}[a-z0-9]", fullmatch=True)
_FILE = st.tuples(_NODE, st.integers(100, 999_999_999), st.binary(max_size=700))
_FORMATS = st.sampled_from([tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT])


def _archive(files: list[tuple[str, int, bytes]], fmt: int, extra: bool) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as archive:
        for node, vmid, data in files:
            info = tarfile.TarInfo(f"etc/pve/nodes/{node}/qemu-server/{vmid}.conf")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
            if extra:  # a folder and a link among the files: not configs
                folder = tarfile.TarInfo(f"etc/pve/nodes/{node}")
                folder.type = tarfile.DIRTYPE
                archive.addfile(folder)
                link = tarfile.TarInfo(f"etc/pve/nodes/{node}/qemu-server/1{vmid}.conf")
                long_ok = fmt != tarfile.USTAR_FORMAT  # ustar has no long link names
                link.type, link.linkname = tarfile.SYMTYPE, "x" * (120 if long_ok else 20)
                archive.addfile(link)
    return buffer.getvalue()


def _standard(data: bytes) -> object:
    try:
        return _tarfile_members(data)
    except PvefixError:
        return "error"


def _ours(data: bytes) -> object:
    fast = _fast_members(data)
    return _standard(data) if fast is None else fast


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_FILE, max_size=6), _FORMATS, st.booleans())
def test_the_fast_reader_agrees_with_tarfile(files: list[tuple[str, int, bytes]], fmt: int,
                                             extra: bool) -> None:
    data = _archive(files, fmt, extra)
    fast = _fast_members(data)
    if fmt != tarfile.PAX_FORMAT:
        assert fast is not None  # what GNU tar writes is read without tarfile
    if fast is not None:
        assert fast == _tarfile_members(data)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_FILE, min_size=1, max_size=3), _FORMATS, st.data())
def test_damaged_streams_read_as_tarfile_reads_them(files: list[tuple[str, int, bytes]],
                                                    fmt: int, data: st.DataObject) -> None:
    stream = bytearray(_archive(files, fmt, extra=False))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(stream) - 1))
        stream[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(stream)))
    damaged = bytes(stream[:cut])
    assert _ours(damaged) == _standard(damaged)


def test_parse_bulk_reads_long_node_names_through_gnu_long_names() -> None:
    node = "n" * 90  # the member's path is longer than the 100 bytes of a tar header's name
    data = _archive([(node, 4242, b"memory: 512\n")], tarfile.GNU_FORMAT, extra=True)
    assert _fast_members(data) is not None
    text = data.decode("utf-8", "surrogateescape")
    configs = parse_bulk(CommandResult(BULK_COMMAND, 0, text, ""))
    assert {vmid: (c.node, c.text) for vmid, c in configs.items()} == {
        4242: (node, "memory: 512\n")}
