#!/usr/bin/env bash
# Builds dist/encfs-tools_VERSION_amd64.deb: the encfs-* executables linked
# with --static-swift-stdlib (the target machine needs no Swift), man pages,
# bash completion, the systemd examples, and libencfs for C and other
# languages (the library, include/encfs.h, encfs.pc, examples/c). Depends: are computed by
# dpkg-shlibdeps from the binaries (libc6, libfuse3-3, libssl3, libipsec-mb1, …), plus
# fuse3 for fusermount3 and mount.fuse3.
#
# The static build goes to .build-static (kept: a second run only relinks
# what changed). ENCFS_GIT_COMMIT names the commit for --version.
# The package is named encfs-tools: "encfs" is an unrelated Debian package.
#
# usage: Scripts/package-deb.sh        prints the path of the .deb
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="/opt/swift/usr/bin:$PATH"
for tool in swift dpkg-deb dpkg-shlibdeps gzip; do
  command -v "$tool" >/dev/null || { echo "package-deb.sh: error: $tool is not installed (Scripts/install-deps.sh)" >&2; exit 1; }
done

version=$(sed -n 's/.*\(public\|package\) static let string = "\([0-9.]*\)".*/\2/p' Sources/EncFSCore/Version.swift)
[ -n "$version" ] || { echo "package-deb.sh: error: no version in Sources/EncFSCore/Version.swift" >&2; exit 1; }
arch=$(dpkg --print-architecture)
export ENCFS_GIT_COMMIT="${ENCFS_GIT_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}"
# Who answers for the package: set DEB_MAINTAINER for a real release.
maintainer="${DEB_MAINTAINER:-encfs maintainers <encfs-maintainers@users.noreply.github.com>}"

echo "package-deb.sh: static build (.build-static)" >&2
# Bind now and read-only relocations: the hardening Debian's toolchain applies.
flags=(-c release --static-swift-stdlib --build-path .build-static -Xlinker -z -Xlinker now -Xlinker -z -Xlinker relro)
# Product by product: a plain `swift build` would also build the test
# support target, which imports XCTest, absent from a static-stdlib build.
for product in encfs-pack encfs-mount encfs-inspect encfs-keygen encfs-rekey encfs-ctl encfs-serve encfs; do
  swift build "${flags[@]}" -Xswiftc -warnings-as-errors --product "$product" >&2
done
bin=$(swift build "${flags[@]}" --show-bin-path)

# Every encfs-* executable the package builds (encfs-ctl too once it
# exists), not the test tooling.
tools=()
for path in "$bin"/encfs-*; do
  name=$(basename "$path")
  case "$name" in encfs-fuzz|encfs-embed-example|encfs-sigv4-bench|*.*) continue ;; esac
  [ -f "$path" ] && [ -x "$path" ] && tools+=("$name")
done

