/*
 * abi-test: every call of include/encfs.h, each error code it can be made
 * to return, NULL and bad arguments, and 8 threads reading one handle,
 * against the fixture of Tests/EmbedTests/Fixture/make_fixture.py.
 *
 *   abi-test FIXTURE_DIR [URL_OF_app.bundle]
 *
 * Prints "ok NAME" per check and "N passed, N failed" last; exits 1 when a
 * check failed. EmbedTests builds it plain, with AddressSanitizer and for
 * Valgrind.
 */
#include <encfs.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The layout libencfs writes (Sources/EncFSC/BundleCalls.swift, StatLayout). */
_Static_assert(offsetof(struct encfs_stat, kind) == 0, "kind");
_Static_assert(offsetof(struct encfs_stat, mode) == 4, "mode");
_Static_assert(offsetof(struct encfs_stat, size) == 8, "size");
_Static_assert(offsetof(struct encfs_stat, mtime_sec) == 16, "mtime_sec");
_Static_assert(offsetof(struct encfs_stat, mtime_nsec) == 24, "mtime_nsec");
_Static_assert(offsetof(struct encfs_stat, target) == 32, "target");
_Static_assert(offsetof(struct encfs_stat, target_length) == 40, "target_length");
_Static_assert(sizeof(struct encfs_stat) == 48, "size of struct encfs_stat");

static int passed, failed;
static const char *dir;

static void check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (ok) passed++; else failed++;
    printf(ok ? "ok " : "FAILED ");
    vprintf(fmt, ap);
    if (!ok) printf(" (last error %d: %s)", encfs_last_error(), encfs_last_error_message());
    printf("\n");
    va_end(ap);
}

static char *path_in(const char *name) {
    static char buf[8][4096];
    static int next;
    char *out = buf[next++ % 8];
    snprintf(out, sizeof buf[0], "%s/%s", dir, name);
    return out;
}

/* The whole of a file of the fixture's source tree; *length its size. */
static unsigned char *source(const char *relative, size_t *length) {
    char full[4096];
    snprintf(full, sizeof full, "%s/src/%s", dir, relative);
    FILE *f = fopen(full, "rb");
    if (!f) { perror(full); exit(2); }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc(size ? size : 1);
    if (fread(data, 1, size, f) != (size_t)size) exit(2);
    fclose(f);
    *length = size;
    return data;
}

/* Opens `bundle` (a fixture name or an address) with a key file. */
static encfs_bundle *open_with_key(const char *location, const char *key) {
    encfs_options *o = encfs_options_new();
    encfs_options_add_key_file(o, path_in(key));
    encfs_bundle *b = NULL;
    int rc = encfs_open(location, o, &b);
    encfs_options_free(o);
    return rc == ENCFS_OK ? b : NULL;
}

static void test_version_and_strings(void) {
    const char *v = encfs_version();
    int major, minor, patch;
    check(v && sscanf(v, "%d.%d.%d", &major, &minor, &patch) == 3, "encfs_version is x.y.z (%s)", v ? v : "NULL");
    check(strcmp(encfs_status_string(ENCFS_ERR_WRONG_KEY), "wrong key") == 0, "status string of WRONG_KEY");
    check(strcmp(encfs_status_string(ENCFS_OK), "success") == 0, "status string of OK");
    check(strcmp(encfs_status_string(9999), "unknown status") == 0, "status string of an unknown code");
    check(strcmp(encfs_status_string(-1), "unknown status") == 0, "status string of -1");
    for (int code = 0; code <= ENCFS_ERR_NO_MEMORY; code++)
        check(strlen(encfs_status_string(code)) > 0 && strcmp(encfs_status_string(code), "unknown status") != 0,
              "status string of code %d", code);
}

static void expect_invalid(int rc, const char *function) {
    check(rc == ENCFS_ERR_INVALID_ARGUMENT && encfs_last_error() == ENCFS_ERR_INVALID_ARGUMENT
              && strstr(encfs_last_error_message(), function) != NULL,
          "%s refuses NULL or a bad argument", function);
}

