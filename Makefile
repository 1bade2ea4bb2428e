# zdinit: the two entry points are 'make bench' and 'make test'; each is
# one zdinit run that installs what it needs first (Debian packages, the
# kernel source in the cache) and holds the cache lock until it ends.
# Debian's own python3: its apt packages (pytest, matplotlib) are the deps.
PYTHON ?= /usr/bin/python3
ZDINIT := $(PYTHON) -m zdinit
# BASE=6.12 runs a target on the backport instead of the default base (7.3).
BASE_OPTION := $(if $(BASE),--base $(BASE))

.PHONY: setup bench bench-clear test test-full test-unit lab selftest safety check-series clean

setup:
	$(ZDINIT) setup $(BASE_OPTION)

# The main job: stock vs patched 7.3 on emulated NVDIMMs (100 GB, N=30),
# the patched kernel's own choice beside the seeds' method (stream@1).
bench:
	$(ZDINIT) bench $(BASE_OPTION)

# Unit tests, the lab's byte-equality and sanitizer tests, then the
# end-to-end tests: every patch of the ZONE_DEVICE series applied,
# checkpatch'd and built, every scenario booted small on both kernels, the
# memmap equality test with KUnit; for the clear series every patch
# applied and checkpatch'd, the series built, the zero read-back (also
# against a deliberately broken kernel) and the kernel's hugetlb/THP
# selftests under preempt=none against stock 6.12's recorded outcomes
# (zdinit/stock-selftests.json); on 7.3 the clear series applied and
# checkpatch'd, its zero read-back under preempt=lazy and full, and the
# check failing on 7.3's broken kernel.
test:
	$(ZDINIT) test

# Everything in 'test' plus each prefix of the clear series built, the
# clear bench smoke test, the selftests on stock and the series under
# preempt=none and full (checking the record), the tracepoint-guard and
# KASAN/lockdep/kmemleak kernels (two more kernel builds), the zero
# read-back on the clear series' KASAN/lockdep kernel (one more build)
# and, for 2M THP under preempt=none, on its KMSAN kernel (a clang build;
# three times the guest memory); on 7.3 each clear prefix built, the
# selftests against stock 7.3's record, and one clear run of stock 6.12,
# stock 7.3 and the series on 7.3 with perf bench mem mmap.
test-full:
	$(ZDINIT) test --full

# Unit and lab tests alone: pytest and a C compiler, no kernel, no cache.
test-unit:
	$(ZDINIT) test --unit

# Huge-page clearing: stock 6.12 vs the linux-6.12-clear series.
bench-clear:
	$(ZDINIT) clear $(BASE_OPTION)

# Native C alone: a C compiler (and matplotlib for the plots); no kernel
# source, no cache lock.  LAB_ARGS=--reserve-hugetlb lets the clearing
# sweep grow the hugetlb pools.
lab:
	$(ZDINIT) lab $(LAB_ARGS)

selftest:
	$(ZDINIT) selftest $(BASE_OPTION)

safety:
	$(ZDINIT) safety $(BASE_OPTION)

check-series:
	$(ZDINIT) check-series $(BASE_OPTION)

clean:
	$(MAKE) -C lab clean
