"""Compare observed VMs and nodes with a desired state. Pure: no I/O, same input, same report.

Equivalent forms are not drift: a machine pinned only by family matches every version of it
(`q35` ~ `pc-q35-9.2+pve0`), and property strings compare as sets of their parts
(`pcie=1,x-vga=1` ~ `x-vga=1,pcie=1`). Each VM property is judged on the config now and on
the config after [PENDING]; each host parameter on the configured and on the booted cmdline.
A difference on one side only is labelled with when it takes effect, and still is drift.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from functools import lru_cache
from typing import NamedTuple

from pvefix.check.report import AT_COLD_START, AT_HOST_REBOOT, PRESENT, CheckItem, CheckReport
from pvefix.closedworld import Claim
from pvefix.closedworld.config_keys import family
from pvefix.closedworld.gaps import config_gaps
from pvefix.closedworld.kernel_params import classify as classify_token
from pvefix.closedworld.registry import lookup
from pvefix.cmdline import Cmdline
from pvefix.desired.model import (
    CmdlineRules,
    DesiredState,
    HostPciRule,
    MachineRule,
    NodeDesired,
    VmDesired,
    parameter,
)
from pvefix.errors import PvefixError
from pvefix.observed import NOT_CONFIG, ObservedNode, ObservedVm
from pvefix.vmconfig import HostPci, Machine, PropertyString
from pvefix.vmconfig.args import clique_map
from pvefix.vmconfig.hostpci import HOSTPCI_KEY, normalize_address

# Keys that come and go by themselves (a backup sets `lock`): never "unexpected".
TRANSIENT = frozenset({"lock"})


class Judge(NamedTuple):
    """How one property is judged on a config: `judge` says whether it holds, the text for the
    report, and the raw value read (None: absent) for the item's structured `got`. It reads
    the config's value of `reads` only (None: only which keys the config has), and `spec` is
    everything else it depends on, so equal (spec, value read) pairs are judged alike: a
    fleet's are judged once (`Memo`)."""

    reads: str | None
    spec: Hashable
    judge: Callable[[Mapping[str, str]], tuple[bool, str, str | None]]


# What an item of a VM says but its VM (status, actual, when, got, where): one per distinct
# judgement of a report, whatever the number of VMs it holds for.
Verdict = tuple[str, str, str | None, str | None, str]
Memo = dict[Hashable, Verdict]

NO_DESIRED = "desired state"
NO_DESIRED_DETAIL = ("no desired state for this VM: write one (pvefix desired VMID -o FILE, or "
                     "--record), or check only the VMs that have one (--only-desired)")


def _parts(value: str, default_key: str | None) -> list[tuple[str, str]]:
    ps = PropertyString.parse(value.strip(), default_key=default_key)
    return sorted((k, v.strip()) for k, v in ps.items())


def same_value(a: str, b: str, default_key: str | None = None) -> bool:
    """Equal, or equal as property strings whatever the order of their parts."""
    if a == b:
        return True
    if "=" not in a and "=" not in b:
        return False
    return _parts(a, default_key) == _parts(b, default_key)


@lru_cache(maxsize=4096)
def _machine(value: str | None) -> Machine:
    """Machine.parse, once per distinct value (a cluster has few; a check reads thousands)."""
    return Machine.parse(value)


@lru_cache(maxsize=4096)
def _hostpci(raw: str, name: str) -> HostPci:
    return HostPci.parse(raw, name)


def _read(judge: Judge, config: Mapping[str, str]) -> Hashable:
    """What `judge` reads of `config`: its one value, or its key set."""
    return config.get(judge.reads) if judge.reads is not None else frozenset(config)


def _vm_item(vm: ObservedVm, prop: str, expected: str, judge: Judge, *, key: str,
             want: str | None, memo: Memo, detail: str = "") -> CheckItem:
    pending = _pending(vm)
    seen = (prop, expected, key, want, detail, judge.reads, judge.spec, _read(judge, vm.current),
            _read(judge, vm.next) if pending else None, pending)
    verdict = memo.get(seen)
    if verdict is None:
        verdict = memo[seen] = _verdict(vm, judge.judge, pending)
    status, actual, when, got, where = verdict
    # From a dict: pydantic-core validates it in about half the time of keyword arguments.
    return CheckItem.model_validate({
        "target": "vm", "vmid": vm.vmid, "node": vm.node, "property": prop, "status": status,
        "expected": expected, "actual": actual, "when": when, "detail": detail, "key": key,
        "want": want, "got": got, "where": where})


