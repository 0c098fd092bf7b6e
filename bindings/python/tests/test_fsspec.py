"""The fsspec file system for encfs://, and pandas through it."""
import os

import pytest


@pytest.fixture
def options(fx):
    return {"bundle": fx.app, "key_file": fx.key}


def test_fsspec_open_and_pandas(encfs_fsspec, fx, options):
    with encfs_fsspec.open("encfs://docs/data.csv", "rb", **options) as f:
        assert f.read() == fx.source("docs/data.csv")
    with encfs_fsspec.open("encfs://docs/data.csv", "rt", **options) as f:
        assert f.readline() == "name,count\n"
    pandas = pytest.importorskip("pandas")
    frame = pandas.read_csv("encfs://docs/data.csv", storage_options=options)
    assert list(frame["name"]) == ["alpha", "beta", "gamma"]
    assert list(frame["count"]) == [1, 2, 3]
    assert pandas.read_json("encfs://docs/data.json", storage_options=options, typ="series")["name"] == "encfs"


def test_ls_info_find_walk(encfs_fsspec, options):
    fs = encfs_fsspec.filesystem("encfs", **options)
    assert sorted(fs.ls("docs", detail=False)) == ["docs/a.pdf", "docs/b.txt", "docs/data.csv", "docs/data.json",
                                                   "docs/empty", "docs/sub", "docs/x.zip"]
    entries = {e["name"]: e for e in fs.ls("encfs://docs")}
    assert entries["docs/a.pdf"]["size"] == 10000 and entries["docs/a.pdf"]["type"] == "file"
    assert entries["docs/sub"]["type"] == "directory"
    assert fs.info("docs/a.pdf")["size"] == 10000
    assert fs.info("link-docs")["type"] == "directory"
    assert fs.info("link-a")["type"] == "file" and fs.info("link-a")["size"] == 10000
    assert fs.isdir("docs") and fs.isfile("docs/b.txt") and not fs.exists("nope")
    found = fs.find("docs")
    assert "docs/sub/deep.txt" in found and "docs/a.pdf" in found and "docs/sub" not in found
    walked = {root: (sorted(dirs), sorted(files)) for root, dirs, files in fs.walk("docs")}
    assert walked["docs"][0] == ["sub"] and "a.pdf" in walked["docs"][1]
    assert walked["docs/sub"] == ([], ["deep.txt"])
    with pytest.raises(FileNotFoundError):
        fs.info("nope")


def test_cat_file_ranges_and_seeks(encfs_fsspec, fx, options):
    fs = encfs_fsspec.filesystem("encfs", **options)
    data = fx.source("big.bin")
    assert fs.cat_file("big.bin") == data
    assert fs.cat_file("big.bin", start=4090, end=4100) == data[4090:4100]
    assert fs.cat_file("big.bin", start=-100) == data[-100:]
    assert fs.cat_file("big.bin", start=10, end=-10) == data[10:-10]
    assert fs.cat_file("big.bin", start=len(data) + 5) == b""
    assert fs.cat_file("docs/empty") == b""
    with fs.open("big.bin") as f:
        f.seek(1 << 20)
        assert f.read(123) == data[1 << 20:]
        f.seek(7)
        assert f.read(5) == data[7:12]
    with pytest.raises(PermissionError):
        fs.open("docs/new", "wb")


def test_non_utf8_through_fsspec(encfs_fsspec, options):
    fs = encfs_fsspec.filesystem("encfs", **options)
    names = fs.ls("", detail=False)
    assert "f\udcff.bin" in names
    assert fs.cat_file("f\udcff.bin") == b"not utf-8\n"
    assert os.fsencode("f\udcff.bin") == b"f\xff.bin"
