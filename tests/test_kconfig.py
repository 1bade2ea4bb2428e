import pytest

from zdinit import bases, kconfig
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
    wanted = kconfig.requested(kconfig.fragment_paths(["zdinit"], bases.get("6.12")))
    for option in ("CONFIG_ZONE_DEVICE", "CONFIG_DEVICE_PRIVATE",
                   "CONFIG_ACPI_NFIT", "CONFIG_DEV_DAX_PMEM", "CONFIG_FS_DAX",
                   "CONFIG_SPARSEMEM_VMEMMAP", "CONFIG_DYNAMIC_DEBUG",
                   "CONFIG_DEBUG_FS", "CONFIG_64BIT"):
        assert wanted[option] == "y", option


def test_missing_fragment_is_an_error():
    with pytest.raises(ZdinitError, match="not found"):
        kconfig.fragment_paths(["no-such-fragment"], bases.get("6.12"))


def test_base_additions_follow_their_fragment():
    """6.12's clear additions come right after clear.config; 7.3 has none,
    so CONFIG_PROC_SYSCTL, which 7.3 lacks, is asked of 6.12 alone."""
    paths = kconfig.fragment_paths(["zdinit", "clear"], bases.get("6.12"))
    assert [p.relative_to(kconfig.CONFIGS).as_posix() for p in paths] == [
        "zdinit.config", "clear.config", "linux-6.12/clear.config"]
    assert kconfig.requested(paths)["CONFIG_PROC_SYSCTL"] == "y"
    on_73 = kconfig.requested(
        kconfig.fragment_paths(["zdinit", "clear"], bases.get("7.3")))
    assert "CONFIG_PROC_SYSCTL" not in on_73
    assert on_73["CONFIG_HUGETLBFS"] == "y"


def test_every_base_addition_names_a_base_and_a_fragment():
    """An addition under a misspelt base or fragment would be silently
    left out of every build."""
    for path in kconfig.CONFIGS.glob("linux-*/*"):
        assert path.parent.name.removeprefix("linux-") in bases.BASES, path
        assert (kconfig.CONFIGS / path.name).is_file(), path


def test_a_misspelt_base_addition_is_still_verified(tmp_path, monkeypatch):
    """Lines of an addition are verified like any other: a symbol the
    tree does not define (a typo) fails the build's configuration."""
    (tmp_path / "linux-7.3").mkdir()
    (tmp_path / "clear.config").write_text("CONFIG_HUGETLBFS=y\n")
    (tmp_path / "linux-7.3" / "clear.config").write_text(
        "CONFIG_HUGETLBFS_TYPO=y\n")
    monkeypatch.setattr(kconfig, "CONFIGS", tmp_path)
    wanted = kconfig.requested(
        kconfig.fragment_paths(["clear"], bases.get("7.3")))
    dotconfig = tmp_path / ".config"
    dotconfig.write_text("CONFIG_HUGETLBFS=y\n")
    with pytest.raises(ZdinitError, match="CONFIG_HUGETLBFS_TYPO=y"):
        kconfig.verify(wanted, dotconfig)
