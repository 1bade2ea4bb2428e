"""One guest of a check, booted and judged the same way by every check
(safety, memmap equality, the clear zero read-back and selftests, the
lab's vector capture): its images made and removed, its console kept
where asked and read, a kernel splat refused."""
import contextlib
import dataclasses
import pathlib
from typing import Callable

from zdinit.vm import console, qemu


@dataclasses.dataclass(frozen=True)
class CheckGuest:
    label: str                  # names the guest in progress and errors
    params: dict                # the guest scenario's zdinit.KEY=VALUE
    log_path: pathlib.Path | None = None
    ram_mb: int = qemu.CHECK_GUEST_RAM_MB
    # NVDIMMs of qemu.CHECK_IMAGE_BYTES each, every page of them touched
    nvdimms: int = 0
    labels: bool = False        # the last NVDIMM gets a label area
    virtio_mem: int = 0         # bytes of virtio-mem-pci (0: none)
    cmdline: tuple = ()
    timeout_s: int = 900


def boot_check(target, guest: CheckGuest, accel: str,
               read: Callable = console.parse, refuse_splats: bool = True):
    """Boot guest on target (a kernel.under_test.KernelUnderTest) and
    return its console as read() reads it.  refuse_splats=False leaves a
    splat in the run for a check that reports it as its own row."""
    with contextlib.ExitStack() as stack:
        images = [stack.enter_context(qemu.SparseImage(
            qemu.CHECK_IMAGE_BYTES, qemu.CHECK_IMAGE_BYTES,
            f"{guest.label.replace(' ', '-')}-{i}"))
            for i in range(guest.nvdimms)]
        boot = qemu.boot(target.kernel, target.initrd, guest.params, accel,
                         ram_mb=guest.ram_mb,
                         nvdimms=[(i.path, i.size) for i in images],
                         timeout_s=guest.timeout_s, log_path=guest.log_path,
                         label=guest.label, labels=guest.labels,
                         cmdline=guest.cmdline, virtio_mem=guest.virtio_mem)
    run = read(boot.log)
    if refuse_splats:
        console.refuse_splats(run, guest.label)
    return run
