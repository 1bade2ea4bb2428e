"""Code placement of the timed functions (TCG chains jumps only within a
4 KiB guest page): the offsets of the hotplug-base and patched kernels
that showed the 2x memmap_init_range difference (docs/hotplug-slowdown.md)."""
from zdinit.results import report
from zdinit.vm import placement

# Excerpts of the two System.maps (6.12.117, patch 11 alone / whole series).
HOTPLUG_BASE = """\
ffffffff8116e020 T __init_single_page
ffffffff8116e070 T reserve_bootmem_region
ffffffff8116e130 T memmap_init_range
ffffffff8116e380 T init_currently_empty_zone
ffffffff8116e3f0 T set_zone_contiguous
ffffffff8116e470 T clear_zone_contiguous
ffffffff81b5a720 B highest_memmap_pfn
"""
PATCHED = """\
ffffffff8116ee60 T __init_single_page
ffffffff8116ef70 T memmap_init_range
ffffffff8116f1c0 T init_currently_empty_zone
ffffffff8116f230 T set_zone_contiguous
ffffffff8116f2b0 T clear_zone_contiguous
ffffffff81538d70 T memmap_init_zone_device
ffffffff815394a0 T build_all_zonelists
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_patched_memmap_init_range_crosses_a_page(tmp_path):
    got = placement.kernel_placement(write(tmp_path, "p", PATCHED))
    assert got["memmap_init_range"] == "0xf70-0x11c0, crosses a 4 KiB page"
    assert got["memmap_init_zone_device"].endswith("crosses a 4 KiB page")
    assert got["set_zone_contiguous"] == "0x230-0x2b0, within one 4 KiB page"


def test_hotplug_base_memmap_init_range_in_one_page(tmp_path):
    got = placement.kernel_placement(write(tmp_path, "b", HOTPLUG_BASE))
    assert got["memmap_init_range"] == "0x130-0x380, within one 4 KiB page"
    assert "memmap_init_zone_device" not in got


def test_data_symbols_do_not_end_a_function(tmp_path):
    text = ("ffffffff81000ff0 T memmap_init_range\n"
            "ffffffff81001000 B some_bss\n"
            "ffffffff81001020 T next_function\n")
    got = placement.kernel_placement(write(tmp_path, "m", text))
    assert got["memmap_init_range"].endswith("crosses a 4 KiB page")


def test_ending_exactly_at_a_page_does_not_cross():
    assert not placement.crosses(0x1f00, 0x2000)
    assert placement.crosses(0x1f00, 0x2001)


def test_missing_map_gives_nothing(tmp_path):
    assert placement.kernel_placement(tmp_path / "absent") == {}


def test_differing_and_summary_warning(tmp_path):
    kernels = {
        "hotplug-base": placement.kernel_placement(
            write(tmp_path, "b", HOTPLUG_BASE)),
        "patched": placement.kernel_placement(write(tmp_path, "p", PATCHED)),
    }
    assert placement.differing(kernels) == ["memmap_init_range"]
    env = {"placement": kernels}
    lines = report.placement_lines(env, "TCG")
    assert any("TCG placement warning" in line and "memmap_init_range" in line
               for line in lines)
    assert not any("warning" in line
                   for line in report.placement_lines(env, "KVM"))
    assert report.placement_lines({}, "TCG") == []
