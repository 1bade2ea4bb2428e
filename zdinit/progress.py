"""Progress lines on stderr for long steps, timestamped."""
import sys
import threading
import time

_START = time.monotonic()
# Guests of a check run in threads (qemu.map_checks()): one line at a time.
_LOCK = threading.Lock()


def say(message):
    elapsed = time.monotonic() - _START
    with _LOCK:
        sys.stderr.write(f"[zdinit {elapsed:7.1f}s] {message}\n")
        sys.stderr.flush()