def _verdict(vm: ObservedVm, judge: Callable[[Mapping[str, str]], tuple[bool, str, str | None]],
             pending: bool) -> Verdict:
    ok_now, now, got_now = judge(vm.current)
    # Without [PENDING] (most VMs) the config after it is the config now: judged once.
    ok_next, after, got_next = (ok_now, now, got_now) if not pending else judge(vm.next)
    # The structured `got`: where it fails first (the config, then [PENDING]).
    where, got = ("pending", got_next) if ok_now and not ok_next else ("config", got_now)
    actual = now if now == after else f"{now} (pending: {after})"
    when: str | None = None
    if ok_now and ok_next:
        status = "ok"
    else:
        status = "drift"
        if ok_next:
            when = f"only in [PENDING]: {AT_COLD_START}"
        elif ok_now:
            when = f"[PENDING] undoes it: {AT_COLD_START}"
    return status, actual, when, got, where


def _pending(vm: ObservedVm) -> bool:
    return vm.next is not vm.current and vm.next != vm.current


# -- machine ----------------------------------------------------------------------------------


def _machine_text(value: str | None) -> str:
    return value if value else "(absent: pc, i440fx)"


def _machine_judge(rule: MachineRule) -> Judge:
    def judge(config: Mapping[str, str]) -> tuple[bool, str, str | None]:
        value = config.get("machine")
        try:
            machine = _machine(value)
        except PvefixError:
            return False, f"{value} (invalid)", value
        if rule.exact is not None:
            ok = same_value(rule.exact.strip(), (value or "pc").strip(), "type")
        else:
            ok = machine.family == rule.family
        return ok, f"{_machine_text(value)} [{machine.family}]", value

    return Judge("machine", ("machine", rule.family, rule.exact), judge)


def _running_machine(vm: ObservedVm, rule: MachineRule, memo: Memo) -> CheckItem:
    wanted = rule.exact or rule.wanted_family
    seen = ("machine (running)", rule.family, rule.exact, vm.running_machine,
            vm.next.get("machine"))
    verdict = memo.get(seen)
    if verdict is None:
        verdict = memo[seen] = _running_verdict(vm, rule)
    status, actual, when, detail, _ = verdict
    return CheckItem.model_validate({
        "target": "vm", "vmid": vm.vmid, "node": vm.node, "property": "machine (running)",
        "status": status, "expected": wanted, "actual": actual, "when": when,
        "detail": detail or "", "key": "machine", "want": wanted, "got": vm.running_machine,
        "where": "running"})


def _running_verdict(vm: ObservedVm, rule: MachineRule) -> Verdict:
    """(status, actual, when, detail, "") of the running machine: what it reads of `vm` is its
    running machine and the machine of its next start."""
    if vm.running_machine is None:
        return "skipped", "", None, "the running machine was not reported", ""
    try:
        running = _machine(vm.running_machine)
    except PvefixError:
        return "drift", vm.running_machine, None, None, ""
    ok = running.family == rule.wanted_family
    if ok and rule.exact is not None:
        pinned = _machine(rule.exact)
        ok = pinned.version is None or pinned.version == running.version
    configured_ok = _machine_judge(rule).judge(vm.next)[0]
    return ("ok" if ok else "drift", f"{vm.running_machine} [{running.family}]",
            None if ok or not configured_ok else
            f"the running QEMU still uses the old machine: {AT_COLD_START}", None, "")


# -- hostpci ----------------------------------------------------------------------------------


def _hosts(text: str) -> set[str]:
    return {normalize_address(h) or h for h in text.split(";")}


