"""Run long external commands with a log file and periodic progress."""
import subprocess
import time

from zdinit import progress
from zdinit.errors import ZdinitError

PROGRESS_EVERY_S = 20


def run_logged(cmd, log_path, label, env=None, cwd=None, tail_lines=15):
    """Run cmd, teeing its output to log_path; raise with the log's tail."""
    started = time.monotonic()
    last = started
    lines = 0
    tail = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                env=env, cwd=cwd, errors="replace")
        for line in proc.stdout:
            log.write(line)
            lines += 1
            tail = (tail + [line.rstrip()])[-tail_lines:]
            now = time.monotonic()
            if now - last >= PROGRESS_EVERY_S:
                progress.say(f"{label}: {lines} lines of output, "
                             f"{now - started:.0f}s")
                last = now
        rc = proc.wait()
    if rc != 0:
        detail = "\n".join("    " + t for t in tail)
        raise ZdinitError(f"{label} failed (exit {rc}); log {log_path}; "
                          f"last lines:\n{detail}")
    return time.monotonic() - started
