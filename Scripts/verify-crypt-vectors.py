#!/usr/bin/env python3
"""Cross-checks the CryptCore test vectors against an independent implementation.

The JSON files in Tests/CryptCoreTests/Vectors/ are transcribed from published
sources (GCM spec, Wycheproof, RFC 5869, RFC 7914, RFC 4231, RFC 7748,
FIPS 180-2). This script recomputes every vector with the Python `cryptography`
package (and hashlib for scrypt and SHA-256) so a transcription error is caught
before the Swift tests trust it.

Usage: python3 Scripts/verify-crypt-vectors.py   (pip install cryptography)
Exit status 0 when every vector matches, 1 otherwise.
"""
import hashlib
import hmac
import json
import pathlib
import sys

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

VECTORS = pathlib.Path(__file__).resolve().parent.parent / "Tests" / "CryptCoreTests" / "Vectors"
failures = 0
checked = 0


def fail(name, why):
    global failures
    failures += 1
    print(f"verify-crypt-vectors: FAIL {name}: {why}")


def load(name):
    return json.loads((VECTORS / name).read_text())["vectors"]


def h(s):
    return bytes.fromhex(s)


def check_gcm(file):
    global checked
    for v in load(file):
        checked += 1
        key, iv, aad = h(v["key"]), h(v["iv"]), h(v["aad"])
        pt, ct, tag = h(v["plaintext"]), h(v["ciphertext"]), h(v["tag"])
        if len(key) != 32 or len(iv) != 12 or len(tag) != 16:
            fail(v["name"], "not a 256-bit key / 96-bit IV / 128-bit tag vector")
            continue
        gcm = AESGCM(key)
        sealed = gcm.encrypt(iv, pt, aad or None)
        if v["valid"]:
            if sealed != ct + tag:
                fail(v["name"], f"encrypt gives {sealed.hex()}")
            try:
                if gcm.decrypt(iv, ct + tag, aad or None) != pt:
                    fail(v["name"], "decrypt gives a different plaintext")
            except InvalidTag:
                fail(v["name"], "valid vector does not authenticate")
        else:
            # The ciphertext itself must be right, so only the tag is wrong.
            if sealed[:-16] != ct:
                fail(v["name"], "ciphertext of an invalid vector is not the real encryption")
            try:
                gcm.decrypt(iv, ct + tag, aad or None)
                fail(v["name"], "invalid vector authenticates")
            except InvalidTag:
                pass


def check_hkdf():
    global checked
    for v in load("hkdf-sha256-rfc5869.json"):
        checked += 1
        okm = h(v["okm"])
        out = HKDF(algorithm=hashes.SHA256(), length=len(okm), salt=h(v["salt"]) or None,
                   info=h(v["info"])).derive(h(v["ikm"]))
        if out != okm:
            fail(v["name"], f"got {out.hex()}")


def check_scrypt():
    global checked
    for v in load("scrypt-rfc7914.json"):
        checked += 1
        want = h(v["derived"])
        got = hashlib.scrypt(h(v["passphrase"]), salt=h(v["salt"]), n=1 << v["logN"], r=v["r"], p=v["p"],
                             maxmem=1 << 30, dklen=len(want))
        if got != want:
            fail(v["name"], f"got {got.hex()}")


def check_hmac():
    global checked
    for v in load("hmac-sha256-rfc4231.json"):
        checked += 1
        got = hmac.new(h(v["key"]), h(v["data"]), hashlib.sha256).digest()
        if got != h(v["mac"]):
            fail(v["name"], f"got {got.hex()}")


def check_x25519():
    global checked
    for v in load("x25519-rfc7748.json"):
        checked += 1
        key = X25519PrivateKey.from_private_bytes(h(v["privateKey"]))
        if "publicKey" in v and key.public_key().public_bytes_raw() != h(v["publicKey"]):
            fail(v["name"], f"public key is {key.public_key().public_bytes_raw().hex()}")
        got = key.exchange(X25519PublicKey.from_public_bytes(h(v["peerPublicKey"])))
        if got != h(v["sharedSecret"]):
            fail(v["name"], f"got {got.hex()}")


def check_x25519_low_order():
    global checked
    key = X25519PrivateKey.generate()
    for v in load("x25519-low-order.json"):
        checked += 1
        try:
            key.exchange(X25519PublicKey.from_public_bytes(h(v["publicKey"])))
            fail(v["name"], "gives a non-zero shared secret")
        except ValueError:
            pass


def check_sha256():
    global checked
    for v in load("sha256-nist.json"):
        checked += 1
        got = hashlib.sha256(h(v["message"])).digest()
        if got != h(v["digest"]):
            fail(v["name"], f"got {got.hex()}")


check_gcm("aes-256-gcm-spec.json")
check_gcm("aes-256-gcm-wycheproof.json")
check_hkdf()
check_scrypt()
check_hmac()
check_x25519()
check_x25519_low_order()
check_sha256()
print(f"verify-crypt-vectors: {checked - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
