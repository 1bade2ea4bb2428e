"""Whether a built kernel can be timed by kprobe events (vm/trace.py):
checked on its .config and System.map before any of its guests boots."""
from zdinit.errors import ZdinitError
from zdinit.kernel import kconfig
from zdinit.vm import trace

# What guest/trace.sh needs: the probes and their tracefs files.
OPTIONS = ("CONFIG_KPROBES", "CONFIG_KPROBE_EVENTS")


def functions(system_map):
    """The text symbols of a System.map."""
    names = set()
    for line in system_map.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in "tT":
            names.add(fields[2])
    return names


def problem(kernel, family):
    """Why kernel cannot time family's functions by kprobe events, in one
    line naming it, or None."""
    name = kernel.variant if kernel.base is None else \
        f"{kernel.base.name}/{kernel.variant}"
    config = kernel.out / ".config"
    have = kconfig.parse(config.read_text()) if config.is_file() else {}
    missing = [o for o in OPTIONS if have.get(o) != "y"]
    if missing:
        return (f"kernel '{name}' has no {'=y, '.join(missing)}=y in "
                f"{config}: it cannot be timed by kprobe events (--timing "
                "log reads its log lines instead)")
    system_map = kernel.out / "System.map"
    found = functions(system_map.read_text()) if system_map.is_file() else set()
    for func in trace.PROBES.get(family, {}):
        if func not in found:
            return (f"kernel '{name}' has no function {func} in "
                    f"{system_map} to probe (inlined?)")
    return None


def require(kernel, family):
    """problem(), raised."""
    why = problem(kernel, family)
    if why:
        raise ZdinitError(why)
