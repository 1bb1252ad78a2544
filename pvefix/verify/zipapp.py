"""The probe as a zipapp, built in memory, that runs on a guest with only python3.

It holds `pvefix/__init__.py`, `pvefix/errors.py` and every module of `pvefix/probe/`, plus a
`__main__.py` that (1) selects the standard-library model stand-in (`PVEFIX_PROBE_STDLIB=1`),
(2) copies the two PyTorch worker scripts out of the archive into a private temporary folder
(a child interpreter cannot run a file that lies inside a zip) and (3) calls the probe's own
command line: `python3 FILE.pyz --format json [--quick] [--timeout S]`.

The guest agent's file-write takes at most 60 KiB per call, so a larger zipapp is sent in parts
and put together in the guest by the joiner (pvefix.target.guest.joiner), which checks the
SHA-256 of the whole before it writes it.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pvefix
from pvefix.target.guest.joiner import zip_member as _add

PACKAGE_ROOT = Path(pvefix.__file__).parent

PROBE_MAIN = '''\
"""pvefix probe, packed by `pvefix verify` (standard library only)."""
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ["PVEFIX_PROBE_STDLIB"] = "1"
if sys.version_info < (3, 10):
    sys.stderr.write("pvefix probe needs Python 3.10 or newer; this guest has %d.%d\\n"
                     % sys.version_info[:2])
    sys.exit(4)


def _run():
    import pkgutil

    from pvefix.probe import allreduce, p2p
    from pvefix.probe.main import main

    workdir = tempfile.mkdtemp(prefix="pvefix-probe-")
    try:
        for module, name in ((p2p, "_p2p_worker.py"), (allreduce, "_allreduce_worker.py")):
            data = pkgutil.get_data("pvefix.probe", name)
            path = Path(workdir) / name
            path.write_bytes(data)
            module.WORKER = path
        return main(sys.argv[1:])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


sys.exit(_run())
'''

def probe_sources() -> dict[str, bytes]:
    """Archive name -> source bytes of every module the probe needs in a guest."""
    files = {
        "pvefix/__init__.py": (PACKAGE_ROOT / "__init__.py").read_bytes(),
        "pvefix/errors.py": (PACKAGE_ROOT / "errors.py").read_bytes(),
        "pvefix/pci.py": (PACKAGE_ROOT / "pci.py").read_bytes(),  # the resource parser
    }
    for path in sorted((PACKAGE_ROOT / "probe").glob("*.py")):
        files[f"pvefix/probe/{path.name}"] = path.read_bytes()
    return files


def build_probe_zipapp(*, extra: dict[str, bytes] | None = None) -> bytes:
    """The probe zipapp's bytes. `extra` adds files (tests use it to make a large archive)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        _add(zf, "__main__.py", PROBE_MAIN.encode())
        for name, data in {**probe_sources(), **(extra or {})}.items():
            _add(zf, name, data)
    return buffer.getvalue()
