"""ctypes declarations of libencfs (include/encfs.h), loaded once.

The library is looked for, in order: the file named by ENCFS_LIBRARY; the
copy inside this package (the wheel carries one); libencfs.so.0 on the
loader's path (the .deb installs it). ctypes releases the GIL for every
call through a CDLL, so reads from several threads run in parallel.
"""
import ctypes
import os

c_size_p = ctypes.POINTER(ctypes.c_size_t)


class Stat(ctypes.Structure):
    """struct encfs_stat."""
    _fields_ = [
        ("kind", ctypes.c_int),
        ("mode", ctypes.c_uint32),
        ("size", ctypes.c_uint64),
        ("mtime_sec", ctypes.c_int64),
        ("mtime_nsec", ctypes.c_uint32),
        ("target", ctypes.c_void_p),
        ("target_length", ctypes.c_size_t),
    ]


def _path():
    named = os.environ.get("ENCFS_LIBRARY")
    if named:
        return named
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libencfs.so.0")
    return bundled if os.path.exists(bundled) else "libencfs.so.0"


def _declare(lib):
    vp, cp, sz, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int
    out = ctypes.POINTER(ctypes.c_void_p)
    table = {
        "encfs_version": (cp, []),
        "encfs_status_string": (cp, [i]),
        "encfs_last_error": (i, []),
        "encfs_last_error_message": (vp, []),
        "encfs_last_error_path": (vp, [c_size_p]),
        "encfs_last_error_chunk": (ctypes.c_uint64, []),
        "encfs_last_error_errno": (i, []),
        "encfs_free": (None, [vp]),
        "encfs_options_new": (vp, []),
        "encfs_options_free": (None, [vp]),
        "encfs_options_add_key_file": (i, [vp, cp]),
        "encfs_options_add_key": (i, [vp, vp, sz]),
        "encfs_options_add_passphrase": (i, [vp, vp, sz]),
        "encfs_options_add_passphrase_file": (i, [vp, cp]),
        "encfs_options_add_identity_file": (i, [vp, cp]),
        "encfs_options_add_verify_key_file": (i, [vp, cp]),
        "encfs_options_add_verify_key_pem": (i, [vp, vp, sz]),
        "encfs_options_set_bundle_id": (i, [vp, cp]),
        "encfs_options_add_http_header": (i, [vp, cp]),
        "encfs_options_set_ca_file": (i, [vp, cp]),
        "encfs_open": (i, [cp, vp, out]),
        "encfs_close": (None, [vp]),
        "encfs_bundle_id": (i, [vp, ctypes.c_char_p]),
        "encfs_listdir": (i, [vp, cp, out]),
        "encfs_walk": (i, [vp, cp, out]),
        "encfs_list_count": (sz, [vp]),
        "encfs_list_name": (vp, [vp, sz, c_size_p]),
        "encfs_list_free": (None, [vp]),
        "encfs_stat": (i, [vp, cp, ctypes.POINTER(Stat)]),
        "encfs_file_open": (i, [vp, cp, out]),
        "encfs_file_size": (ctypes.c_uint64, [vp]),
        "encfs_file_pread": (i, [vp, vp, sz, ctypes.c_uint64, c_size_p]),
        "encfs_file_close": (None, [vp]),
        "encfs_read_file": (i, [vp, cp, ctypes.c_uint64, out, c_size_p]),
    }
    for name, (restype, argtypes) in table.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


lib = _declare(ctypes.CDLL(_path()))
