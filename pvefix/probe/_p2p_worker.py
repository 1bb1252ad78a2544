"""Measured P2P check, run as a child process: `python3 _p2p_worker.py [options]`.

Standalone on purpose: only the standard library and PyTorch, so any interpreter that has
PyTorch can run it, and a hung driver only hangs this child (the parent has a timeout).
Prints one JSON object on its last stdout line.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import statistics
import sys
import traceback
from collections.abc import Callable
from typing import Any

CUDA_SUCCESS = 0
CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704


def _pattern(torch: Any, n: int, seed: int, device: int) -> Any:
    # A byte pattern that differs per pair and per position, made on the given device, so a
    # peer can build the expected bytes itself instead of trusting a copy.
    idx = torch.arange(n, device=f"cuda:{device}", dtype=torch.int64)
    return (((idx * 2654435761 + seed * 40503) >> 11) & 0xFF).to(torch.uint8)


def _timed(torch: Any, device: int, fn: Callable[[], None], iters: int, warmup: int = 3) -> float:
    """Median microseconds of `fn`, with CUDA events on `device`'s current stream."""
    with torch.cuda.device(device):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize(device)
        times = []
        for _ in range(iters):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
    return float(statistics.median(times))


def _staged(torch: Any, src: Any, host: Any, dst: Any, iters: int) -> float:
    """Median microseconds of GPU i -> pinned host -> GPU j, each leg timed on its device."""
    i, j = src.device.index, dst.device.index
    legs = []
    for k in range(iters + 3):
        d2h = _timed(torch, i, lambda: host.copy_(src, non_blocking=True), 1, warmup=0)
        h2d = _timed(torch, j, lambda: dst.copy_(host, non_blocking=True), 1, warmup=0)
        if k >= 3:
            legs.append(d2h + h2d)
    return float(statistics.median(legs))


def _enable_peer(i: int, j: int) -> tuple[bool | None, str | None]:
    """Enable peer access i -> j through the driver API on the primary contexts PyTorch uses.

    Run after PyTorch's own copies, so 'already enabled' is the usual answer where P2P works.
    """
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return None, f"libcuda.so.1 not loadable: {exc}"
    dev_i, dev_j = ctypes.c_int(), ctypes.c_int()
    ctx_i, ctx_j, popped = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    if cuda.cuDeviceGet(ctypes.byref(dev_i), i) or cuda.cuDeviceGet(ctypes.byref(dev_j), j):
        return None, "cuDeviceGet failed"
    if cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx_i), dev_i):
        return None, "cuDevicePrimaryCtxRetain failed"
    if cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx_j), dev_j):
        cuda.cuDevicePrimaryCtxRelease_v2(dev_i)
        return None, "cuDevicePrimaryCtxRetain failed"
    try:
        cuda.cuCtxPushCurrent_v2(ctx_i)
        rc = cuda.cuCtxEnablePeerAccess(ctx_j, 0)
        cuda.cuCtxPopCurrent_v2(ctypes.byref(popped))
    finally:
        cuda.cuDevicePrimaryCtxRelease_v2(dev_i)
        cuda.cuDevicePrimaryCtxRelease_v2(dev_j)
    if rc in (CUDA_SUCCESS, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED):
        return True, None
    name = ctypes.c_char_p()
    cuda.cuGetErrorName(rc, ctypes.byref(name))
    return False, f"cuCtxEnablePeerAccess: {(name.value or b'').decode()} ({rc})"


def _device_info(torch: Any, index: int) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(index)
    address = None
    if hasattr(props, "pci_bus_id"):
        address = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    return {
        "index": index,
        "name": props.name,
        "pci_address": address,
        "total_memory_mib": int(props.total_memory) // (1 << 20),
        "capability": f"{props.major}.{props.minor}"}


