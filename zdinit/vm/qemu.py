"""Boot a kernel in QEMU with emulated NVDIMMs and capture its console."""
import concurrent.futures
import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import threading
import time

from zdinit import cache, deps, progress
from zdinit.errors import ZdinitError

QEMU = "qemu-system-x86_64"
SHM = pathlib.Path("/dev/shm")
END_MARK = "@@zdinit end rc="


@dataclasses.dataclass
class Boot:
    log: str
    accel: str
    wall_s: float


def qemu_version():
    ver = subprocess.run([deps.require_tool(QEMU, "qemu-system-x86"),
                          "--version"], capture_output=True, text=True)
    return ver.stdout.splitlines()[0] if ver.stdout else "unknown"


# A label area lets a region hold several namespaces; with labels=True the
# last NVDIMM gets one and the others stay label-less (one raw namespace
# each).  Last, because QEMU 7.2 maps the next NVDIMM right after a label
# area's end, off the 2 MiB alignment device-dax needs.
LABEL_SIZE = "128K"

# TCG counting instructions (bench --icount): with -icount shift=0 the
# guest's clock advances one nanosecond per guest instruction, and with
# sleep=off it skips idle time instead of waiting for the host's, so
# every time the guest kernel prints is an instruction count, whatever
# the host and its load.  QEMU then runs the vCPUs in turn on one host
# thread: what several threads do is counted one after the other.
ICOUNT = "tcg-icount"
ICOUNT_OPTIONS = "shift=0,align=off,sleep=off"
# Under a fixed icount shift QEMU 7.2's 7.3 guest stops in its boot-time
# timer checks (the check of the timer interrupt, then the local APIC
# timer's calibration) and never boots; without the local APIC timer and
# that check it boots and ticks from the broadcast timer.
ICOUNT_CMDLINE = ("noapictimer", "no_timer_check")


def accel_args(accel):
    """QEMU's options for accel: kvm, tcg or ICOUNT."""
    if accel == ICOUNT:
        return ["-accel", "tcg,thread=single", "-icount", ICOUNT_OPTIONS]
    return ["-accel", accel]


def guest_cmdline(accel):
    """Kernel parameters every guest under accel needs."""
    return ICOUNT_CMDLINE if accel == ICOUNT else ()


def _base_cmd(accel, ram_mb, nvdimms, labels=False, virtio_mem=0):
    # TCG's default 40 physical address bits stop at 1 TiB, below a large
    # NVDIMM placed above guest RAM; KVM takes the host's.
    cpu = "host" if accel == "kvm" else "max,phys-bits=46"
    total = (ram_mb + (sum(size for _, size in nvdimms) + virtio_mem) // 2**20
             + 1024)
    cmd = [QEMU, "-machine", "pc,nvdimm=on", *accel_args(accel), "-cpu", cpu,
           "-smp", "2", "-m", f"{ram_mb}M,slots={len(nvdimms) + 1},"
           f"maxmem={total}M", "-nographic", "-no-reboot",
           "-monitor", "none", "-net", "none"]
    for i, (path, size) in enumerate(nvdimms):
        cmd += ["-object", f"memory-backend-file,id=nvmem{i},share=on,"
                f"mem-path={path},size={size}",
                "-device", f"nvdimm,id=nvdimm{i},memdev=nvmem{i}"
                + (f",label-size={LABEL_SIZE}"
                   if labels and i == len(nvdimms) - 1 else "")]
    if virtio_mem:
        # All of it requested from the start: the guest plugs it when it
        # loads virtio_mem.
        cmd += ["-object", "memory-backend-ram,id=vmem0,reserve=off,"
                f"size={virtio_mem}",
                "-device", "virtio-mem-pci,id=vm0,memdev=vmem0,"
                f"requested-size={virtio_mem}"]
    return cmd


