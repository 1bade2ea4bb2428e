"""safety --full's hotplug-tracepoint job alone, on the trace kernel."""
import pathlib
import sys

from zdinit import cli
from zdinit.checks import safety
from zdinit.vm import qemu

job = next(j for j in safety.FULL if j.scenario == "hotplug-tracepoint")
target = cli.prepare_target("trace", cli.STRATEGIES)
accel, _ = qemu.choose_accel(target.kernel, target.initrd)
logs = pathlib.Path(sys.argv[1])
logs.mkdir(parents=True, exist_ok=True)
for row in safety.run_job(job, target, accel, logs):
    print(row)
