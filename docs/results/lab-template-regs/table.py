"""The README table of this directory from the zdlab runs given."""
import json, sys
print("| state | memmap | template-reload GB/s | template-regs GB/s | regs / reload |")
print("|---|---|---|---|---|")
for f in sys.argv[1:]:
    d = json.load(open(f))
    rows = {}
    for r in d["runs"]:
        rows.setdefault((r["state"], r["memmap_bytes"]), {})[r["strategy"]] = r
    for (st, sz), m in sorted(rows.items(), key=lambda k: (k[0][0], k[0][1])):
        a, b = m["template-reload"], m["template-regs"]
        gb = lambda r, k: r["memmap_bytes"] / r[k]
        print(f"| {st} | {sz >> 20}M ({f.split('/')[-1][:-5]}) | {gb(a,'median_ns'):.1f} [{gb(a,'max_ns'):.1f}-{gb(a,'min_ns'):.1f}] "
              f"| {gb(b,'median_ns'):.1f} [{gb(b,'max_ns'):.1f}-{gb(b,'min_ns'):.1f}] | {a['median_ns'] / b['median_ns']:.2f}x |")
