"""Where recorded desired states live in the state directory (cheap: no models, no TOML)."""

from __future__ import annotations

from pathlib import Path

DESIRED_DIR = "desired"


def may_have_recorded(state_dir: Path, vmid: int) -> bool:
    """Is there a recorded file for VM `vmid`, unkeyed or in some cluster's folder?"""
    folder = state_dir / DESIRED_DIR
    return (folder / f"{vmid}.toml").is_file() or any(folder.glob(f"*/{vmid}.toml"))
