"""encfs.Bundle against the fixture: listing, stat, reads, file objects,
walks, unlocks and every error."""
import errno
import io
import json
import os
import zipfile

import pytest

import encfs


def test_listdir_str_bytes_and_root(bundle):
    root = ["big.bin", "café.txt", "docs", "d\udcfe", "f\udcff.bin", "link-a", "link-docs", "loop", "outside"]
    assert bundle.listdir() == root
    assert bundle.listdir("/") == root
    assert bundle.listdir("") == root
    assert bundle.listdir(b"") == [b"big.bin", b"caf\xc3\xa9.txt", b"docs", b"d\xfe", b"f\xff.bin",
                                   b"link-a", b"link-docs", b"loop", b"outside"]
    assert bundle.listdir("docs") == ["a.pdf", "b.txt", "data.csv", "data.json", "empty", "sub", "x.zip"]
    assert bundle.listdir(b"d\xfe") == [b"inner.txt"]
    assert bundle.listdir("d\udcfe") == ["inner.txt"]
    assert bundle.listdir("link-docs") == bundle.listdir("docs")


def test_non_utf8_names_round_trip(bundle, fx):
    for name in bundle.listdir():
        if name.startswith("f"):
            assert bundle.read_bytes(name) == fx.source(b"f\xff.bin")
    assert bundle.read_bytes(b"d\xfe/inner.txt") == b"inside\n"
    assert bundle.read_bytes("café.txt") == b"utf-8 name\n"


def test_stat(bundle):
    st = bundle.stat("docs/a.pdf")
    assert (st.kind, st.size, st.mode, st.mtime_ns, st.target) == ("file", 10000, 0o640, 1600000000123456789, None)
    assert abs(st.mtime - 1600000000.123456789) < 1e-6
    assert bundle.stat("docs").kind == "directory"
    link = bundle.stat("link-a")
    assert (link.kind, link.target, link.size) == ("symlink", "docs/a.pdf", 10)
    assert bundle.stat(b"link-a").target == b"docs/a.pdf"
    assert bundle.stat("outside").target == "/etc/passwd"
    assert bundle.stat("docs/empty").size == 0


def test_read_bytes_limit_and_empty(bundle, fx):
    assert bundle.read_bytes("big.bin") == fx.source("big.bin")
    assert bundle.read_bytes("docs/empty") == b""
    assert bundle.read_bytes("docs/b.txt", limit=6) == b"hello\n"
    with pytest.raises(encfs.TooLarge) as e:
        bundle.read_bytes("docs/b.txt", limit=5)
    assert e.value.path == "docs/b.txt"
    assert bundle.read_text("docs/b.txt") == "hello\n"
    assert bundle.read_bytes("link-a") == fx.source("docs/a.pdf")


def test_open_seek_read(bundle, fx):
    data = fx.source("big.bin")
    with bundle.open("big.bin") as f:
        assert isinstance(f, io.BufferedReader)
        assert f.seekable() and f.readable()
        for offset, count in [(0, 1), (4095, 2), (4096, 4096), (1 << 20, 200), (len(data) - 5, 100)]:
            f.seek(offset)
            assert f.read(count) == data[offset:offset + count]
            assert f.tell() == offset + len(data[offset:offset + count])
        f.seek(-10, io.SEEK_END)
        assert f.read() == data[-10:]
        f.seek(len(data) + 100)
        assert f.read(10) == b""
        f.seek(0)
        assert f.read() == data
    raw = bundle.open("big.bin", buffering=0)
    assert isinstance(raw, io.RawIOBase)
    buffer = bytearray(10000)
    raw.seek(4000)
    assert raw.readinto(buffer) == 10000 and bytes(buffer) == data[4000:14000]
    raw.close()
    with pytest.raises(ValueError):
        raw.readinto(buffer)
    with pytest.raises(ValueError):
        bundle.open("big.bin", "wb")


