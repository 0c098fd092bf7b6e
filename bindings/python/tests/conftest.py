"""Fixtures of the encfs Python tests.

Run by EmbedTests (Swift), which sets ENCFS_TEST_FIXTURE (the bundles of
Tests/EmbedTests/Fixture/make_fixture.py), ENCFS_TEST_URL (nginx serving
them), ENCFS_LIBRARY and ENCFS_BIN_DIR. Standalone,
`ENCFS_BIN_DIR=... ENCFS_LIBRARY=$ENCFS_BIN_DIR/libencfs.so python3 -m pytest bindings/python/tests`
makes its own fixture and skips the remote tests.
"""
import importlib.util
import os
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
sys.path.insert(0, os.path.join(ROOT, "Tests", "EmbedTests", "Fixture"))

import make_fixture  # noqa: E402


class Fixture:
    def __init__(self, directory):
        self.dir = directory

    def path(self, name):
        return os.path.join(self.dir, name)

    def source(self, relative):
        """The bytes of a packed file (relative path, str or bytes)."""
        rel = os.fsencode(relative)
        with open(os.path.join(os.fsencode(self.dir), b"src", rel), "rb") as f:
            return f.read()

    @property
    def app(self):
        return self.path("app.bundle")

    @property
    def key(self):
        return self.path("app.key")


@pytest.fixture(scope="session")
def fx(tmp_path_factory):
    directory = os.environ.get("ENCFS_TEST_FIXTURE")
    if not directory:
        bin_dir = os.environ.get("ENCFS_BIN_DIR")
        if not bin_dir:
            pytest.fail("set ENCFS_BIN_DIR to the release build (encfs-pack, encfs-keygen, libencfs.so)")
        directory = str(tmp_path_factory.mktemp("fixture"))
        make_fixture.make(directory, bin_dir)
    return Fixture(directory)


@pytest.fixture(scope="session")
def huge(fx, tmp_path_factory):
    """A bundle holding huge.bin: 5 GiB of sparse zeros with b"X" at 4 GiB + 7."""
    bin_dir = os.environ.get("ENCFS_BIN_DIR")
    if not bin_dir:
        pytest.fail("set ENCFS_BIN_DIR")
    directory = str(tmp_path_factory.mktemp("huge"))
    os.symlink(fx.key, os.path.join(directory, "app.key"))
    return make_fixture.make_huge(directory, bin_dir)


@pytest.fixture(scope="session")
def url():
    base = os.environ.get("ENCFS_TEST_URL")
    if not base:
        pytest.skip("no ENCFS_TEST_URL (EmbedTests serves the fixture with nginx)")
    return base


@pytest.fixture
def bundle(fx):
    import encfs
    with encfs.Bundle(fx.app, key_file=fx.key) as b:
        yield b


@pytest.fixture(scope="session")
def encfs_fsspec():
    """fsspec with the encfs protocol: by the entry point when the package
    is installed, registered here when it runs from the source tree."""
    fsspec = pytest.importorskip("fsspec")
    if "encfs" not in fsspec.registry and "encfs" not in fsspec.available_protocols():
        fsspec.register_implementation("encfs", "encfs.fsspec.EncFSFileSystem", clobber=True)
    return fsspec


def have(module):
    return importlib.util.find_spec(module) is not None


@pytest.fixture
def in_threads():
    """run(work, count=8): work(seed) on `count` threads at once, seeds 0 …
    count - 1; returns once every thread ended."""
    def run(work, count=8):
        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return run
