/*
 * embed_bench: read throughput of libencfs for Scripts/bench-embed.sh.
 *
 *   embed_bench BUNDLE KEY-FILE PATH seq THREADS BLOCK
 *       each thread reads its own 1/THREADS of the file in BLOCK-byte preads
 *   embed_bench BUNDLE KEY-FILE PATH rand THREADS COUNT
 *       each thread does COUNT 4 KiB preads at 4 KiB-aligned random offsets
 *
 * Prints one line: "bytes=N seconds=S" (wall clock of the reading only,
 * after open). Threads share one bundle handle and one file handle.
 */
#include <encfs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static encfs_file *file;
static uint64_t size;
static int threads, sequential;
static size_t block;
static long count;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *work(void *arg) {
    long index = (long)arg;
    size_t bufsize = sequential ? block : 4096;
    char *buffer = malloc(bufsize);
    uint64_t done = 0;
    size_t n = 0;
    if (sequential) {
        uint64_t share = size / threads, start = share * index, end = index == threads - 1 ? size : start + share;
        for (uint64_t offset = start; offset < end; offset += n) {
            size_t want = end - offset < block ? end - offset : block;
            if (encfs_file_pread(file, buffer, want, offset, &n) != ENCFS_OK || n == 0) {
                fprintf(stderr, "embed_bench: %s\n", encfs_last_error_message());
                exit(1);
            }
            done += n;
        }
    } else {
        unsigned seed = 12345 + index;
        uint64_t pages = size / 4096;
        for (long i = 0; i < count; i++) {
            uint64_t page = ((uint64_t)rand_r(&seed) << 16 ^ rand_r(&seed)) % pages;
            if (encfs_file_pread(file, buffer, 4096, page * 4096, &n) != ENCFS_OK) {
                fprintf(stderr, "embed_bench: %s\n", encfs_last_error_message());
                exit(1);
            }
            done += n;
        }
    }
    free(buffer);
    return (void *)(uintptr_t)done;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: embed_bench BUNDLE KEY-FILE PATH seq|rand THREADS BLOCK|COUNT\n");
        return 2;
    }
    sequential = strcmp(argv[4], "seq") == 0;
    threads = atoi(argv[5]);
    block = (size_t)atol(argv[6]);
    count = atol(argv[6]);
    encfs_options *o = encfs_options_new();
    encfs_options_add_key_file(o, argv[2]);
    encfs_bundle *bundle;
    if (encfs_open(argv[1], o, &bundle) != ENCFS_OK || encfs_file_open(bundle, argv[3], &file) != ENCFS_OK) {
        fprintf(stderr, "embed_bench: %s\n", encfs_last_error_message());
        return 1;
    }
    encfs_options_free(o);
    size = encfs_file_size(file);
    pthread_t ids[64];
    double start = now();
    uint64_t total = 0;
    for (long i = 0; i < threads && i < 64; i++) pthread_create(&ids[i], NULL, work, (void *)i);
    for (long i = 0; i < threads && i < 64; i++) {
        void *done;
        pthread_join(ids[i], &done);
        total += (uint64_t)(uintptr_t)done;
    }
    printf("bytes=%llu seconds=%.6f\n", (unsigned long long)total, now() - start);
    encfs_file_close(file);
    encfs_close(bundle);
    return 0;
}
