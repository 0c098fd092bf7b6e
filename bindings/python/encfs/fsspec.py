"""An fsspec file system over encfs bundles, for the protocol ``encfs``.

    import pandas
    pandas.read_csv("encfs://data/x.csv",
                    storage_options={"bundle": "app.bundle", "key_file": "app.key"})

The package registers it by the entry point ``fsspec.specs: encfs``; the
options are those of encfs.Bundle, with the bundle's location as
``bundle``. fsspec is needed only to use this module.
"""

from fsspec.spec import AbstractFileSystem

from .bundle import Bundle
from .errors import IsADirectory


class EncFSFileSystem(AbstractFileSystem):
    """The files of one bundle, read-only."""

    protocol = "encfs"
    root_marker = ""

    def __init__(self, bundle=None, **options):
        fs_options = {k: options.pop(k) for k in list(options) if k in ("skip_instance_cache", "use_listings_cache",
                                                                           "listings_expiry_time", "max_paths")}
        super().__init__(**fs_options)
        if bundle is None:
            raise ValueError("encfs: give the bundle's location as bundle=")
        self.bundle = Bundle(bundle, **options)

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("encfs://"):
            path = path[len("encfs://"):]
        elif path.startswith("encfs:"):
            path = path[len("encfs:"):]
        return path.strip("/")

    def _kind(self, path, kind):
        """fsspec's type of an item: a symlink counts as what it points to."""
        if kind != "symlink":
            return kind
        try:
            self.bundle.open(path, buffering=0).close()
            return "file"
        except IsADirectory:
            return "directory"
        except Exception:
            return "other"

    def _entry(self, path):
        st = self.bundle.stat(path)
        kind = self._kind(path, st.kind)
        size = st.size if kind == "file" and st.kind == "file" else (
            self.bundle.open(path, buffering=0).size if kind == "file" else 0)
        return {"name": path, "size": size, "type": kind, "mode": st.mode, "mtime": st.mtime,
                "islink": st.kind == "symlink", "destination": st.target}

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        st = self.bundle.stat(path)
        if self._kind(path, st.kind) != "directory":
            entries = [self._entry(path)]
        else:
            entries = [self._entry(name if not path else path + "/" + name) for name in self.bundle.listdir(path)]
        return entries if detail else [entry["name"] for entry in entries]

    def info(self, path, **kwargs):
        return self._entry(self._strip_protocol(path))

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        if "w" in mode or "a" in mode or "+" in mode or "x" in mode:
            raise PermissionError("encfs bundles are read-only")
        return self.bundle.open(self._strip_protocol(path), "rb",
                                buffering=block_size if block_size and block_size > 1 else -1)

    def cat_file(self, path, start=None, end=None, **kwargs):
        path = self._strip_protocol(path)
        with self.bundle.open(path, buffering=0) as f:
            size = f.size
            start = 0 if start is None else (max(size + start, 0) if start < 0 else start)
            end = size if end is None else (max(size + end, 0) if end < 0 else min(end, size))
            if end <= start:
                return b""
            return f.pread(end - start, start)

    def created(self, path):
        raise NotImplementedError("bundles record modification times only")

    def modified(self, path):
        import datetime
        return datetime.datetime.fromtimestamp(self.info(path)["mtime"], tz=datetime.timezone.utc)

    def ukey(self, path):
        return "%s:%s" % (self.bundle.bundle_id, self._strip_protocol(path))

    def _rm(self, path):
        raise PermissionError("encfs bundles are read-only")


__all__ = ["EncFSFileSystem"]
