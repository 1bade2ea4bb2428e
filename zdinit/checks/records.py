"""Stock's recorded outcomes: a JSON file in the checkout, one entry per
base, that a check compares the series with instead of booting stock."""
import json
import os


def of_base(path, base):
    """What path records for base ({} where it records nothing)."""
    return json.loads(path.read_text()).get(base.name, {}) \
        if path.exists() else {}


def write(path, base, entries, merge):
    """Record entries for base in path, whole or not at all: in place of
    what it had for base, or merged into it; other bases are kept."""
    recorded = json.loads(path.read_text()) if path.exists() else {}
    if merge:
        recorded.setdefault(base.name, {}).update(entries)
    else:
        recorded[base.name] = entries
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    os.replace(partial, path)