def _hostpci_judge(name: str, option: str, want: str) -> Judge:
    def judge(config: Mapping[str, str]) -> tuple[bool, str, str | None]:
        raw = config.get(name)
        if raw is None:
            return False, f"{name} absent", None
        try:
            entry = _hostpci(raw, name)
        except PvefixError:
            return False, f"{raw} (invalid)", raw
        if option == "present":
            return True, raw, raw
        if option == "mapping":
            return (entry.mapping == want, f"mapping={entry.mapping}" if entry.mapping else raw,
                    entry.mapping)
        if option == "host":
            hosts = ";".join(entry.hosts) or None
            ok = bool(entry.hosts) and _hosts(";".join(entry.hosts)) == _hosts(want)
            return ok, f"host={hosts}" if hosts else raw, hosts
        if option == "mdev":  # a vGPU entry must stay one, of the same type
            return (entry.mdev == want, f"mdev={entry.mdev}" if entry.mdev else
                    f"{raw} (whole device, no mdev)", entry.mdev)
        flag = entry.pcie if option == "pcie" else entry.x_vga
        return flag == (want == "1"), f"{option}={int(flag)}", str(int(flag))

    return Judge(name, ("hostpci", option, want), judge)


def _hostpci_items(vm: ObservedVm, name: str, rule: HostPciRule, memo: Memo) -> list[CheckItem]:
    fields = rule.fields() or [("present", "")]
    items = []
    for option, want in fields:
        prop = name if option == "present" else f"{name}.{option}"
        expected = f"{name} present" if option == "present" else f"{option}={want}"
        items.append(_vm_item(vm, prop, expected, _hostpci_judge(name, option, want), key=prop,
                              want=PRESENT if option == "present" else want, memo=memo))
    return items


# -- keys -------------------------------------------------------------------------------------


def _key_judge(key: str, want: str | None) -> Judge:
    def judge(config: Mapping[str, str]) -> tuple[bool, str, str | None]:
        value = config.get(key)
        if want is None:
            return value is None, "(absent)" if value is None else value, value
        if value is None:
            return False, "(absent)", None
        return same_value(value, want), value, value

    return Judge(key, ("key", want), judge)


def _clique_judge(device: str, clique: int) -> Judge:
    def judge(config: Mapping[str, str]) -> tuple[bool, str, str | None]:
        try:
            have = clique_map(config.get("args")).get(device)
        except PvefixError as exc:
            return False, f"args unreadable: {exc.message}", config.get("args")
        text = "(none)" if have is None else str(have)
        return have == clique, text, None if have is None else text

    return Judge("args", ("clique", device, clique), judge)


def _unexpected_judge(rule: VmDesired) -> Judge:
    def judge(config: Mapping[str, str]) -> tuple[bool, str, str | None]:
        extra = sorted(rule.uncovered(
            k for k in config if k not in NOT_CONFIG and k not in TRANSIENT))
        return not extra, ", ".join(extra) if extra else "(none)", ",".join(extra) or None

    # What `uncovered` reads of the rule: every other field leaves the answer alone.
    spec = ("unexpected", tuple(rule.keys), tuple(rule.hostpci), rule.absent,
            rule.machine is not None, rule.free)
    return Judge(None, spec, judge)


# -- cmdlines ---------------------------------------------------------------------------------


def _found(line: Cmdline, name: str) -> str:
    raws = [t.raw for t in line.tokens if t.matches(name)]
    return " ".join(raws) if raws else "absent"


def _got(line: Cmdline | None, name: str) -> str | None:
    """The structured `got` of a cmdline item: the parameter's tokens, None when absent."""
    found = "absent" if line is None else _found(line, name)
    return None if found == "absent" else found


def _cmdline_want(kind: str, param: str, value: str | None) -> str | None:
    """The structured `want`: the token required; None when the name must be absent; `not
    NAME=VALUE` when only that value is forbidden."""
    if kind == "required":
        return param
    return None if value is None else f"not {param}"


