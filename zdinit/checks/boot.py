"""One guest of a check, booted and judged the same way by every check
(safety, memmap equality, the clear zero read-back and selftests, the
lab's vector capture): vm.guest.boot() and a kernel splat refused."""
from typing import Callable

from zdinit.vm import console, guest as vm_guest
from zdinit.vm.guest import Guest


def boot_check(target, guest: Guest, accel: str,
               read: Callable = console.parse, refuse_splats: bool = True):
    """Boot guest on target and return its console as read() reads it.
    refuse_splats=False leaves a splat in the run for a check that
    reports it as its own row."""
    run = vm_guest.boot(target, guest, accel, read)
    if refuse_splats:
        console.refuse_splats(run, guest.label)
    return run
