#!/usr/bin/env python3
"""Makes the bundles that the C and Python tests of libencfs read.

    make_fixture.py DIR BIN_DIR      (BIN_DIR holds encfs-pack, encfs-keygen)

Shared by EmbedTests (Swift, which runs the C programs) and the pytest
suite in bindings/python/tests, so both test the same tree. DIR gets:

    src/            the packed tree:
                      docs/a.pdf        10,000 seeded bytes, mode 0640,
                                        mtime 1600000000.123456789
                      docs/b.txt        "hello\\n"
                      docs/empty        0 bytes
                      docs/data.csv     a small CSV, docs/data.json a JSON
                      docs/x.zip        a zip of two members
                      docs/sub/deep.txt "deep\\n"
                      big.bin           1 MiB + 123 seeded bytes (257 chunks)
                      f\\xff.bin         a name that is not UTF-8
                      d\\xfe/inner.txt   a directory whose name is not UTF-8
                      caf\\xc3\\xa9.txt    a UTF-8 name
                      link-a -> docs/a.pdf, link-docs -> docs,
                      outside -> /etc/passwd, loop -> loop
    app.key other.key          raw keys (app.key opens app.bundle, one.bundle)
    host.key host.key.pub      an X25519 identity (multi.bundle's recipient)
    pass.txt                   multi.bundle's passphrase, "correct horse battery staple\\n"
    sign.key sign.key.pub      signs app.bundle; other-sign.key.pub signs nothing
    app.bundle                 src, 4 KiB chunks, one raw-key slot, signed
    multi.bundle               src behind a passphrase slot and a recipient slot, unsigned
    one.bundle                 one.bin (3 chunks + 500 bytes), key app.key
    damaged.bundle             one.bundle with a byte of chunk 1 flipped
    future.bundle              app.bundle claiming format version 99
    truncated.bundle           app.bundle less its last byte
    garbage.bundle             4096 bytes that are no bundle
"""
import io
import os
import random
import subprocess
import sys
import zipfile

PASSPHRASE = b"correct horse battery staple"
CHUNK = 4096
A_MTIME = (1600000000, 123456789)


def _write(path, data, mode=0o644):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def tree_files():
    """Path (bytes, relative) -> contents of every regular file in src/."""
    rng = random.Random(0x656D626564)
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("one.txt", "first member\n")
        z.writestr("two/two.txt", "second member\n" * 100)
    return {
        b"docs/a.pdf": rng.randbytes(10000),
        b"docs/b.txt": b"hello\n",
        b"docs/empty": b"",
        b"docs/data.csv": b"name,count\nalpha,1\nbeta,2\ngamma,3\n",
        b"docs/data.json": b'{"name": "encfs", "values": [1, 2, 3]}\n',
        b"docs/x.zip": zbuf.getvalue(),
        b"docs/sub/deep.txt": b"deep\n",
        b"big.bin": rng.randbytes((1 << 20) + 123),
        b"f\xff.bin": b"not utf-8\n",
        b"d\xfe/inner.txt": b"inside\n",
        "café.txt".encode(): b"utf-8 name\n",
    }


LINKS = {b"link-a": b"docs/a.pdf", b"link-docs": b"docs", b"outside": b"/etc/passwd", b"loop": b"loop"}


def run(*argv):
    subprocess.run([os.fsencode(a) if isinstance(a, str) else a for a in argv], check=True,
                   stdout=subprocess.DEVNULL)


def make(directory, bin_dir):
    d = os.fsencode(directory)
    pack = os.path.join(os.fsencode(bin_dir), b"encfs-pack")
    keygen = os.path.join(os.fsencode(bin_dir), b"encfs-keygen")
    src = os.path.join(d, b"src")
    for sub in (b"docs/sub", b"d\xfe"):
        os.makedirs(os.path.join(src, sub), exist_ok=True)
    for path, data in tree_files().items():
        _write(os.path.join(src, path), data, 0o640 if path == b"docs/a.pdf" else 0o644)
    os.utime(os.path.join(src, b"docs/a.pdf"), ns=(A_MTIME[0] * 10**9 + A_MTIME[1],) * 2)
    for link, target in LINKS.items():
        os.symlink(target, os.path.join(src, link))
    os.makedirs(os.path.join(d, b"one"))
    _write(os.path.join(d, b"one/one.bin"), random.Random(7).randbytes(3 * CHUNK + 500))

    p = lambda name: os.path.join(d, name)  # noqa: E731
    run(keygen, "--symmetric", "-o", p(b"app.key"))
    run(keygen, "--symmetric", "-o", p(b"other.key"))
    run(keygen, "-o", p(b"host.key"))
    run(keygen, "--sign", "-o", p(b"sign.key"))
    run(keygen, "--sign", "-o", p(b"other-sign.key"))
    _write(p(b"pass.txt"), PASSPHRASE + b"\n", 0o600)
    run(pack, "--quiet", "--chunk-size", "4K", "--key-file", p(b"app.key"), "--sign-key", p(b"sign.key"),
        "--", src, p(b"app.bundle"))
    run(pack, "--quiet", "--scrypt-log-n", "14", "--passphrase-file", p(b"pass.txt"),
        "--recipient", p(b"host.key.pub"), "--", src, p(b"multi.bundle"))
    run(pack, "--quiet", "--chunk-size", "4K", "--key-file", p(b"app.key"), "--", p(b"one"), p(b"one.bundle"))

    one = bytearray(open(p(b"one.bundle"), "rb").read())
    header = int.from_bytes(one[12:16], "little")
    # one.bundle holds one file, so its chunks start the payload: chunk i
    # at H + i * (CHUNK + 16) (docs/FORMAT.md).
    one[header + (CHUNK + 16) + 100] ^= 0x01
    _write(p(b"damaged.bundle"), bytes(one))
    app = bytearray(open(p(b"app.bundle"), "rb").read())
    future = bytearray(app)
    future[8:10] = (99).to_bytes(2, "little")
    _write(p(b"future.bundle"), bytes(future))
    _write(p(b"truncated.bundle"), bytes(app[:-1]))
    _write(p(b"garbage.bundle"), random.Random(3).randbytes(4096))


def make_huge(directory, bin_dir, size=5 << 30):
    """huge.bundle: src-huge/huge.bin, `size` sparse bytes (zeros) with b"X"
    at 4 GiB + 7, packed with zstd so the bundle stays small. Returns its path."""
    d = os.fsencode(directory)
    src = os.path.join(d, b"src-huge")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, b"huge.bin"), "wb") as f:
        f.truncate(size)
        f.seek((4 << 30) + 7)
        f.write(b"X")
    bundle = os.path.join(d, b"huge.bundle")
    run(os.path.join(os.fsencode(bin_dir), b"encfs-pack"), "--quiet", "--compress", "zstd", "--chunk-size", "1M",
        "--key-file", os.path.join(d, b"app.key"), "--", src, bundle)
    os.unlink(os.path.join(src, b"huge.bin"))
    return bundle


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: make_fixture.py DIR BIN_DIR")
    make(sys.argv[1], sys.argv[2])
