"""The measuring method's statistics, checked against known synthetic timings."""

import numpy as np
import pytest

from edgeinf.bench import Evictor, compare, last_level_cache_bytes, measure, summarize


def test_summarize_known_timings():
    stats = summarize(np.arange(1, 101, dtype=float))  # 1..100 us
    assert stats.runs == 100
    assert stats.median_us == pytest.approx(50.5)
    assert stats.p95_us == pytest.approx(95.05)
    assert stats.p99_us == pytest.approx(99.01)
    assert stats.max_us == 100 and stats.min_us == 1
    assert stats.throughput_per_s == pytest.approx(1e6 / 50.5)


def test_measure_counts_calls():
    calls = []
    stats = measure(lambda: calls.append(1), warmup=3, runs=7, batch=4)
    assert len(calls) == 3 + 7 * 4
    assert stats.runs == 7 and stats.batch == 4


def test_compare_interleaves_and_ranks_a_slower_function_slower():
    order = []

    def fast():
        order.append("f")

    def slow():
        order.append("s")
        sum(range(20000))

    out = compare({"fast": fast, "slow": slow}, warmup=0, runs=10, batch=1, rounds=5)
    assert out["slow"].median_us > out["fast"].median_us
    assert "".join(order[:4]) == "ffss"  # two per round, then the other contender


def test_measure_rejects_nonsense():
    with pytest.raises(ValueError, match="runs must be"):
        measure(lambda: None, runs=0)


@pytest.mark.parametrize(("sizes", "expected"), [(["48K", "1024K", "32768K"], 32 << 20), (["2M", "512K"], 2 << 20)])
def test_last_level_cache_is_the_largest_listed(tmp_path, sizes, expected):
    for i, size in enumerate(sizes):
        (tmp_path / f"index{i}").mkdir()
        (tmp_path / f"index{i}" / "size").write_text(size + "\n")
    assert last_level_cache_bytes(tmp_path) == expected


def test_last_level_cache_defaults_when_sysfs_has_none(tmp_path):
    (tmp_path / "index0").mkdir()
    (tmp_path / "index0" / "size").write_text("unknown\n")
    assert last_level_cache_bytes(tmp_path) == 32 << 20
    assert last_level_cache_bytes(tmp_path / "missing") == 32 << 20


def test_evictor_reads_one_byte_per_line_of_twice_the_cache():
    evict = Evictor(cache_bytes=1 << 20)
    assert evict.lines.size == (2 << 20) // 64
    assert evict.lines.strides == (64,)
    evict()  # reads only: the buffer is unchanged
    assert int(evict.lines.min()) == 1 and int(evict.lines.max()) == 1
