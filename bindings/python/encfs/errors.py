"""The exceptions of encfs: one class per status code of libencfs.

Every one derives from encfs.Error; those with a builtin meaning also derive
from the builtin (FileNotFoundError, NotADirectoryError, IsADirectoryError,
ValueError, OSError, MemoryError), so ordinary ``except`` clauses work.
"""
import ctypes
import errno as _errno
import os

from ._lib import lib


class Error(Exception):
    """A call of libencfs failed. ``code`` is its stable status code,
    ``message`` the library's one-line message (never a key or passphrase)."""

    code = -1

    def __init__(self, message, path=None):
        Exception.__init__(self, message)
        self.message = message
        #: The bundle path the failure is about (str, non-UTF-8 bytes as
        #: surrogate escapes), or None.
        self.path = path

    def __str__(self):
        return self.message


def _oserror(builtin, number):
    """An Error that is also the builtin OSError subclass ``builtin``,
    with ``errno`` ``number`` and ``filename`` the bundle path."""

    class Mixed(Error, builtin):
        def __init__(self, message, path=None):
            builtin.__init__(self, number, message, path)
            self.message = message
            self.path = path

        def __str__(self):
            return self.message

    return Mixed


class InvalidArgument(Error, ValueError):
    """An argument the library refuses (NULL, empty secret, malformed id)."""
    code = 1


class WrongKey(Error):
    """No key slot opened with the secrets given."""
    code = 2


class UnusableKey(Error):
    """A secret could not be used (missing key file, wrong length, not a key)."""
    code = 3


class NotABundle(Error):
    """The file does not start like an encfs bundle."""
    code = 4


class UnsupportedVersion(Error):
    """The bundle's format version is not one this library reads."""
    code = 5


class DamagedBundle(Error):
    """The header, the index or the bundle's length failed its checks."""
    code = 6


class DamagedChunk(Error):
    """A chunk of a file failed authentication; ``path`` and ``chunk``
    (from 0) name it. No byte of it was returned."""
    code = 7

    def __init__(self, message, path=None, chunk=0):
        Error.__init__(self, message, path)
        self.chunk = chunk


class NoSuchFile(_oserror(FileNotFoundError, _errno.ENOENT)):
    """Nothing at that path."""
    code = 8


class NotADirectory(_oserror(NotADirectoryError, _errno.ENOTDIR)):
    """A component of the path, or the path itself, is not a directory."""
    code = 9


class IsADirectory(_oserror(IsADirectoryError, _errno.EISDIR)):
    """A directory where a file was asked for."""
    code = 10


class SymlinkOutsideBundle(Error):
    """The path leads through a symlink that leaves the bundle."""
    code = 11


class TooLarge(Error):
    """The file is larger than the limit given."""
    code = 12


class IOFailure(Error, OSError):
    """A system call or the network failed; ``errno`` says which error."""
    code = 13

    def __init__(self, message, path=None, number=0):
        OSError.__init__(self, number, message)
        self.message = message
        self.path = path

    def __str__(self):
        return self.message


class CryptoFailure(Error):
    """A cryptographic primitive failed for a reason other than authentication."""
    code = 14


class NotSigned(Error):
    """Verifying keys were given and the bundle is not signed."""
    code = 15


class UntrustedSigner(Error):
    """Verifying keys were given and another key signed the bundle."""
    code = 16


class BadSignature(Error):
    """The signature does not hold for this bundle."""
    code = 17


class UnexpectedBundleID(Error):
    """An expected bundle id was given and the bundle has another."""
    code = 18


class OutOfMemory(Error, MemoryError):
    """The library could not allocate memory for a result."""
    code = 19


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgument, WrongKey, UnusableKey, NotABundle, UnsupportedVersion, DamagedBundle, DamagedChunk,
    NoSuchFile, NotADirectory, IsADirectory, SymlinkOutsideBundle, TooLarge, IOFailure, CryptoFailure,
    NotSigned, UntrustedSigner, BadSignature, UnexpectedBundleID, OutOfMemory)}


def last_error(code):
    """The exception for status ``code``, with the calling thread's details."""
    message = ctypes.string_at(lib.encfs_last_error_message()).decode("utf-8", "replace")
    length = ctypes.c_size_t(0)
    raw = lib.encfs_last_error_path(ctypes.byref(length))
    path = os.fsdecode(ctypes.string_at(raw, length.value)) if length.value else None
    cls = _BY_CODE.get(code, Error)
    if cls is DamagedChunk:
        return DamagedChunk(message, path, lib.encfs_last_error_chunk())
    if cls is IOFailure:
        return IOFailure(message, path, lib.encfs_last_error_errno())
    error = cls(message, path)
    if cls is Error:
        error.code = code
    return error


def check(code):
    """Raises the exception for a status code other than 0."""
    if code != 0:
        raise last_error(code)