def test_empty_file_object(bundle):
    with bundle.open("docs/empty") as f:
        assert f.read() == b""
        assert f.read(10) == b""


def test_zipfile_json_and_text(bundle):
    with zipfile.ZipFile(bundle.open("docs/x.zip")) as z:
        assert z.namelist() == ["one.txt", "two/two.txt"]
        assert z.read("one.txt") == b"first member\n"
        assert z.read("two/two.txt") == b"second member\n" * 100
    with bundle.open("docs/data.json") as f:
        assert json.load(f) == {"name": "encfs", "values": [1, 2, 3]}
    with io.TextIOWrapper(bundle.open("docs/data.csv"), encoding="utf-8") as text:
        assert text.readline() == "name,count\n"
        assert text.read().splitlines() == ["alpha,1", "beta,2", "gamma,3"]
    with bundle.open("docs/b.txt", "r") as text:
        assert text.read() == "hello\n"


def test_walk_and_subpaths(bundle):
    walked = list(bundle.walk())
    assert walked[0] == ("", ["docs", "d\udcfe"], ["big.bin", "café.txt", "f\udcff.bin", "link-a", "link-docs", "loop",
                                                  "outside"])
    assert ("docs/sub", [], ["deep.txt"]) in walked
    assert ("d\udcfe", [], ["inner.txt"]) in walked
    assert len(walked) == 4
    assert bundle.subpaths("docs") == ["a.pdf", "b.txt", "data.csv", "data.json", "empty", "sub", "sub/deep.txt",
                                       "x.zip"]
    assert len(bundle.subpaths()) == 18


def test_unlocks(fx):
    key = bytes.fromhex(open(fx.key).read().strip())
    with encfs.Bundle(fx.app, key=key) as b:
        assert b.read_bytes("docs/b.txt") == b"hello\n"
    with encfs.Bundle(fx.app, key=bytearray(key)) as b:
        assert b.exists("docs")
    multi = fx.path("multi.bundle")
    for options in ({"passphrase": "correct horse battery staple"},
                    {"passphrase": b"correct horse battery staple"},
                    {"passphrase_file": fx.path("pass.txt")},
                    {"identity_file": fx.path("host.key")},
                    {"key_file": fx.path("other.key"), "passphrase": "wrong", "identity_file": fx.path("host.key")},
                    {"identity_file": [fx.path("host.key")], "key_file": [fx.path("other.key")]}):
        with encfs.Bundle(multi, **options) as b:
            assert b.read_bytes("docs/b.txt") == b"hello\n", options


def test_origin_checks(fx):
    pub = fx.path("sign.key.pub")
    with encfs.Bundle(fx.app, key_file=fx.key, verify_keys=[pub]) as b:
        bundle_id = b.bundle_id
    assert len(bundle_id) == 32
    with encfs.Bundle(fx.app, key_file=fx.key, verify_keys=[open(pub, "rb").read()], bundle_id=bundle_id):
        pass
    with pytest.raises(encfs.UntrustedSigner):
        encfs.Bundle(fx.app, key_file=fx.key, verify_keys=[fx.path("other-sign.key.pub")])
    with pytest.raises(encfs.NotSigned):
        encfs.Bundle(fx.path("one.bundle"), key_file=fx.key, verify_keys=[pub])
    with pytest.raises(encfs.UnexpectedBundleID):
        encfs.Bundle(fx.app, key_file=fx.key, bundle_id="0" * 32)
    badsig = fx.path("badsig.bundle")  # made by EmbedTests (BadSignatureBundle.swift)
    if not os.path.exists(badsig):
        pytest.skip("no badsig.bundle: EmbedTests makes it")
    encfs.Bundle(badsig, key_file=fx.key).close()
    with pytest.raises(encfs.BadSignature):
        encfs.Bundle(badsig, key_file=fx.key, verify_keys=[pub])


