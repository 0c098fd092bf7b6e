#!/usr/bin/env bash
# Builds the Python wheel: the encfs package of bindings/python with
# libencfs inside it, and beside libencfs the shared libraries it needs
# that a fresh Debian 12 with only python3 lacks (libIPSec_MB, and
# libcrypto and libzstd so the wheel does not depend on their versions);
# libencfs finds them through its RUNPATH $ORIGIN. The Swift runtime is
# linked into libencfs already.
#
#   Scripts/package-python.sh [OUT_DIR]     (default dist/)
#
# Writes OUT_DIR/encfs-VERSION-py3-none-manylinux_2_35_x86_64.whl: the tag
# says glibc 2.35 or later (the newest symbol version libencfs needs).
# Reads the release build in $ENCFS_BIN_DIR, else `swift build -c release
# --show-bin-path` (build first). Needs python3 only (the wheel is a zip
# written by the standard library).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/dist}
bin=${ENCFS_BIN_DIR:-$(cd "$root" && PATH=/opt/swift/usr/bin:$PATH swift build -c release --show-bin-path)}
library=$bin/libencfs.so
[ -f "$library" ] || { echo "package-python.sh: error: no $library: run \`swift build -c release\` first" >&2; exit 1; }
version=$(sed -n 's/.*static let string = "\([0-9.]*\)".*/\1/p' "$root/Sources/EncFSCore/Version.swift")
[ -n "$version" ] || { echo "package-python.sh: error: no version in Sources/EncFSCore/Version.swift" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/encfs" "$out"
cp "$root"/bindings/python/encfs/*.py "$work/encfs/"
strip --strip-unneeded -o "$work/encfs/libencfs.so.0" "$library"
# The libraries to carry, as the loader resolves them for libencfs now.
for soname in libIPSec_MB.so.1 libcrypto.so.3 libzstd.so.1; do
  resolved=$(ldd "$library" | awk -v n="$soname" '$1 == n { print $3 }')
  [ -n "$resolved" ] && [ -f "$resolved" ] || { echo "package-python.sh: error: $soname not found for $library" >&2; exit 1; }
  cp -L "$resolved" "$work/encfs/$soname"
done

python3 - "$work" "$out" "$version" <<'PY'
import base64, hashlib, os, sys, zipfile
work, out, version = sys.argv[1:]
tag = "py3-none-manylinux_2_35_x86_64"
info = f"encfs-{version}.dist-info"
files = {}
for name in sorted(os.listdir(os.path.join(work, "encfs"))):
    with open(os.path.join(work, "encfs", name), "rb") as f:
        files[f"encfs/{name}"] = f.read()
files[f"{info}/METADATA"] = (
    "Metadata-Version: 2.1\nName: encfs\nVersion: " + version + "\n"
    "Summary: Read encrypted encfs bundles in-process (ctypes over libencfs), with an fsspec file system\n"
    "Requires-Python: >=3.9\nProvides-Extra: fsspec\nRequires-Dist: fsspec; extra == \"fsspec\"\n").encode()
files[f"{info}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: encfs package-python.sh\nRoot-Is-Purelib: false\n"
                          f"Tag: {tag}\n").encode()
files[f"{info}/entry_points.txt"] = b"[fsspec.specs]\nencfs = encfs.fsspec:EncFSFileSystem\n"
record = []
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(data)}")
record.append(f"{info}/RECORD,,")
files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
wheel = os.path.join(out, f"encfs-{version}-{tag}.whl")
with zipfile.ZipFile(wheel + ".tmp", "w", zipfile.ZIP_DEFLATED) as z:
    for name, data in files.items():
        entry = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        entry.external_attr = (0o755 if name.endswith((".so.0", ".so.1", ".so.3")) else 0o644) << 16
        entry.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(entry, data)
os.replace(wheel + ".tmp", wheel)
print(wheel)
PY
