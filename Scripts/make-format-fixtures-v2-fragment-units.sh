#!/usr/bin/env bash
# Format version 2 with fragment units: part of Scripts/make-format-fixtures.sh
# (run that with "v2-fragment-units"; this takes the built encfs-pack, the
# output directory and a scratch directory). Writes
# Tests/FormatTests/Fixtures/v2-fragment-units/: golden.bundle (zstd level 3,
# 4 KiB chunks, 16 KiB fragment units: header flags 0x0E01; files below
# 2 KiB packed into two fragments, the first filled past one chunk, one
# slice duplicated at another path, an empty file, two files of their
# own), golden.key, manifest.json, and broken/ with expected.json.
#
# usage: Scripts/make-format-fixtures-v2-fragment-units.sh ENCFS_PACK OUT_DIR WORK_DIR
set -euo pipefail
pack="$1" out="$2" work="$3"
export PYTHONPATH="$(cd "$(dirname "$0")" && pwd)/fixtures${PYTHONPATH:+:$PYTHONPATH}"

mkdir -p "$out/broken"
rm -f "$out"/golden.* "$out"/manifest.json "$out"/broken/*
# A test value, committed on purpose.
printf '%s\n' 5d1f0c9e8b7a69584736251403f2e1d0c0b1a29384756f6e5d4c3b2a19081726 > "$out/golden.key"

# 1. The tree and its manifest. Fragments are filled in extension order:
#    noise.bin, the .h files and hello.txt (16,263 bytes) fill the first
#    unit, notes.txt the second; lib/copy.h is a.h's slice again.
python3 - "$work/tree" "$out/manifest.json" <<'PY'
import random, sys
from fixture_tree import make_tree, write_manifest

tree, manifest_path = sys.argv[1].encode(), sys.argv[2]
rng = random.Random(3131)
words = [b"static ", b"int ", b"return ", b"struct ", b"#define X 1\n", b"{", b"}", b";\n", b"/* c */", b"(x)"]
def code(n):
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words)
    return bytes(out[:n])

a_h = code(700)
t = 1_700_300_000_000_000_000
entries = [
    (b"a.h", "file", 0o644, t + 1, a_h),
    (b"b.h", "file", 0o644, t + 2, code(1900)),
    (b"c.h", "file", 0o644, t + 3, code(1500)),
    (b"d.h", "file", 0o644, t + 4, code(1800)),
    (b"e.h", "file", 0o644, t + 5, code(1600)),
    (b"empty.c", "file", 0o600, t + 6, b""),
    (b"f.h", "file", 0o644, t + 7, code(1700)),
    (b"g.h", "file", 0o644, t + 8, code(1400)),
    (b"hello.txt", "file", 0o644, t + 9, b"hello, world\n"),
    (b"lib", "directory", 0o755, t + 10, None),
    (b"noise.bin", "file", 0o600, t + 11, rng.randbytes(1800)),
    (b"notes.txt", "file", 0o644, t + 12, code(1900)),
    (b"lib/big.txt", "file", 0o644, t + 13, code(9000)),
    (b"lib/c.c", "file", 0o644, t + 14, code(3000)),
    (b"lib/copy.h", "file", 0o644, t + 15, a_h),
    (b"lib/g2.h", "file", 0o644, t + 16, code(1900)),
    (b"lib/h2.h", "file", 0o644, t + 17, code(1950)),
]
root_mode, root_mtime = 0o755, t
make_tree(tree, entries, root_mode, root_mtime)
write_manifest(manifest_path, entries, root_mode, root_mtime,
               about="Expected contents of golden.bundle (format version 2 with fragment units), made by "
                     "Scripts/make-format-fixtures.sh v2-fragment-units. Entries are in index order (breadth-first, "
                     "siblings by name bytes); the first is the root.",
               formatVersion=2, chunkSizeLog2=12, slots=[{"kind": "raw-key"}])
PY

# 2. The golden bundle.
"$pack" "$work/tree" "$out/golden.bundle" --key-file "$out/golden.key" --compress zstd:3 --chunk-size 4K \
    --fragment-size 2K --fragment-unit 16K --quiet

# 3. Broken copies.
python3 - "$out/golden.bundle" "$out/broken" <<'PY'
import os, sys
from fixture_tree import Golden, write_cases, write_expected

golden = Golden(sys.argv[1])
broken = sys.argv[2]
flip, setbytes, le = golden.flip, golden.setbytes, golden.le
n = len(golden.data)
H = le(12, 4)
assert le(10, 2) == 0x0E01, "expected the fragments flag and a 16 KiB unit"
head = le(36, 4)
index_start = H + le(48, 8)
cases = [
    ("unit-cleared.bundle", setbytes(10, b"\x01\x00"), {"error": "headerAuthenticationFailed"},
     "the unit cleared (fragments of one chunk): the header MAC fails"),
    ("unit-changed.bundle", setbytes(10, b"\x01\x0f"), {"error": "headerAuthenticationFailed"},
     "a 32 KiB unit: the header MAC fails"),
    ("unit-at-chunk-size.bundle", setbytes(10, b"\x01\x0c"), {"error": "corruptHeader"},
     "a unit of 2^12, the chunk size: out of range"),
    ("unit-past-1m.bundle", setbytes(10, b"\x01\x15"), {"error": "corruptHeader"}, "a unit of 2^21: out of range"),
    ("unit-without-fragments.bundle", setbytes(10, b"\x00\x0e"), {"error": "corruptHeader"},
     "a unit without the fragments flag"),
    ("flipped-record-page-byte.bundle", flip(index_start + head + 3), {"error": "corruptIndex", "lookup": "hello.txt"},
     "a byte of record page 1: opens, the first lookup fails"),
    ("truncated.bundle", golden.data[:-1], {"error": "lengthMismatch", "expected": n, "actual": n - 1}, "last byte cut"),
]
write_expected(os.path.join(broken, "expected.json"),
               "Copies of ../golden.bundle (format version 2 with fragment units), each opened with ../golden.key; "
               "'error' is the BundleError case expected (from opening, or from looking up 'lookup' when given). "
               "Made by Scripts/make-format-fixtures.sh v2-fragment-units.",
               write_cases(broken, cases))
PY
ls -l "$out" "$out/broken" >&2
