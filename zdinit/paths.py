"""Where the repository's parts are: the one place that knows the layout
of the checkout around the package."""
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PATCHES = ROOT / "patches"
GUEST = ROOT / "guest"
CONFIGS = ROOT / "configs"
LAB = ROOT / "lab"
RESULTS = ROOT / "results"
DOCS = ROOT / "docs"
COMMITTED_RESULTS = DOCS / "results"
TESTS = ROOT / "tests"
