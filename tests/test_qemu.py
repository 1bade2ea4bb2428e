"""Guests of correctness checks run side by side, bounded by CPUs and RAM."""
import threading
import time

import pytest

from zdinit import qemu

G = 1 << 30


def test_checks_at_once_is_bounded_by_cpus_and_memory(monkeypatch):
    monkeypatch.setattr(qemu.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(qemu, "mem_available", lambda: 20 * G)
    assert qemu.checks_at_once(2 * G) == 2
    assert qemu.checks_at_once(12 * G) == 1      # two would not fit
    assert qemu.checks_at_once(40 * G) == 1      # refusing is not its job
    monkeypatch.setattr(qemu.os, "cpu_count", lambda: 1)
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


def test_map_checks_raises_the_first_failure_and_starts_no_more(monkeypatch):
    monkeypatch.setattr(qemu, "checks_at_once", lambda guest_bytes: 2)
    started = []

    def check(item):
        started.append(item)
        time.sleep(0.05)
        if item in (1, 2):
            raise ValueError(f"guest {item} failed")
        return item

    with pytest.raises(ValueError, match="guest 1 failed"):
        qemu.map_checks(check, range(8), G)
    assert len(started) < 8
