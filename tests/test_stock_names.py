"""The unpatched kernels are called stock; their first names (base,
hotplug-base, clear-base) stay accepted on the command line and in the
records of the runs made with them."""
import pytest

from zdinit import cli
from zdinit.families import clearing, rebind
from zdinit.kernel import bases, build


@pytest.mark.parametrize("argv,field,want", [
    (["build", "base", "patched"], "variants", ["stock", "patched"]),
    (["bench", "--kernels", "base,hotplug-base,patched"], "kernels",
     ["stock", "hotplug-stock", "patched"]),
    (["clear", "--kernels", "clear-base,clear"], "kernels",
     ["clear-stock", "clear"]),
])
def test_first_names_mean_the_stock_kernels(argv, field, want):
    args = cli.parser().parse_args(argv)
    assert getattr(args, field) == want


def test_a_first_name_builds_in_the_stock_kernels_directory():
    base = bases.get("7.3")
    assert build.work_name("base", base) == build.work_name("stock", base)
    assert build.variant_spec("hotplug-base") is \
        build.VARIANTS["hotplug-stock"]


def record(kernel, strategy, samples):
    return {"scenario": "fsdax-dev", "align": None, "kernel": kernel,
            "strategy": strategy, "samples_ms": samples}


@pytest.mark.parametrize("stock", ["stock", "base"])
def test_the_series_is_compared_with_stock_by_either_name(stock):
    runs = rebind.resummarize([record(stock, "default", [4.0, 4.0, 4.0]),
                               record("patched", "auto", [2.0, 2.0, 2.0])])
    assert "vs_base" not in runs[0]
    assert runs[1]["vs_base"]["speedup"] == 2.0


@pytest.mark.parametrize("stock", ["clear-stock", "clear-base"])
def test_clearing_is_compared_with_stock_by_either_name(stock):
    def run(kernel, method, gbps):
        return {"base": "7.3", "page": "2M", "preempt": "none",
                "kernel": kernel, "method": method, "samples_gbps": gbps,
                "latency": None}
    runs = clearing.resummarize([run(stock, "default", [1.0, 1.0]),
                                 run("clear", "stream", [3.0, 3.0])])
    assert runs[1]["vs_base"]["speedup"] == 3.0


def test_building_a_stock_kernel_removes_its_first_names_directory(
        tmp_path, monkeypatch):
    """A cache from before the rename holds work/<base>/base: the stock
    kernel, once built as stock, leaves no stale copy of itself."""
    from zdinit import cache
    monkeypatch.setenv("ZDINIT_CACHE", str(tmp_path / "cache"))
    base = bases.get("7.3")
    with cache.lock("pytest scratch cache"):
        work = cache.src_dir("7.3/stock").parent.parent
        for name in ("base", "base+contiguity", "stock", "patched"):
            (work / name / "linux").mkdir(parents=True)
        build.forget_former_directories("stock", base, False)
        assert sorted(p.name for p in work.iterdir()) == [
            "base+contiguity", "patched", "stock"]
        build.forget_former_directories("patched", base, False)
        assert (work / "patched").is_dir()
