"""make lint fails on what its linter or its type checker finds."""
import shutil

import pytest

from zdinit import deps, lint, paths
from zdinit.errors import ZdinitError


def checkout(tmp_path, harness_code):
    """A checkout of lint's folders holding one module of harness_code."""
    for folder in lint.LINTED:
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "ok.py").write_text("VALUE = 1\n")
    (tmp_path / "zdinit" / "module.py").write_text(harness_code)
    shutil.copy(paths.ROOT / "mypy.ini", tmp_path)
    return tmp_path


@pytest.fixture
def at(monkeypatch):
    monkeypatch.setattr(deps, "ensure_packages", lambda packages: None)
    return lambda root: monkeypatch.setattr(paths, "ROOT", root)


def test_clean_code_passes(tmp_path, at):
    at(checkout(tmp_path, "def double(n: int) -> int:\n    return 2 * n\n"))
    lint.run()


@pytest.mark.parametrize("code,finder", [
    ("import os\n", "pyflakes"),                       # an unused import
    ("def f():\n    return undefined_name\n", "pyflakes"),
    ("def f():\n    n: int = 'one'\n    return n\n", "mypy"),
])
def test_a_finding_fails_the_run_naming_its_checker(tmp_path, at, code,
                                                    finder):
    at(checkout(tmp_path, code))
    with pytest.raises(ZdinitError, match="found problems") as err:
        lint.run()
    assert finder in str(err.value).split(" found")[0]


def test_every_test_selection_lints_before_its_tests(monkeypatch):
    """A finding stops make test-unit (and so make test, which lints the
    same way under its lock) before pytest starts."""
    from zdinit import cli

    def finding(install):
        raise ZdinitError("lint: pyflakes found problems (listed above)")
    ran = []
    monkeypatch.setattr(deps, "ensure_packages", lambda packages: None)
    monkeypatch.setattr(lint, "run", finding)
    monkeypatch.setattr(cli.subprocess, "run", lambda cmd, **kw: ran.append(cmd))
    assert cli.main(["test", "--unit"]) == 1 and ran == []