static void test_null_and_bad_arguments(void) {
    encfs_options *o = encfs_options_new();
    encfs_bundle *b = open_with_key(path_in("app.bundle"), "app.key");
    encfs_file *f = NULL;
    encfs_list *l = NULL;
    struct encfs_stat st;
    size_t n = 0;
    void *data = NULL;
    char id[33];
    unsigned char buf[16];
    expect_invalid(encfs_options_add_key_file(NULL, "x"), "encfs_options_add_key_file");
    expect_invalid(encfs_options_add_key_file(o, NULL), "encfs_options_add_key_file");
    expect_invalid(encfs_options_add_key(NULL, buf, 32), "encfs_options_add_key");
    expect_invalid(encfs_options_add_key(o, NULL, 32), "encfs_options_add_key");
    expect_invalid(encfs_options_add_key(o, buf, (size_t)-1), "encfs_options_add_key");
    expect_invalid(encfs_options_add_passphrase(o, NULL, 5), "encfs_options_add_passphrase");
    expect_invalid(encfs_options_add_passphrase(o, "x", 0), "encfs_options_add_passphrase");
    expect_invalid(encfs_options_add_passphrase_file(o, NULL), "encfs_options_add_passphrase_file");
    expect_invalid(encfs_options_add_identity_file(o, NULL), "encfs_options_add_identity_file");
    expect_invalid(encfs_options_add_verify_key_file(o, NULL), "encfs_options_add_verify_key_file");
    expect_invalid(encfs_options_add_verify_key_pem(o, NULL, 10), "encfs_options_add_verify_key_pem");
    expect_invalid(encfs_options_add_verify_key_pem(o, "x", 0), "encfs_options_add_verify_key_pem");
    expect_invalid(encfs_options_set_bundle_id(o, NULL), "encfs_options_set_bundle_id");
    expect_invalid(encfs_options_set_bundle_id(o, "abc"), "encfs_options_set_bundle_id");
    expect_invalid(encfs_options_set_bundle_id(o, "zz000000000000000000000000000000"), "encfs_options_set_bundle_id");
    expect_invalid(encfs_options_add_http_header(o, NULL), "encfs_options_add_http_header");
    expect_invalid(encfs_options_add_http_header(o, "no colon"), "encfs_options_add_http_header");
    expect_invalid(encfs_options_add_http_header(o, "A: b\r\nC: d"), "encfs_options_add_http_header");
    expect_invalid(encfs_options_set_ca_file(o, NULL), "encfs_options_set_ca_file");
    expect_invalid(encfs_open(NULL, o, &b), "encfs_open");
    expect_invalid(encfs_open(path_in("app.bundle"), NULL, &b), "encfs_open");
    expect_invalid(encfs_open(path_in("app.bundle"), o, NULL), "encfs_open");
    expect_invalid(encfs_open(path_in("app.bundle"), o, &b), "encfs_open"); /* no secret given */
    expect_invalid(encfs_bundle_id(NULL, id), "encfs_bundle_id");
    expect_invalid(encfs_bundle_id(b, NULL), "encfs_bundle_id");
    expect_invalid(encfs_listdir(NULL, "", &l), "encfs_listdir");
    expect_invalid(encfs_listdir(b, NULL, &l), "encfs_listdir");
    expect_invalid(encfs_listdir(b, "", NULL), "encfs_listdir");
    expect_invalid(encfs_walk(NULL, "", &l), "encfs_walk");
    expect_invalid(encfs_walk(b, "", NULL), "encfs_walk");
    expect_invalid(encfs_stat(NULL, "docs", &st), "encfs_stat");
    expect_invalid(encfs_stat(b, NULL, &st), "encfs_stat");
    expect_invalid(encfs_stat(b, "docs", NULL), "encfs_stat");
    expect_invalid(encfs_file_open(NULL, "big.bin", &f), "encfs_file_open");
    expect_invalid(encfs_file_open(b, NULL, &f), "encfs_file_open");
    expect_invalid(encfs_file_open(b, "big.bin", NULL), "encfs_file_open");
    expect_invalid(encfs_read_file(NULL, "docs/b.txt", 100, &data, &n), "encfs_read_file");
    expect_invalid(encfs_read_file(b, NULL, 100, &data, &n), "encfs_read_file");
    expect_invalid(encfs_read_file(b, "docs/b.txt", 100, NULL, &n), "encfs_read_file");
    expect_invalid(encfs_read_file(b, "docs/b.txt", 100, &data, NULL), "encfs_read_file");
    expect_invalid(encfs_file_pread(NULL, buf, 4, 0, &n), "encfs_file_pread");
    check(encfs_file_open(b, "docs/b.txt", &f) == ENCFS_OK, "open docs/b.txt");
    expect_invalid(encfs_file_pread(f, NULL, 4, 0, &n), "encfs_file_pread");
    expect_invalid(encfs_file_pread(f, buf, 4, 0, NULL), "encfs_file_pread");
    n = 77;
    check(encfs_file_pread(f, NULL, 0, 0, &n) == ENCFS_OK && n == 0, "pread of 0 bytes into NULL reads nothing");
    n = 77;
    check(encfs_file_pread(f, buf, (size_t)-1, 6, &n) == ENCFS_OK && n == 0, "pread of SIZE_MAX bytes at the end reads 0");
    check(encfs_file_pread(f, buf, sizeof buf, UINT64_MAX, &n) == ENCFS_OK && n == 0, "pread at UINT64_MAX reads 0");
    check(encfs_file_pread(f, buf, sizeof buf, UINT64_MAX - 3, &n) == ENCFS_OK && n == 0, "pread near UINT64_MAX reads 0");
    encfs_file_close(f);
    check(encfs_list_count(NULL) == 0, "encfs_list_count(NULL) is 0");
    check(encfs_list_name(NULL, 0, &n) == NULL, "encfs_list_name(NULL) is NULL");
    check(encfs_file_size(NULL) == 0, "encfs_file_size(NULL) is 0");
    check(encfs_listdir(b, "docs", &l) == ENCFS_OK, "listdir docs");
    check(encfs_list_name(l, encfs_list_count(l), &n) == NULL, "a name past the end is NULL");
    check(encfs_list_name(l, (size_t)-1, NULL) == NULL, "name SIZE_MAX is NULL");
    encfs_list_free(l);
    /* The free and close functions take NULL. */
    encfs_options_free(NULL);
    encfs_close(NULL);
    encfs_file_close(NULL);
    encfs_list_free(NULL);
    encfs_free(NULL);
    encfs_options_free(o);
    encfs_close(b);
}

