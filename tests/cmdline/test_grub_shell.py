"""/etc/default/grub and its grub.d drop-ins, evaluated as update-grub's shell evaluates them.

The oracle is a real shell: hypothesis writes the files to a folder and dash (and bash) source
them with the very loop Debian's grub-mkconfig uses; pvefix's evaluation (GrubConfig) must give
the same two values, or say that it cannot evaluate them: never a different value.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pvefix.cmdline.grubd import GrubConfig
from pvefix.paths import GRUB_D

DEFAULT = "/etc/default/grub"
LINUX, LINUX_DEFAULT = "GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT"
SHELLS = [s for s in ("dash", "bash") if shutil.which(s)]
pytestmark = pytest.mark.skipif(not SHELLS, reason="no dash or bash on this machine")

# grub-mkconfig's own lines (Debian): /etc/default/grub, then grub.d/*.cfg in glob order.
MKCONFIG = """
if test -f ${sysconfdir}/default/grub ; then . ${sysconfdir}/default/grub ; fi
for x in ${sysconfdir}/default/grub.d/*.cfg ; do
  if [ -e "${x}" ]; then . "${x}" ; fi
done
printf '%s\\0%s' "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"
"""


def sourced(files: dict[str, str], shell: str) -> tuple[str, str]:
    """The two values after a real shell sourced `files` the way grub-mkconfig does."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "default" / "grub.d").mkdir(parents=True)
        for path, text in files.items():
            (root / path.removeprefix("/etc/")).write_text(text)
        out = subprocess.run(
            [shell, "-c", MKCONFIG], env={"sysconfdir": tmp, "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, check=True, timeout=20,
        ).stdout
    linux, _, default = out.partition("\0")
    return linux, default


TOKENS = st.sampled_from(["quiet", "iommu=pt", "intel_iommu=on", "console=ttyS0,115200",
                          "pci=realloc", "splash", 'x="a  b"', "root=ZFS=rpool/ROOT/pve-1"])
REFS = st.sampled_from(["$GRUB_CMDLINE_LINUX", "${GRUB_CMDLINE_LINUX_DEFAULT}",
                        "$GRUB_CMDLINE_LINUX_DEFAULT"])


@st.composite
def assignment(draw: st.DrawFn) -> str:
    variable = draw(st.sampled_from([LINUX, LINUX_DEFAULT]))
    words = draw(st.lists(st.one_of(TOKENS, REFS), max_size=4))
    value = draw(st.sampled_from([" ", "  "])).join(words)
    style = draw(st.sampled_from(["double", "single", "bare"]))
    if style == "single" and '"' not in value:
        raw = f"'{value}'"  # a `$` stays literal in single quotes
    elif style == "bare" and len(words) == 1 and '"' not in value:
        raw = value
    else:
        raw = '"' + value.replace('"', '\\"') + '"'
    prefix = draw(st.sampled_from(["", "export ", "  "]))
    comment = draw(st.sampled_from(["", "  # set by hand", " ;"]))
    return f"{prefix}{variable}={raw}{comment}"


@st.composite
def grub_file(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.one_of(
        assignment(), st.just("# a comment"), st.just(""), st.just("GRUB_TIMEOUT=5"),
        st.just("GRUB_DISABLE_OS_PROBER=true"),
    ), max_size=6))
    return "\n".join(lines) + draw(st.sampled_from(["\n", ""]))


@st.composite
def grub_files(draw: st.DrawFn) -> dict[str, str]:
    files: dict[str, str] = {}
    if draw(st.booleans()):
        files[DEFAULT] = draw(grub_file())
    names = draw(st.lists(st.sampled_from(["zfs.cfg", "50-x.cfg", "99-y.cfg", "Z.cfg",
                                           ".hidden.cfg", "installer.cfg", "a_b.cfg"]),
                          unique=True, max_size=3))
    for name in names:
        files[f"{GRUB_D}/{name}"] = draw(grub_file())
    return files


@settings(max_examples=80, deadline=None)
@given(grub_files())
def test_values_are_what_the_shell_sources(files: dict[str, str]) -> None:
    config = GrubConfig(files)
    if config.unknown:
        return  # said, not guessed
    got = (config.values[LINUX], config.values[LINUX_DEFAULT])
    for shell in SHELLS:
        assert got == sourced(files, shell), (shell, files)


@pytest.mark.parametrize("text", [
    'GRUB_CMDLINE_LINUX_DEFAULT="$(cat /etc/extra) quiet"\n',
    'GRUB_CMDLINE_LINUX_DEFAULT="$OTHER quiet"\n',
    'if true; then\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nfi\n',
    ". /etc/default/more\n",
    'GRUB_CMDLINE_LINUX_DEFAULT="quiet \\$GRUB_CMDLINE_LINUX"\n',
])
def test_what_is_beyond_evaluation_is_said_not_guessed(text: str) -> None:
    config = GrubConfig({DEFAULT: "", f"{GRUB_D}/x.cfg": text})
    assert config.unknown, text
    assert config.unknown[0].startswith(f"{GRUB_D}/x.cfg:")


def test_running_is_compared_as_the_kernel_reads_it() -> None:
    from pvefix.cmdline.grubd import same_as_running
    from pvefix.cmdline.tokens import Cmdline

    configured = Cmdline.parse('quiet foo="a b" vfio-pci.ids=10de:2bb1')
    # GRUB re-quotes an argument holding a space; the kernel sees the same parameters.
    running = Cmdline.parse('root=/dev/mapper/pve-root ro quiet "foo=a b" vfio_pci.ids=10de:2bb1')
    assert same_as_running(configured, running)
    assert not same_as_running(configured, Cmdline.parse("root=/dev/x ro quiet"))
