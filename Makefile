# zdinit: the two entry points are 'make bench' and 'make test'; both set
# up what they need first (Debian packages, kernel source in the cache).
# Debian's own python3: its apt packages (pytest, matplotlib) are the deps.
PYTHON ?= /usr/bin/python3
ZDINIT := $(PYTHON) -m zdinit

.PHONY: setup bench bench-clear test test-full test-unit lab selftest safety check-series clean

setup:
	$(ZDINIT) setup

# The main job: base vs patched 6.12 on emulated NVDIMMs (100 GB, N=30).
bench: setup
	$(ZDINIT) bench

# Unit tests, the lab's byte-equality and sanitizer tests, then the
# end-to-end tests: every patch of the ZONE_DEVICE series applied,
# checkpatch'd and built, every scenario booted small on both kernels, the
# memmap equality test with KUnit; for the clear series every patch
# applied and checkpatch'd, the series built, the zero read-back (also
# against a deliberately broken kernel) and the kernel's hugetlb/THP
# selftests under preempt=none against stock 6.12's recorded outcomes
# (zdinit/stock-selftests.json).
test: setup
	$(PYTHON) -m pytest -v -m "not full" tests

# Everything in 'test' plus each prefix of the clear series built, the
# clear bench smoke test, the selftests on stock and the series under
# preempt=none and full (checking the record), the tracepoint-guard and
# KASAN/lockdep/kmemleak kernels (two more kernel builds), the zero
# read-back on the clear series' KASAN/lockdep kernel (one more build)
# and, for 2M THP under preempt=none, on its KMSAN kernel (a clang build;
# three times the guest memory).
test-full: test
	$(PYTHON) -m pytest -v -m full tests
	$(ZDINIT) safety --full
	$(ZDINIT) clear-check --size 1G --kernel clear-debug
	$(ZDINIT) clear-check --pages 2M --size 64M --preempt none --kernel clear-kmsan

test-unit: setup
	$(PYTHON) -m pytest -v -m "not e2e" tests

# Huge-page clearing (issue 9): stock 6.12 vs the linux-6.12-clear series.
bench-clear: setup
	$(ZDINIT) clear

# LAB_ARGS=--reserve-hugetlb lets the clearing sweep grow the hugetlb pools.
lab: setup
	$(ZDINIT) lab $(LAB_ARGS)

selftest: setup
	$(ZDINIT) selftest

safety: setup
	$(ZDINIT) safety

check-series: setup
	$(ZDINIT) check-series

clean:
	$(MAKE) -C lab clean
