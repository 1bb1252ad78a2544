"""The tiny zipapp that puts an upload's parts together in a guest.

The guest agent's file-write takes at most 60 KiB per call and replaces the file each time, so
a larger file is sent in parts; this zipapp, run with the guest's python3, joins them, checks
the SHA-256 of the whole and only then writes it (mode 0600).
"""

from __future__ import annotations

import io
import zipfile

#: A fixed timestamp, so the same sources always give the same bytes.
EPOCH = (2020, 1, 1, 0, 0, 0)

JOINER_MAIN = '''\
"""pvefix part joiner: NAME SHA256 COUNT. Joins NAME.part000.. (files next to this zipapp)
into NAME, checks the SHA-256 of the whole, removes the parts."""
import hashlib
import os
import sys

here = os.path.dirname(os.path.abspath(sys.argv[0]))
name, digest, count = os.path.basename(sys.argv[1]), sys.argv[2], int(sys.argv[3])
target = os.path.join(here, name)
parts = ["%s.part%03d" % (target, i) for i in range(count)]
data = b"".join(open(p, "rb").read() for p in parts)
for p in parts:
    os.remove(p)
if hashlib.sha256(data).hexdigest() != digest:
    sys.stderr.write("pvefix joiner: SHA-256 mismatch: the upload was damaged\\n")
    sys.exit(3)
fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "wb") as out:
    out.write(data)
'''


def zip_member(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    """Add `name` with a fixed timestamp and mode (reproducible archives)."""
    info = zipfile.ZipInfo(name, date_time=EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data, compresslevel=9)


def build_joiner_zipapp() -> bytes:
    """The joiner's bytes: `python3 JOINER NAME SHA256 COUNT`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zip_member(zf, "__main__.py", JOINER_MAIN.encode())
    return buffer.getvalue()
