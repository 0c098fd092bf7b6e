// AES-256-GCM decryption through Intel's ipsec-mb (Debian: libipsec-mb-dev),
// used by CryptCore on CPUs with VAES, VPCLMULQDQ and AVX-512, where its GCM
// decrypts a 4 KiB chunk about three times as fast as OpenSSL 3.0's
// (docs/PERFORMANCE.md). Only Sources/CryptCore/IPSecMB/ imports this module.
//
// The VAES functions are called directly rather than through an IMB_MGR:
// init_mb_mgr_auto() runs code of every algorithm it sets up and so faults
// about 3 MiB of the library into the daemon's resident size, where these
// two functions touch about 0.5 MiB. libipsec-mb 1.3 exports them but its
// header declares only the SSE/AVX/AVX2 siblings (same signatures); a
// library without them fails at link time, never at run time.
#ifndef CIPSECMB_SHIM_H
#define CIPSECMB_SHIM_H
#include <intel-ipsec-mb.h>
#include <stdint.h>
#include <string.h>

void aes_gcm_pre_256_vaes_avx512(const void *key, struct gcm_key_data *key_data);
void aes_gcm_dec_256_vaes_avx512(const struct gcm_key_data *key_data, struct gcm_context_data *context_data,
                                 uint8_t *out, uint8_t const *in, uint64_t len, const uint8_t *iv,
                                 uint8_t const *aad, uint64_t aad_len, uint8_t *auth_tag, uint64_t auth_tag_len);

/// Whether this CPU runs the VAES code: AVX-512 (F, BW, VL, DQ) with vector
/// AES and carry-less multiply.
static inline int cimb_cpu_has_vaes_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
        && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
        && __builtin_cpu_supports("vaes") && __builtin_cpu_supports("vpclmulqdq");
}

/// Bytes of an expanded GCM key (round keys and GHASH powers).
static inline size_t cimb_gcm_key_size(void) { return sizeof(struct gcm_key_data); }

/// Expands a 32-byte key into `key_data` (cimb_gcm_key_size() bytes,
/// 64-byte aligned).
static inline void cimb_gcm256_expand(const void *key, void *key_data) {
    aes_gcm_pre_256_vaes_avx512(key, (struct gcm_key_data *)key_data);
}

/// Decrypts `len` (> 0) bytes of `in` into `out` (may be the same memory)
/// with a 12-byte IV and compares the computed 16-byte tag with `tag` in
/// constant time: 1 when it verifies, 0 when not (`out` then holds
/// unauthenticated bytes: the caller wipes them). The per-message state
/// is wiped before returning.
static inline int cimb_gcm256_open(const void *key_data, void *out, const void *in, uint64_t len, const void *iv12,
                                   const void *aad, uint64_t aad_len, const void *tag) {
    struct gcm_context_data ctx;
    uint8_t computed[16];
    aes_gcm_dec_256_vaes_avx512((const struct gcm_key_data *)key_data, &ctx, (uint8_t *)out, (const uint8_t *)in,
                                len, (const uint8_t *)iv12, (const uint8_t *)aad, aad_len, computed, 16);
    const volatile uint8_t *a = computed;
    const uint8_t *b = (const uint8_t *)tag;
    uint8_t diff = 0;
    for (int i = 0; i < 16; i++)
        diff |= (uint8_t)(a[i] ^ b[i]);
    explicit_bzero(&ctx, sizeof(ctx));
    return diff == 0;
}
#endif
