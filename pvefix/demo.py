"""`make demo` / `python -m pvefix.demo`: the product's front door on a simulated host.

Starts the built-in `kpro6` scenario (8 x RTX PRO 6000, the story of docs/) as a simulated
Proxmox VE node on 127.0.0.1 — real HTTPS API and real SSH — shows what is on it, then runs
`pvefix plan 100` against it exactly as an admin would against a real node. Nothing outside this
machine is contacted; the node's state lives in DIR (default .demo/kpro6) and persists.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pvefix.demo", description=__doc__)
    parser.add_argument("--scenario", default="kpro6", help="built-in scenario or host tree")
    parser.add_argument("--root", default=".demo/kpro6", help="where the node's state lives")
    parser.add_argument("--vmid", type=int, default=100, help="the VM to plan for")
    args = parser.parse_args(argv)

    from pvefix.main import main as pvefix
    from pvefix.sim.serve import running_simulator, write_ready_file

    root = Path(args.root)
    ready = root.parent / f"{root.name}.ready.json"
    with running_simulator(args.scenario, root) as info:
        write_ready_file(info, ready)
        print(f"== A simulated Proxmox VE node '{info.node}' is up (scenario {args.scenario}):")
        print(f"   API  {info.api_url}  (TLS with its own CA: {info.ca_cert})")
        print(f"   SSH  {info.ssh_user}@{info.ssh_host}:{info.ssh_port}"
              f"  (host key in {info.known_hosts})")
        print(f"   connection file: {ready}  (0600; holds the simulator's credentials)\n")
        _show_node(info)
        print(f"\n== pvefix plan {args.vmid} --connection {ready}\n", flush=True)
        code = pvefix(["plan", str(args.vmid), "--connection", str(ready)])
        print(
            f"\n== pvefix plan exited {code}"
            + {0: " (nothing to do)", 2: " (changes planned; nothing was changed)"}.get(code, ""))
    for line in try_lines(args.scenario, root, ready, args.vmid):
        print(line)
    return 0 if code in (0, 2) else code


def try_lines(scenario: str, root: Path, ready: Path, vmid: int) -> list[str]:
    """What to try next. The demo's simulator has stopped by then: the first line reads the
    node's files it left in ROOT (no simulator needed); the next start it again in the
    background (it keeps its state) and plan against it live. Each line runs as printed
    (tests/docs/test_doc_examples.py runs them)."""
    bin_ = ".venv/bin/pvefix"
    return [
        f"   The simulated node has stopped; its state stays in {root}. Try:",
        f"   {bin_} plan {vmid} --bundle {root} --format markdown",
        f"   {bin_} sim serve --scenario {scenario} --root {root} --ready-file {ready} &",
        f"   {bin_} plan {vmid} --connection {ready} --format markdown"
        "   # once the line above says it is ready",
        "   kill %1   # stop the simulator again"]


def _show_node(info: object) -> None:
    """What is on the node, read through the real API with proxmoxer."""
    from proxmoxer import ProxmoxAPI

    from pvefix.sim.serve import ReadyInfo

    assert isinstance(info, ReadyInfo)
    host = info.api_url.split("//", 1)[1]
    name, port = host.rsplit(":", 1)
    user, token = info.token_id.split("!", 1)
    api = ProxmoxAPI(name, port=int(port), user=user, token_name=token,
                     token_value=info.token_secret, verify_ssl=info.ca_cert)
    status = api.nodes(info.node).status.get()
    cpu = status.get("cpuinfo", {})
    print(f"== Node {info.node}: {cpu.get('model', '?')}, kernel {status.get('kversion', '?')}")
    for vm in sorted(api.nodes(info.node).qemu.get(), key=lambda v: int(v["vmid"])):
        cfg = api.nodes(info.node).qemu(vm["vmid"]).config.get()
        gpus = sorted(k for k in cfg if k.startswith("hostpci"))
        machine = cfg.get("machine", "(none: i440fx)")
        print(f"   VM {vm['vmid']} {vm.get('name', '')}: {vm['status']}, machine {machine},"
              f" {len(gpus)} hostpci entries" + (f": {cfg[gpus[0]]}, ..." if gpus else ""))
    mappings = api.cluster.mapping.pci.get()
    for m in mappings:
        print(f"   PCI mapping {m['id']}: {len(m.get('map', []))} devices")
    sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())
