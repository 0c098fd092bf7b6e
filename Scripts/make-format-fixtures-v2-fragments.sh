#!/usr/bin/env bash
# Format version 2 with fragments: part of Scripts/make-format-fixtures.sh
# (run that with "v2-fragments"; this takes the built encfs-pack, the output
# directory and a scratch directory). Writes
# Tests/FormatTests/Fixtures/v2-fragments/: golden.bundle (zstd level 3,
# 4 KiB chunks, files below 2 KiB packed into two fragments, one of them
# duplicated at another path, an empty file, two files of their own),
# golden.key, manifest.json, and broken/ with expected.json.
#
# usage: Scripts/make-format-fixtures-v2-fragments.sh ENCFS_PACK OUT_DIR WORK_DIR
set -euo pipefail
pack="$1" out="$2" work="$3"
export PYTHONPATH="$(cd "$(dirname "$0")" && pwd)/fixtures${PYTHONPATH:+:$PYTHONPATH}"

mkdir -p "$out/broken"
rm -f "$out"/golden.* "$out"/manifest.json "$out"/broken/*
# A test value, committed on purpose.
printf '%s\n' 603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4 > "$out/golden.key"

# 1. The tree and its manifest (entries in index order). Fragments are
#    filled in extension order: noise.bin and a.h fill the first, b.h and
#    hello.txt the second; lib/copy.h is a.h's slice again.
python3 - "$work/tree" "$out/manifest.json" <<'PY'
import random, sys
from fixture_tree import make_tree, write_manifest

tree, manifest_path = sys.argv[1].encode(), sys.argv[2]
rng = random.Random(31)
words = [b"static ", b"int ", b"return ", b"struct ", b"#define X 1\n", b"{", b"}", b";\n", b"/* c */", b"(x)"]
def code(n):
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words)
    return bytes(out[:n])

a_h = code(700)
entries = [
    (b"a.h", "file", 0o644, 1_700_200_001_000_000_001, a_h),
    (b"b.h", "file", 0o644, 1_700_200_002_000_000_002, code(1900)),
    (b"empty.c", "file", 0o600, 1_700_200_003_000_000_003, b""),
    (b"hello.txt", "file", 0o644, 1_700_200_004_000_000_004, b"hello, world\n"),
    (b"lib", "directory", 0o755, 1_700_200_005_000_000_005, None),
    (b"noise.bin", "file", 0o600, 1_700_200_006_000_000_006, rng.randbytes(1800)),
    (b"lib/big.txt", "file", 0o644, 1_700_200_007_000_000_007, code(9000)),
    (b"lib/c.c", "file", 0o644, 1_700_200_008_000_000_008, code(3000)),
    (b"lib/copy.h", "file", 0o644, 1_700_200_009_000_000_009, a_h),
]
root_mode, root_mtime = 0o755, 1_700_200_000_000_000_000
make_tree(tree, entries, root_mode, root_mtime)
write_manifest(manifest_path, entries, root_mode, root_mtime,
               about="Expected contents of golden.bundle (format version 2 with fragments), made by "
                     "Scripts/make-format-fixtures.sh v2-fragments. Entries are in index order (breadth-first, "
                     "siblings by name bytes); the first is the root.",
               formatVersion=2, chunkSizeLog2=12, slots=[{"kind": "raw-key"}])
PY

# 2. The golden bundle.
"$pack" "$work/tree" "$out/golden.bundle" --key-file "$out/golden.key" --compress zstd --chunk-size 4K --fragment-size 2K --fragment-unit 4K --quiet

# 3. Broken copies.
python3 - "$out/golden.bundle" "$out/broken" <<'PY'
import os, sys
from fixture_tree import Golden, write_cases, write_expected

golden = Golden(sys.argv[1])
broken = sys.argv[2]
flip, setbytes, le = golden.flip, golden.setbytes, golden.le
n = len(golden.data)
H = le(12, 4)
assert le(10, 2) == 1, "expected the fragments flag"
head = le(36, 4)
index_start = H + le(48, 8)
cases = [
    ("flag-cleared.bundle", setbytes(10, b"\x00\x00"), {"error": "headerAuthenticationFailed"},
     "the fragments flag cleared: the header MAC fails"),
    ("unknown-flag.bundle", setbytes(10, b"\x03\x00"), {"error": "corruptHeader"}, "header flags 3: bit 1 is unknown"),
    ("page-0-length-changed.bundle", setbytes(36, (head - 1).to_bytes(4, "little")), {"error": "headerAuthenticationFailed"},
     "page 0's sealed length changed: the header MAC fails"),
    ("flipped-page-0-byte.bundle", flip(index_start + 3), {"error": "corruptIndex"}, "a byte of page 0"),
    ("flipped-record-page-byte.bundle", flip(index_start + head + 3), {"error": "corruptIndex", "lookup": "hello.txt"},
     "a byte of record page 1: opens, the first lookup fails"),
    ("truncated.bundle", golden.data[:-1], {"error": "lengthMismatch", "expected": n, "actual": n - 1}, "last byte cut"),
]
write_expected(os.path.join(broken, "expected.json"),
               "Copies of ../golden.bundle (format version 2 with fragments), each opened with ../golden.key; 'error' "
               "is the BundleError case expected (from opening, or from looking up 'lookup' when given). "
               "Made by Scripts/make-format-fixtures.sh v2-fragments.",
               write_cases(broken, cases))
PY
ls -l "$out" "$out/broken" >&2
