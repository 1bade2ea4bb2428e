import pytest

from zdinit import kconfig
from zdinit.errors import ZdinitError

FRAGMENT = """
CONFIG_ZONE_DEVICE=y
CONFIG_NR_CPUS=8
# CONFIG_DEBUG_INFO is not set
"""


def test_parse_set_and_unset():
    assert kconfig.parse(FRAGMENT) == {"CONFIG_ZONE_DEVICE": "y",
                                       "CONFIG_NR_CPUS": "8",
                                       "CONFIG_DEBUG_INFO": "n"}


def test_verify_names_the_option_that_did_not_stick(tmp_path):
    dotconfig = tmp_path / ".config"
    dotconfig.write_text("CONFIG_NR_CPUS=8\n# CONFIG_ZONE_DEVICE is not set\n")
    with pytest.raises(ZdinitError, match="CONFIG_ZONE_DEVICE=y.*'n'"):
        kconfig.verify(kconfig.parse(FRAGMENT), dotconfig)


def test_verify_passes_when_all_stuck(tmp_path):
    dotconfig = tmp_path / ".config"
    dotconfig.write_text("CONFIG_ZONE_DEVICE=y\nCONFIG_NR_CPUS=8\n")
    kconfig.verify(kconfig.parse(FRAGMENT), dotconfig)


def test_repo_fragment_has_what_the_experiments_need():
    wanted = kconfig.requested(kconfig.fragment_paths(["zdinit"]))
    for option in ("CONFIG_ZONE_DEVICE", "CONFIG_DEVICE_PRIVATE",
                   "CONFIG_ACPI_NFIT", "CONFIG_DEV_DAX_PMEM", "CONFIG_FS_DAX",
                   "CONFIG_SPARSEMEM_VMEMMAP", "CONFIG_DYNAMIC_DEBUG",
                   "CONFIG_DEBUG_FS", "CONFIG_64BIT"):
        assert wanted[option] == "y", option


def test_missing_fragment_is_an_error():
    with pytest.raises(ZdinitError, match="not found"):
        kconfig.fragment_paths(["no-such-fragment"])
