"""Kernel bases: the Debian source package each kernel tree comes from.

A base is data: the package, the version pinned, the checksum of its .deb
and the archive that serves it.  Its series live in patches/linux-<name>/
(and linux-<name>-clear/ for huge-page clearing).  Adding a base is one
entry here plus its patch directories.
"""
import dataclasses
import pathlib

from zdinit.errors import UsageError

PATCHES_ROOT = pathlib.Path(__file__).resolve().parent.parent / "patches"
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


@dataclasses.dataclass(frozen=True)
class Base:
    name: str          # what --base takes: the kernel's major.minor
    package: str       # Debian's architecture-independent source package
    version: str       # the Debian version pinned
    sha256: str        # of that version's .deb
    suite: str         # the archive suite that serves it
    # The preemption models its x86 kernel accepts at boot (preempt=), and
    # the clear family's default among them: the least and the most
    # preemptible.  7.3's x86 selects ARCH_HAS_PREEMPT_LAZY, so none and
    # voluntary cannot be built and preempt=none|voluntary is refused at
    # boot (the configured model runs instead).
    preempt_models: tuple
    clear_preempt: tuple
    archive: str = "http://deb.debian.org/debian"
    note: str = ""     # what the base is for, in --help

    @property
    def deb_name(self):
        return f"{self.package}_{self.version}_all.deb"

    @property
    def tarball_member(self):
        """The tree's tarball inside the .deb, xz-compressed."""
        return f"./usr/src/{self.package}.tar.xz"

    @property
    def sources_line(self):
        return (f"deb [signed-by={DEBIAN_KEYRING}] {self.archive} "
                f"{self.suite} main")

    def series_dir(self, kind=""):
        """patches/linux-<name>[-<kind>]: kind "" is the ZONE_DEVICE and
        onlining series, "clear" the huge-page clearing series."""
        return PATCHES_ROOT / (f"linux-{self.name}"
                               + (f"-{kind}" if kind else ""))


BASES = {b.name: b for b in (
    Base("6.12", "linux-source-6.12", "6.12.117-1~deb12u1",
         "e849faf31ca3555757f3a8877cb01af92122f744f75d1f3102734651c4e14703",
         "bookworm-security", ("none", "voluntary", "full"), ("none", "full"),
         archive="http://deb.debian.org/debian-security",
         note="the LTS backport (Debian 13's kernel)"),
    Base("7.3", "linux-source-7.3", "7.3.4-1~bpo13+1",
         "703e369ddd4cce971452f5a593ee55df3a5c10c83caf0fa0df039633ed181ee3",
         "trixie-backports", ("full", "lazy"), ("lazy", "full"),
         note="where upstream's multi-page clearing is merged"),
)}
DEFAULT = "7.3"


def get(name):
    """The base called name, or a one-line refusal naming the known ones."""
    try:
        return BASES[name]
    except KeyError:
        raise UsageError(f"unknown kernel base '{name}'; choose from "
                         + ", ".join(BASES)) from None


def preempt_models():
    """Every model some base accepts, in the order the bases list them."""
    return tuple(dict.fromkeys(m for b in BASES.values()
                               for m in b.preempt_models))


def help_text():
    return "; ".join(f"{b.name}: {b.package} {b.version}, {b.note}"
                     for b in BASES.values())
