#ifndef ENCFS_CKEYRING_SHIM_H
#define ENCFS_CKEYRING_SHIM_H

// The kernel key retention service, reached through the keyctl system
// call directly rather than libkeyutils: three operations are needed, and
// the kernel's ABI for them is stable (man 2 keyctl).

#include <linux/keyctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

// syscall() is variadic, which Swift cannot call; one helper per
// operation, each returning the system call's result (-1 and errno set
// on failure).

// The special keyring ids (KEY_SPEC_*) are macros of negative values;
// Swift imports them, but as Int32 constants of a macro the importer may
// type differently across headers, so pin them here.
static inline int32_t ckeyring_session_keyring(void) { return KEY_SPEC_SESSION_KEYRING; }
static inline int32_t ckeyring_user_keyring(void) { return KEY_SPEC_USER_KEYRING; }
static inline int32_t ckeyring_process_keyring(void) { return KEY_SPEC_PROCESS_KEYRING; }

// KEYCTL_SEARCH: the id of a key of `type` and `description` reachable
// from `keyring` (searched recursively), linking it nowhere (dest 0).
static inline long ckeyring_search(int32_t keyring, const char *type, const char *description) {
    return syscall(SYS_keyctl, KEYCTL_SEARCH, keyring, type, description, 0);
}

// KEYCTL_READ: copies at most `length` bytes of the key's payload into
// `buffer`; returns the payload's full length.
static inline long ckeyring_read(int32_t key, void *buffer, size_t length) {
    return syscall(SYS_keyctl, KEYCTL_READ, key, buffer, length);
}

// KEYCTL_GET_PERSISTENT: the calling user's persistent keyring (uid -1),
// linked into `destination` (the kernel requires a keyring to link it
// to: the caller passes its own process keyring, which dies with it).
static inline long ckeyring_get_persistent(int32_t destination) {
    return syscall(SYS_keyctl, KEYCTL_GET_PERSISTENT, (uid_t)-1, destination);
}

#endif