def _cmdline_items(
    rules: CmdlineRules, configured: Cmdline | None, running: Cmdline | None,
    make: Callable[..., CheckItem], problem: str | None, *, host: bool,
) -> list[CheckItem]:
    items = []
    for kind, params in (("required", rules.required), ("forbidden", rules.forbidden)):
        for param in params:
            name, value = parameter(param)
            prop = f"{'cmdline' if host else 'guest cmdline'} {param} ({kind})"
            expected = param if kind == "required" else f"no {param}"
            key = f"{'cmdline' if host else 'guest-cmdline'}:{name}"
            want = _cmdline_want(kind, param, value)
            if configured is None and (host or running is None):
                items.append(make(property=prop, status="unknown", expected=expected,
                                  actual="unknown", detail=problem or "not read", key=key,
                                  want=want, where="configured" if host else "guest"))
                continue
            if not host:  # the guest: only what is booted can be read
                assert running is not None
                ok = running.has(name, value) == (kind == "required")
                items.append(make(property=prop, status="ok" if ok else "drift",
                                  expected=expected, actual=_found(running, name), key=key,
                                  want=want, got=_got(running, name), where="guest"))
                continue
            assert configured is not None
            ok_conf = configured.has(name, value) == (kind == "required")
            ok_run = None if running is None else running.has(name, value) == (kind == "required")
            actual = f"configured: {_found(configured, name)}"
            if running is not None:
                actual += f"; booted: {_found(running, name)}"
            when = None
            if ok_conf and ok_run is False:
                when = f"configured, not booted yet: {AT_HOST_REBOOT}"
            elif not ok_conf and ok_run:
                when = f"the booted kernel still complies; the configuration does not: " \
                       f"{AT_HOST_REBOOT}"
            ok = ok_conf and ok_run is not False
            where, line = ("booted", running) if ok_conf and ok_run is False else (
                "configured", configured)
            items.append(make(property=prop, status="ok" if ok else "drift",
                              expected=expected, actual=actual, when=when, key=key, want=want,
                              got=_got(line, name), where=where))
    return items


# -- whole VMs and nodes ------------------------------------------------------------------------


def compare_vm(rule: VmDesired, vm: ObservedVm, memo: Memo | None = None) -> list[CheckItem]:
    """Every property `rule` names, judged on `vm` (in the order the file lists them); `memo`
    keeps the judgements for the next VM (build_report passes one for the whole fleet)."""
    memo = {} if memo is None else memo
    items: list[CheckItem] = []
    if rule.machine is not None:
        expected = rule.machine.exact or f"family {rule.machine.family}"
        items.append(_vm_item(vm, "machine", expected, _machine_judge(rule.machine),
                              key="machine", want=rule.machine.exact or rule.machine.family,
                              memo=memo))
        if vm.status == "running":
            items.append(_running_machine(vm, rule.machine, memo))
    for name in sorted(rule.hostpci, key=lambda k: int(k[len("hostpci"):])):
        items.extend(_hostpci_items(vm, name, rule.hostpci[name], memo))
    for key in sorted(rule.keys):
        items.append(_vm_item(vm, key, rule.keys[key], _key_judge(key, rule.keys[key]),
                              key=key, want=rule.keys[key], memo=memo))
    for device, clique in sorted(clique_map(rule.keys.get("args")).items()):
        items.append(_vm_item(vm, f"P2P clique of {device}", str(clique),
                              _clique_judge(device, clique), key=f"args:{device}",
                              want=str(clique), memo=memo, detail="x-nv-gpudirect-clique in "
                              "args (docs/p2p.md): without it the guest driver reports P2P as "
                              "NS again"))
    for key in rule.absent:
        items.append(_vm_item(vm, f"{key} (absent)", "(absent)", _key_judge(key, None),
                              key=key, want=None, memo=memo))
    if rule.closed:
        items.append(_vm_item(vm, "unexpected keys", "(none)", _unexpected_judge(rule),
                              key="*", want=None, memo=memo,
                              detail="closed = true: keys not pinned, absent or free"))
    items = _not_established(items, vm)
    if rule.guest_cmdline is not None:
        guest = None if vm.guest_cmdline is None else Cmdline.parse(vm.guest_cmdline)

        def make(**fields: object) -> CheckItem:
            return CheckItem(target="vm", vmid=vm.vmid, node=vm.node, **fields)

        items.extend(_cmdline_items(
            rule.guest_cmdline, None, guest, make,
            "the guest cmdline was not read (no guest access in this source)", host=False,
        ))
    return items


def _claims_of(item: CheckItem) -> tuple[Claim, ...]:
    """What an item's "ok" says beyond the text it compared: the claim it stands for. None
    for what is read as it runs (the running machine) or is only text (unexpected or absent
    keys)."""
    key = item.key
    if item.where == "running" or key == "*" or item.want is None:
        return ()
    if key == "machine":
        return ("machine",)
    if key.startswith("args:"):
        return ("p2p",)
    if key.startswith("guest-cmdline:"):
        return ("guest-cmdline",)
    if HOSTPCI_KEY.match(key.partition(".")[0]):
        return ("pcie",) if key.endswith(".pcie") else ("start",)
    found = lookup("config-key", family(key))
    return found.claims if found is not None and found.status == "modelled" else ()


