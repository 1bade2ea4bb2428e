"""safety --full's hotplug-tracepoint job alone, on the trace kernel."""
import pathlib
import sys

from zdinit import cli
from zdinit.checks import safety
from zdinit.kernel import bases, under_test

job = next(j for j in safety.FULL if j.scenario == "hotplug-tracepoint")
(target,), accel, _ = under_test.prepare(
    [cli.wanted("trace", bases.get(bases.DEFAULT), cli.STRATEGIES)])
logs = pathlib.Path(sys.argv[1])
logs.mkdir(parents=True, exist_ok=True)
for row in safety.run_job(job, target, accel, logs):
    print(row)
