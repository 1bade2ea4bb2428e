import pathlib
import shlex
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT / "tests" / "data"

from zdinit import cache  # noqa: E402 (needs ROOT on sys.path)


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: builds kernels and boots QEMU")
    config.addinivalue_line("markers", "full: heavier e2e checks, make test-full only")


@pytest.fixture(scope="session", autouse=True)
def cache_lock(request):
    """A session with end-to-end tests is one run: it holds the cache lock
    from its first test to its last, and the zdinit commands it starts
    (with pass_fds=cache.held_fds()) share it.  Under 'python3 -m zdinit
    test' the session inherits the lock of that command instead."""
    if not any(item.get_closest_marker("e2e")
               for item in request.session.items):
        yield
        return
    with cache.lock("pytest " + shlex.join(sys.argv[1:])):
        yield
