"""The harness's folders are layers (docs/design.md, The harness): a
module imports only from its own folder and the folders below it, so
that a new import the other way fails here rather than in a review."""
import re

from conftest import ROOT

# Top to bottom; folders of one rank do not import each other, and the
# plumbing (top-level modules other than cli) is below them all.
RANKS = {"cli": 0, "docs": 1, "lab": 1, "checks": 2, "families": 3,
         "kernel": 4, "results": 4, "vm": 5}
PLUMBING = 6
IMPORT = re.compile(r"^\s*from zdinit(?:\.(\w+))?(?:\.\w+)? import ([\w, ()]+)",
                    re.M)


def layer(name):
    return RANKS.get(name, PLUMBING)


def imports(path):
    """The folders and top-level modules a module imports from."""
    for package, names in IMPORT.findall(path.read_text()):
        if package:
            yield package
        else:
            yield from (n.strip() for n in names.strip("()").split(",")
                        if n.strip())


def upward_imports():
    out = []
    for path in sorted((ROOT / "zdinit").rglob("*.py")):
        parts = path.relative_to(ROOT / "zdinit").parts
        own = parts[0] if len(parts) > 1 else path.stem
        for used in imports(path):
            if own == "__main__" or used == own:
                continue
            if layer(used) < layer(own) or (layer(used) == layer(own)
                                            and layer(own) != PLUMBING):
                out.append(f"{'/'.join(parts)} imports {used}")
    return out


def test_no_module_imports_from_a_layer_above_its_own():
    assert upward_imports() == []


def test_the_check_sees_an_upward_import(monkeypatch):
    """Shown failing: vm/ made to sit above families/."""
    monkeypatch.setitem(RANKS, "vm", 2)
    assert any(line.startswith("kernel/") and line.endswith("imports vm")
               for line in upward_imports())
