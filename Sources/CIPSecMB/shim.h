// AES-256-GCM decryption through Intel's ipsec-mb (Debian: libipsec-mb-dev),
// used by CryptCore wherever the CPU runs one of two of its code paths: VAES
// with AVX-512, where its GCM decrypts a 4 KiB chunk about three times as
// fast as OpenSSL 3.0's, and AES-NI with AVX (ipsec-mb's "gen2" code) on
// CPUs without AVX-512, such as AMD's, where it is about 1.25 times as fast
// for a 4 KiB chunk, mostly by skipping OpenSSL's per-call work
// (docs/PERFORMANCE.md). Only Sources/CryptCore/IPSecMB/ imports this module.
//
// The functions are called directly rather than through an IMB_MGR:
// init_mb_mgr_auto() runs code of every algorithm it sets up and so faults
// about 3 MiB of the library into the daemon's resident size, where these
// functions touch about 0.5 MiB. libipsec-mb 1.3 exports the VAES ones but
// its header declares only the SSE/AVX/AVX2 siblings (same signatures); a
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

/// The ipsec-mb code that opens messages on this CPU (cimb_cpu_code()).
enum { CIMB_CODE_NONE = 0, CIMB_CODE_VAES_AVX512 = 1, CIMB_CODE_AVX = 2 };

/// The fastest of the two codes this CPU runs: VAES with AVX-512 (F, BW,
/// VL, DQ, vector AES and carry-less multiply), else AES-NI with AVX and
/// PCLMULQDQ, else none (OpenSSL then opens everything).
static inline int cimb_cpu_code(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
        && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
        && __builtin_cpu_supports("vaes") && __builtin_cpu_supports("vpclmulqdq"))
        return CIMB_CODE_VAES_AVX512;
    if (__builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("avx"))
        return CIMB_CODE_AVX;
    return CIMB_CODE_NONE;
}

/// Bytes of an expanded GCM key (round keys and GHASH powers).
static inline size_t cimb_gcm_key_size(void) { return sizeof(struct gcm_key_data); }

/// Expands a 32-byte key into `key_data` (cimb_gcm_key_size() bytes,
/// 64-byte aligned) for `code` (a CIMB_CODE_ other than NONE).
static inline void cimb_gcm256_expand(int code, const void *key, void *key_data) {
    if (code == CIMB_CODE_VAES_AVX512)
        aes_gcm_pre_256_vaes_avx512(key, (struct gcm_key_data *)key_data);
    else
        aes_gcm_pre_256_avx_gen2(key, (struct gcm_key_data *)key_data);
}

/// Decrypts with `code` (the one `key_data` was expanded for) `len` (> 0)
/// bytes of `in` into `out` (may be the same memory) with a 12-byte IV and
/// compares the computed 16-byte tag with `tag` in constant time: 1 when it
/// verifies, 0 when not (`out` then holds unauthenticated bytes: the caller
/// wipes them). The per-message state is wiped before returning.
static inline int cimb_gcm256_open(int code, const void *key_data, void *out, const void *in, uint64_t len, const void *iv12,
                                   const void *aad, uint64_t aad_len, const void *tag) {
    struct gcm_context_data ctx;
    uint8_t computed[16];
    if (code == CIMB_CODE_VAES_AVX512)
        aes_gcm_dec_256_vaes_avx512((const struct gcm_key_data *)key_data, &ctx, (uint8_t *)out, (const uint8_t *)in,
                                    len, (const uint8_t *)iv12, (const uint8_t *)aad, aad_len, computed, 16);
    else
        aes_gcm_dec_256_avx_gen2((const struct gcm_key_data *)key_data, &ctx, (uint8_t *)out, (const uint8_t *)in,
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
