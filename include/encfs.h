/*
 * encfs.h: the C ABI of libencfs, for reading encfs bundles in-process
 * from C and from any language with a C foreign-function interface.
 *
 * Link with `cc $(pkg-config --cflags --libs encfs)`. The library's
 * SONAME is libencfs.so.0; ENCFS_ABI_VERSION is its major version, and
 * only functions named encfs_* are exported.
 *
 * Conventions (docs/C-API.md says more):
 *  - Calls that can fail return an int: ENCFS_OK (0) or one of the
 *    encfs_status codes below, which are stable: a code keeps its number
 *    and meaning in every libencfs.so.0. A failing call also records, for
 *    the calling thread, the code, a one-line message and the details
 *    (encfs_last_error_*); a call that succeeds leaves them as they were.
 *  - Outputs go through pointers the caller passes; on failure they are
 *    left unchanged unless the function says otherwise.
 *  - Every pointer argument may be NULL: the call then fails with
 *    ENCFS_ERR_INVALID_ARGUMENT (the free and close functions do nothing).
 *    A pointer that is not NULL must be valid: a handle that was freed or
 *    never made is undefined behaviour, as in C.
 *  - Paths inside a bundle are NUL-terminated byte strings (any bytes but
 *    NUL, not necessarily UTF-8), relative to the bundle's root: "" and
 *    "/" are the root, a leading "/" is ignored, "." and ".." work inside
 *    the bundle, and symlinks inside the bundle are followed.
 *  - Ownership: the caller owns what it passes and keeps owning it; what
 *    the library returns is freed with the function named beside it.
 *  - Threads: bundle and file handles may be used from any number of
 *    threads at once, except that a handle must not be freed while another
 *    thread uses it. An encfs_options is used by one thread at a time.
 *  - Secrets: the library copies keys and passphrases into storage that it
 *    wipes and frees with the options (encfs_options_free); an open bundle
 *    keeps its keys in wiping storage until its last handle is closed. No
 *    call returns a key. The caller's own copies are the caller's to wipe.
 *  - No call aborts the process on bad input or a damaged bundle: every
 *    failure is a returned code.
 */
#ifndef ENCFS_H
#define ENCFS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The major version of the ABI: the N of libencfs.so.N. */
#define ENCFS_ABI_VERSION 0

/** An open bundle. Made by encfs_open, freed by encfs_close. */
typedef struct encfs_bundle encfs_bundle;
/** A file of a bundle open for positional reads. Made by encfs_file_open,
 *  freed by encfs_file_close. */
typedef struct encfs_file encfs_file;
/** How to open a bundle: secrets, origin checks, HTTP settings. Made by
 *  encfs_options_new, freed by encfs_options_free. */
typedef struct encfs_options encfs_options;
/** A list of names or paths. Made by encfs_listdir or encfs_walk, freed by
 *  encfs_list_free. */
typedef struct encfs_list encfs_list;

/** Results of every call that can fail. Stable numbers: new codes are
 *  only ever added at the end. */
typedef enum encfs_status {
    ENCFS_OK = 0,
    /** A NULL pointer, an empty secret, a malformed bundle id or another
     *  argument the call refuses. */
    ENCFS_ERR_INVALID_ARGUMENT = 1,
    /** No key slot opened with the secrets given. */
    ENCFS_ERR_WRONG_KEY = 2,
    /** A secret could not be used: a key file missing or not 64 hex
     *  digits, a raw key that is not 32 bytes, an identity file that is
     *  not a private key, a verifying key that is not Ed25519 PEM. */
    ENCFS_ERR_UNUSABLE_KEY = 3,
    /** The bytes do not start like an encfs bundle. */
    ENCFS_ERR_NOT_A_BUNDLE = 4,
    /** The bundle's format version is not one this library reads. */
    ENCFS_ERR_UNSUPPORTED_VERSION = 5,
    /** The header, the index or the bundle's length failed its checks. */
    ENCFS_ERR_DAMAGED_BUNDLE = 6,
    /** A chunk of a file failed authentication: encfs_last_error_path and
     *  encfs_last_error_chunk name it. No byte of it was returned. */
    ENCFS_ERR_DAMAGED_CHUNK = 7,
    /** Nothing at that path (ENOENT). */
    ENCFS_ERR_NO_SUCH_FILE = 8,
    /** A component of the path, or the path where a directory was asked
     *  for, is not a directory (ENOTDIR). */
    ENCFS_ERR_NOT_A_DIRECTORY = 9,
    /** A directory where a file was asked for (EISDIR). */
    ENCFS_ERR_IS_A_DIRECTORY = 10,
    /** The path leads through a symlink that leaves the bundle. */
    ENCFS_ERR_SYMLINK_OUTSIDE_BUNDLE = 11,
    /** The file is larger than the limit the caller gave. */
    ENCFS_ERR_TOO_LARGE = 12,
    /** A system call or the network failed: encfs_last_error_errno says
     *  which error. */
    ENCFS_ERR_IO = 13,
    /** A cryptographic primitive failed for a reason other than
     *  authentication. */
    ENCFS_ERR_CRYPTO = 14,
    /** Verifying keys were given and the bundle is not signed. */
    ENCFS_ERR_NOT_SIGNED = 15,
    /** Verifying keys were given and another key signed the bundle. */
    ENCFS_ERR_UNTRUSTED_SIGNER = 16,
    /** The signature does not hold for this bundle. */
    ENCFS_ERR_BAD_SIGNATURE = 17,
    /** An expected bundle id was given and the bundle has another. */
    ENCFS_ERR_UNEXPECTED_BUNDLE_ID = 18,
    /** The library could not allocate memory for a result. */
    ENCFS_ERR_NO_MEMORY = 19
} encfs_status;

