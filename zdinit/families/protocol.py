"""What a measured family is: the calls loop.py makes of it to boot,
check and record a guest, and those results/ makes to show its records.
A family is a module of this package with one object that has them
(rebind.REBIND, onlining.ONLINING, clearing.CLEARING), listed in
registry.py, and its guest code in guest/."""
import dataclasses
import pathlib
from typing import Any, Callable, Hashable, Protocol, Sequence

# What a family's parse() returns: console.Run, clearing.ClearRun.
Run = Any
# A planned measurement: scenarios.RunSpec or scenarios.ClearSpec.
Spec = Any
# A kernel and its initramfs: kernel.under_test.KernelUnderTest.
Target = Any
# A results.json record.
Record = dict
# How a family's rows are laid out: results.report.markdown_table or
# text_table, each (runs, header, make_rows) -> table text.
TableFormat = Callable[[list, list, Callable[[list], list]], str]


@dataclasses.dataclass(frozen=True)
class BootPlan:
    """One guest of a family: what qemu.boot() is given, and its names."""
    label: str                  # the kernel and variation; the round follows
    log_name: str
    what: str                   # the samples it takes, for the progress line
    params: dict
    ram_mb: int
    cmdline: tuple = ()
    nvdimm_bytes: int = 0
    touched_bytes: int = 0      # of the NVDIMM image, to place it
    virtio_mem: int = 0
    timeout_s: int = 1800


class Family(Protocol):
    name: str                   # in results and on the command line
    title: str                  # the heading of its part of summary.md
    plot_file: str              # where plot() draws, "" for no plot
    # Whether summary.md shows where the kernels' timed functions sit
    # (placement.py), and whether a command prints the notes after the
    # tables as well as summary.md.
    shows_placement: bool
    prints_notes: bool

    def parse(self, text: str) -> Run:
        """The guest's console read into a run."""

    def variations(self, spec: Spec, target: Target) -> Sequence[Hashable]:
        """What else varies between the boots of one round of spec on
        target: an extra command line, a preemption model."""

    def boot(self, spec: Spec, target: Target, variation: Hashable,
             share: int, verify: bool) -> BootPlan:
        """The guest that takes share samples of spec."""

    def check(self, spec: Spec, run: Run, label: str, target: Target,
              variation: Hashable, share: int, verify: bool) -> None:
        """Raise ZdinitError, naming label, if the guest did not do what
        spec asks."""

    def collect(self, samples: dict, spec: Spec, run: Run, target: Target,
                share: int, first_round: bool) -> None:
        """Add a checked run's samples to samples, the family's own
        format."""

    def records(self, samples: dict, specs: Sequence[Spec]) -> list[Record]:
        """The results.json records of all the samples collected."""

    def host_bytes(self, spec: Spec, variant: str) -> int:
        """The host memory a guest of spec on kernel variant needs."""

    def describe(self, spec: Spec) -> str:
        """spec in a few words, for a refusal."""

    def owns(self, record: Record) -> bool:
        """Whether a results.json record is this family's; no record is
        two families' (registry.owner())."""

    def resummarize(self, records: list[Record]) -> list[Record]:
        """records, in their order, with every summary field computed
        again from their samples: the one computation of them."""

    def record_name(self, record: Record) -> str:
        """The record's row name in the tables, then its kernel and
        method: what a stale summary is reported by."""

    def runs_of(self, results: dict) -> list[Record]:
        """This family's records of a results.json, as tables() takes
        them."""

    def tables(self, runs: list[Record],
               table: TableFormat) -> list[tuple[str, str]]:
        """[(title, table text)]: the first untitled; docs/ picks one by
        its place."""

    def notes(self, results: dict) -> list[str]:
        """Paragraphs said with the tables."""

    def plot(self, runs: list[Record], path: pathlib.Path) -> None:
        """Draw the samples into path (never called when plot_file is
        "")."""
