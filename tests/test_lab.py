"""The native lab: byte equality with the kernel's images, dispatch, ASan."""
import json
import os
import re
import subprocess

import pytest

from zdinit import lab


def cpuinfo_flags():
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def test_vectors_are_a_real_kernel_capture():
    text = lab.VECTORS.read_text()
    assert "captured from a QEMU guest" in text
    fields = dict(line.split(" ", 1) for line in text.splitlines()
                  if line and not line.startswith("#"))
    size = int(fields["struct_page_size"])
    for key in ("order0", "head", "tail1_2M", "tail1_1G", "tail"):
        assert len(fields[key].strip()) == 2 * size, key
    # The tail's compound_head word has bit 0 set (it points at a head).
    off = int(fields["head_ptr_offset"])
    word = bytes.fromhex(fields["tail"].strip())[off:off + 8]
    assert int.from_bytes(word, "little") & 1


@pytest.mark.parametrize("sanitized", [False, True], ids=["plain", "asan-ubsan"])
def test_every_strategy_writes_the_kernels_bytes(sanitized):
    out = lab.zdlab(["verify", str(lab.VECTORS)], sanitized=sanitized)
    m = re.search(r"(\d+) passed, (\d+) failed", out)
    assert m and int(m.group(1)) > 1000 and m.group(2) == "0", out


def test_truncated_vectors_are_refused(tmp_path):
    lines = lab.VECTORS.read_text().splitlines()
    (tmp_path / "short.txt").write_text("\n".join(lines[:-1]) + "\n")
    proc = subprocess.run([str(lab.binary()), "verify",
                           str(tmp_path / "short.txt")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "cannot read" in proc.stderr


def test_dispatcher_matches_cpuinfo():
    feats = lab.features()
    flags = cpuinfo_flags()
    supported = set(feats["supported"])
    assert ("avx512-vmovntdq" in supported) <= ("avx512f" in flags)
    assert ("avx2-vmovntdq" in supported) <= ("avx2" in flags)
    assert ("movdir64b" in supported) <= ("movdir64b" in flags or
                                          feats["cpu"]["movdir64b"])
    assert {"slow", "template-u64", "template-memcpy"} <= supported


def test_masked_features_are_never_used():
    env = dict(os.environ, ZDLAB_MASK="avx512f,avx2,movdir64b")
    feats = json.loads(lab.zdlab(["features"], env=env))
    assert not {"avx512-vmovntdq", "avx2-vmovntdq", "movdir64b"} & set(feats["supported"])
    out = json.loads(lab.zdlab(["bench", str(lab.VECTORS), "--sizes", "1M",
                                "--reps", "1", "--strategies",
                                "avx512-vmovntdq,sse2-movntdq"], env=env))
    by = {r["strategy"]: r for r in out["runs"]}
    assert by["avx512-vmovntdq"].get("unsupported") is True
    assert by["sse2-movntdq"]["median_ns"] > 0
    assert by["sse2-movntdq"]["floor_by"] not in ("avx512-vmovntdq",
                                                  "avx2-vmovntdq", "movdir64b")


def test_bad_lab_options_are_one_line_errors():
    for args, message in [(["bench", str(lab.VECTORS), "--sizes", "0"], "bad size"),
                          (["bench", str(lab.VECTORS), "--geometry", "3M"], "unknown geometry"),
                          (["bench", str(lab.VECTORS), "--threads", "0"], "--threads"),
                          (["verify", "/nonexistent"], "cannot read")]:
        proc = subprocess.run([str(lab.binary())] + args, capture_output=True,
                              text=True)
        assert proc.returncode == 2
        assert message in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_recommendation_finds_the_crossover():
    def run(state, size, strategy, ns):
        return {"state": state, "memmap_bytes": size, "strategy": strategy,
                "median_ns": ns}
    runs = [run("cold", 1, "template-u64", 10), run("cold", 1, "sse2-movntdq", 12),
            run("cold", 2, "template-u64", 20), run("cold", 2, "sse2-movntdq", 15),
            run("cold", 4, "template-u64", 40), run("cold", 4, "sse2-movntdq", 25)]
    rec = lab.recommend(runs)["cold"]
    assert rec["stream_wins_from_bytes"] == 2
    assert rec["best_at_largest"] == "sse2-movntdq"
