#!/bin/sh
# Capture raw GPU outputs for parser fixtures, and run the probe, on a GPU machine.
# Usage: tests/probe/capture.sh OUTDIR   (writes OUTDIR/capture.tar.gz and probe outputs)
set -u
OUTDIR=${1:?usage: capture.sh OUTDIR}
D=$(mktemp -d)/cap
mkdir -p "$D"
Q=index,name,pci.bus_id,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,pcie.link.width.max
nvidia-smi >"$D/nvidia_smi.txt" 2>&1
nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits >"$D/query_gpu.csv" 2>&1
nvidia-smi --query-gpu=$Q --format=csv >"$D/query_gpu_header.csv" 2>&1
nvidia-smi -q >"$D/nvidia_smi_q.txt" 2>&1
nvidia-smi topo -m >"$D/topo_m.txt" 2>&1
nvidia-smi topo -h >"$D/topo_help.txt" 2>&1
for m in r w n a p; do nvidia-smi topo -p2p $m >"$D/topo_p2p_$m.txt" 2>&1; done
cat /proc/cmdline >"$D/proc_cmdline.txt"
dmesg >"$D/dmesg.txt" 2>&1 || echo "dmesg failed: $?" >>"$D/dmesg.txt"
journalctl -k -b --no-pager -q >"$D/journalctl_k.txt" 2>&1 || true
uname -a >"$D/uname.txt"
for dev in /sys/bus/pci/devices/*; do
  [ "$(cat "$dev/vendor")" = 0x10de ] || continue
  t="$D/sys/bus/pci/devices/$(basename "$dev")"
  mkdir -p "$t"
  for f in vendor device class resource numa_node current_link_speed current_link_width \
           max_link_speed max_link_width; do
    [ -r "$dev/$f" ] && cat "$dev/$f" >"$t/$f" 2>/dev/null
  done
  for l in driver iommu_group; do
    [ -L "$dev/$l" ] && ln -s "$(readlink "$dev/$l")" "$t/$l"
  done
done
tar -C "$(dirname "$D")" -czf "$OUTDIR/capture.tar.gz" cap
