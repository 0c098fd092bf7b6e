#!/usr/bin/env bash
# Keeps the import direction honest (see STYLE.md):
#   CryptCore -> COpenSSL, only in Sources/CryptCore/OpenSSL/;
#   CFuse only in Sources/EncFS/FUSE/; nothing else imports the C modules.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
while IFS= read -r hit; do
  echo "layering: COpenSSL imported outside Sources/CryptCore/OpenSSL/: $hit" >&2; bad=1
done < <(grep -rnE '^\s*(internal |public |@_implementationOnly )?import COpenSSL' Sources Tests | grep -v '^Sources/CryptCore/OpenSSL/' || true)
while IFS= read -r hit; do
  echo "layering: CFuse imported outside Sources/EncFS/FUSE/: $hit" >&2; bad=1
done < <(grep -rnE '^\s*(internal |public |@_implementationOnly )?import CFuse' Sources Tests | grep -v '^Sources/EncFS/FUSE/' || true)
while IFS= read -r hit; do
  echo "layering: OpenSSL symbol outside CryptCore: $hit" >&2; bad=1
done < <(grep -rnE '\b(EVP_|OPENSSL_|RAND_bytes|HMAC\()' Sources/EncFS Sources/encfs-* || true)
for f in Sources/encfs-*/main.swift; do
  n=$(grep -cvE '^\s*(//.*)?$' "$f")
  [ "$n" -le 8 ] || { echo "layering: $f should stay a thin main ($n lines)" >&2; bad=1; }
done
exit $bad
