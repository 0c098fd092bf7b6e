"""encfs: read encrypted encfs bundles in-process, through libencfs.

    import encfs
    with encfs.Bundle("app.bundle", key_file="app.key") as b:
        b.listdir("docs")
        with b.open("big.bin") as f:
            f.seek(1 << 30)
            f.read(4096)
        with b.open("big.bin", buffering=0) as raw:
            raw.pread_into(buffer, 1 << 30)    # at an offset, no copy; threads may share raw

An fsspec file system for the protocol ``encfs`` is in encfs.fsspec
(registered by entry point when the package is installed).
"""
from ._lib import lib as _lib
from .bundle import Bundle, EncryptedFile, StatResult
from .errors import (BadSignature, CryptoFailure, DamagedBundle, DamagedChunk, Error, InvalidArgument, IOFailure,
                     IsADirectory, NoSuchFile, NotABundle, NotADirectory, NotSigned, OutOfMemory, SymlinkOutsideBundle,
                     TooLarge, UnexpectedBundleID, UnsupportedVersion, UntrustedSigner, UnusableKey, WrongKey)

__version__ = "0.1.0"


def library_version():
    """The version of the libencfs this package loaded."""
    return _lib.encfs_version().decode()


__all__ = [
    "Bundle", "EncryptedFile", "StatResult", "library_version",
    "Error", "InvalidArgument", "WrongKey", "UnusableKey", "NotABundle", "UnsupportedVersion", "DamagedBundle",
    "DamagedChunk", "NoSuchFile", "NotADirectory", "IsADirectory", "SymlinkOutsideBundle", "TooLarge", "IOFailure",
    "CryptoFailure", "NotSigned", "UntrustedSigner", "BadSignature", "UnexpectedBundleID", "OutOfMemory",
]
