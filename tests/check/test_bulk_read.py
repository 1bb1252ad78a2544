"""The bulk read (every config in one SSH command from pmxcfs) and the per-VM API read give the
same observed state for every VM of the generated `large` cluster (1,000 VMs on 8 nodes):
values now and after [PENDING] (pending deletes included), locks, run states, running machines
and Proxmox's digest (SHA-1 of the raw file against the API's). /_sim/stats counts what each
path cost."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pvefix.observed import ObservedVm
from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.sim.stats import fetch_stats
from pvefix.sources.cluster import HOST_COMMANDS, read_live_cluster
from pvefix.sources.pmxcfs import BULK_COMMAND, parse_bulk
from pvefix.target.settings import resolve_connection
from pvefix.target.ssh import CommandResult
from tests.simkit import api, run, ssh

Sim = Callable[..., ReadyInfo]


def stats(info: ReadyInfo, reset: bool = False) -> dict[str, Any]:
    return fetch_stats(info.api_url, info.ca_cert, info.user, info.password, reset=reset)


def test_bulk_and_per_vm_reads_agree_on_every_vm_of_large(fresh_sim: Sim,
                                                          tmp_path: Path) -> None:
    info = fresh_sim("large", inject=["lock=105:backup", "lock=640:migrate"])
    prox = api(info, "ticket")
    where = {int(r["vmid"]): r["node"] for r in prox.cluster.resources.get(type="vm")}
    # A pending delete, a snapshot section and a running VM, written as Proxmox would.
    def plain(vmid: int) -> bool:
        rows = prox.nodes(where[vmid]).qemu(vmid).pending.get()
        return not any("pending" in r or r.get("delete") for r in rows)

    edited = [v for v in sorted(where) if where[v] != "node1" and plain(v)][:3]
    client = ssh(info)
    for vmid in edited:
        conf = f"/etc/pve/nodes/{where[vmid]}/qemu-server/{vmid}.conf"
        lines = ["[PENDING]", "delete: cores", "memory: 3072", "[snap1]", "cpu: kvm64"]
        script = " && ".join(f"echo '{line}' >> {conf}" for line in lines)
        code, _, err = run(client, script)
        assert code == 0, err
    client.close()
    node_of_101 = where[101]
    prox.nodes(node_of_101).qemu(101).status.start.post()
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    conn = resolve_connection(connection_file=ready, env={})

    # 20 ms per request and command while the bulk read is counted: a wave is then a round
    # trip, not a scheduling gap of a loaded machine (at 0 ms a busy CI box splits one wave
    # into two); the rest of the test runs without it.
    assert prox("_sim/inject").post(latency="20")["latency_ms"] == 20  # every node's
    stats(info, reset=True)
    bulk = read_live_cluster(conn, None, workers=32, bulk=True)
    bulk_cost = stats(info, reset=True)
    prox("_sim/inject").post(latency="0")
    per_vm = read_live_cluster(conn, None, workers=32, bulk=False)
    per_vm_cost = stats(info)

    assert (bulk.path, bulk.api_vm_reads) == ("bulk", 0)
    assert (per_vm.path, per_vm.api_vm_reads) == ("per-vm", len(where))
    assert sorted(bulk.vms) == sorted(per_vm.vms) == sorted(where)
    for vmid, seen in bulk.vms.items():
        assert isinstance(seen, ObservedVm), seen
        assert seen == per_vm.vms[vmid], vmid
        assert seen.digest is not None and len(seen.digest) == 40
    assert bulk.vms[105].current["lock"] == "backup"
    assert bulk.vms[640].current["lock"] == "migrate"
    for vmid in edited:
        seen = bulk.vms[vmid]
        assert isinstance(seen, ObservedVm)
        assert "cores" in seen.current and "cores" not in seen.next  # the pending delete
        assert seen.next["memory"] == "3072" != seen.current["memory"]
        assert seen.current.get("cpu") != "kvm64"  # a snapshot's values are not the config's
    assert sum(isinstance(v, ObservedVm) and v.has_pending for v in bulk.vms.values()) == 3
    started = bulk.vms[101]
    assert isinstance(started, ObservedVm) and started.status == "running"
    assert started.running_machine
    assert bulk.nodes == per_vm.nodes and bulk.ssh_node == "node1"

    # The bulk path's cost does not grow with the VM count; the per-VM path's does.

    assert not any("pending" in k for k in bulk_cost["requests"])
    assert bulk_cost["requests"]["GET /cluster/resources"] == 1
    assert bulk_cost["requests"].get("GET /nodes/{node}/qemu", 0) <= len(set(where.values()))
    assert bulk_cost["ssh_connections"] == 1
    # The host facts' commands share one channel (pvefix.target.framed); the configs one more.
    assert len(HOST_COMMANDS) > 1 and bulk_cost["ssh_channels"] == {"exec": 2}
    assert bulk_cost["waves"] <= 6
    assert per_vm_cost["requests"]["GET /nodes/{node}/qemu/{vmid}/pending"] == len(where)


def test_digest_of_the_raw_file_is_the_apis(fresh_sim: Sim) -> None:
    info = fresh_sim("kpro6")
    client = ssh(info)
    _, out, _ = client.exec_command(" ".join(BULK_COMMAND[:2]) + f" '{BULK_COMMAND[2]}'")
    data = out.read()
    code = out.channel.recv_exit_status()
    client.close()
    raw = parse_bulk(CommandResult(BULK_COMMAND, code, data.decode("utf-8", "surrogateescape"),
                                   ""))
    prox = api(info, "token")
    assert raw, "a single-node tree shows its configs under /etc/pve/nodes/<node>"
    from pvefix.digest import sha1_text

    for vmid, conf in raw.items():
        assert conf.node == info.node
        assert sha1_text(conf.text) == prox.nodes(info.node).qemu(vmid).config.get()["digest"]


def test_an_empty_glob_is_no_vm() -> None:
    result = CommandResult(BULK_COMMAND, 2, "", "tar: /etc/pve/nodes/*/qemu-server/*.conf: "
                           "Cannot stat: No such file or directory\n"
                           "tar: Exiting with failure status due to previous errors\n")
    assert parse_bulk(result) == {}