static void test_listing_stat_and_reads(void) {
    encfs_bundle *b = open_with_key(path_in("app.bundle"), "app.key");
    check(b != NULL, "open app.bundle with a key file");
    if (!b) return;
    char id[33];
    check(encfs_bundle_id(b, id) == ENCFS_OK && strlen(id) == 32, "bundle id is 32 hex digits");

    encfs_list *l = NULL;
    check(encfs_listdir(b, "/", &l) == ENCFS_OK, "listdir /");
    const char *root[] = {"big.bin", "caf\xc3\xa9.txt", "docs", "d\xfe", "f\xff.bin", "link-a", "link-docs", "loop", "outside"};
    size_t count = encfs_list_count(l);
    check(count == 9, "root has 9 names (%zu)", count);
    for (size_t i = 0; i < count && i < 9; i++) {
        size_t length = 0;
        const char *name = encfs_list_name(l, i, &length);
        check(length == strlen(root[i]) && memcmp(name, root[i], length) == 0 && name[length] == 0,
              "root name %zu in bytewise order", i);
    }
    encfs_list_free(l);
    check(encfs_listdir(b, "link-docs", &l) == ENCFS_OK && encfs_list_count(l) == 7, "listdir through a symlink");
    encfs_list_free(l);

    check(encfs_walk(b, "docs", &l) == ENCFS_OK, "walk docs");
    const char *walked[] = {"a.pdf", "b.txt", "data.csv", "data.json", "empty", "sub", "sub/deep.txt", "x.zip"};
    check(encfs_list_count(l) == 8, "walk docs lists 8 paths");
    for (size_t i = 0; i < encfs_list_count(l) && i < 8; i++)
        check(strcmp(encfs_list_name(l, i, NULL), walked[i]) == 0, "walk path %zu is %s", i, walked[i]);
    encfs_list_free(l);
    int walked_root = encfs_walk(b, "", &l);
    check(walked_root == ENCFS_OK && encfs_list_count(l) == 18, "walk of the root lists 18 paths (%zu)", encfs_list_count(l));
    encfs_list_free(l);

    struct encfs_stat st;
    check(encfs_stat(b, "docs/a.pdf", &st) == ENCFS_OK && st.kind == ENCFS_KIND_FILE && st.size == 10000
              && st.mode == 0640 && st.mtime_sec == 1600000000 && st.mtime_nsec == 123456789 && st.target == NULL,
          "stat docs/a.pdf: file, 10000 bytes, 0640, mtime to the nanosecond");
    check(encfs_stat(b, "docs", &st) == ENCFS_OK && st.kind == ENCFS_KIND_DIRECTORY && st.size == 0, "stat docs: directory");
    check(encfs_stat(b, "link-a", &st) == ENCFS_OK && st.kind == ENCFS_KIND_SYMLINK && st.target
              && strcmp(st.target, "docs/a.pdf") == 0 && st.target_length == 10 && st.size == 10,
          "stat link-a: symlink to docs/a.pdf, not followed");
    encfs_free(st.target);
    check(encfs_stat(b, "outside", &st) == ENCFS_OK && st.target && strcmp(st.target, "/etc/passwd") == 0,
          "stat outside: its target is data");
    encfs_free(st.target);
    check(encfs_stat(b, "f\xff.bin", &st) == ENCFS_OK && st.size == 10, "stat a name that is not UTF-8");

    size_t size = 0;
    unsigned char *expected = source("big.bin", &size);
    encfs_file *f = NULL;
    check(encfs_file_open(b, "big.bin", &f) == ENCFS_OK && encfs_file_size(f) == size, "open big.bin, size");
    unsigned char *buffer = malloc(size + 100);
    size_t n = 0;
    check(encfs_file_pread(f, buffer, size + 100, 0, &n) == ENCFS_OK && n == size && memcmp(buffer, expected, size) == 0,
          "pread the whole file in one call, short at the end");
    uint64_t offsets[] = {0, 1, 4095, 4096, 4097, 8191, 2 * 4096 + 500, size - 1, size - 4096};
    size_t lengths[] = {1, 4095, 4096, 4097, 10000, 65536};
    int all = 1;
    for (size_t i = 0; i < sizeof offsets / sizeof *offsets; i++)
        for (size_t j = 0; j < sizeof lengths / sizeof *lengths; j++) {
            size_t want = lengths[j], expect = offsets[i] + want > size ? size - offsets[i] : want;
            if (encfs_file_pread(f, buffer, want, offsets[i], &n) != ENCFS_OK || n != expect
                || memcmp(buffer, expected + offsets[i], n) != 0) all = 0;
        }
    check(all, "pread at chunk boundaries of several lengths matches the source");
    check(encfs_file_pread(f, buffer, 10, size, &n) == ENCFS_OK && n == 0, "pread at the end reads 0");
    /* A file stays readable after its bundle handle is closed. */
    encfs_close(b);
    check(encfs_file_pread(f, buffer, 100, 5000, &n) == ENCFS_OK && n == 100 && memcmp(buffer, expected + 5000, 100) == 0,
          "a file outlives its bundle handle");
    encfs_file_close(f);
    free(buffer);
    free(expected);

    b = open_with_key(path_in("app.bundle"), "app.key");
    void *data = NULL;
    expected = source("docs/b.txt", &size);
    check(encfs_read_file(b, "docs/b.txt", 6, &data, &n) == ENCFS_OK && n == 6 && memcmp(data, "hello\n", 6) == 0,
          "read_file at its limit");
    encfs_free(data);
    free(expected);
    check(encfs_read_file(b, "docs/empty", 0, &data, &n) == ENCFS_OK && n == 0 && data != NULL, "read_file of an empty file");
    encfs_free(data);
    check(encfs_read_file(b, "link-a", 1 << 20, &data, &n) == ENCFS_OK && n == 10000, "read_file through a symlink");
    encfs_free(data);
    check(encfs_read_file(b, "d\xfe/inner.txt", 100, &data, &n) == ENCFS_OK && n == 7 && memcmp(data, "inside\n", 7) == 0,
          "read_file below a directory whose name is not UTF-8");
    encfs_free(data);
    encfs_close(b);
}