def boot(kernel, initrd, params, accel, ram_mb=1024, nvdimms=(),
         timeout_s=600, log_path=None, label="guest", labels=False,
         cmdline=(), virtio_mem=0):
    """Boot, stream the console into log_path, return the whole console.

    params become zdinit.KEY=VALUE for the guest scenario; cmdline holds
    other kernel parameters, after the defaults so that they win;
    virtio_mem is the size of a virtio-mem-pci device to add (0: none).  The
    guest powers itself off; a guest that does not within timeout_s is
    killed and reported with the tail of its console.
    """
    deps.require_tool(QEMU, "qemu-system-x86")
    # oops=panic: an Oops ends the guest at once (panic=-1 reboots, which
    # -no-reboot turns into an exit) instead of leaving it hung until
    # timeout_s; the log keeps the Oops for the splat check.
    append = " ".join(["console=ttyS0", "oops=panic", "panic=-1", "quiet",
                       *guest_cmdline(accel), *cmdline]
                      + [f"zdinit.{k}={v}" for k, v in params.items()])
    cmd = _base_cmd(accel, ram_mb, list(nvdimms), labels, virtio_mem) + [
        "-kernel", str(kernel.bzimage), "-initrd", str(initrd),
        "-append", append]
    # Opened first: a log that cannot be written fails before a guest
    # and its watchdog timer are started.
    log = open(log_path, "w") if log_path else None
    started = time.monotonic()
    lines = []
    qemu = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")
    with _guests_lock:
        _guests.add(qemu)
    timer = threading.Timer(timeout_s, qemu.kill)
    timer.start()
    try:
        last = started
        for line in qemu.stdout or ():
            line = line.rstrip("\r\n")
            lines.append(line)
            if log:
                log.write(line + "\n")
            now = time.monotonic()
            if line.startswith("@@zdinit done") and now - last > 10:
                progress.say(f"{label}: {line[len('@@zdinit done '):]}")
                last = now
        qemu.wait()
    finally:
        timer.cancel()
        with _guests_lock:
            _guests.discard(qemu)
        if log:
            log.close()
        if qemu.poll() is None:
            qemu.kill()
    wall = time.monotonic() - started
    text = "\n".join(lines)
    ends = [l for l in lines if l.startswith(END_MARK)]
    if not ends or ends[-1] != END_MARK + "0":
        why = "timed out" if wall >= timeout_s else (
            "guest scenario failed" if ends else "guest died before finishing")
        errors = [l for l in lines if l.startswith("@@zdinit error")]
        tail = "\n".join("    " + l for l in lines[-12:])
        first = f" ({errors[0][len('@@zdinit error '):]})" if errors else ""
        raise ZdinitError(f"{label}: {why}{first}; console log "
                          f"{log_path or '(not kept)'}; last lines:\n{tail}")
    return Boot(text, accel, wall)


# Host memory the guests must leave free for everything else.
HOST_MEMORY_SPARE = 1 << 30


def require_host_memory(need, what):
    """The host-memory refusal of every family, made before the cache lock
    and before apt: a guest (and the image pages it touches) that the host
    cannot back."""
    have = mem_available()
    if need + HOST_MEMORY_SPARE > have:
        raise ZdinitError(
            f"{what} needs about {need / 2**30:.1f} GiB of host memory and "
            f"{have / 2**30:.1f} GiB is available (keeping "
            f"{HOST_MEMORY_SPARE >> 30} GiB spare); use a smaller --size")


def mem_available():
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


# The guest of a correctness check (safety, the memmap selftest) and each
# of its NVDIMM images, which the check may write whole (gup_test touches
# 1 GiB, the devdax integrity check 512 MiB and its memmap).
CHECK_GUEST_RAM_MB = 1536
CHECK_IMAGE_BYTES = 2 << 30

# What QEMU itself takes beside the guest's RAM (TCG's translation cache,
# device state), rounded up.
QEMU_OVERHEAD = 512 << 20


