"""encfs.Bundle: an encrypted bundle opened in-process through libencfs."""
import ctypes
import errno
import io
import os
import threading

from ._lib import Stat, lib
from .errors import Error, check, last_error

KIND_NAMES = {1: "file", 2: "directory", 3: "symlink"}
# The hot path of every read from Python (readinto, pread_into) calls
# encfs_file_pread through a second function object with no argtypes and
# passes it ctypes objects only: argtypes would run one from_param
# conversion per argument, which cost as much again as the call itself
# (docs/PERFORMANCE.md, "Reading in-process"). Every argument is built
# with its exact C type, so nothing depends on ctypes' conversion of a
# plain int: the handle (converted once per file) a void *, the buffer a
# pointer (byref), the count a size_t (converted once per size), the offset
# a c_uint64, n a pointer to a c_size_t.
_pread = lib["encfs_file_pread"]
_pread.restype = ctypes.c_int
_char_from_buffer = ctypes.c_char.from_buffer
_byref = ctypes.byref
_c_size_t = ctypes.c_size_t
_c_uint64 = ctypes.c_uint64
# A size_t argument ready to pass, as ctypes.byref gives a pointer one.
_size_argument = ctypes.c_size_t.from_param
_UNLIMITED = (1 << 64) - 1


def _encode(path):
    """A bundle path as bytes: str (surrogate escapes kept), bytes or os.PathLike."""
    path = os.fspath(path)
    return path if isinstance(path, bytes) else os.fsencode(path)