def test_context_manager_closes(fx):
    with encfs.Bundle(fx.app, key_file=fx.key) as b:
        f = b.open("docs/b.txt")
    assert b.closed
    with pytest.raises(ValueError):
        b.listdir()
    # A file opened before stays readable until it is closed.
    assert f.read() == b"hello\n"
    f.close()


def test_each_error(fx, bundle):
    with pytest.raises(encfs.WrongKey) as e:
        encfs.Bundle(fx.app, key_file=fx.path("other.key"))
    assert "wrong key" in str(e.value)
    with pytest.raises(encfs.UnusableKey):
        encfs.Bundle(fx.app, key_file=fx.path("no-such.key"))
    with pytest.raises(encfs.UnusableKey):
        encfs.Bundle(fx.app, key=b"short")
    with pytest.raises(encfs.NotABundle):
        encfs.Bundle(fx.path("garbage.bundle"), key_file=fx.key)
    with pytest.raises(encfs.UnsupportedVersion):
        encfs.Bundle(fx.path("future.bundle"), key_file=fx.key)
    with pytest.raises(encfs.DamagedBundle):
        encfs.Bundle(fx.path("truncated.bundle"), key_file=fx.key)
    with pytest.raises(encfs.InvalidArgument):
        encfs.Bundle(fx.app)
    with pytest.raises(ValueError):
        encfs.Bundle(fx.app, key_file=fx.key, bundle_id="xyz")
    with pytest.raises(encfs.IOFailure) as e:
        encfs.Bundle(fx.path("no-such.bundle"), key_file=fx.key)
    assert e.value.errno == errno.ENOENT and isinstance(e.value, OSError)

    with pytest.raises(FileNotFoundError) as e:
        bundle.stat("docs/nope")
    assert isinstance(e.value, encfs.NoSuchFile) and isinstance(e.value, encfs.Error)
    assert e.value.errno == errno.ENOENT and e.value.path == "docs/nope"
    with pytest.raises(NotADirectoryError):
        bundle.listdir("docs/b.txt")
    with pytest.raises(encfs.NotADirectory):
        bundle.stat("docs/b.txt/x")
    with pytest.raises(IsADirectoryError):
        bundle.open("docs")
    with pytest.raises(encfs.IsADirectory):
        bundle.read_bytes("docs")
    with pytest.raises(encfs.SymlinkOutsideBundle):
        bundle.read_bytes("outside")
    with pytest.raises(encfs.IOFailure) as e:
        bundle.read_bytes("loop")
    assert e.value.errno == errno.ELOOP
    # Ordinary except clauses work.
    try:
        bundle.read_bytes("nope")
    except OSError as error:
        assert error.errno == errno.ENOENT


def test_damaged_chunk_raises_and_never_returns_wrong_bytes(fx):
    one = open(os.path.join(fx.dir, "one", "one.bin"), "rb").read()
    with encfs.Bundle(fx.path("damaged.bundle"), key_file=fx.key) as b:
        with pytest.raises(encfs.DamagedChunk) as e:
            b.read_bytes("one.bin")
        assert (e.value.path, e.value.chunk) == ("one.bin", 1)
        raw = b.open("one.bin", buffering=0)
        # Chunks 0, 2 and 3 read; any read that touches chunk 1 raises.
        assert raw.pread(4096, 0) == one[:4096]
        assert raw.pread(4096, 8192) == one[8192:12288]
        for offset, count in [(4096, 1), (4000, 200), (8191, 1), (0, len(one))]:
            with pytest.raises(encfs.DamagedChunk):
                raw.pread(count, offset)
        buffer = bytearray(b"\xa5" * 8192)
        raw.seek(0)
        with pytest.raises(encfs.DamagedChunk):
            raw.readinto(buffer)
        assert bytes(buffer[:4096]) != one[:4096]
        raw.close()
        with pytest.raises(encfs.DamagedChunk):
            with b.open("one.bin") as f:
                f.read()


def test_library_version():
    major, minor, patch = encfs.library_version().split(".")
    assert encfs.library_version() == encfs.__version__