/** Kinds of item (struct encfs_stat's kind). */
enum {
    ENCFS_KIND_FILE = 1,
    ENCFS_KIND_DIRECTORY = 2,
    ENCFS_KIND_SYMLINK = 3
};

/** The attributes of one item, as encfs_stat fills them (as with POSIX
 *  `struct stat`, the struct and the function share a name). */
struct encfs_stat {
    /** ENCFS_KIND_FILE, ENCFS_KIND_DIRECTORY or ENCFS_KIND_SYMLINK. */
    int kind;
    /** The permission bits (at most 07777), such as 0644. */
    uint32_t mode;
    /** A file's length in bytes; a symlink's target length; 0 for a
     *  directory. */
    uint64_t size;
    /** The modification time: seconds since the epoch and nanoseconds. */
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    /** A symlink's target, NUL-terminated, target_length bytes before the
     *  NUL; NULL for other kinds. Owned by the caller: free it with
     *  encfs_free. */
    char *target;
    size_t target_length;
};

/* ---- Version and errors ------------------------------------------------ */

/** The library's version, such as "0.1.0". A static string: never freed. */
const char *encfs_version(void);

/** A short, static, lowercase description of a status code ("wrong key");
 *  "unknown status" for a number that is not one. Never freed. */
const char *encfs_status_string(int status);

/** The code of the calling thread's last failed call (ENCFS_OK if none). */
int encfs_last_error(void);

/** The one-line message of the calling thread's last failed call ("" if
 *  none). Owned by the library: valid on this thread until its next
 *  failing call. Never contains key bytes or passphrases. */
const char *encfs_last_error_message(void);

/** The bundle path the calling thread's last failed call was about (for
 *  ENCFS_ERR_DAMAGED_CHUNK, NO_SUCH_FILE, NOT_A_DIRECTORY, IS_A_DIRECTORY,
 *  SYMLINK_OUTSIDE_BUNDLE, TOO_LARGE), NUL-terminated, its byte length in
 *  *length when length is not NULL; "" otherwise. Owned by the library,
 *  valid as encfs_last_error_message. */
const char *encfs_last_error_path(size_t *length);

/** The chunk number (from 0) of the last ENCFS_ERR_DAMAGED_CHUNK on this
 *  thread; 0 otherwise. */
uint64_t encfs_last_error_chunk(void);

/** The errno of the last ENCFS_ERR_IO on this thread; 0 otherwise. */
int encfs_last_error_errno(void);

/** Frees memory the library handed to the caller (struct encfs_stat's target).
 *  NULL does nothing. */
void encfs_free(void *pointer);

/* ---- Options ----------------------------------------------------------- */

/** New, empty options; NULL only when memory runs out. Free with
 *  encfs_options_free. */
encfs_options *encfs_options_new(void);

/** Frees the options and wipes the secrets they hold. NULL does nothing. */
void encfs_options_free(encfs_options *options);

/** Adds a key file (64 hex digits, as encfs-keygen --symmetric writes).
 *  The file is read by encfs_open. Several secrets of any kinds may be
 *  added: the bundle opens when one of them opens a slot. */
int encfs_options_add_key_file(encfs_options *options, const char *path);

/** Adds a raw 32-byte key, copied into wiping storage (another length
 *  fails encfs_open with ENCFS_ERR_UNUSABLE_KEY). */
int encfs_options_add_key(encfs_options *options, const void *key, size_t length);

/** Adds a passphrase of `length` bytes (used exactly as given), copied
 *  into wiping storage; an empty one is ENCFS_ERR_INVALID_ARGUMENT. */
int encfs_options_add_passphrase(encfs_options *options, const void *passphrase, size_t length);

/** Adds a passphrase file (its bytes less one trailing newline). */
int encfs_options_add_passphrase_file(encfs_options *options, const char *path);

/** Adds an identity file: an X25519 or RSA private key in PEM (PKCS#8). */
int encfs_options_add_identity_file(encfs_options *options, const char *path);