/* Opens with the options `o` (freed here) and checks the code. */
static int open_expect(const char *location, encfs_options *o, int code, const char *what) {
    encfs_bundle *b = NULL;
    int rc = encfs_open(location, o, &b);
    encfs_options_free(o);
    /* A success leaves the last error as it was. */
    check(rc == code && (code == ENCFS_OK ? b != NULL : encfs_last_error() == code), "%s (code %d, got %d)", what, code, rc);
    encfs_close(b);
    return rc;
}

static encfs_options *with_key_file(const char *key) {
    encfs_options *o = encfs_options_new();
    encfs_options_add_key_file(o, path_in(key));
    return o;
}

static void test_unlocks_and_origin(void) {
    encfs_options *o = encfs_options_new();
    encfs_options_add_passphrase(o, "correct horse battery staple", 28);
    open_expect(path_in("multi.bundle"), o, ENCFS_OK, "a passphrase opens multi.bundle");
    o = encfs_options_new();
    encfs_options_add_passphrase_file(o, path_in("pass.txt"));
    open_expect(path_in("multi.bundle"), o, ENCFS_OK, "a passphrase file opens multi.bundle");
    o = encfs_options_new();
    encfs_options_add_identity_file(o, path_in("host.key"));
    open_expect(path_in("multi.bundle"), o, ENCFS_OK, "an identity file opens multi.bundle");
    o = encfs_options_new();
    encfs_options_add_key_file(o, path_in("other.key"));
    encfs_options_add_passphrase(o, "wrong", 5);
    encfs_options_add_identity_file(o, path_in("host.key"));
    open_expect(path_in("multi.bundle"), o, ENCFS_OK, "several secrets at once: the identity opens it");

    /* A raw key: the bytes of app.key's 64 hex digits. */
    FILE *kf = fopen(path_in("app.key"), "r");
    char hex[65] = {0};
    if (!kf || fread(hex, 1, 64, kf) != 64) exit(2);
    fclose(kf);
    unsigned char key[32];
    for (int i = 0; i < 32; i++) sscanf(hex + 2 * i, "%2hhx", &key[i]);
    o = encfs_options_new();
    encfs_options_add_key(o, key, 32);
    open_expect(path_in("app.bundle"), o, ENCFS_OK, "raw key bytes open app.bundle");
    o = encfs_options_new();
    encfs_options_add_key(o, key, 31);
    open_expect(path_in("app.bundle"), o, ENCFS_ERR_UNUSABLE_KEY, "a 31-byte key is UNUSABLE_KEY");

    o = with_key_file("app.key");
    check(encfs_options_add_verify_key_file(o, path_in("sign.key.pub")) == ENCFS_OK, "add a verifying key file");
    open_expect(path_in("app.bundle"), o, ENCFS_OK, "app.bundle verifies with its signer's key");
    FILE *pf = fopen(path_in("sign.key.pub"), "r");
    char pem[1024];
    size_t pem_length = fread(pem, 1, sizeof pem, pf);
    fclose(pf);
    o = with_key_file("app.key");
    check(encfs_options_add_verify_key_pem(o, pem, pem_length) == ENCFS_OK, "add a verifying key as PEM text");
    open_expect(path_in("app.bundle"), o, ENCFS_OK, "app.bundle verifies with PEM text");
    o = with_key_file("app.key");
    encfs_options_add_verify_key_file(o, path_in("other-sign.key.pub"));
    open_expect(path_in("app.bundle"), o, ENCFS_ERR_UNTRUSTED_SIGNER, "another signer is UNTRUSTED_SIGNER");
    o = with_key_file("app.key");
    encfs_options_add_verify_key_file(o, path_in("sign.key.pub"));
    open_expect(path_in("one.bundle"), o, ENCFS_ERR_NOT_SIGNED, "an unsigned bundle is NOT_SIGNED");
    /* badsig.bundle (EmbedTests' BadSignatureBundle): its index sealed
     * again by a key holder; only the signature notices. */
    if (access(path_in("badsig.bundle"), F_OK) == 0) {
        open_expect(path_in("badsig.bundle"), with_key_file("app.key"), ENCFS_OK, "a resealed index opens without verifying keys");
        o = with_key_file("app.key");
        encfs_options_add_verify_key_file(o, path_in("sign.key.pub"));
        open_expect(path_in("badsig.bundle"), o, ENCFS_ERR_BAD_SIGNATURE, "a resealed index is BAD_SIGNATURE when verifying");
    } else {
        check(0, "badsig.bundle is in the fixture");
    }
    o = encfs_options_new();
    check(encfs_options_add_verify_key_pem(o, "not a key", 9) == ENCFS_ERR_UNUSABLE_KEY, "garbage PEM is UNUSABLE_KEY");
    encfs_options_free(o);
    o = encfs_options_new();
    check(encfs_options_add_verify_key_file(o, path_in("no-such.pub")) == ENCFS_ERR_UNUSABLE_KEY,
          "a missing verifying key file is UNUSABLE_KEY");
    encfs_options_free(o);

    encfs_bundle *b = open_with_key(path_in("app.bundle"), "app.key");
    char id[33];
    encfs_bundle_id(b, id);
    encfs_close(b);
    o = with_key_file("app.key");
    encfs_options_set_bundle_id(o, id);
    open_expect(path_in("app.bundle"), o, ENCFS_OK, "the expected bundle id opens");
    o = with_key_file("app.key");
    encfs_options_set_bundle_id(o, "00000000000000000000000000000000");
    open_expect(path_in("app.bundle"), o, ENCFS_ERR_UNEXPECTED_BUNDLE_ID, "another bundle id is UNEXPECTED_BUNDLE_ID");
}

