"""The store rule's tables, from every committed native lab run (Zen 3,
Zen 4, Zen 5 and this Xeon, named by zdinit/lab.py's CPU_NAMES): what
zdinit/store_rule.py chooses at a 100 GB and a 1 TB bind against the
best the kernel can run and the best store measured, every point
measured at those sizes, and where the rule's choice is more than 10%
slower than the best, with why (zdinit/lab.py, rule_tables()).

Run from the repository root:
  PYTHONPATH=. python3 docs/results/lab-xeon-emr-16cpu/table.py \
      docs/results/lab-xeon-emr-16cpu/results.json
results.json records this directory's command and revision; the runs
are read from docs/results/lab*/ (zdlab/ here), not from it.
"""
import sys

from zdinit.lab import memmap_stores
from zdinit.results import report
from zdinit.errors import UsageError


def render(results):
    if len(results) != 1 or results[0]["runs"]:
        raise UsageError("give this directory's results.json alone")
    print(memmap_stores.rule_tables())


if __name__ == "__main__":
    sys.exit(report.table_script(render, "PYTHONPATH=. python3 "
                                 "docs/results/lab-xeon-emr-16cpu/table.py "
                                 "docs/results/lab-xeon-emr-16cpu/"
                                 "results.json"))
