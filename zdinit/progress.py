"""Progress lines on stderr for long steps, timestamped."""
import sys
import time

_START = time.monotonic()


def say(message):
    elapsed = time.monotonic() - _START
    print(f"[zdinit {elapsed:7.1f}s] {message}", file=sys.stderr, flush=True)
