"""8 threads reading one Bundle at once, each byte compared with the source."""
import random

import encfs


def test_eight_threads_read_one_bundle(fx, in_threads):
    data = fx.source("big.bin")
    with encfs.Bundle(fx.app, key_file=fx.key) as b:
        shared = b.open("big.bin", buffering=0)
        failures = []

        def work(seed):
            rng = random.Random(seed)
            own = b.open("big.bin")
            buffer = bytearray(70000)
            try:
                for _ in range(150):
                    offset, count = rng.randrange(len(data)), rng.randrange(1, 70000)
                    got = shared.pread(count, offset)
                    if got != data[offset:offset + count]:
                        failures.append(("pread", offset, count))
                    own.seek(offset)
                    n = own.readinto(memoryview(buffer)[:count])
                    if bytes(buffer[:n]) != data[offset:offset + count]:
                        failures.append(("readinto", offset, count))
                    try:
                        b.stat("nope-%d" % seed)
                    except encfs.NoSuchFile as error:
                        if error.path != "nope-%d" % seed:
                            failures.append(("error of another thread", error.path))
            except Exception as error:  # recorded, so the main thread fails the test
                failures.append(("raised", repr(error)))
            finally:
                own.close()

        in_threads(work)
        shared.close()
        assert failures == []
