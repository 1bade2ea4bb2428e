import pytest

from zdinit import scenarios
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
    (dict(n=0), "--n must be"),
    (dict(n=1001), "--n must be"),
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
    assert scenarios.expected_written(spec, 1048576, "2M") == 262144
    assert scenarios.expected_written(spec, 1048576, "1G") == 512
    dev = scenarios.plan(["devdax-dev"], size="4G")[0]
    assert scenarios.expected_written(dev, 1031680, "2M") == 1031680
