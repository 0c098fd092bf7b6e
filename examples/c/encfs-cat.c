/*
 * encfs-cat: lists a bundle, or writes one of its files to stdout, through
 * libencfs (include/encfs.h).
 *
 *   cc -o encfs-cat encfs-cat.c $(pkg-config --cflags --libs encfs)
 *   ./encfs-cat app.bundle app.key               # every item: kind, size, path
 *   ./encfs-cat app.bundle app.key docs/a.pdf    # one file, byte for byte
 *
 * BUNDLE may be a path, an http(s):// or an s3:// address. Exit status: 0 done,
 * 1 the bundle or the file could not be read, 2 usage.
 */
#include <encfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what) {
    fprintf(stderr, "encfs-cat: error: %s: %s\n", what, encfs_last_error_message());
    return 1;
}

/* Prints "KIND SIZE PATH" for every item below the root. */
static int list(encfs_bundle *bundle) {
    encfs_list *paths = NULL;
    if (encfs_walk(bundle, "", &paths) != ENCFS_OK) return fail("cannot list the bundle");
    int status = 0;
    for (size_t i = 0; i < encfs_list_count(paths); i++) {
        size_t length = 0;
        const char *path = encfs_list_name(paths, i, &length);
        struct encfs_stat st;
        if (encfs_stat(bundle, path, &st) != ENCFS_OK) { status = fail(path); break; }
        char kind = st.kind == ENCFS_KIND_DIRECTORY ? 'd' : st.kind == ENCFS_KIND_SYMLINK ? 'l' : 'f';
        printf("%c %llu ", kind, (unsigned long long)st.size);
        fwrite(path, 1, length, stdout);
        if (st.target) printf(" -> %s", st.target);
        putchar('\n');
        encfs_free(st.target);
    }
    encfs_list_free(paths);
    return status;
}

/* Writes the file at `path` to stdout in 256 KiB reads. */
static int cat(encfs_bundle *bundle, const char *path) {
    encfs_file *file = NULL;
    if (encfs_file_open(bundle, path, &file) != ENCFS_OK) return fail(path);
    enum { buffer_size = 256 * 1024 };
    char *buffer = malloc(buffer_size);
    int status = buffer ? 0 : 1;
    uint64_t offset = 0;
    while (status == 0) {
        size_t got = 0;
        if (encfs_file_pread(file, buffer, buffer_size, offset, &got) != ENCFS_OK) { status = fail(path); break; }
        if (got == 0) break;
        if (fwrite(buffer, 1, got, stdout) != got) { status = 1; break; }
        offset += got;
    }
    free(buffer);
    encfs_file_close(file);
    return status;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: encfs-cat BUNDLE KEY-FILE [PATH]\n");
        return 2;
    }
    encfs_options *options = encfs_options_new();
    if (!options || encfs_options_add_key_file(options, argv[2]) != ENCFS_OK) return fail("options");
    encfs_bundle *bundle = NULL;
    int opened = encfs_open(argv[1], options, &bundle);
    encfs_options_free(options);
    if (opened != ENCFS_OK) return fail(argv[1]);
    int status = argc == 4 ? cat(bundle, argv[3]) : list(bundle);
    encfs_close(bundle);
    return status;
}
