"""Guests of correctness checks run side by side, bounded by CPUs and RAM,
and a failure or an interruption stops the others."""
import threading
import time

import pytest

from zdinit.vm import qemu

G = 1 << 30


def test_checks_at_once_is_bounded_by_cpus_and_memory(monkeypatch):
    monkeypatch.setattr(qemu.os, "sched_getaffinity",
                        lambda pid: set(range(16)))
    monkeypatch.setattr(qemu, "mem_available", lambda: 20 * G)
    assert qemu.checks_at_once(2 * G) == 2
    # With QEMU's own memory two of these do not fit.
    assert qemu.checks_at_once(int(9.5 * G)) == 1
    assert qemu.checks_at_once(40 * G) == 1      # refusing is not its job
    monkeypatch.setattr(qemu.os, "sched_getaffinity", lambda pid: {0})
    assert qemu.checks_at_once(G) == 1


def test_map_checks_keeps_order_and_runs_two_at_once(monkeypatch):
    monkeypatch.setattr(qemu, "checks_at_once", lambda guest_bytes: 2)
    running, most = 0, 0
    lock = threading.Lock()

    def check(item):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05 * (3 - item % 3))
        with lock:
            running -= 1
        return item * 10

    assert qemu.map_checks(check, range(6), G) == [0, 10, 20, 30, 40, 50]
    assert most == 2


def test_one_at_a_time_runs_in_order_in_this_thread(monkeypatch):
    monkeypatch.setattr(qemu, "checks_at_once", lambda guest_bytes: 1)
    threads = set()

    def check(item):
        threads.add(threading.get_ident())
        if item == 2:
            raise ValueError("guest 2 failed")
        return item

    with pytest.raises(ValueError, match="guest 2 failed"):
        qemu.map_checks(check, range(4), G)
    assert threads == {threading.get_ident()}


class FakeGuest:
    """Stands for a running QEMU: kill() ends the boot that waits on it."""

    def __init__(self):
        self.killed = threading.Event()

    def kill(self):
        self.killed.set()


def test_a_failure_kills_the_running_guest_and_starts_no_more(monkeypatch):
    """Item 0 boots a guest that would run for a minute; item 1 fails at
    once: its failure is raised, item 0's guest killed, nothing started
    after."""
    monkeypatch.setattr(qemu, "checks_at_once", lambda guest_bytes: 2)
    guest = FakeGuest()
    started = []

    def check(item):
        started.append(item)
        if item == 0:
            with qemu._guests_lock:
                qemu._guests.add(guest)
            try:
                if not guest.killed.wait(60):
                    return "ran to the end"
                raise RuntimeError("guest 0 killed")
            finally:
                with qemu._guests_lock:
                    qemu._guests.discard(guest)
        if item == 1:
            time.sleep(0.05)
            raise ValueError("guest 1 failed")
        time.sleep(0.05)
        return item

    began = time.monotonic()
    with pytest.raises(ValueError, match="guest 1 failed"):
        qemu.map_checks(check, range(8), G)
    assert time.monotonic() - began < 30
    assert guest.killed.is_set()
    assert sorted(started) in ([0, 1], [0, 1, 2])


def test_two_images_with_one_tag_are_two_files(tmp_path, monkeypatch):
    """Guests map their NVDIMM files shared: one file given to two guests
    would let them write into each other's memory."""
    monkeypatch.setattr(qemu, "image_dir", lambda touched: tmp_path)
    with qemu.SparseImage(1 << 20, 0, "job-base-0") as a, \
            qemu.SparseImage(1 << 20, 0, "job-base-0") as b:
        assert a.path != b.path
        assert a.path.stat().st_size == b.path.stat().st_size == 1 << 20
    assert not a.path.exists() and not b.path.exists()
