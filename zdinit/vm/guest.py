"""One guest booted: its NVDIMM backing files made before the boot and
removed after it, its console kept where asked, and read.  The measured
families' run loop and every check boot through boot()."""
import contextlib
import dataclasses
import pathlib
from typing import Callable

from zdinit.vm import qemu


@dataclasses.dataclass(frozen=True)
class Guest:
    label: str                  # names the guest in progress and errors
    params: dict                # the guest scenario's zdinit.KEY=VALUE
    ram_mb: int = qemu.CHECK_GUEST_RAM_MB
    # Each NVDIMM's backing file: (its size, the bytes the guest touches,
    # which decide where the file can live).
    images: tuple = ()
    labels: bool = False        # the last NVDIMM gets a label area
    virtio_mem: int = 0         # bytes of virtio-mem-pci (0: none)
    cmdline: tuple = ()
    timeout_s: int = 900
    log_path: pathlib.Path | None = None


def check_images(count):
    """The NVDIMMs of a check guest: count of qemu.CHECK_IMAGE_BYTES, every
    page of them touched."""
    return ((qemu.CHECK_IMAGE_BYTES, qemu.CHECK_IMAGE_BYTES),) * count


def boot(target, guest: Guest, accel: str, read: Callable):
    """Boot guest on target (a kernel.under_test.KernelUnderTest); its
    console as read() reads it."""
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(qemu.SparseImage(size, touched,
                                                      f"{guest.label}-{i}"))
                 for i, (size, touched) in enumerate(guest.images)]
        result = qemu.boot(target.kernel, target.initrd, guest.params, accel,
                           ram_mb=guest.ram_mb,
                           nvdimms=[(f.path, f.size) for f in files],
                           timeout_s=guest.timeout_s,
                           log_path=guest.log_path, label=guest.label,
                           labels=guest.labels, cmdline=guest.cmdline,
                           virtio_mem=guest.virtio_mem)
    return read(result.log)
