"""Run long external commands with a log file and periodic progress."""
import ctypes
import signal
import subprocess
import time

from zdinit import progress
from zdinit.errors import ZdinitError

PROGRESS_EVERY_S = 20
STOP_GRACE_S = 30
_PR_SET_PDEATHSIG = 1


def die_with_parent():
    """In the child, before exec: SIGTERM when zdinit dies, even by
    SIGKILL, so that no make outlives the cache lock."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def stop(proc):
    """End a child we are abandoning (^C, SIGTERM), so that it does not go
    on writing into the cache after our lock is gone.  SIGTERM first: make
    passes it to its jobs and deletes their half-written targets."""
    proc.terminate()
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_logged(cmd, log_path, label, env=None, cwd=None, tail_lines=15):
    """Run cmd, teeing its output to log_path; raise with the log's tail."""
    started = time.monotonic()
    last = started
    lines = 0
    tail: list[str] = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                env=env, cwd=cwd, errors="replace",
                                preexec_fn=die_with_parent)
        try:
            for line in proc.stdout or ():
                log.write(line)
                lines += 1
                tail = (tail + [line.rstrip()])[-tail_lines:]
                now = time.monotonic()
                if now - last >= PROGRESS_EVERY_S:
                    progress.say(f"{label}: {lines} lines of output, "
                                 f"{now - started:.0f}s")
                    last = now
            rc = proc.wait()
        except BaseException:
            stop(proc)
            raise
    if rc != 0:
        detail = "\n".join("    " + t for t in tail)
        raise ZdinitError(f"{label} failed (exit {rc}); log {log_path}; "
                          f"last lines:\n{detail}")
    return time.monotonic() - started
