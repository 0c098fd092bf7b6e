#!/usr/bin/env bash
# Keeps what the compiler cannot check (see STYLE.md). Which module may
# import which is enforced by the target dependencies in Package.swift:
# EncFSCore (the core: format, keys, index, reader, writer) and EncFS (the
# public API over it) do not depend on CFuse, EncFSMount or EncFSCLI, so
# they cannot import them. What remains is checked here:
#   - COpenSSL only in Sources/CryptCore/OpenSSL/ (CryptCore may import it
#     anywhere, by dependency; the house rule keeps it in one folder);
#   - CFuse only in Sources/EncFSMount/;
#   - CKeyring (the keyctl system call) only in Sources/EncFSCLI/KernelKeyring.swift;
#   - CZstd and ZSTD_ symbols only in Sources/EncFSCore/Compression/ (the
#     chunk compressor and decompressor; nothing else sees libzstd);
#   - CCurl (libcurl) only in Sources/EncFSRemote/;
#   - CUring (io_uring system calls, the FUSE ring ABI) only in
#     Sources/EncFSMount/Uring/;
#   - CIPSecMB (ipsec-mb's VAES AES-GCM) only in Sources/CryptCore/IPSecMB/;
#   - CMicroHTTPD (libmicrohttpd) only in Sources/EncFSServe/HTTPEndpoint.swift;
#   - no OpenSSL symbol outside CryptCore;
#   - EncFSCore and EncFS never read the environment, prompt or exit: those
#     belong to EncFSCLI;
#   - executables stay thin mains;
#   - no hand-written EINTR retry: every Swift file in Sources compares
#     with EINTR only through SystemCall (Sources/EncFSCore/IO/SystemCall.swift);
#     a comparison that is not a retry (how a loop ended, an event loop's
#     turn) carries "// EINTR-ok: why" on the line above. C shims are not
#     checked;
#   - no function over 80 lines without a "// Long because:" comment above
#     it anywhere in Sources/ (Scripts/long-functions.sh --check).
#
# usage: Scripts/check-layering.sh   (no arguments; one line per violation, exit 1)
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
report() { echo "layering: $1: $2" >&2; bad=1; }
while IFS= read -r hit; do report "COpenSSL imported outside Sources/CryptCore/OpenSSL/" "$hit"; done \
  < <(grep -rnE '^\s*(internal |public |package |@_implementationOnly )?import COpenSSL' Sources Tests | grep -v '^Sources/CryptCore/OpenSSL/' || true)
while IFS= read -r hit; do report "CFuse imported outside Sources/EncFSMount/" "$hit"; done \
  < <(grep -rnE '^\s*(internal |public |package |@_implementationOnly )?import CFuse' Sources Tests | grep -v '^Sources/EncFSMount/' || true)
while IFS= read -r hit; do report "CKeyring imported outside Sources/EncFSCLI/KernelKeyring.swift" "$hit"; done \
  < <(grep -rnE '^\s*(internal |public |package |@_implementationOnly )?import CKeyring' Sources Tests | grep -v '^Sources/EncFSCLI/KernelKeyring.swift:' || true)
while IFS= read -r hit; do report "CZstd imported outside Sources/EncFSCore/Compression/" "$hit"; done \
  < <(grep -rnE '^\s*(internal |public |package |@_implementationOnly )?import CZstd' Sources Tests | grep -v '^Sources/EncFSCore/Compression/' || true)
while IFS= read -r hit; do report "zstd symbol outside Sources/EncFSCore/Compression/" "$hit"; done \
  < <(grep -rnE '\bZSTD_' Sources | grep -v '^Sources/EncFSCore/Compression/' | grep -v '^Sources/CZstd/' || true)
while IFS= read -r hit; do report "CCurl imported outside Sources/EncFSRemote/" "$hit"; done \
  < <(grep -rnE '^\s*(internal |public |package |@_implementationOnly )?import CCurl' Sources Tests | grep -v '^Sources/EncFSRemote/' || true)
while IFS= read -r hit; do report "CUring imported outside Sources/EncFSMount/Uring/" "$hit"; done \
  < <(grep -rnE '^\s*(internal |public |package |@_implementationOnly )?import CUring' Sources Tests | grep -v '^Sources/EncFSMount/Uring/' || true)