static void test_error_codes(void) {
    open_expect(path_in("app.bundle"), with_key_file("other.key"), ENCFS_ERR_WRONG_KEY, "another key is WRONG_KEY");
    check(strstr(encfs_last_error_message(), "wrong key") != NULL, "WRONG_KEY's message says so");
    open_expect(path_in("app.bundle"), with_key_file("no-such.key"), ENCFS_ERR_UNUSABLE_KEY, "a missing key file is UNUSABLE_KEY");
    open_expect(path_in("garbage.bundle"), with_key_file("app.key"), ENCFS_ERR_NOT_A_BUNDLE, "garbage is NOT_A_BUNDLE");
    open_expect(path_in("future.bundle"), with_key_file("app.key"), ENCFS_ERR_UNSUPPORTED_VERSION, "version 99 is UNSUPPORTED_VERSION");
    open_expect(path_in("truncated.bundle"), with_key_file("app.key"), ENCFS_ERR_DAMAGED_BUNDLE, "a truncated bundle is DAMAGED_BUNDLE");
    open_expect(path_in("no-such.bundle"), with_key_file("app.key"), ENCFS_ERR_IO, "a missing bundle is IO");
    check(encfs_last_error_errno() == ENOENT, "... with errno ENOENT (%d)", encfs_last_error_errno());
    open_expect(dir, with_key_file("app.key"), ENCFS_ERR_IO, "a directory as the bundle is IO");

    encfs_bundle *b = open_with_key(path_in("app.bundle"), "app.key");
    struct encfs_stat st;
    size_t length = 0;
    encfs_list *l = NULL;
    encfs_file *f = NULL;
    check(encfs_stat(b, "docs/nope", &st) == ENCFS_ERR_NO_SUCH_FILE
              && strcmp(encfs_last_error_path(&length), "docs/nope") == 0 && length == 9,
          "a missing path is NO_SUCH_FILE, naming it");
    check(encfs_listdir(b, "docs/b.txt", &l) == ENCFS_ERR_NOT_A_DIRECTORY, "listdir of a file is NOT_A_DIRECTORY");
    check(encfs_stat(b, "docs/b.txt/x", &st) == ENCFS_ERR_NOT_A_DIRECTORY, "a path through a file is NOT_A_DIRECTORY");
    check(encfs_file_open(b, "docs", &f) == ENCFS_ERR_IS_A_DIRECTORY, "opening a directory is IS_A_DIRECTORY");
    check(encfs_file_open(b, "outside", &f) == ENCFS_ERR_SYMLINK_OUTSIDE_BUNDLE, "a link out of the bundle is SYMLINK_OUTSIDE_BUNDLE");
    check(encfs_file_open(b, "loop", &f) == ENCFS_ERR_IO && encfs_last_error_errno() == ELOOP, "a symlink loop is IO with ELOOP");
    void *data = NULL;
    size_t n = 0;
    check(encfs_read_file(b, "docs/a.pdf", 9999, &data, &n) == ENCFS_ERR_TOO_LARGE
              && strcmp(encfs_last_error_path(NULL), "docs/a.pdf") == 0 && data == NULL,
          "read_file over its limit is TOO_LARGE, naming the path");
    encfs_close(b);

    b = open_with_key(path_in("damaged.bundle"), "app.key");
    check(b != NULL, "the damaged bundle opens (only a chunk is damaged)");
    check(encfs_file_open(b, "one.bin", &f) == ENCFS_OK, "open one.bin");
    unsigned char buffer[4 * 4096];
    memset(buffer, 0xA5, sizeof buffer);
    check(encfs_file_pread(f, buffer, 4096, 0, &n) == ENCFS_OK && n == 4096, "chunk 0 still reads");
    memset(buffer, 0xA5, sizeof buffer);
    n = 12345;
    check(encfs_file_pread(f, buffer, sizeof buffer, 0, &n) == ENCFS_ERR_DAMAGED_CHUNK && n == 12345,
          "a read over chunk 1 is DAMAGED_CHUNK");
    check(encfs_last_error_chunk() == 1 && strcmp(encfs_last_error_path(&length), "one.bin") == 0 && length == 7,
          "... naming one.bin and chunk 1");
    int plaintext = 0;
    size_t one_size = 0;
    char one_path[4096];
    snprintf(one_path, sizeof one_path, "%s/one/one.bin", dir);
    FILE *one = fopen(one_path, "rb");
    unsigned char expected[4096];
    if (!one || fread(expected, 1, 4096, one) != 4096) exit(2);
    fclose(one);
    (void)one_size;
    plaintext = memcmp(buffer, expected, 4096) == 0;
    check(!plaintext, "... and the buffer holds no plaintext of the failed read");
    check(encfs_read_file(b, "one.bin", 1 << 20, &data, &n) == ENCFS_ERR_DAMAGED_CHUNK, "read_file of it is DAMAGED_CHUNK");
    encfs_file_close(f);
    encfs_close(b);
}

