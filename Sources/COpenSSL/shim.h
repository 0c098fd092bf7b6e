#ifndef ENCFS_COPENSSL_SHIM_H
#define ENCFS_COPENSSL_SHIM_H

// Only libcrypto is used: AES-256-GCM through EVP, HKDF and scrypt through
// EVP_KDF, HMAC-SHA256 through EVP_MAC, randomness, and OPENSSL_cleanse.
// OpenSSL 3 is required (EVP_CIPHER_fetch, EVP_KDF, EVP_MAC).
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/rand.h>

// OSSL_PARAM constructors are functions, but the key names are macros that
// expand to string literals; Swift imports those as constants already. The
// GCM control codes are plain integer macros and import too. Nothing else
// needs a shim here.

#endif