def _many(value):
    """None, one value, or a list/tuple of values, as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


class StatResult:
    """The attributes of one item: ``kind`` ("file", "directory" or
    "symlink"), ``size``, ``mode`` (permission bits), ``mtime`` (seconds,
    float), ``mtime_ns`` (int, exact) and, for a symlink, ``target``
    (str, or bytes when the path was bytes)."""

    __slots__ = ("kind", "size", "mode", "mtime", "mtime_ns", "target")

    def __init__(self, kind, size, mode, mtime_ns, target):
        self.kind, self.size, self.mode, self.mtime_ns, self.target = kind, size, mode, mtime_ns, target
        self.mtime = mtime_ns / 1e9

    def __repr__(self):
        return "StatResult(kind=%r, size=%d, mode=0o%o, mtime_ns=%d, target=%r)" % (
            self.kind, self.size, self.mode, self.mtime_ns, self.target)


class _Options:
    """An encfs_options handle, freed (and its secrets wiped) on exit."""

    def __init__(self):
        self.handle = lib.encfs_options_new()
        if not self.handle:
            raise MemoryError("encfs_options_new")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        lib.encfs_options_free(self.handle)

    def add_path(self, function, path):
        check(function(self.handle, _encode(path)))

    def add_secret(self, function, secret):
        """Passes a secret through a ctypes buffer that is zeroed after the
        library copied it (a str or bytes the caller holds is beyond reach)."""
        if isinstance(secret, str):
            secret = secret.encode()
        view = memoryview(secret).cast("B")
        if len(view) == 0:
            check(function(self.handle, None, 0))
            return
        buffer = (ctypes.c_char * len(view)).from_buffer_copy(view)
        try:
            check(function(self.handle, buffer, len(view)))
        finally:
            ctypes.memset(buffer, 0, ctypes.sizeof(buffer))


class Bundle:
    """An encrypted bundle, opened for reading in this process.

    ``location`` is a file path, an ``http(s)://`` address or
    ``s3://BUCKET/KEY`` (signed with AWS Signature V4; endpoint, region and
    credentials from the environment, e.g. ``AWS_ENDPOINT_URL``). Give one or
    more secrets: ``key_file``, ``key`` (32 raw bytes), ``passphrase``,
    ``passphrase_file``, ``identity_file`` (each a value or a list); the
    bundle opens when one of them opens a slot. ``verify_keys`` (paths of
    PEM public keys, or PEM bytes) require a signature by one of them;
    ``bundle_id`` (32 hex digits) pins one bundle. ``headers`` and
    ``ca_file`` are for HTTP.

    A Bundle may be read from many threads at once. It is a context
    manager: closing it releases the library's handle, whose keys are wiped
    once no file of it is open.
    """

    def __init__(self, location, *, key_file=None, key=None, passphrase=None, passphrase_file=None,
                 identity_file=None, verify_keys=None, bundle_id=None, headers=None, ca_file=None):
        self._lock = threading.Lock()
        self._handle = None
        with _Options() as options:
            for path in _many(key_file):
                options.add_path(lib.encfs_options_add_key_file, path)
            for value in _many(key):
                options.add_secret(lib.encfs_options_add_key, value)
            for value in _many(passphrase):
                options.add_secret(lib.encfs_options_add_passphrase, value)
            for path in _many(passphrase_file):
                options.add_path(lib.encfs_options_add_passphrase_file, path)
            for path in _many(identity_file):
                options.add_path(lib.encfs_options_add_identity_file, path)
            for verify in _many(verify_keys):
                if isinstance(verify, (bytes, bytearray)) and verify.lstrip().startswith(b"-----BEGIN"):
                    check(lib.encfs_options_add_verify_key_pem(options.handle, bytes(verify), len(verify)))
                else:
                    options.add_path(lib.encfs_options_add_verify_key_file, verify)
            if bundle_id is not None:
                check(lib.encfs_options_set_bundle_id(options.handle, bundle_id.encode()))
            for line in _many(headers):
                check(lib.encfs_options_add_http_header(options.handle, _encode(line)))
            if ca_file is not None:
                options.add_path(lib.encfs_options_set_ca_file, ca_file)
            handle = ctypes.c_void_p()
            check(lib.encfs_open(_encode(location), options.handle, ctypes.byref(handle)))
        self._handle = handle.value

    # Life cycle

    def close(self):
        """Releases the bundle; files opened from it stay readable until closed."""
        with self._lock:
            handle, self._handle = self._handle, None
        if handle:
            lib.encfs_close(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None):
            self.close()

    @property
    def closed(self):
        return self._handle is None

    def _live(self):
        handle = self._handle
        if handle is None:
            raise ValueError("I/O operation on a closed bundle")
        return handle

    # Metadata

    @property
    def bundle_id(self):
        """The bundle's id, 32 hex digits."""
        out = ctypes.create_string_buffer(33)
        check(lib.encfs_bundle_id(self._live(), out))
        return out.value.decode()

    def _names(self, function, path):
        listing = ctypes.c_void_p()
        check(function(self._live(), _encode(path), ctypes.byref(listing)))
        try:
            names = []
            length = ctypes.c_size_t()
            for index in range(lib.encfs_list_count(listing)):
                pointer = lib.encfs_list_name(listing, index, ctypes.byref(length))
                names.append(ctypes.string_at(pointer, length.value))
            return names
        finally:
            lib.encfs_list_free(listing)

    def listdir(self, path=""):
        """The names in the directory at ``path`` ("" or "/" is the root),
        sorted; str names for a str path (non-UTF-8 bytes as surrogate
        escapes, as os.listdir), bytes names for a bytes path."""
        names = self._names(lib.encfs_listdir, path)
        if isinstance(os.fspath(path), bytes):
            return names
        return sorted(os.fsdecode(name) for name in names)

    def subpaths(self, path=""):
        """Every path below the directory at ``path``, relative to it, depth
        first; symlinks listed, not followed. Types follow ``path``'s."""
        names = self._names(lib.encfs_walk, path)
        return names if isinstance(os.fspath(path), bytes) else [os.fsdecode(name) for name in names]

    def stat(self, path):
        """The attributes of the item at ``path`` (a symlink is described,
        not followed, as os.lstat)."""
        raw = Stat()
        check(lib.encfs_stat(self._live(), _encode(path), ctypes.byref(raw)))
        target = None
        if raw.target:
            target = ctypes.string_at(raw.target, raw.target_length)
            lib.encfs_free(raw.target)
            if not isinstance(os.fspath(path), bytes):
                target = os.fsdecode(target)
        return StatResult(KIND_NAMES.get(raw.kind, "unknown"), raw.size, raw.mode,
                          raw.mtime_sec * 1_000_000_000 + raw.mtime_nsec, target)

    def exists(self, path):
        """Whether anything is at ``path``."""
        try:
            self.stat(path)
            return True
        except (FileNotFoundError, NotADirectoryError):
            return False

    def walk(self, top=""):
        """Like os.walk: (root, dirs, files) for ``top`` and every directory
        below it, top down; symlinks are in ``files`` and not followed."""
        dirs, files = [], []
        for name in self.listdir(top):
            child = name if top in ("", "/", b"", b"/") else os.path.join(top, name)
            (dirs if self.stat(child).kind == "directory" else files).append(name)
        yield top, dirs, files
        for name in dirs:
            yield from self.walk(name if top in ("", "/", b"", b"/") else os.path.join(top, name))

    # Contents

    def read_bytes(self, path, limit=None):
        """The whole file at ``path``; with ``limit``, encfs.TooLarge for a
        file of more than ``limit`` bytes."""
        data, length = ctypes.c_void_p(), ctypes.c_size_t()
        check(lib.encfs_read_file(self._live(), _encode(path), _UNLIMITED if limit is None else limit,
                                  ctypes.byref(data), ctypes.byref(length)))
        try:
            return ctypes.string_at(data, length.value)
        finally:
            lib.encfs_free(data)

    def read_text(self, path, encoding="utf-8", errors="strict", limit=None):
        """The whole file at ``path`` decoded."""
        return self.read_bytes(path, limit).decode(encoding, errors)

    def open(self, path, mode="rb", buffering=-1, encoding=None, errors=None, newline=None):
        """The file at ``path`` as a seekable, readable file object: an
        io.BufferedReader over an io.RawIOBase ("rb"), or an
        io.TextIOWrapper over that ("r"). ``buffering=0`` gives the raw file."""
        if mode not in ("r", "rb", "rt"):
            raise ValueError("encfs bundles are read-only: mode must be 'r' or 'rb', not %r" % mode)
        raw = EncryptedFile(self, path)
        if buffering == 0:
            if mode != "rb":
                raise ValueError("unbuffered text is not supported")
            return raw
        # 64 KiB: 16 chunks of the default size, so a small random read does
        # not decrypt far more than it returns; pass buffering= for more.
        binary = io.BufferedReader(raw, buffering if buffering > 1 else 64 * 1024)
        if mode == "rb":
            return binary
        return io.TextIOWrapper(binary, encoding=encoding or "utf-8", errors=errors, newline=newline)