def _not_established(items: list[CheckItem], vm: ObservedVm) -> list[CheckItem]:
    """An "ok" that rests on an input of the VM's next start pvefix does not model (the
    closed world, pvefix.closedworld.gaps config_gaps) is not established: UNKNOWN (exit 1),
    naming the input. Drift stays drift: the text wanted is not there, whatever the rest."""
    if not any(i.status == "ok" for i in items):
        return items
    gaps = config_gaps(vm.next)
    if not gaps:
        return items
    out = []
    for item in items:
        claims = _claims_of(item) if item.status == "ok" else ()
        hit = next(((claim, g) for claim in claims for g in gaps if claim in g.item.claims),
                   None)
        if hit is None:
            out.append(item)
            continue
        claim, gap = hit
        out.append(item.model_copy(update={"status": "unknown", "detail": (
            f"not established: {claim} ({gap.item.kind} {gap.item.name}): the config says"
            f" what is wanted, but the next start holds {gap.where!r}, which pvefix does not"
            f" model for this claim. {gap.item.why}").strip()}))
    return out


def compare_node(rule: NodeDesired, node: ObservedNode) -> list[CheckItem]:
    """The node's cmdline rules, judged on its configured and booted cmdlines."""

    def make(**fields: object) -> CheckItem:
        return CheckItem(target="node", node=node.name, **fields)

    configured, running = node.configured_cmdline(), node.running_cmdline()
    items = _cmdline_items(rule.cmdline, configured, running, make, node.problem, host=True)
    return _host_not_established(items, [x for x in (configured, running) if x is not None])


def _host_not_established(items: list[CheckItem], lines: list[Cmdline]) -> list[CheckItem]:
    """A required parameter that holds, whose claim (host-iommu for `iommu=pt`) an unmodelled
    token of the configured or booted cmdline touches (`amd_iommu=force_enable`,
    `intel_iommu=sm_on`: pvefix.closedworld.kernel_params), is not established: UNKNOWN."""
    gaps = [(t.raw, i) for line in lines for t in line.tokens for i in classify_token(t)
            if i.status == "unmodelled"]
    if not gaps:
        return items
    out = []
    for item in items:
        required = item.status == "ok" and bool(item.want) and not (
            item.want or "").startswith("not ")  # a forbidden one is absent: read as it is
        claims = {c for t in Cmdline.parse(item.want or "").tokens for i in classify_token(t)
                  for c in i.claims} if required else set()
        hit = next(((c, raw, i) for c in sorted(claims) for raw, i in gaps if c in i.claims),
                   None)
        if hit is None:
            out.append(item)
            continue
        claim, raw, gap = hit
        out.append(item.model_copy(update={"status": "unknown", "detail": (
            f"not established: {claim} ({gap.kind} {gap.name}): the cmdline holds {raw!r},"
            f" which pvefix does not model for this claim. {gap.why}")}))
    return out


def build_report(
    desired: DesiredState,
    vms: Mapping[int, ObservedVm | str],
    nodes: Mapping[str, ObservedNode],
    *,
    notes: list[str] | None = None,
    source: str = "",
    read_path: str | None = None,
) -> CheckReport:
    """The report for these VMs (an ObservedVm, or why it could not be read) and nodes."""
    items: list[CheckItem] = []
    for name in sorted(nodes):
        rule = desired.nodes.get(name)
        if rule is not None:
            items.extend(compare_node(rule, nodes[name]))
    memo: Memo = {}  # a fleet's identical judgements, made once
    for vmid in sorted(vms):
        observed = vms[vmid]
        vm_rule = desired.vms.get(vmid)
        node = observed.node if isinstance(observed, ObservedVm) else (
            (vm_rule.node if vm_rule else None) or "?")
        if isinstance(observed, str):
            items.append(CheckItem(target="vm", vmid=vmid, node=node, property="read",
                                   status="unknown", detail=observed))
        elif vm_rule is None:
            # Not checked is not "no drift": an always-green CI job would hide it (exit 1).
            items.append(CheckItem(target="vm", vmid=vmid, node=node, property=NO_DESIRED,
                                   status="unknown", detail=NO_DESIRED_DETAIL))
        else:
            items.extend(compare_vm(vm_rule, observed, memo))
    return CheckReport(items=items, notes=list(notes or []), source=source, read_path=read_path)