/* 8 threads read big.bin through one file handle and one bundle handle
 * at once; each compares every byte, and keeps its own last error. */
struct worker {
    encfs_bundle *bundle;
    encfs_file *file;
    const unsigned char *expected;
    size_t size;
    int index;
    int mismatches;
    int errors_kept;
};

static void *work(void *arg) {
    struct worker *w = arg;
    unsigned char *buffer = malloc(70000);
    size_t n = 0;
    unsigned seed = 1234 + w->index;
    for (int round = 0; round < 200; round++) {
        uint64_t offset = rand_r(&seed) % w->size;
        size_t want = 1 + rand_r(&seed) % 70000;
        if (encfs_file_pread(w->file, buffer, want, offset, &n) != ENCFS_OK) { w->mismatches++; continue; }
        size_t expect = offset + want > w->size ? w->size - offset : want;
        if (n != expect || memcmp(buffer, w->expected + offset, n) != 0) w->mismatches++;
        /* A failure of this thread's own, whose details no other thread's
         * failure may overwrite. */
        char missing[32];
        snprintf(missing, sizeof missing, "nope-%d", w->index);
        struct encfs_stat st;
        encfs_stat(w->bundle, missing, &st);
        if (round % 7 == 0) sched_yield();
        if (strcmp(encfs_last_error_path(NULL), missing) != 0 || encfs_last_error() != ENCFS_ERR_NO_SUCH_FILE) w->errors_kept = 0;
    }
    free(buffer);
    return NULL;
}

