#ifndef ENCFS_COPENSSL_SHIM_H
#define ENCFS_COPENSSL_SHIM_H

// Only libcrypto is used: AES-256-GCM through EVP, HKDF and scrypt through
// EVP_KDF, HMAC-SHA256 through EVP_MAC, SHA-256 through EVP_Digest, X25519
// and RSA-OAEP through EVP_PKEY (keys read and written as PEM), randomness,
// and OPENSSL_cleanse. OpenSSL 3 is required (EVP_CIPHER_fetch, EVP_KDF,
// EVP_MAC, the *_ex PEM readers).
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

// OSSL_PARAM constructors are functions, but the key names are macros that
// expand to string literals; Swift imports those as constants already. The
// GCM control codes and RSA padding modes are plain integer macros and import
// too. The RSA EVP_PKEY_CTX setters are real functions since OpenSSL 3.0.

// OPENSSL_malloc and OPENSSL_free are function-like macros (they pass
// __FILE__ and __LINE__ to CRYPTO_malloc/CRYPTO_free), which Swift cannot
// import. EVP_PKEY_CTX_set0_rsa_oaep_label takes ownership of a buffer that
// OpenSSL later releases with OPENSSL_free, so the label must come from
// OPENSSL_malloc; these two wrappers make that possible from Swift.
static inline void *encfs_OPENSSL_malloc(size_t num) {
    return OPENSSL_malloc(num);
}

static inline void encfs_OPENSSL_free(void *addr) {
    OPENSSL_free(addr);
}

// A reusable HMAC-SHA256 context: the digest is an OSSL_PARAM whose name and
// value are C strings that must outlive the call, which Swift's string
// bridging does not promise; built here once per context, so re-keying it
// later (EVP_MAC_init with no parameters) looks nothing up by name.
static inline EVP_MAC_CTX *encfs_hmac_sha256_ctx_new(EVP_MAC *mac) {
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
    if (ctx == NULL) {
        return NULL;
    }
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    if (EVP_MAC_CTX_set_params(ctx, params) != 1) {
        EVP_MAC_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

#endif
