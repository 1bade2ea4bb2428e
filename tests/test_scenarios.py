import pytest

from zdinit.families import scenarios
from zdinit.kernel import bases
from zdinit.errors import UsageError

G = 1 << 30


def test_defaults_match_the_seeds():
    specs = {s.scenario.name: s for s in scenarios.plan(list(scenarios.SCENARIOS))}
    assert specs["fsdax-dev"].size == 100 * G and specs["fsdax-dev"].n == 30
    assert specs["devdax-dev"].aligns == ("2M",)
    assert specs["devdax-mem"].aligns == ("2M", "1G")
    assert specs["devprivate"].size == 64 * G and specs["devprivate"].n == 10


@pytest.mark.parametrize("text,value", [("4G", 4 * G), ("512M", 512 << 20),
                                        ("1T", 1 << 40), ("2GiB", 2 * G)])
def test_parse_size(text, value):
    assert scenarios.parse_size(text) == value


@pytest.mark.parametrize("kwargs,message", [
    (dict(size="3X"), "bad size"),
    (dict(size="100M"), "multiple of 128M"),
    (dict(size="4.1G"), "multiple of 128M"),
    (dict(size="2T"), "between 256M and 1T"),
    (dict(n=0), "argument --n: must be"),
    (dict(n=1001), "argument --n: must be"),
])
def test_bad_options(kwargs, message):
    with pytest.raises(UsageError, match=message):
        scenarios.plan(["fsdax-dev"], **kwargs)


def test_unknown_scenario():
    with pytest.raises(UsageError, match="unknown scenario 'nope'"):
        scenarios.plan(["nope"])


def test_align_must_fit_size():
    with pytest.raises(UsageError, match="align 1G"):
        scenarios.plan(["devdax-mem"], size="1G", aligns=["1G"])
    with pytest.raises(UsageError, match="unknown align"):
        scenarios.plan(["devdax-dev"], size="4G", aligns=["3M"])


def test_guest_ram_grows_with_a_memmap_in_ram():
    small = scenarios.plan(["fsdax-dev"], size="100G")[0]
    big = scenarios.plan(["fsdax-mem"], size="100G")[0]
    assert small.guest_ram_mb() == 1024
    # 100G of order-0 pages: 1.56 GiB of struct pages, plus headroom.
    assert big.guest_ram_mb() >= 1024 + 1600


def test_vmemmap_reuse_in_expected_written():
    spec = scenarios.plan(["devdax-mem"], size="4G")[0]
    assert scenarios.expected_written(spec.scenario, 1048576, "2M") == 262144
    assert scenarios.expected_written(spec.scenario, 1048576, "1G") == 512
    dev = scenarios.plan(["devdax-dev"], size="4G")[0]
    assert scenarios.expected_written(dev.scenario, 1031680, "2M") == 1031680


def test_auto_keeps_the_template_with_vmemmap_tail_reuse():
    """A 4G devdax map=mem range with 2M pages writes 262144 struct pages
    (16 MiB) for 1048576 pfns: TCG's 16 MiB L3 would stream them, but
    tail reuse keeps the template, as the kernel's written < nr_pages
    does (zdinit/kernel/store_rule.py); the same count without reuse streams."""
    l3 = 16 << 20
    spec = scenarios.plan(["devdax-mem"], size="4G")[0]
    for align in ("2M", "1G"):
        written = scenarios.expected_written(spec.scenario, 1048576, align)
        assert scenarios.auto_strategy(written, l3, pages=1048576) == \
            "template"
    assert scenarios.auto_strategy(262144, l3, pages=262144) == "stream"
    assert scenarios.auto_strategy(262144, l3) == "stream"
    # 1 TiB of 2M pages with reuse: 4 GiB written, still the template.
    pages = (1 << 40) // 4096
    assert scenarios.auto_strategy(pages // 4, 0, pages=pages) == "template"


def test_only_a_base_with_the_on_demand_series_has_its_strategy():
    assert scenarios.ON_DEMAND in scenarios.base_strategies(bases.get("7.3"))
    assert scenarios.base_strategies(bases.get("6.12")) == tuple(
        s for s in scenarios.STRATEGIES if s != scenarios.ON_DEMAND)
    scenarios.check_base_strategies(["demand", "auto"], bases.get("7.3"))
    with pytest.raises(UsageError, match="strategy demand: base 6.12's "
                       "series builds every memmap before the bind returns"):
        scenarios.check_base_strategies(["auto", "demand"],
                                        bases.get("6.12"))
    assert "give it without @" in scenarios.check_strategy("demand@2")
