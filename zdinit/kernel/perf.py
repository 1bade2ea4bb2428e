"""perf, built once into the cache, for 'perf bench mem mmap' in the guest.

'perf bench mem mmap' with its page sizes (-p 2MB|1GB) and functions
(-f demand|populate) is in 7.3's tools/perf; one static binary from that
tree runs in every base's guest, since the benchmark is plain user space
(mmap, MAP_HUGETLB, MAP_POPULATE).
"""
import hashlib
import shutil
import subprocess

from zdinit import cache, deps, proc, progress
from zdinit.kernel import bases, build, source
from zdinit.errors import ZdinitError

BASE = "7.3"
# Static, so the guest needs no libraries; every optional feature that
# would link a library is left out (the benchmark needs none of them), and
# so are the Rust test workloads, which a rustc on PATH would otherwise
# build with a toolchain the kernel's build knows nothing of.
# Only the perf binary is made: 'all' also links the dlfilter test
# libraries, shared objects that cannot be linked with -static.
MAKE_FLAGS = ("LDFLAGS=-static", "NO_LIBELF=1", "NO_LIBTRACEEVENT=1",
              "NO_JEVENTS=1", "NO_LIBPYTHON=1", "NO_LIBPERL=1",
              "NO_LIBUNWIND=1", "NO_LIBDW=1", "NO_SDT=1", "NO_LIBBPF=1",
              "NO_BPF_SKEL=1", "NO_LIBCAP=1", "NO_LIBNUMA=1",
              "NO_LIBCRYPTO=1", "NO_SLANG=1", "NO_GTK2=1", "NO_BABELTRACE=1",
              "NO_LIBZSTD=1", "NO_LIBLZMA=1", "NO_ZLIB=1", "NO_DEMANGLE=1",
              "NO_LIBLLVM=1", "NO_CAPSTONE=1", "NO_LIBDEBUGINFOD=1",
              "NO_AUXTRACE=1", "NO_LIBPFM4=1", "NO_SHELLCHECK=1",
              "NO_RUST=1")
# What the perf build runs beyond the kernel's own toolchain.
TOOLS = {"flex": "flex", "bison": "bison", "gcc": "build-essential",
         "make": "make"}
_STAMP = ".zdinit-perf"


def identity(base):
    """What the binary is made of: the tree's .deb and the flags."""
    return hashlib.sha256(" ".join((base.sha256,) + MAKE_FLAGS).encode()
                          ).hexdigest()[:16]


def binary():
    """The static perf of base BASE's tree, built on first use; a build
    that did not finish, or made from another tree or flags, is redone."""
    for tool, package in TOOLS.items():
        deps.require_tool(tool, package)
    base = bases.get(BASE)
    out = cache.require_lock() / "tools" / f"perf-{base.name}"
    perf = out / "perf"
    stamp = out / _STAMP
    want = identity(base)
    if stamp.exists() and stamp.read_text().strip() == want \
            and perf.exists():
        return perf
    tree = source.pristine_tree(base)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    progress.say(f"building perf from {base.name}'s tools/perf in {out}")
    took = proc.run_logged(
        ["make", "-C", str(tree / "tools/perf"), f"O={out}",
         f"-j{build.jobs()}", *MAKE_FLAGS, "perf"],
        out / "build.log", "build perf")
    check_static(perf)
    stamp.write_text(want + "\n")
    progress.say(f"perf built in {took:.0f}s")
    return perf


def check_static(perf):
    """The guest has no libraries: a perf that links any is refused."""
    ldd = subprocess.run(["ldd", str(perf)], capture_output=True, text=True)
    if "not a dynamic executable" not in ldd.stdout + ldd.stderr:
        raise ZdinitError(f"{perf} is not statically linked; the guest has "
                          "no libraries for it")
