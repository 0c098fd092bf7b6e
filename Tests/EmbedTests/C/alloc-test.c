/*
 * alloc-test: encfs_file_pread allocates nothing once warm. This program
 * defines malloc, calloc, realloc and the aligned allocators itself
 * (counting, then calling glibc's __libc_* functions), so every
 * allocation in the process, libencfs and the Swift runtime inside it
 * included, is counted.
 *
 *   alloc-test BUNDLE KEY-FILE PATH
 *
 * Prints the allocations of 2000 preads after a warm-up; exits 1 if any.
 */
#include <encfs.h>
#include <stdio.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static unsigned long allocations;

void *malloc(size_t n) { __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED); return __libc_malloc(n); }
void *calloc(size_t n, size_t m) { __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED); return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED); return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    void *p = memalign(a, n);
    if (!p) return 12;
    *out = p;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: alloc-test BUNDLE KEY-FILE PATH\n");
        return 2;
    }
    encfs_options *o = encfs_options_new();
    encfs_options_add_key_file(o, argv[2]);
    encfs_bundle *b;
    encfs_file *f;
    if (encfs_open(argv[1], o, &b) != ENCFS_OK || encfs_file_open(b, argv[3], &f) != ENCFS_OK) {
        fprintf(stderr, "alloc-test: %s\n", encfs_last_error_message());
        return 1;
    }
    encfs_options_free(o);
    uint64_t size = encfs_file_size(f);
    static char buffer[300000];
    size_t n;
    /* Reads of every shape, twice: the first pass warms the reader's pool. */
    for (int pass = 0; pass < 2; pass++) {
        unsigned long before = __atomic_load_n(&allocations, __ATOMIC_RELAXED);
        for (int i = 0; i < 1000; i++) {
            uint64_t offset = ((uint64_t)i * 7919 * 4099) % size;
            size_t count = 1 + (size_t)(i * 104729) % sizeof buffer;
            if (encfs_file_pread(f, buffer, count, offset, &n) != ENCFS_OK) {
                fprintf(stderr, "alloc-test: %s\n", encfs_last_error_message());
                return 1;
            }
            if (encfs_file_pread(f, buffer, 4096, (offset / 4096) * 4096, &n) != ENCFS_OK) return 1;
        }
        unsigned long made = __atomic_load_n(&allocations, __ATOMIC_RELAXED) - before;
        printf("pass %d: %lu allocations in 2000 preads\n", pass, made);
        if (pass == 1 && made != 0) return 1;
    }
    encfs_file_close(f);
    encfs_close(b);
    return 0;
}