def _host_path(torch: Any, d: int, lat: int, bw: int, iters: int) -> dict[str, Any]:
    small_h = torch.empty(lat, dtype=torch.uint8, pin_memory=True)
    small_d = torch.empty(lat, dtype=torch.uint8, device=f"cuda:{d}")
    big_h = torch.empty(bw, dtype=torch.uint8, pin_memory=True)
    big_d = torch.empty(bw, dtype=torch.uint8, device=f"cuda:{d}")
    big_d2 = torch.empty_like(big_d)
    bw_iters = max(3, iters // 4)
    h2d_bw = _timed(torch, d, lambda: big_d.copy_(big_h, non_blocking=True), bw_iters)
    d2h_bw = _timed(torch, d, lambda: big_h.copy_(big_d, non_blocking=True), bw_iters)
    d2d_bw = _timed(torch, d, lambda: big_d2.copy_(big_d), bw_iters)
    return {
        "device": d,
        "h2d_latency_us": _timed(torch, d, lambda: small_d.copy_(small_h, True), iters),
        "d2h_latency_us": _timed(torch, d, lambda: small_h.copy_(small_d, True), iters),
        "h2d_bandwidth_gbps": bw / (h2d_bw * 1e3),
        "d2h_bandwidth_gbps": bw / (d2h_bw * 1e3),
        "d2d_bandwidth_gbps": bw / (d2d_bw * 1e3)}


def _pair(torch: Any, i: int, j: int, lat: int, bw: int, check: int, iters: int) -> dict[str, Any]:
    out: dict[str, Any] = {"src": i, "dst": j}
    out["can_access_peer"] = bool(torch.cuda.can_device_access_peer(i, j))
    try:
        seed = i * 131 + j
        src = _pattern(torch, check, seed, i)
        dst = torch.bitwise_not(_pattern(torch, check, seed, j))  # surely not the pattern yet
        dst.copy_(src)
        torch.cuda.synchronize(i)
        torch.cuda.synchronize(j)
        expected = _pattern(torch, check, seed, j)  # built on the peer, not copied there
        mismatched = int((dst != expected).sum().item())  # compared on the peer
        out.update(
            data_delivered=mismatched == 0, mismatched_bytes=mismatched, bytes_checked=check
        )
        del src, dst, expected
        s_small = torch.empty(lat, dtype=torch.uint8, device=f"cuda:{i}")
        d_small = torch.empty(lat, dtype=torch.uint8, device=f"cuda:{j}")
        s_big = torch.empty(bw, dtype=torch.uint8, device=f"cuda:{i}")
        d_big = torch.empty(bw, dtype=torch.uint8, device=f"cuda:{j}")
        h_small = torch.empty(lat, dtype=torch.uint8, pin_memory=True)
        h_big = torch.empty(bw, dtype=torch.uint8, pin_memory=True)
        bw_iters = max(3, iters // 4)
        out["latency_us"] = _timed(torch, i, lambda: d_small.copy_(s_small), iters)
        out["bandwidth_gbps"] = bw / (_timed(torch, i, lambda: d_big.copy_(s_big), bw_iters) * 1e3)
        out["host_staged_latency_us"] = _staged(torch, s_small, h_small, d_small, iters)
        staged_us = _staged(torch, s_big, h_big, d_big, bw_iters)
        out["host_staged_bandwidth_gbps"] = bw / (staged_us * 1e3)
    except Exception as exc:  # one broken pair must not hide the others
        out["error"] = f"{type(exc).__name__}: {exc}"[:500]
    enabled, error = _enable_peer(i, j)
    out["peer_enabled"] = enabled
    out["peer_error"] = error
    return out


def measure(lat: int, bw: int, check: int, iters: int) -> dict[str, Any]:
    """Everything the P2P section holds, as plain JSON-able values."""
    result: dict[str, Any] = {"python": sys.executable}
    try:
        torch = importlib.import_module("torch")
    except Exception as exc:
        return {**result, "status": "not_measured", "reason": f"PyTorch not importable: {exc}"}
    result.update(torch_version=torch.__version__, cuda_version=torch.version.cuda)
    if torch.version.cuda is None:
        return {**result, "status": "not_measured", "reason": "PyTorch built without CUDA"}
    try:
        torch.cuda.init()
    except Exception as exc:
        return {**result, "status": "not_measured", "reason": f"CUDA not usable: {exc}"[:500]}
    n = torch.cuda.device_count()
    if n == 0:
        return {**result, "status": "not_measured", "reason": "CUDA sees no GPU"}
    result["devices"] = [_device_info(torch, d) for d in range(n)]
    result.update(latency_bytes=lat, bandwidth_bytes=bw, iterations=iters)
    result["host_paths"] = [_host_path(torch, d, lat, bw, iters) for d in range(n)]
    torch.cuda.empty_cache()
    result["pairs"] = [
        _pair(torch, i, j, lat, bw, check, iters) for i in range(n) for j in range(n) if i != j
    ]
    if n < 2:
        result["note"] = "one GPU: no pair to measure; host paths only"
    result["status"] = "measured"
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency-bytes", type=int, default=4)
    parser.add_argument("--bandwidth-bytes", type=int, default=256 << 20)
    parser.add_argument("--check-bytes", type=int, default=64 << 20)
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()
    try:
        result = measure(args.latency_bytes, args.bandwidth_bytes, args.check_bytes, args.iters)
    except Exception as exc:
        tb = traceback.format_exc(limit=3).strip().splitlines()[-1]
        result = {"status": "not_measured", "reason": f"{type(exc).__name__}: {exc} ({tb})"[:800]}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
