import pytest

from zdinit import paths
from zdinit.kernel import bases, build, kconfig
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
    found = kconfig.fragment_paths(["zdinit", "clear"], bases.get("6.12"))
    assert [p.relative_to(paths.CONFIGS).as_posix() for p in found] == [
        "zdinit.config", "clear.config", "linux-6.12/clear.config"]
    assert kconfig.requested(found)["CONFIG_PROC_SYSCTL"] == "y"
    on_73 = kconfig.requested(
        kconfig.fragment_paths(["zdinit", "clear"], bases.get("7.3")))
    assert "CONFIG_PROC_SYSCTL" not in on_73
    assert on_73["CONFIG_HUGETLBFS"] == "y"


def test_every_base_addition_names_a_base_and_a_fragment():
    """An addition under a misspelt base or fragment would be silently
    left out of every build."""
    for path in paths.CONFIGS.glob("linux-*/*"):
        assert path.parent.name.removeprefix("linux-") in bases.BASES, path
        assert (paths.CONFIGS / path.name).is_file(), path


def test_a_misspelt_base_addition_is_still_verified(tmp_path, monkeypatch):
    """Lines of an addition are verified like any other: a symbol the
    tree does not define (a typo) fails the build's configuration."""
    (tmp_path / "linux-7.3").mkdir()
    (tmp_path / "clear.config").write_text("CONFIG_HUGETLBFS=y\n")
    (tmp_path / "linux-7.3" / "clear.config").write_text(
        "CONFIG_HUGETLBFS_TYPO=y\n")
    monkeypatch.setattr(paths, "CONFIGS", tmp_path)
    wanted = kconfig.requested(
        kconfig.fragment_paths(["clear"], bases.get("7.3")))
    dotconfig = tmp_path / ".config"
    dotconfig.write_text("CONFIG_HUGETLBFS=y\n")
    with pytest.raises(ZdinitError, match="CONFIG_HUGETLBFS_TYPO=y"):
        kconfig.verify(wanted, dotconfig)


def test_defined_finds_config_entries_in_every_kconfig_file(tmp_path):
    (tmp_path / "mm").mkdir()
    (tmp_path / "mm/Kconfig").write_text(
        "config ZONE_DEVICE\n\tbool\nconfig ZONE_DEVICE_TEST_LONGER\n")
    (tmp_path / "mm/Kconfig.debug").write_text(
        "menuconfig KUNIT\nchoice\n\tprompt \"x\"\n\tconfig HZ_1000\nendchoice\n")
    (tmp_path / "mm/notes.txt").write_text("config DEBUG_FS\n")
    assert kconfig.defined(tmp_path, {
        "CONFIG_ZONE_DEVICE": "y", "CONFIG_KUNIT": "y", "CONFIG_HZ_1000": "y",
        "CONFIG_ZONE_DEVICE_TEST": "y", "CONFIG_DEBUG_FS": "y"}) == {
        "CONFIG_ZONE_DEVICE", "CONFIG_KUNIT", "CONFIG_HZ_1000"}


def test_configuration_is_redone_once_a_patch_defines_an_option(
        tmp_path, monkeypatch):
    """A prefix leaves out what a later patch defines; the patch that
    defines it gets a configuration with it, verified."""
    steps = []
    out = tmp_path / "build"
    out.mkdir()

    def fake_make(cmd, log_path, label, **kw):
        steps.append(label)
        if label == "olddefconfig":
            (out / ".config").write_text(
                "CONFIG_ZONE_DEVICE=y\n" if (tmp_path / "Kconfig").exists()
                else "")
        return 0.0

    monkeypatch.setattr(build.proc, "run_logged", fake_make)
    monkeypatch.setattr(paths, "CONFIGS", tmp_path)
    (tmp_path / "frag.config").write_text("CONFIG_ZONE_DEVICE=y\n")

    def configure(**kw):
        build.configure(tmp_path, out, ["frag"], bases.get("7.3"), {}, **kw)

    configure(defined_only=True)
    configure(defined_only=True)
    assert steps.count("olddefconfig") == 1
    with pytest.raises(ZdinitError, match="CONFIG_ZONE_DEVICE=y"):
        configure()
    (tmp_path / "Kconfig").write_text("config ZONE_DEVICE\n")
    configure(defined_only=True)
    assert steps.count("olddefconfig") == 3
    # The last prefix is configured afresh and checked in full; the
    # kernel's own build then finds that configuration.
    configure()
    configure()
    assert steps.count("olddefconfig") == 4
