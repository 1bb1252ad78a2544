# pvefix: the two front-door commands are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test conformance bench clean venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m pvefix.demo

# Tests run in parallel (pytest-xdist): each worker starts its own simulators on ephemeral
# ports. One worker more than there are CPUs, because a quarter of the suite's time is waiting
# (simulated tasks, reboots, timeouts) that another worker's tests can fill; idle workers steal
# queued tests (--dist worksteal), so a long test at the end does not leave a CPU idle.
# Measured on the 2-core machine (docs/benchmarks.md): one process 316 s, -n 2 227 s, -n 3 with
# worksteal 162 s. PYTEST_WORKERS=0 runs them in one process; `-m "not slow"` leaves out the
# crash drills.
PYTEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print((os.cpu_count() or 1) + 1)')
test: $(STAMP)
	$(BIN)/ruff check pvefix tests bench
	$(BIN)/mypy
	$(BIN)/pytest -m "not conformance" -n $(PYTEST_WORKERS) --dist worksteal

# The judges (../shared): Proxmox VE's own code (pve-oracle), its own API daemons (pve-api) and
# real firmware (fw-lab). tests/conformance/setup-judges.sh installs what each needs (root, apt;
# a no-op when ready); the conformance tests then run, and those of a judge that cannot run here
# (no ../shared, not root, no namespaces) skip, saying why. Two processes: Proxmox's daemons'
# tests keep to one, the real-QEMU tests (fw-lab, rehearsals, the kernel judge) to one, and the
# oracle's are shared out (tests/conftest.py JUDGE_GROUPS): much of a judge's time is waiting.
SHARED ?= ../shared
conformance: $(STAMP)
	@sh tests/conformance/setup-judges.sh $(SHARED)
	$(BIN)/pytest -m conformance -n 2 --dist loadgroup

bench: $(STAMP)
	$(BIN)/python bench/startup_and_parse.py
	$(BIN)/python bench/sim_throughput.py
	$(BIN)/python bench/plan_roundtrips.py --latency-ms 20
	$(BIN)/python bench/check_all.py --per-vm $(if $(wildcard bench/out/ansible-venv/bin/ansible-playbook),--ansible)
	$(BIN)/python bench/check_all.py --vms 10000 --repeat 3
	$(BIN)/python bench/grub_parse.py
	$(BIN)/python bench/rehearse_cluster.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
