"""Kernel bases: the Debian source package each kernel tree comes from.

A base is data: the package, the version pinned, the checksum of its .deb,
the archive that serves it and its series.  Each series is a stack of
directories under patches/, applied in order, each on top of the ones
before it.  Adding a base is one entry here plus its patch directories.
"""
import dataclasses

from zdinit import paths
from zdinit.errors import UsageError

DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


@dataclasses.dataclass(frozen=True)
class Part:
    """One directory of a stack of series: a series of its own, with its
    own cover letter, applied on top of the parts before it in the stack
    (its prerequisites)."""
    name: str           # what check-series and its refusals call it
    # True: offered for merging, so no patch of it may say NOT FOR MERGING
    # in its Subject; False: not for merging, which its cover letter's
    # Subject must say; None: a series for merging that ends with the
    # harness's own patches, each marked NOT FOR MERGING, so that neither
    # is checked.
    for_merging: object = True


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
    # Its series by the name variants and check-series --series use
    # ("zone-device", "clear"): each a tuple of Parts in the order they
    # apply.  (Left out of the hash: a base is hashed, a dict cannot be.)
    stacks: dict = dataclasses.field(hash=False)
    # The KUnit suites of its zone-device series, which a kernel booted
    # with kunit.enable=1 must run and pass: the memmap's, and padata's
    # multithreaded jobs (a job ends while the unbound workqueue is too
    # busy to start its helpers).
    kunit_suites: tuple = ("zone_device_memmap", "padata_mt")
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

    def has_part(self, stack, name):
        """Whether this base's stack has a part called name."""
        return any(part.name == name for part in self.stacks[stack])

    def series_dir(self, part):
        """The directory of one Part of this base's stacks."""
        return paths.PATCHES / f"linux-{self.name}-{part.name}"


# The ZONE_DEVICE and onlining work as six series (seven on 7.3), each
# with its own cover letter, on top of what upstream queued for 7.4; the
# last, the kit (timing, test hooks, debugfs), is the harness's and not
# for merging.
ZONE_DEVICE_PARTS = (Part("templates"), Part("store-policy"),
                     Part("parallel"), Part("onlining"), Part("contiguity"),
                     Part("kit", for_merging=False))
# 7.3 has a seventh before the kit: the memmap of a pgmap whose driver
# asks for it built on demand and in the background (not backported).
ZONE_DEVICE_PARTS_ON_DEMAND = (ZONE_DEVICE_PARTS[:-1] + (Part("demand"),)
                               + ZONE_DEVICE_PARTS[-1:])

BASES = {b.name: b for b in (
    Base("6.12", "linux-source-6.12", "6.12.117-1~deb12u1",
         "e849faf31ca3555757f3a8877cb01af92122f744f75d1f3102734651c4e14703",
         "bookworm-security", ("none", "voluntary", "full"), ("none", "full"),
         stacks={
             # Six of 7.3's seven series backported, cut the same way.
             "zone-device": ZONE_DEVICE_PARTS,
             # Its last patch is the harness's debugfs switch.
             "clear": (Part("clear", for_merging=None),)},
         archive="http://deb.debian.org/debian-security",
         note="the LTS backport (Debian 13's kernel)"),
    Base("7.3", "linux-source-7.3", "7.3.4-1~bpo13+1",
         "703e369ddd4cce971452f5a593ee55df3a5c10c83caf0fa0df039633ed181ee3",
         "trixie-backports", ("full", "lazy"), ("lazy", "full"),
         stacks={
             "zone-device": ZONE_DEVICE_PARTS_ON_DEMAND,
             # Its last patch is the harness's debugfs switch.
             "clear": (Part("clear", for_merging=None),)},
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