class EncryptedFile(io.RawIOBase):
    """A file of a bundle as a raw, seekable binary stream. Reads go
    straight into the caller's buffer (readinto, pread_into), with the GIL
    released.

    The position (seek, tell, readinto) belongs to the object: threads
    that share one file object read with pread or pread_into, which take
    an offset and leave the position alone."""

    # Slots: the hot path reads these on every call (name and the
    # io.RawIOBase state stay in the base's __dict__).
    __slots__ = ("_handle", "_argument", "_size", "_position", "_got", "_got_pointer", "_counted")

    def __init__(self, bundle, path):
        self._handle = None  # first: close() runs even when opening fails
        self._argument = None
        super().__init__()
        handle = ctypes.c_void_p()
        check(lib.encfs_file_open(bundle._live(), _encode(path), ctypes.byref(handle)))
        self._handle = handle.value
        # The handle as _pread's argument, converted once; None once closed.
        self._argument = ctypes.c_void_p.from_param(handle.value)
        self._size = lib.encfs_file_size(self._handle)
        self._position = 0
        # The last count read and its argument, replaced as a pair and never
        # changed, so a thread that took one passes the count it checked.
        self._counted = (0, None)
        self._got = ctypes.c_size_t()
        self._got_pointer = ctypes.byref(self._got)
        self.name = os.fsdecode(_encode(path))

    @property
    def size(self):
        return self._size

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, buffer):
        handle = self._argument
        if handle is None:
            raise ValueError("I/O operation on closed file")
        # bytes and bytearray count bytes; other buffers by their view.
        count = len(buffer) if type(buffer) is bytearray else memoryview(buffer).nbytes
        if count == 0:
            return 0
        # The ctypes object holds an export of the buffer until the call
        # returns: no other thread can resize it while the GIL is released.
        # n goes to the file's own c_size_t, as the position is the file's.
        counted = self._counted
        if counted[0] != count:
            counted = self._counted = (count, _size_argument(count))
        status = _pread(handle, _byref(_char_from_buffer(buffer)), counted[1], _c_uint64(self._position),
                        self._got_pointer)
        if status:
            raise last_error(status)
        got = self._got.value
        self._position += got
        return got

    def pread_into(self, buffer, offset):
        """Reads into ``buffer`` (a writable bytes-like object: bytearray,
        memoryview, array…) from ``offset``, like ``os.preadv``: returns the
        number of bytes read, fewer than the buffer holds only at the end
        of the file (0 at or past it). The position is left alone, so
        threads may share one file object; the data is not copied or
        allocated. A negative offset is OSError(EINVAL)."""
        handle = self._argument
        if handle is None:
            raise ValueError("I/O operation on closed file")
        if offset < 0:
            raise OSError(errno.EINVAL, "negative offset %d" % offset)
        count = len(buffer) if type(buffer) is bytearray else memoryview(buffer).nbytes
        if count == 0:
            return 0
        # As in readinto, written out again: a shared method would add a
        # call, about 0.1 of the 1.8 µs Python adds to each read.
        counted = self._counted
        if counted[0] != count:
            counted = self._counted = (count, _size_argument(count))
        got = _c_size_t()  # this call's own: another thread may read this file at once
        status = _pread(handle, _byref(_char_from_buffer(buffer)), counted[1], _c_uint64(offset), _byref(got))
        if status:
            raise last_error(status)
        return got.value

    def pread(self, count, offset):
        """Up to ``count`` bytes at ``offset``, without moving the position."""
        buffer = bytearray(min(count, max(self._size - offset, 0)))
        if not buffer:
            return b""
        got = ctypes.c_size_t()
        pointer = (ctypes.c_char * len(buffer)).from_buffer(buffer)
        check(lib.encfs_file_pread(self._handle, pointer, len(buffer), offset, ctypes.byref(got)))
        return bytes(buffer[:got.value])

    def readall(self):
        return self.read(max(self._size - self._position, 0)) or b""

    def seek(self, offset, whence=io.SEEK_SET):
        # Literal whence values: io.SEEK_SET, SEEK_CUR and SEEK_END are 0, 1
        # and 2 on every platform, and a module lookup per seek adds up.
        if whence == 0:
            position = offset
        elif whence == 1:
            position = self._position + offset
        elif whence == 2:
            position = self._size + offset
        else:
            raise ValueError("invalid whence (%r)" % whence)
        if position < 0:
            raise OSError(22, "negative seek position %d" % position)
        self._position = position
        return position

    def tell(self):
        return self._position

    def close(self):
        """Frees the file's handle in libencfs. As with the C API, no other
        thread may still be reading this file object: join its readers
        first (a read that overlaps the close reads freed memory)."""
        if not self.closed and self._handle is not None:
            self._argument = None
            lib.encfs_file_close(self._handle)
            self._handle = None
        super().close()

    def __del__(self):
        try:
            self.close()
        except Error:
            pass