static void test_threads(const char *location) {
    encfs_bundle *b = open_with_key(location, "app.key");
    check(b != NULL, "open %s for 8 threads", location);
    if (!b) return;
    encfs_file *f = NULL;
    encfs_file_open(b, "big.bin", &f);
    size_t size = 0;
    unsigned char *expected = source("big.bin", &size);
    pthread_t threads[8];
    struct worker workers[8];
    for (int i = 0; i < 8; i++) {
        workers[i] = (struct worker){b, f, expected, size, i, 0, 1};
        pthread_create(&threads[i], NULL, work, &workers[i]);
    }
    int mismatches = 0, kept = 1;
    for (int i = 0; i < 8; i++) {
        pthread_join(threads[i], NULL);
        mismatches += workers[i].mismatches;
        kept &= workers[i].errors_kept;
    }
    check(mismatches == 0, "8 threads x 200 reads match the source byte for byte (%d mismatches)", mismatches);
    check(kept, "each thread keeps its own last error");
    free(expected);
    encfs_file_close(f);
    encfs_close(b);
}

static void test_remote(const char *url) {
    encfs_options *o = with_key_file("app.key");
    check(encfs_options_add_http_header(o, "X-Test: yes") == ENCFS_OK, "add an HTTP header");
    encfs_options_add_verify_key_file(o, path_in("sign.key.pub"));
    encfs_bundle *b = NULL;
    check(encfs_open(url, o, &b) == ENCFS_OK, "open the bundle over HTTP, signature verified");
    encfs_options_free(o);
    if (!b) return;
    void *data = NULL;
    size_t n = 0, size = 0;
    unsigned char *expected = source("docs/a.pdf", &size);
    check(encfs_read_file(b, "docs/a.pdf", 1 << 20, &data, &n) == ENCFS_OK && n == size && memcmp(data, expected, n) == 0,
          "read docs/a.pdf over HTTP");
    encfs_free(data);
    free(expected);
    encfs_close(b);
    test_threads(url);
    char missing[4096];
    snprintf(missing, sizeof missing, "%s.missing", url);
    open_expect(missing, with_key_file("app.key"), ENCFS_ERR_IO, "a missing remote bundle is IO");
}

