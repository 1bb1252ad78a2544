#!/bin/sh
# Sets up the judges of `make conformance` from ../shared: Proxmox VE's own code (pve-oracle),
# its own API daemons (pve-api) and real firmware (fw-lab). Each judge's install script installs
# Debian packages (root, apt) and is a no-op when ready. Where a judge cannot be set up (no
# ../shared, not root, no namespaces) this says so and goes on: its tests skip, saying why.
# Usage: tests/conformance/setup-judges.sh [SHARED]   (default ../shared)
SHARED=${1:-../shared}
say() { echo "conformance: $*"; }
judge() {  # judge NAME: run NAME's install-deps.sh when it is there
    if [ -x "$SHARED/$1/install-deps.sh" ]; then
        "$SHARED/$1/install-deps.sh" || say "$1 cannot be set up here; its tests will skip"
    else
        say "$SHARED/$1 is absent; its tests will skip"
    fi
}
judge pve-oracle
judge pve-api
# pve-api's node makes its CA certificate with `faketime yesterday openssl ...`
# (pve-cluster's gen_pve_node_files), a command its install script does not list.
if [ -d "$SHARED/pve-api" ] && ! command -v faketime >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq --no-install-recommends faketime >/dev/null 2>&1 ||
            { apt-get update -qq && apt-get install -y -qq --no-install-recommends faketime >/dev/null; } ||
            say "faketime could not be installed: pve-api nodes will not start"
    else
        say "faketime is missing (apt-get install faketime, as root): pve-api nodes will not start"
    fi
fi
judge fw-lab
exit 0
