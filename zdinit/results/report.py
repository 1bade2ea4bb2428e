"""Results directories and the table, summary and plot primitives every
family's report is made of (families/summary.py puts them together)."""
import datetime
import itertools
import json
import os
import pathlib
import sys

from zdinit import paths, progress
from zdinit.vm import placement
from zdinit.errors import UsageError, ZdinitError



def new_results_dir(root=paths.RESULTS):
    """A partial directory, made final by publish() once everything is in.

    Runs started in the same second (two caches, or bench and lab) get
    distinct names: the partial directory is the claim on the name.
    """
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    root.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        name = stamp if n == 1 else f"{stamp}-{n}"
        final, partial = root / name, root / f".{name}.partial"
        if final.exists() or (root / f"{name}-FAILED").exists():
            continue
        try:
            partial.mkdir()
        except FileExistsError:
            continue
        (partial / "logs").mkdir()
        return partial, final


def load_results(path, kind="a results.json", bad_json=None):
    """A run's results.json (zdinit's or zdlab's), or one line why not.
    bad_json(text, error), if given, makes what it can of text that is
    not JSON (a zdlab bench cut off by a time limit) or raises."""
    try:
        text = pathlib.Path(path).read_text()
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        if bad_json is None:
            raise UsageError(f"{path} is not JSON ({err})") from None
        data = bad_json(text, err)
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise UsageError(f"{path} has no list of runs: not {kind}")
    return data


def table_script(render, usage, argv=None):
    """main() of a table script kept beside a committed run: render(runs
    of each results.json named) prints the table; bad arguments or files
    get one line and exit status 2."""
    argv = sys.argv[1:] if argv is None else argv
    prog = os.path.basename(sys.argv[0])
    if argv[:1] in (["-h"], ["--help"]):
        print(f"usage: {usage}")
        return 0
    try:
        if not argv:
            raise UsageError(f"no results.json given (usage: {usage})")
        render([load_results(path) for path in argv])
    except ZdinitError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return err.exit_code
    return 0


def publish(partial, final):
    os.rename(partial, final)
    latest = final.parent / "latest"
    tmp = final.parent / ".latest.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(final.name)
    os.replace(tmp, latest)
    return final


def mark_failed(partial):
    failed = partial.with_name(partial.name.replace(".partial", "-FAILED")
                               .lstrip("."))
    os.rename(partial, failed)
    return failed


def fmt_ms(v):
    return "-" if v is None else f"{v:.2f}"


def ratio_text(vs):
    """A stats.speedup() result as '1.23x [1.10-1.40]', '-' when absent."""
    return "-" if not vs else (f"{vs['speedup']:.2f}x "
                               f"[{vs['ci95'][0]:.2f}-{vs['ci95'][1]:.2f}]")


def text_table(runs, header, make_rows):
    table = [header] + make_rows(runs)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
             for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(runs, header, make_rows):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in make_rows(runs)]
    return "\n".join(lines)


def placement_lines(env, accel):
    """Where each kernel's timed functions sit; under TCG, a warning for
    those whose 4 KiB page crossing differs between the kernels."""
    kernels = env.get("placement") or {}
    if not any(kernels.values()):
        return []
    lines = ["- code placement (page offsets of the timed functions):"]
    for kernel, funcs in kernels.items():
        lines.append(f"  - {kernel}: " + "; ".join(
            f"{name} {where}" for name, where in sorted(funcs.items())))
    differ = placement.differing(kernels)
    if differ and accel == "TCG":
        lines.append(
            "- **TCG placement warning:** " + ", ".join(differ) + " cross"
            " a 4 KiB page in some kernels and not in others.  TCG does not"
            " chain jumps across guest pages, so their times can differ"
            " between these kernels with identical code"
            " (docs/hotplug-slowdown.md); compare them on hardware.")
    return lines


def header_lines(results, placement=True):
    """What ran where: the lines that open a run's summary.md; placement:
    with where the timed memmap functions sit in each kernel."""
    env = results["env"]
    accel = env["accel"].upper()
    return [
        f"- command: `{results['command']}`",
        f"- accelerator: {accel} ({env['accel_reason']})",
        "- kernels: " + ", ".join(f"{k} {v}" for k, v in env["kernels"].items()),
        f"- host: {env['host_cpu']}, {env['host_cpus']} CPUs, "
        f"Linux {env['host_kernel']}; {env['qemu']}",
        f"- project revision: {env['project_rev']}",
        *(placement_lines(env, accel) if placement else [])]


def save_plot(draw, data, path):
    """draw(data, path), or one warning line if it cannot: a plot only
    shows results already written, and must never cost them."""
    try:
        draw(data, path)
    except Exception as err:  # a missing matplotlib and any drawing bug alike
        path.unlink(missing_ok=True)
        why = (str(err).splitlines() or [""])[0]
        hint = (" (install python3-matplotlib and run Debian's "
                "/usr/bin/python3)" if isinstance(err, ImportError) else "")
        progress.say(f"warning: {path.name} not drawn: "
                     f"{type(err).__name__}: {why}{hint}")
        return False
    return True