def checks_at_once(guest_bytes):
    """How many guests of guest_bytes each (RAM and the image bytes they
    write) a correctness check may run side by side.

    Under TCG a guest mostly keeps one of its two vCPU threads busy, so
    two guests use both cores of a two-core host.  Only for checks whose
    verdict does not depend on time (safety, the zero read-back, the
    memmap selftest); a benchmark boots one guest at a time.  No more than
    two, and only as many as the host's available memory holds, leaving
    HOST_MEMORY_SPARE.
    """
    fit = ((mem_available() - HOST_MEMORY_SPARE)
           // (guest_bytes + QEMU_OVERHEAD))
    return max(1, min(2, len(os.sched_getaffinity(0)), fit))


def map_checks(fn, items, guest_bytes):
    """[fn(item) for item in items], each call booting one guest of
    guest_bytes, checks_at_once() of them at a time.

    On the first failure no further call starts, the guests still running
    are killed, and the failure of the earliest item that failed is
    raised; so is an interruption (^C, SIGTERM), after the same kill.
    """
    items = list(items)
    at_once = checks_at_once(guest_bytes)
    if at_once == 1:
        return [fn(item) for item in items]
    pool = concurrent.futures.ThreadPoolExecutor(at_once)
    futures = [pool.submit(fn, item) for item in items]
    try:
        done, _ = concurrent.futures.wait(
            futures, return_when=concurrent.futures.FIRST_EXCEPTION)
        failed = [f for f in futures if f in done and f.exception()]
        if failed:
            raise failed[0].exception() or AssertionError("no exception")
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        _kill_guests()
        pool.shutdown(wait=True)


# QEMU processes of running boot() calls, so that map_checks() can stop the
# guests of other threads.
_guests: set[subprocess.Popen] = set()
_guests_lock = threading.Lock()


def _kill_guests():
    with _guests_lock:
        for guest in _guests:
            guest.kill()


def _kvm_probe_key(kernel):
    return f"{os.uname().release}|{qemu_version()}|{kernel.release}"


def choose_accel(kernel, initrd):
    """'kvm' only if a probe boot under KVM really reaches our init."""
    if os.environ.get("ZDINIT_ACCEL") in ("kvm", "tcg"):
        return os.environ["ZDINIT_ACCEL"], "forced by ZDINIT_ACCEL"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg", "/dev/kvm not available"
    record = cache.require_lock() / "kvm-probe.json"
    key = _kvm_probe_key(kernel)
    try:
        known = json.loads(record.read_text())
        if known.get("key") == key:
            return known["accel"], known["why"]
    except (OSError, ValueError):
        pass
    progress.say("probing whether KVM can boot a kernel here")
    try:
        boot(kernel, initrd, {"scenario": "probe"}, "kvm", timeout_s=60,
             label="kvm probe")
        result = ("kvm", "KVM probe boot succeeded")
    except ZdinitError:
        result = ("tcg", "/dev/kvm present but a probe boot failed "
                  "(e.g. kvm_pvm); using TCG")
    record.write_text(json.dumps({"key": key, "accel": result[0],
                                  "why": result[1]}))
    return result


def image_dir(touched_bytes):
    """tmpfs when the pages the guest will touch fit there, else the cache."""
    margin = 1 << 30
    if SHM.is_dir() and shutil.disk_usage(SHM).free > touched_bytes + margin:
        return SHM
    path = cache.images_dir()
    path.mkdir(exist_ok=True)
    cache.require_free_space(path, touched_bytes + margin,
                             "the NVDIMM backing image")
    return path


class SparseImage:
    """A fresh sparse NVDIMM backing file, removed when done.

    QEMU maps it shared, so two guests given the same file would write
    into each other's memory: the name is made unique where it is created
    (O_EXCL), not merely per process, since runs in other PID namespaces
    can share /dev/shm."""

    def __init__(self, size, touched_bytes, tag):
        self.directory = image_dir(touched_bytes)
        # Part of a file name: a tag made of a label ("round 1/2") keeps
        # only what a file name can hold.
        self.tag = re.sub(r"[^A-Za-z0-9._-]+", "-", tag)
        self.size = size
        self.path = None

    def __enter__(self):
        fd, name = tempfile.mkstemp(prefix=f"zdinit-{self.tag}-",
                                    suffix=".img", dir=self.directory)
        self.path = pathlib.Path(name)
        with os.fdopen(fd, "wb") as fh:
            fh.truncate(self.size)
        return self

    def __exit__(self, *exc):
        if self.path:
            self.path.unlink(missing_ok=True)
