"""The zone contiguity check: the count in the onlining kernels, the
check patch added to the hotplug kernels, and the guest's reports failing
a run."""
import types

import pytest

from conftest import ROOT
from zdinit.families import onlining, scenarios
from zdinit.kernel import bases, build
from zdinit.vm import console
from zdinit.errors import ZdinitError

BASE = bases.BASES["7.3"]
CHECK = ROOT / "patches/linux-7.3-contiguity-check.patch"
COUNT = ROOT / ("patches/linux-7.3-contiguity/"
                "0001-mm-memory_hotplug-decide-zone-contiguity-from-a-coun.patch")


def kernel(variant, base=BASE):
    return types.SimpleNamespace(variant=variant, base=base)


def hotplug_console(*lines):
    """A hotplug run's console: one step, then the contiguity markers."""
    return "\n".join([
        "@@zdinit start scenario=kmem",
        "@@zdinit hotplug blocks=4 block_bytes=134217728 mom=N",
        "@@zdinit begin phase=online strategy=default zone=movable mom=N iter=1",
        "@@zdinit wall us=1000",
        "@@zdinit done",
        *(f"@@zdinit contiguity step={line}" for line in lines),
        "@@zdinit end rc=0"])


def test_the_onlining_kernels_count_on_every_base():
    """Stock onlining is timed on top of the count, upstream's 7.4
    method, on 7.3 and on the backport."""
    assert build.variant_patches("hotplug-base", BASE)[0] == COUNT
    for base in bases.BASES.values():
        for variant in ("hotplug-base", "patched", "upstream"):
            count = build.variant_patches(variant, base)
            assert any(p.name == COUNT.name for p in count), variant
            assert onlining.keeps_contiguity_exact(kernel(variant, base)), \
                (variant, base.name)
        assert not onlining.keeps_contiguity_exact(kernel("base", base))


def test_the_check_is_the_last_patch_and_a_config_of_each_hotplug_kernel():
    for variant in ("hotplug-stock", "patched"):
        plain = build.variant_patches(variant, BASE)
        checked = build.variant_patches(variant, BASE, contiguity=True)
        assert checked == plain + [CHECK]
        assert build.variant_spec(variant, contiguity=True).fragments == \
            build.VARIANTS[variant].fragments + ("contiguity",)
        # Its own tree and build directory: the plain kernel stays built.
        assert build.work_name(variant, BASE, contiguity=True) != \
            build.work_name(variant, BASE)
    assert (ROOT / "configs/contiguity.config").is_file()


def test_every_base_has_the_check():
    for base in bases.BASES.values():
        assert build.variant_patches("hotplug-base", base,
                                     contiguity=True)[-1].is_file()


def test_a_base_without_the_check_is_refused_in_one_line(monkeypatch):
    """A base whose check patch is missing: named, in one line."""
    monkeypatch.setattr(build, "CONTIGUITY_CHECK",
                        "patches/linux-{base}-no-contiguity-check.patch")
    with pytest.raises(ZdinitError, match=r"^kernel 'hotplug-base' has no "
                       r"patch for base 6\.12 \(.*no-contiguity-check\.patch "
                       r"is missing\)$"):
        build.variant_patches("hotplug-base", bases.BASES["6.12"],
                              contiguity=True)


def test_contiguity_markers_parse():
    run = console.parse(hotplug_console(
        "online:movable:1 node=0 zone=Movable flag=1 walk=1"))
    assert run.contiguity == [{"step": "online:movable:1", "node": "0",
                               "zone": "Movable", "flag": "1", "walk": "1"}]
    assert len(run.steps) == 1


@pytest.mark.parametrize("exact", [False, True])
def test_agreeing_zones_pass(exact):
    run = console.parse(hotplug_console(
        "boot node=0 zone=DMA32 flag=1 walk=1",
        "offline:movable:1 node=0 zone=Normal flag=0 walk=0"))
    assert onlining.contiguity_problem(run, exact) is None


@pytest.mark.parametrize("exact", [False, True])
def test_a_flag_set_over_a_hole_always_fails(exact):
    run = console.parse(hotplug_console(
        "boot node=0 zone=DMA32 flag=1 walk=1",
        "failed-online:movable:1 node=0 zone=Movable flag=1 walk=0"))
    assert onlining.contiguity_problem(run, exact) == (
        "zone Movable of node 0 after failed-online:movable:1: marked "
        "contiguous, the walk finds a hole")


def test_a_stale_clear_flag_fails_the_exact_kernel_only():
    """Unpatched onlining leaves the flag clear where the walk, once the
    range is online, finds no hole: allowed there, not for the counter."""
    run = console.parse(hotplug_console(
        "online:movable:1 node=0 zone=Movable flag=0 walk=1"))
    assert onlining.contiguity_problem(run, exact=False) is None
    assert onlining.contiguity_problem(run, exact=True) == (
        "zone Movable of node 0 after online:movable:1: not marked "
        "contiguous, the walk finds no hole")


def test_no_report_fails():
    assert onlining.contiguity_problem(console.parse(hotplug_console()), False) == \
        "the guest reported no zone contiguity"


def test_check_run_fails_in_one_line_naming_zone_and_step():
    spec = scenarios.plan(["kmem"], size="1G", n=1, timing="log")[0]
    run = console.parse(hotplug_console(
        "offline:normal:1 node=0 zone=Normal flag=0 walk=1"))
    with pytest.raises(ZdinitError, match=r"^kmem hotplug-base: zone "
                       r"Normal of node 0 after offline:normal:1: not "
                       r"marked contiguous, the walk finds no hole$"):
        onlining.check_run(spec, run, "kmem hotplug-base", timed=False,
                          contiguity=True)


def test_boot_params_ask_the_guest_for_the_check():
    from zdinit.families import onlining
    from zdinit.kernel import under_test
    spec = scenarios.plan(["kmem"], size="1G", n=1, timing="log")[0]
    for contiguity in (False, True):
        target = under_test.KernelUnderTest(
            kernel("hotplug-base"), None, ("default",), contiguity=contiguity)
        params = onlining.boot_params(spec, target, 1, False, spec.aligns)
        assert params["contiguity"] == int(contiguity)


def test_the_guest_runs_the_failing_notifier_module():
    """module/ builds it, the initramfs carries every module built, and
    the guest loads it by that name."""
    assert "zd_failonline.o" in (ROOT / "module/Kbuild").read_text()
    assert "/zdinit/zd_failonline.ko" in (ROOT / "guest/hotplug.sh").read_text()
