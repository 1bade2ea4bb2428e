# zdinit: the two entry points are 'make bench' and 'make test'; each is
# one zdinit run that installs what it needs first (Debian packages, the
# kernel source in the cache) and holds the cache lock until it ends.
# Debian's own python3: its apt packages (pytest, matplotlib) are the deps.
PYTHON ?= /usr/bin/python3
ZDINIT := $(PYTHON) -m zdinit
# BASE=6.12 runs a target on the backport instead of the default base (7.3).
BASE_OPTION := $(if $(BASE),--base $(BASE))
# The targets that run every base's checks, or none, refuse a BASE they
# would otherwise ignore.
NO_BASE = $(if $(BASE),$(error make $@ takes no BASE: it covers every base or none; BASE is for setup, bench, bench-clear, memmap-equality, safety and check-series))

.PHONY: setup bench bench-clear test test-full test-unit lint lab memmap-equality selftest safety check-series docs clean

setup:
	$(ZDINIT) setup $(BASE_OPTION)

# The main job: stock 7.3, upstream's 7.4 method (the kernel 'upstream')
# and the series on emulated NVDIMMs (100 GB; N=30 rebinds per kernel and
# strategy; devprivate 64 GB and N=10), the series' own choice (auto)
# beside that method run by its own code: a struct page template copied
# with streaming stores on one thread (stream@1), from "mm: optimize
# zone-device memmap initialization" by Li Zhe.
bench:
	$(ZDINIT) bench $(BASE_OPTION)

# Lint, the unit tests, the lab's byte-equality and sanitizer tests, then the
# end-to-end tests.  The default base (7.3): every patch of its
# ZONE_DEVICE and clear series applied and checkpatch'd, the ZONE_DEVICE
# series built whole (its prefixes, arm64 and the clear series in
# test-full), every scenario booted small on the series, the memmap
# equality test with KUnit, the safety checks against stock's recorded
# outcomes (stock is built and booted in test-full).  The 6.12 backport:
# both series applied and checkpatch'd.
test:
	$(NO_BASE)$(ZDINIT) test

# Everything in 'test' plus stock 7.3 in every bench scenario and every
# safety check (its outcomes checked against the record), each prefix of
# 7.3's ZONE_DEVICE series built, the whole series for arm64 booting its KUnit suite, each prefix
# of 7.3's clear series built, its zero read-back and the check failing
# on a deliberately broken clear, and, on
# 6.12, the KUnit suite in a small x86-64 kernel, each prefix of both
# series built (the ZONE_DEVICE series for arm64 and i386 too), the memmap equality
# test, the clear checks (zero read-back, broken kernel, selftests against
# stock's record under preempt=none and full), the contiguity check on
# hotplug-stock; on 7.3 the selftests against stock 7.3's record, the
# series compiled for i386, the kernel upstream in every bench
# scenario, the onlining kernels broken on purpose (three builds) and one
# clear run of stock 6.12, stock 7.3 and the series on 7.3 with perf
# bench mem mmap, and a small clear bench on 6.12; the
# tracepoint-guard and KASAN/lockdep/kmemleak kernels, the zero read-back
# on the clear series' KASAN/lockdep kernel and, for 2M THP, on its KMSAN
# kernel (a clang build; three times the guest memory).
test-full:
	$(NO_BASE)$(ZDINIT) test --full

# Unit and lab tests alone: pytest and a C compiler, no kernel, no cache.
test-unit:
	$(NO_BASE)$(ZDINIT) test --unit

# pyflakes over every Python file and mypy (mypy.ini) over the harness;
# every test selection runs it first.
lint:
	$(NO_BASE)$(ZDINIT) lint

# Huge-page clearing: stock vs the clear series of the base (7.3 by default).
# Its 8 GiB of 2M and 1G pages need a 12.5 GiB guest: about 13.5 GiB of
# MemAvailable with the 1 GiB the harness keeps spare (README, Requirements).
bench-clear:
	$(ZDINIT) clear $(BASE_OPTION)

# Native C alone: a C compiler (and matplotlib for the plots); no kernel
# source, no cache lock.  LAB_ARGS=--reserve-hugetlb lets the clearing
# sweep grow the hugetlb pools.
lab:
	$(NO_BASE)$(ZDINIT) lab $(LAB_ARGS)

# Every strategy's memmap against the slow path's, byte for byte, in
# QEMU; 'selftest' is its first name.
memmap-equality:
	$(ZDINIT) memmap-equality $(BASE_OPTION)

selftest: memmap-equality

safety:
	$(ZDINIT) safety $(BASE_OPTION)

check-series:
	$(ZDINIT) check-series $(BASE_OPTION)

# The results tables of README.md and docs/, rendered from docs/results/.
docs:
	$(NO_BASE)$(ZDINIT) docs

clean:
	$(NO_BASE)$(MAKE) -C lab clean