/** Adds a verifying key from a PEM public-key file (encfs-keygen --sign's
 *  .pub): the bundle then opens only if one of the verifying keys signed
 *  it. The file is read now. */
int encfs_options_add_verify_key_file(encfs_options *options, const char *path);

/** Adds a verifying key from PEM text of `length` bytes. */
int encfs_options_add_verify_key_pem(encfs_options *options, const void *pem, size_t length);

/** Requires the bundle id to be `hex` (32 hex digits, as encfs-inspect
 *  info shows it). */
int encfs_options_set_bundle_id(encfs_options *options, const char *hex);

/** For an http(s):// bundle: adds a request header line ("Name: value"),
 *  kept secret like the URL's query string. */
int encfs_options_add_http_header(encfs_options *options, const char *line);

/** For an https:// bundle: the CA certificates (PEM) to trust instead of
 *  the system's. */
int encfs_options_set_ca_file(encfs_options *options, const char *path);

/* ---- Bundles ----------------------------------------------------------- */

/** Opens the bundle at `location`: a file path, or an address starting
 *  with "http://", "https://" or "s3://" (Signature V4, credentials from
 *  the AWS_* environment) read with range requests (write "./http:..." for
 *  a local file of such a name). Checks the key, the header, the
 *  signature when verifying keys were given, and the whole index.
 *  `options` is only read: it may be freed right after. On success
 *  *bundle is a new handle for encfs_close. */
int encfs_open(const char *location, const encfs_options *options, encfs_bundle **bundle);

/** Closes a bundle handle. Files opened from it stay readable until they
 *  are closed; the keys are wiped when the last of them is. NULL does
 *  nothing. */
void encfs_close(encfs_bundle *bundle);

/** Writes the bundle's id, 32 hex digits and a NUL, into `out`, which has
 *  room for 33 bytes. */
int encfs_bundle_id(const encfs_bundle *bundle, char *out);

/** Lists the directory at `path` (or a symlink to one): names sorted
 *  bytewise, without "." and "..". On success *list is a new list for
 *  encfs_list_free. */
int encfs_listdir(const encfs_bundle *bundle, const char *path, encfs_list **list);

/** Lists every path below the directory at `path`, relative to it, depth
 *  first ("a", "a/b", "c"); symlinks are listed, not followed. On success
 *  *list is a new list for encfs_list_free. */
int encfs_walk(const encfs_bundle *bundle, const char *path, encfs_list **list);

/** The number of names in a list; 0 for NULL. */
size_t encfs_list_count(const encfs_list *list);

/** Name `index` of a list, NUL-terminated, its byte length in *length
 *  when length is not NULL (names may be any bytes but NUL and "/").
 *  Owned by the list: valid until encfs_list_free. NULL when list is NULL
 *  or index is out of range. */
const char *encfs_list_name(const encfs_list *list, size_t index, size_t *length);

/** Frees a list. NULL does nothing. */
void encfs_list_free(encfs_list *list);

/** Fills *st with the attributes of the item at `path`; a symlink at
 *  `path` itself is described, not followed (as lstat). On success the
 *  caller frees st->target with encfs_free. */
int encfs_stat(const encfs_bundle *bundle, const char *path, struct encfs_stat *st);

/* ---- Files ------------------------------------------------------------- */

/** Opens the file at `path` (or a symlink to one) for reads. On success
 *  *file is a new handle for encfs_file_close. A file holds no descriptor
 *  of its own and keeps its bundle's keys alive until it is closed. */
int encfs_file_open(const encfs_bundle *bundle, const char *path, encfs_file **file);

/** The file's length in bytes; 0 for NULL. */
uint64_t encfs_file_size(const encfs_file *file);

/** Reads up to `count` bytes at `offset` into `buffer` (which the caller
 *  owns and which has room for `count` bytes; NULL only when `count` is
 *  0), allocating nothing. On
 *  success *nread is `count`, or less only where the file ends (0 at or
 *  past its end). Each chunk read is authenticated before any of its
 *  bytes is copied: on ENCFS_ERR_DAMAGED_CHUNK the buffer holds no
 *  plaintext of the failed read. Any offset and count are accepted. */
int encfs_file_pread(const encfs_file *file, void *buffer, size_t count, uint64_t offset, size_t *nread);

/** Reads the whole file at `path` (or a symlink to one) if it holds at
 *  most `limit` bytes (ENCFS_ERR_TOO_LARGE otherwise). On success *data is
 *  a new buffer of *length bytes, which the caller frees with encfs_free
 *  (a buffer is returned, non-NULL, even for an empty file). */
int encfs_read_file(const encfs_bundle *bundle, const char *path, uint64_t limit, void **data, size_t *length);

/** Closes a file handle. NULL does nothing. */
void encfs_file_close(encfs_file *file);

#ifdef __cplusplus
}
#endif

#endif /* ENCFS_H */
