#!/usr/bin/env bash
# Installs what encfs needs to build and test on Debian 12: the FUSE,
# OpenSSL and zstd development packages, the fuse3 runtime (fusermount3), and the
# tools the tests read the mount with (fio for Scripts/load.sh), keyctl
# (keyutils) and systemd-creds / systemd-analyze (systemd) for the key
# custody tests, libcurl for remote bundles and nginx to serve them in
# RemoteMountTests. Installs only what is missing.
#
# usage: Scripts/install-deps.sh   (as root, no arguments; apt-get)
set -euo pipefail

packages=(libfuse3-dev fuse3 libssl-dev libipsec-mb-dev libzstd-dev libcurl4-openssl-dev nginx pkg-config python3 sqlite3 xxd file fio keyutils systemd
  scdoc man-db bash-completion dpkg-dev lintian openssl)
# encfs-serve (issue 28): libmicrohttpd to build it, wrk for its short load
# test and Scripts/bench-serve.sh, chromium for ServeRenderingTests.
packages+=(libmicrohttpd-dev wrk chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# libencfs's tests (EmbedTests): a C compiler and Valgrind for the C
# programs, python3 -m venv for the wheel, and pytest, fsspec and pandas
# from PyPI for the python3 on PATH (Debian's marks itself externally
# managed: pip then needs --break-system-packages).
embed=()
for p in gcc libc6-dev valgrind python3-venv python3-pip; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || embed+=("$p")
done
if [ ${#embed[@]} -gt 0 ]; then
  echo "installing: ${embed[*]}"
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${embed[@]}" >/dev/null
fi
if ! python3 -c 'import pytest, fsspec, pandas' 2>/dev/null; then
  echo "installing from PyPI: pytest fsspec pandas"
  python3 -m pip install -q pytest fsspec pandas 2>/dev/null \
    || python3 -m pip install -q --break-system-packages pytest fsspec pandas
fi
if ! command -v swift >/dev/null 2>&1; then
  if [ -x /opt/swift/usr/bin/swift ]; then
    echo "note: add /opt/swift/usr/bin to PATH" >&2
  else
    echo "error: the Swift 6 toolchain is not installed (swift.org)" >&2
    exit 1
  fi
fi
[ -e /dev/fuse ] || { echo "error: /dev/fuse is missing (load the fuse module: modprobe fuse)" >&2; exit 1; }

# Issue 30: an S3 server for S3MountTests and Scripts/bench-remote.sh
# (Scripts/s3-test-server.py runs moto in server mode with Signature V4
# enforced). Debian 12's python3 is externally managed: pip needs
# --break-system-packages (moto and its dependencies, nothing system-wide).
if ! python3 -c 'import moto.server, boto3' 2>/dev/null; then
  command -v pip3 >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive ${sudo:-} apt-get install -y -qq python3-pip >/dev/null
  python3 -m pip install -q --break-system-packages 'moto[server]'
fi
