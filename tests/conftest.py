import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT / "tests" / "data"


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: builds kernels and boots QEMU")
    config.addinivalue_line("markers", "full: heavier e2e checks, make test-full only")
