#!/usr/bin/env bash
# Regenerates the fuzz seed corpus, Tests/Fuzz/Corpus/<target>/, from real
# bundles packed with the harness's fixed secrets (`encfs-fuzz seed`), plus
# the PEM forms only openssl writes: traditional and encrypted RSA keys,
# PKCS#1 public keys, key types encfs refuses, and an RSA modulus over the
# size limit. Bundle ids, salts and
# ephemeral keys are random, so every run gives different bytes; commit the
# result only when the seeds need to change (keep it under 1 MiB).
#
# usage: Scripts/make-fuzz-corpus.sh   (no arguments; rewrites Tests/Fuzz/Corpus)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

swift build --product encfs-fuzz
bin="$(swift build --show-bin-path)/encfs-fuzz"
out=Tests/Fuzz/Corpus
rm -rf "$out"
mkdir -p "$(dirname "$out")"
"$bin" seed "$out"

pem="$out/pem"
rsa="$pem/rsa-private.pem" # the harness's fixed RSA identity
openssl rsa -in "$rsa" -traditional -out "$pem/rsa-traditional.pem" 2>/dev/null
openssl rsa -in "$rsa" -RSAPublicKey_out -out "$pem/rsa-public-pkcs1.pem" 2>/dev/null
openssl pkcs8 -in "$rsa" -topk8 -v2 aes-256-cbc -passout pass:fuzz -out "$pem/rsa-encrypted-pkcs8.pem"
openssl rsa -in "$rsa" -traditional -aes128 -passout pass:fuzz -out "$pem/rsa-encrypted-traditional.pem" 2>/dev/null
openssl genpkey -algorithm ED25519 -out "$pem/ed25519-private.pem"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pem/ec-p256-private.pem"
openssl pkey -in "$pem/ec-p256-private.pem" -pubout -out "$pem/ec-p256-public.pem"
# An RSA public key over the 16384-bit limit (a 16400-bit odd modulus; not a
# real key, which would take long to generate, but the limit looks at size).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/big.cnf" <<CNF
asn1=SEQUENCE:spki
[spki]
algorithm=SEQUENCE:alg
key=BITWRAP,SEQUENCE:rsa
[alg]
oid=OID:rsaEncryption
parameter=NULL
[rsa]
n=INTEGER:0xc$(printf '5a%.0s' $(seq 2049))1
e=INTEGER:0x010001
CNF
openssl asn1parse -genconf "$tmp/big.cnf" -out "$tmp/big.der" -noout
{ echo "-----BEGIN PUBLIC KEY-----"; openssl base64 -in "$tmp/big.der"; echo "-----END PUBLIC KEY-----"; } >"$pem/rsa-16400-public.pem"

echo "fuzz corpus: $(find "$out" -type f | wc -l) files, $(du -sk "$out" | cut -f1) KiB in $out"
