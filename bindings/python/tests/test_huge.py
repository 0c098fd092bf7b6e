"""A 5 GiB sparse file, read across 4 GiB (offsets past 32 bits)."""
import encfs

GIB = 1 << 30


def test_read_across_four_gib(huge, fx):
    with encfs.Bundle(huge, key_file=fx.key) as b:
        st = b.stat("huge.bin")
        assert st.size == 5 * GIB
        with b.open("huge.bin") as f:
            f.seek(4 * GIB - 3)
            assert f.read(16) == b"\0" * 10 + b"X" + b"\0" * 5
            f.seek(5 * GIB - 2)
            assert f.read(10) == b"\0\0"
            assert f.read(10) == b""
        raw = b.open("huge.bin", buffering=0)
        assert raw.pread(1, 4 * GIB + 7) == b"X"
        assert raw.pread(1 << 20, 4 * GIB - (1 << 19)).count(b"X") == 1
        raw.close()
