"""Where `pvefix sim` still answers differently from Proxmox VE's own API daemons, and why.

`"LABEL: PATH"` (a compare.py or test_sim_vs_api.py request label, then the field, `[*]` for
every list item) -> the reason. Allowed reasons only: volatile values compare.py does not mask
(a reason starting "volatile:" may or may not show in a run), the harness's own stand-ins
(pve-manager 9.2.11, IP 192.0.2.10, its missing machine-versions JSON, its CPU and kernel),
Perl hash order. docs/simulator.md lists the same entries (tests/conformance/test_sim_vs_api.py
checks both).
"""

from __future__ import annotations

V92 = ("stand-in: the harness serves pve-manager 9.2.11 (its code's version); the simulator "
       "says the tree's `versions.pve`")
KERNEL = "stand-in: the harness node runs the test machine's kernel (no uname stand-in)"
ROOTFS = "stand-in: the harness node's root file system is the test machine's"
MEMORY = ("stand-in: the harness's /proc/meminfo and the machine's accounting; the simulator "
          "counts a fixed eighth as used")
MACHINES = ("stand-in: the harness lacks /usr/share/kvm/machine-versions-x86_64.json, so "
            "Proxmox's handler fails (500); the simulator does not serve the endpoint (501)")
REBOOT = ("volatile: after a qmreboot task ends, the real node's new QEMU comes from qmeventd's "
          "cleanup and a later qmstart task, so the VM may still be stopped right then (the "
          "simulator restarts it at once)")

ALLOWED: dict[str, str] = {
    **{f"{label}: data.{field}": V92
       for label in ("version", "token header, space form", "ticket in Authorization header")
       for field in ("release", "repoid", "version")},
    "nodes: data[*].maxdisk": ROOTFS,
    "cluster status: data[*].ip":
        "stand-in: the harness node's address is 192.0.2.10 (the simulator's 127.0.0.1)",
    "node status: data.cpuinfo.mhz":
        "stand-in: the harness's /proc/cpuinfo says 3000 MHz (a host tree has no clock)",
    "node status: data.current-kernel.release": KERNEL,
    "node status: data.current-kernel.version": KERNEL,
    "node status: data.kversion": KERNEL,
    "node status: data.loadavg[*]": "volatile: the test machine's load average",
    **{f"node status: data.memory.{field}": MEMORY for field in ("available", "free", "used")},
    "node status: data.pveversion": V92,
    **{f"node status: data.rootfs.{field}": ROOTFS
       for field in ("avail", "free", "total", "used")},
    **{f"capabilities machines: {field}": MACHINES for field in ("message", "reason", "status")},
    **{f"status/current 100 after reboot: data.{field}": REBOOT
       for field in ("diskread", "diskwrite", "pid", "pressurecpufull", "pressurecpusome",
                     "pressureiofull", "pressureiosome", "pressurememoryfull",
                     "pressurememorysome", "proxmox-support", "qmpstatus", "running-machine",
                     "running-qemu", "status")},
    **{f"task list: data[*].{field}": REBOOT for field in ("id", "tokenid", "type")},
}
