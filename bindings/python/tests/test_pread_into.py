"""EncryptedFile.pread_into (a positional read into the caller's buffer) and
readinto with buffers of changing sizes (the count argument each call
passes to encfs_file_pread is cached per file)."""
import array
import errno
import os
import random

import pytest

import encfs


def test_pread_into_reads_at_the_offset_and_leaves_the_position(bundle, fx):
    data = fx.source("big.bin")
    raw = bundle.open("big.bin", buffering=0)
    raw.seek(100)
    buffer = bytearray(4096)
    for offset in [0, 1, 4095, 4096, 8191, (1 << 20) - 5000, len(data) - 4096]:
        assert raw.pread_into(buffer, offset) == 4096
        assert bytes(buffer) == data[offset:offset + 4096]
    assert raw.tell() == 100
    assert raw.read(10) == data[100:110]
    # Other writable buffers: a memoryview slice, an array of 4-byte items.
    backing = bytearray(b"\xa5" * 300)
    assert raw.pread_into(memoryview(backing)[100:200], 5000) == 100
    assert bytes(backing[100:200]) == data[5000:5100]
    assert backing[:100] == backing[200:] == b"\xa5" * 100
    words = array.array("I", [0] * 10)
    assert raw.pread_into(words, 12345) == 40
    assert words.tobytes() == data[12345:12385]
    raw.close()


def test_pread_into_at_the_end_and_past_it(bundle, fx):
    data = fx.source("big.bin")
    raw = bundle.open("big.bin", buffering=0)
    buffer = bytearray(b"\xa5" * 4096)
    assert raw.pread_into(buffer, len(data) - 10) == 10
    assert bytes(buffer[:10]) == data[-10:] and buffer[10:] == b"\xa5" * 4086
    assert raw.pread_into(buffer, len(data)) == 0
    assert raw.pread_into(buffer, 1 << 40) == 0
    assert raw.pread_into(bytearray(), 0) == 0
    raw.close()


def test_pread_into_refuses_what_it_cannot_do(bundle):
    raw = bundle.open("big.bin", buffering=0)
    with pytest.raises(OSError) as e:
        raw.pread_into(bytearray(10), -1)
    assert e.value.errno == errno.EINVAL
    with pytest.raises(TypeError):
        raw.pread_into(b"read-only", 0)
    raw.close()
    with pytest.raises(ValueError):
        raw.pread_into(bytearray(10), 0)


def test_pread_into_a_damaged_chunk_raises(fx):
    one = open(os.path.join(fx.dir, "one", "one.bin"), "rb").read()
    with encfs.Bundle(fx.path("damaged.bundle"), key_file=fx.key) as b:
        raw = b.open("one.bin", buffering=0)
        buffer = bytearray(4096)
        assert raw.pread_into(buffer, 8192) == 4096 and bytes(buffer) == one[8192:12288]
        with pytest.raises(encfs.DamagedChunk) as e:
            raw.pread_into(buffer, 4000)
        assert (e.value.path, e.value.chunk) == ("one.bin", 1)
        raw.close()


def test_readinto_with_buffers_of_changing_sizes(bundle, fx):
    """Each read fills exactly its own buffer: a count kept from the
    previous call would overrun a smaller buffer or leave a larger one
    short."""
    data = fx.source("big.bin")
    raw = bundle.open("big.bin", buffering=0)
    rng = random.Random(3)
    for size in [4096, 10, 4096, 1, 70000, 70000, 3, 4096]:
        offset = rng.randrange(len(data) - size)
        backing = bytearray(b"\xa5" * (size + 16))
        raw.seek(offset)
        assert raw.readinto(memoryview(backing)[8:8 + size]) == size
        assert bytes(backing[8:8 + size]) == data[offset:offset + size]
        assert backing[:8] == backing[8 + size:] == b"\xa5" * 8
        assert raw.tell() == offset + size
        exact = bytearray(size)
        assert raw.pread_into(exact, offset) == size and exact == data[offset:offset + size]
    raw.close()


def test_threads_share_one_file_through_pread_into(bundle, fx, in_threads):
    data = fx.source("big.bin")
    shared = bundle.open("big.bin", buffering=0)
    failures = []

    def work(seed):
        rng = random.Random(seed)
        try:
            for _ in range(300):
                count = rng.choice([1, 4096, rng.randrange(1, 70000)])
                offset = rng.randrange(len(data))
                buffer = bytearray(count)
                got = shared.pread_into(buffer, offset)
                if bytes(buffer[:got]) != data[offset:offset + count]:
                    failures.append((offset, count, got))
        except Exception as error:  # recorded, so the main thread fails the test
            failures.append(("raised", repr(error)))

    in_threads(work)
    shared.close()
    assert failures == []
