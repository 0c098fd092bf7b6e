#!/usr/bin/env bash
# Writes encfs.pc, the pkg-config file of libencfs, and the libencfs.so.0
# link the SONAME asks for at run time.
#
#   Scripts/make-pkgconfig.sh                     beside the release build's libencfs.so:
#                                                 BIN/pkgconfig/encfs.pc, BIN/libencfs.so.0
#   Scripts/make-pkgconfig.sh --prefix /usr --libdir /usr/lib/x86_64-linux-gnu -o FILE
#                                                 only the .pc, for an installed layout (package-deb.sh)
#
# BIN is $ENCFS_BIN_DIR, else `swift build -c release --show-bin-path`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix= libdir= includedir= out=
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --libdir) libdir=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    *) echo "usage: Scripts/make-pkgconfig.sh [--prefix DIR --libdir DIR -o FILE]" >&2; exit 2 ;;
  esac
done
version=$(sed -n 's/.*static let string = "\([0-9.]*\)".*/\1/p' "$root/Sources/EncFSCore/Version.swift")
[ -n "$version" ] || { echo "make-pkgconfig.sh: error: no version in Sources/EncFSCore/Version.swift" >&2; exit 1; }
if [ -z "$prefix" ]; then
  bin=${ENCFS_BIN_DIR:-$(cd "$root" && PATH=/opt/swift/usr/bin:$PATH swift build -c release --show-bin-path)}
  [ -f "$bin/libencfs.so" ] || { echo "make-pkgconfig.sh: error: no $bin/libencfs.so: run \`swift build -c release\` first" >&2; exit 1; }
  ln -sfn libencfs.so "$bin/libencfs.so.0"
  mkdir -p "$bin/pkgconfig"
  prefix=$bin libdir=$bin includedir=$root/include out=$bin/pkgconfig/encfs.pc
else
  includedir=$prefix/include
  [ -n "$libdir" ] && [ -n "$out" ] || { echo "make-pkgconfig.sh: error: --prefix needs --libdir and -o" >&2; exit 2; }
fi
cat > "$out" <<PC
prefix=$prefix
libdir=$libdir
includedir=$includedir

Name: encfs
Description: read encrypted encfs bundles in-process (C ABI)
Version: $version
Libs: -L\${libdir} -lencfs
Cflags: -I\${includedir}
PC