stage=$(mktemp -d "${TMPDIR:-/tmp}/encfs-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
pkg="$stage/encfs-tools"
install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/usr/share/man/man1" "$pkg/usr/share/man/man5" \
  "$pkg/usr/share/bash-completion/completions" "$pkg/usr/share/doc/encfs-tools/examples/systemd"
for name in "${tools[@]}"; do
  install -m 0755 "$bin/$name" "$pkg/usr/bin/$name"
  strip --strip-unneeded --remove-section=.comment "$pkg/usr/bin/$name"
  page="docs/man/$name.1"
  [ -f "$page" ] || { echo "package-deb.sh: error: no man page $page for $name" >&2; exit 1; }
  gzip -9n < "$page" > "$pkg/usr/share/man/man1/$name.1.gz"
done
gzip -9n < docs/man/encfs.5 > "$pkg/usr/share/man/man5/encfs.5.gz"
# bash-completion loads completions/NAME for command NAME: one file, one link per command.
install -m 0644 completions/bash/encfs-tools "$pkg/usr/share/bash-completion/completions/${tools[0]}"
for name in "${tools[@]:1}"; do ln -s "${tools[0]}" "$pkg/usr/share/bash-completion/completions/$name"; done
install -m 0644 examples/systemd/* "$pkg/usr/share/doc/encfs-tools/examples/systemd/"
install -m 0644 packaging/debian/copyright "$pkg/usr/share/doc/encfs-tools/copyright"
# libencfs: the runtime file by its SONAME, the link name for -lencfs, the
# header and the pkg-config file (Scripts/make-pkgconfig.sh), the C example.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
install -d "$pkg/usr/lib/$multiarch/pkgconfig" "$pkg/usr/include" "$pkg/usr/share/doc/encfs-tools/examples/c"
install -m 0644 "$bin/libencfs.so" "$pkg/usr/lib/$multiarch/libencfs.so.0"
strip --strip-unneeded --remove-section=.comment "$pkg/usr/lib/$multiarch/libencfs.so.0"
ln -s libencfs.so.0 "$pkg/usr/lib/$multiarch/libencfs.so"
install -m 0644 include/encfs.h "$pkg/usr/include/encfs.h"
Scripts/make-pkgconfig.sh --prefix /usr --libdir "/usr/lib/$multiarch" -o "$pkg/usr/lib/$multiarch/pkgconfig/encfs.pc"
install -m 0644 examples/c/encfs-cat.c examples/c/README.md "$pkg/usr/share/doc/encfs-tools/examples/c/"
# The loader's cache learns of the new library (Debian policy 8.1.1), and
# packages linking it depend on this one (8.6, the shlibs file).
printf 'activate-noawait ldconfig\n' > "$pkg/DEBIAN/triggers"
printf 'libencfs 0 encfs-tools (>= %s)\n' "$version" > "$pkg/DEBIAN/shlibs"
# One package carries the tools, libencfs and its development files, not
# the libencfs0 / libencfs-dev split Debian's archive would want: said once
# here, for lintian.
install -d "$pkg/usr/share/lintian/overrides"
cat > "$pkg/usr/share/lintian/overrides/encfs-tools" <<'OVERRIDES'
# libencfs ships inside encfs-tools (no libencfs0 / libencfs-dev split).
encfs-tools: package-name-doesnt-match-sonames libencfs0
encfs-tools: link-to-shared-library-in-wrong-package *
OVERRIDES
{
  echo "encfs-tools ($version) unstable; urgency=medium"
  echo
  echo "  * Built from commit $ENCFS_GIT_COMMIT."
  echo
  echo " -- $maintainer  $(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")"
} | gzip -9n > "$pkg/usr/share/doc/encfs-tools/changelog.gz"

# A native package: its changelog is changelog.gz (Debian policy 12.7).
# Depends from the binaries themselves.
mkdir -p "$stage/src/debian"
printf 'Source: encfs-tools\n\nPackage: encfs-tools\nArchitecture: any\n' > "$stage/src/debian/control"
shlibs=$(cd "$stage/src" && dpkg-shlibdeps -O "${tools[@]/#/$pkg/usr/bin/}" "$pkg/usr/lib/$multiarch/libencfs.so.0" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "package-deb.sh: error: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
installed=$(du -sk "$pkg/usr" | cut -f1)
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: encfs-tools
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed
Depends: $shlibs, fuse3
Section: utils
Priority: optional
Homepage: https://example.invalid/encfs
Description: encrypted resource bundles mounted read-only through FUSE
 encfs-pack encrypts a directory into one bundle file (AES-256-GCM in
 chunks); encfs-mount serves it read-only through FUSE, decrypting in
 memory, so plaintext never touches disk. encfs-inspect lists, verifies
 and rekeys bundles (encfs-rekey rekeys too); encfs-keygen makes keys;
 encfs-ctl locks, unlocks and queries a mount; encfs-serve serves a bundle
 over loopback HTTP or a unix socket without FUSE. Mounts work from fstab
 (type fuse.encfs-mount) and from systemd units (Type=notify).
 .
 Not related to the "encfs" package (EncFS, an encrypted file system).
CONTROL

mkdir -p dist
deb="dist/encfs-tools_${version}_${arch}.deb"
(cd "$pkg" && find usr -type f -exec md5sum {} + | sort -k 2) > "$pkg/DEBIAN/md5sums"
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >&2
echo "$root/$deb"
