#!/usr/bin/env python3
"""Gives an executable the same page cache before every measured start, so that
the daemon's peak RSS does not depend on how the file got there.

Dropped, then read back through a mapping one page at a time (order-0 folios, as an
exec faults them in). A fresh build, or cp/install reading the file with read(2),
leaves large folios that an exec maps whole: about 1 MiB more resident text with
the same bytes (docs/PERFORMANCE.md, "Memory").

Used by bench.py, bench_many.py and Scripts/load.sh:

    python3 Scripts/bench/executable_page_cache.py PATH...
"""
import mmap
import os
import sys


def settle(path):
    """Drops the page cache of the file at path and faults it back in page by page.
    Best effort: a file that cannot be opened or mapped is left as it is."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        size = os.fstat(fd).st_size
        if size:
            with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mapped:
                # No read-ahead: it too would fill large folios.
                mapped.madvise(mmap.MADV_RANDOM)
                for offset in range(0, size, mmap.PAGESIZE):
                    mapped[offset]
    except OSError:
        pass
    finally:
        os.close(fd)


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        settle(argument)