while IFS= read -r hit; do report "CMicroHTTPD (libmicrohttpd) outside Sources/EncFSServe/HTTPEndpoint.swift" "$hit"; done \
  < <(grep -rnE '^\s*(internal |public |package |@_implementationOnly )?import CMicroHTTPD|\bMHD_[a-z]' Sources Tests | grep -v '^Sources/EncFSServe/HTTPEndpoint.swift:' | grep -v '^Sources/CMicroHTTPD/' || true)
while IFS= read -r hit; do report "CIPSecMB imported outside Sources/CryptCore/IPSecMB/" "$hit"; done \
  < <(grep -rnE '^\s*(internal |public |package |@_implementationOnly )?import CIPSecMB' Sources Tests | grep -v '^Sources/CryptCore/IPSecMB/' || true)
while IFS= read -r hit; do report "libcurl symbol outside Sources/EncFSRemote/" "$hit"; done \
  < <(grep -rnE '\b(curl_easy_|curl_global_|curl_slist_|ccurl_)' Sources | grep -v '^Sources/EncFSRemote/' | grep -v '^Sources/CCurl/' || true)
while IFS= read -r hit; do report "OpenSSL symbol outside CryptCore" "$hit"; done \
  < <(grep -rnE '\b(EVP_|OPENSSL_|RAND_bytes|HMAC\()' Sources/EncFS Sources/EncFSCore Sources/EncFSMount Sources/EncFSCLI Sources/encfs-* || true)
while IFS= read -r hit; do report "EncFSCore or EncFS reads the environment, prompts or exits" "$hit"; done \
  < <(grep -rnE '\b(getenv|setenv|unsetenv|environ|isatty|tcgetattr|tcsetattr|exit|_exit)\(|/dev/tty|ProcessInfo' Sources/EncFSCore Sources/EncFS || true)
# Neither the core nor the public API may link libfuse or the command
# layer: the dependency graph says so, and Package.swift must keep saying so.
if grep -nE '\.target\(name: "EncFS(Core)?", dependencies: \[[^]]*"(CFuse|EncFSMount|EncFSCLI)"' Package.swift; then
  report "Package.swift" "EncFSCore and EncFS must not depend on CFuse, EncFSMount or EncFSCLI"
fi
# The core is the same with or without a network: libcurl comes in through
# EncFSRemote only, which sees no FUSE.
if grep -nE '\.target\(name: "EncFS(Core|Mount)", dependencies: \[[^]]*"(CCurl|EncFSRemote)"' Package.swift \
   || grep -nE '\.target\(name: "EncFSRemote", dependencies: \[[^]]*"(CFuse|EncFSMount|EncFSCLI)"' Package.swift; then
  report "Package.swift" "EncFSCore and EncFSMount must not depend on CCurl or EncFSRemote, nor EncFSRemote on FUSE or the CLI"
fi
# The tools and the daemon must not link Foundation (the public API does):
# nothing but Sources/EncFS may import it.
while IFS= read -r hit; do report "Foundation imported outside Sources/EncFS/ (costs every process ~1.7 MiB)" "$hit"; done \
  < <(grep -rnE '^\s*(internal |public |package |@_implementationOnly )?import Foundation(Essentials)?' Sources | grep -v '^Sources/EncFS/' || true)
# file:line of every EINTR comparison outside SystemCall.swift whose line
# above does not say "EINTR-ok:" (comment lines are not code).
while IFS= read -r hit; do report "EINTR retried by hand (use SystemCall.retrying or .retryingInterrupts)" "$hit"; done \
  < <(find Sources -name '*.swift' ! -path Sources/EncFSCore/IO/SystemCall.swift -print0 | sort -z \
      | xargs -0 awk '
          FNR == 1 { previous = "" }
          $0 !~ /^[[:space:]]*\/\// && $0 ~ /([!=]=[[:space:]]*-?EINTR|EINTR[[:space:]]*[!=]=)/ && previous !~ /EINTR-ok:/ {
              print FILENAME ":" FNR
          }
          { previous = $0 }')
for f in Sources/encfs-*/main.swift; do
  n=$(grep -cvE '^\s*(//.*)?$' "$f")
  [ "$n" -le 8 ] || report "$f should stay a thin main" "$n lines"
done
Scripts/long-functions.sh --check || bad=1
exit $bad