/* Paths of random bytes (any but NUL), through every path call: each
 * returns a code, none crashes, and every code is a known one. */
static void test_random_paths(void) {
    encfs_bundle *b = open_with_key(path_in("app.bundle"), "app.key");
    unsigned seed = 99;
    int known = 1;
    for (int i = 0; i < 500; i++) {
        char path[64];
        int length = rand_r(&seed) % 63;
        for (int j = 0; j < length; j++) {
            /* Mostly '/', '.' and letters of the tree, sometimes any byte. */
            const char pick[] = "/./..docsab";
            path[j] = rand_r(&seed) % 4 ? pick[rand_r(&seed) % (sizeof pick - 1)] : (char)(1 + rand_r(&seed) % 255);
        }
        path[length] = 0;
        struct encfs_stat st;
        encfs_list *l = NULL, *w = NULL;
        encfs_file *f = NULL;
        void *data = NULL;
        size_t n = 0;
        int codes[5] = {encfs_stat(b, path, &st), encfs_listdir(b, path, &l), encfs_walk(b, path, &w),
                        encfs_file_open(b, path, &f), encfs_read_file(b, path, 1 << 20, &data, &n)};
        for (int k = 0; k < 5; k++)
            if (codes[k] < 0 || codes[k] > ENCFS_ERR_NO_MEMORY) known = 0;
        if (codes[0] == ENCFS_OK) encfs_free(st.target);
        encfs_list_free(l);
        encfs_list_free(w);
        if (codes[3] == ENCFS_OK) encfs_file_close(f);
        if (codes[4] == ENCFS_OK) encfs_free(data);
    }
    check(known, "500 random paths through every path call: known codes, no crash");
    encfs_close(b);
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: abi-test FIXTURE_DIR [URL]\n");
        return 2;
    }
    dir = argv[1];
    test_version_and_strings();
    test_null_and_bad_arguments();
    test_listing_stat_and_reads();
    test_unlocks_and_origin();
    test_error_codes();
    test_threads(path_in("app.bundle"));
    test_random_paths();
    if (argc == 3) test_remote(argv[2]);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
