"""A kernel under test: the kernel, its initramfs and what its guests
run (the strategies the measured families and the checks ask for)."""
import dataclasses
import pathlib

from zdinit import progress
from zdinit.kernel import build as kernel_build, initramfs
from zdinit.vm import qemu


@dataclasses.dataclass
class KernelUnderTest:
    """One kernel under test and the strategies it runs in each boot:
    strategies for ZONE_DEVICE scenarios, hotplug_strategies for the
    onlining family (patched: onlining follows the same knob); contiguity:
    the kernel has the contiguity check, which the guest runs."""
    kernel: object
    initrd: pathlib.Path
    strategies: tuple
    hotplug_strategies: tuple = ("default",)
    contiguity: bool = False


def build(variant, base, strategies, hotplug_strategies=("default",),
          contiguity=False, tools=None):
    """Build the kernel (contiguity: with the contiguity check) and its
    initramfs (tools: more static binaries for it); its KernelUnderTest."""
    kernel = kernel_build.build(variant, base, contiguity)
    initrd = initramfs.build(kernel, kernel.out / "initramfs.cpio.gz", tools)
    return KernelUnderTest(kernel, initrd, tuple(strategies),
                           tuple(hotplug_strategies), contiguity)


# Why the guests of bench --icount run under qemu.ICOUNT: run records say so.
ICOUNT_WHY = (f"--icount: TCG with -icount {qemu.ICOUNT_OPTIONS}, one "
              "nanosecond of guest time per guest instruction, the vCPUs "
              "run in turn")


def prepare(wanted, tools=None, icount=False):
    """Build every kernel of wanted (keyword arguments of build(), one
    dict a kernel) with its initramfs, and choose the accelerator all of
    their guests boot with, probed on the first; icount: TCG counting
    instructions (qemu.ICOUNT), no probe.  Returns (targets, accel,
    why)."""
    targets = [build(**w, tools=tools) for w in wanted]
    if icount:
        accel, why = qemu.ICOUNT, ICOUNT_WHY
    else:
        accel, why = qemu.choose_accel(targets[0].kernel, targets[0].initrd)
    progress.say(f"accelerator: {accel} ({why})")
    return targets, accel, why
