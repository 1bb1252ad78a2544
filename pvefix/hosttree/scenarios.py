"""Built-in scenarios: host trees shipped in the package (`pvefix/scenarios/<name>/`).

A shipped scenario is a plain host tree plus a README.md whose first line is its summary. A
generated one (its folder holds `generator.json` instead of a tree) is written by code: into a
per-user cache by resolve_scenario(), or straight into the destination by materialize_scenario().
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from pvefix import __version__
from pvefix.errors import PvefixError
from pvefix.hosttree.meta import META_FILE
from pvefix.hosttree.tree import HostTree, load_tree

SCENARIOS_DIR = Path(__file__).resolve().parent.parent / "scenarios"
GENERATOR_FILE = "generator.json"
README = "README.md"
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def _generate_large(dest: Path, *args: Any, **kwargs: Any) -> None:
    from pvefix.hosttree.large import generate_large

    generate_large(dest, *args, **kwargs)


def _generate_cluster3(dest: Path, *args: Any, **kwargs: Any) -> None:
    from pvefix.hosttree.cluster3 import generate_cluster3

    generate_cluster3(dest, *args, **kwargs)


# The generators' modules load when a scenario is made, not when a host tree is read.
GENERATORS: dict[str, Callable[..., None]] = {
    "large": _generate_large, "cluster3": _generate_cluster3,
}


class ScenarioInfo(BaseModel):
    """A built-in scenario: its name and one-line summary."""

    model_config = ConfigDict(frozen=True)

    name: str
    summary: str
    generated: bool = False


def _summary(readme: Path) -> str:
    try:
        first = readme.read_text(encoding="utf-8").splitlines()[0]
    except (OSError, IndexError):
        return ""
    return first.lstrip("#").strip()


def list_scenarios() -> list[ScenarioInfo]:
    """The built-in scenarios, sorted by name."""
    if not SCENARIOS_DIR.is_dir():
        return []
    found = []
    for entry in sorted(SCENARIOS_DIR.iterdir()):
        if not entry.is_dir() or not _NAME_RE.match(entry.name):
            continue
        generated = (entry / GENERATOR_FILE).is_file()
        if not generated and not (entry / META_FILE).is_file():
            continue
        found.append(
            ScenarioInfo(name=entry.name, summary=_summary(entry / README), generated=generated))
    return found


def _generator(directory: Path) -> tuple[Callable[..., None], int]:
    spec = json.loads((directory / GENERATOR_FILE).read_text(encoding="utf-8"))
    name = spec.get("generator")
    if name not in GENERATORS:
        raise PvefixError(f"unknown generator {name!r}", source=str(directory / GENERATOR_FILE))
    return GENERATORS[name], int(spec.get("seed", 0))


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pvefix" / "scenarios"


def _generated_path(name: str, directory: Path) -> Path:
    """Generate once into the cache (keyed by version and seed) and return that tree."""
    generate, seed = _generator(directory)
    # A generator's revision (generator.json) names its output's format: a new one is a new tree.
    spec = json.loads((directory / GENERATOR_FILE).read_text(encoding="utf-8"))
    revision = int(spec.get("revision", 1))
    target = _cache_dir() / f"{name}-{__version__}-{seed}-r{revision}"
    if (target / META_FILE).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=target.parent))
    try:
        generate(work, seed)
        try:
            work.rename(target)
        except OSError:
            if not (target / META_FILE).is_file():  # lost a race to a complete twin: fine
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return target


def resolve_scenario(name_or_path: str | Path) -> Path:
    """The host tree directory for a built-in scenario name or any host tree path.

    A bare name ("kpro6") means the built-in; write "./kpro6" for a directory of that name.
    """
    text = str(name_or_path)
    if _NAME_RE.match(text) and (SCENARIOS_DIR / text).is_dir():
        directory = SCENARIOS_DIR / text
        if (directory / GENERATOR_FILE).is_file():
            return _generated_path(text, directory)
        return directory
    path = Path(name_or_path)
    if (path / META_FILE).is_file():
        return path
    names = ", ".join(info.name for info in list_scenarios())
    raise PvefixError(
        f"no built-in scenario or host tree {text!r} (a host tree has {META_FILE}; "
        f"built-in scenarios: {names})"
    )


def _check_dest(dest: Path, source_names: set[str]) -> None:
    if not dest.exists():
        return
    if not dest.is_dir():
        raise PvefixError("destination is not a directory", source=str(dest))
    strangers = sorted(
        entry.name
        for entry in dest.iterdir()
        if not entry.name.startswith(".") and entry.name not in source_names
    )
    if strangers:
        raise PvefixError(
            f"destination holds files that are not a host tree ({', '.join(strangers[:5])}); "
            "refusing to copy a scenario over them",
            source=str(dest))


def materialize_scenario(name_or_path: str | Path, dest: str | Path, *,
                         vms: int | None = None) -> HostTree:
    """A working copy of a scenario in `dest`, made once: later calls load `dest` as it is.

    `vms` sizes a generated scenario (`large`); other scenarios refuse it.

    The copy leaves out dot-entries at the source root (a simulator's `.pvefix-sim/` keys must
    not travel) and a built-in's README.md; pvefix-host.json is written last.
    """
    target = Path(dest)
    if (target / META_FILE).is_file():
        return load_tree(target)
    text = str(name_or_path)
    if _NAME_RE.match(text) and (SCENARIOS_DIR / text / GENERATOR_FILE).is_file():
        _check_dest(target, {"etc", "proc", "sys", "nodes"})
        generate, seed = _generator(SCENARIOS_DIR / text)
        if vms is None:
            generate(target, seed)
        else:
            generate(target, seed, vms=vms)
        return load_tree(target)
    if vms is not None:
        raise PvefixError(f"--vms sizes a generated scenario (large), not {text!r}")
    source = resolve_scenario(name_or_path)
    builtin = source.resolve().parent == SCENARIOS_DIR
    names = {
        entry.name
        for entry in source.iterdir()
        if not entry.name.startswith(".") and not (builtin and entry.name == README)}
    _check_dest(target, names)
    target.mkdir(parents=True, exist_ok=True)
    for name in sorted(names - {META_FILE}):
        item = source / name
        if item.is_dir() and not item.is_symlink():
            shutil.copytree(item, target / name, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(item, target / name, follow_symlinks=False)
    shutil.copy2(source / META_FILE, target / META_FILE)
    return load_tree(target)
