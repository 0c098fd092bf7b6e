/*
 * AES-256-GCM decryption of one message, the three ways encfs can open a
 * chunk on x86-64, side by side (docs/PERFORMANCE.md, "AES-GCM on CPUs
 * without AVX-512"):
 *
 *   cc -O2 -o gcm_openers Scripts/bench/gcm_openers.c -lIPSec_MB -lcrypto
 *   ./gcm_openers [BYTES ...]        (default: 4096 16384 65536)
 *
 * ipsec-mb's AVX code ("gen2", aes_gcm_dec_256_avx_gen2), its AVX2 code
 * ("gen4") and OpenSSL 3.0's EVP with the context kept and only the nonce
 * changed between messages, as CryptCore's AESGCM does. ipsec-mb's VAES code
 * needs AVX-512 and is left out. Every message is 40 bytes of associated
 * data (a chunk's) and BYTES of ciphertext; the tag is not compared (the
 * same work either way). Prints GB/s of ciphertext, one core, about 1.3 s
 * per code and size.
 */
#include <intel-ipsec-mb.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void measure(size_t size) {
    const int rounds = (int)(4e9 / (double)size);
    unsigned char key[32] = {1}, iv[12] = {2}, aad[40] = {3}, tag[16];
    unsigned char *in = aligned_alloc(64, size + 64), *out = aligned_alloc(64, size + 64);
    memset(in, 7, size);
    struct gcm_key_data keyData __attribute__((aligned(64)));
    struct gcm_context_data context;

    aes_gcm_pre_256_avx_gen2(key, &keyData);
    double start = now();
    for (int i = 0; i < rounds; i++)
        aes_gcm_dec_256_avx_gen2(&keyData, &context, out, in, size, iv, aad, sizeof aad, tag, 16);
    double gen2 = now() - start;

    aes_gcm_pre_256_avx_gen4(key, &keyData);
    start = now();
    for (int i = 0; i < rounds; i++)
        aes_gcm_dec_256_avx_gen4(&keyData, &context, out, in, size, iv, aad, sizeof aad, tag, 16);
    double gen4 = now() - start;

    EVP_CIPHER_CTX *evp = EVP_CIPHER_CTX_new();
    EVP_DecryptInit_ex(evp, EVP_aes_256_gcm(), NULL, key, NULL);
    int length;
    start = now();
    for (int i = 0; i < rounds; i++) {
        EVP_DecryptInit_ex(evp, NULL, NULL, NULL, iv);
        EVP_DecryptUpdate(evp, NULL, &length, aad, sizeof aad);
        EVP_DecryptUpdate(evp, out, &length, in, (int)size);
        EVP_CIPHER_CTX_ctrl(evp, EVP_CTRL_GCM_SET_TAG, 16, tag);
        EVP_DecryptFinal_ex(evp, out + length, &length);
    }
    double openssl = now() - start;
    EVP_CIPHER_CTX_free(evp);

    double gigabytes = (double)size * rounds / 1e9;
    printf("%7zu bytes: ipsec-mb AVX (gen2) %.2f GB/s, ipsec-mb AVX2 (gen4) %.2f GB/s, OpenSSL %.2f GB/s\n", size,
           gigabytes / gen2, gigabytes / gen4, gigabytes / openssl);
    free(in);
    free(out);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        measure(4096);
        measure(16384);
        measure(65536);
    }
    for (int i = 1; i < argc; i++) {
        long size = strtol(argv[i], NULL, 10);
        if (size <= 0 || size > (1L << 30)) {
            fprintf(stderr, "gcm_openers: error: BYTES must be 1 to 1073741824 (%s)\n", argv[i]);
            return 2;
        }
        measure((size_t)size);
    }
    return 0;
}
