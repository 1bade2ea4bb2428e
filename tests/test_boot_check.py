"""checks.boot.boot_check(): the one way a check boots and judges a
guest."""
import os
import types

import pytest

from zdinit.checks import boot
from zdinit.vm import guest as vm_guest, qemu
from zdinit.errors import ZdinitError

TARGET = types.SimpleNamespace(kernel="k", initrd="i")
SPLAT = ("@@zdinit start scenario=x\n"
         "@@kmsg [    9.9] WARNING: CPU: 0 PID: 1 at mm/mm_init.c:1 x\n"
         "@@zdinit end rc=0")


def fake_boot(log, seen):
    def boot_fn(kernel, initrd, params, accel, **kwargs):
        seen.append(dict(kwargs, params=params, accel=accel,
                         images_exist=[os.path.exists(p)
                                       for p, _ in kwargs["nvdimms"]]))
        return qemu.Boot(log, accel, 0.1)
    return boot_fn


def test_a_splat_fails_the_check_naming_the_guest(monkeypatch):
    monkeypatch.setattr(qemu, "boot", fake_boot(SPLAT, []))
    with pytest.raises(ZdinitError, match="my check: kernel reported: "
                       ".*WARNING"):
        boot.boot_check(TARGET, boot.Guest("my check", {}), "tcg")


def test_a_check_that_reports_splats_itself_gets_them(monkeypatch):
    monkeypatch.setattr(qemu, "boot", fake_boot(SPLAT, []))
    run = boot.boot_check(TARGET, boot.Guest("my check", {}), "tcg",
                          refuse_splats=False)
    assert run.splats and "WARNING" in run.splats[0]


def test_the_guest_gets_its_images_for_the_boot_only(monkeypatch):
    seen = []
    monkeypatch.setattr(qemu, "boot",
                        fake_boot("@@zdinit end rc=0", seen))
    guest = boot.Guest("imaged round 1/2", {"scenario": "x"},
                       images=vm_guest.check_images(2),
                       cmdline=("a=1",), virtio_mem=1 << 30)
    boot.boot_check(TARGET, guest, "kvm")
    (call,) = seen
    assert call["images_exist"] == [True, True]
    assert all(size == qemu.CHECK_IMAGE_BYTES for _, size in call["nvdimms"])
    assert not any(os.path.exists(p) for p, _ in call["nvdimms"])
    assert (call["params"], call["accel"], call["cmdline"],
            call["virtio_mem"], call["label"]) == (
        {"scenario": "x"}, "kvm", ("a=1",), 1 << 30, "imaged round 1/2")
