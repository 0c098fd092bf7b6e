"""A bundle served by nginx on 127.0.0.1, through Bundle and fsspec."""
import threading

import encfs


def test_remote_bundle(url, fx):
    with encfs.Bundle(url + "app.bundle", key_file=fx.key, verify_keys=[fx.path("sign.key.pub")],
                      headers=["X-Test: yes"]) as b:
        assert b.listdir("docs") == ["a.pdf", "b.txt", "data.csv", "data.json", "empty", "sub", "x.zip"]
        assert b.read_bytes("big.bin") == fx.source("big.bin")
        data = fx.source("big.bin")
        failures = []

        def work(seed):
            with b.open("big.bin") as f:
                for i in range(20):
                    offset = (seed * 7919 + i * 104729) % len(data)
                    f.seek(offset)
                    if f.read(5000) != data[offset:offset + 5000]:
                        failures.append(offset)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []


def test_remote_errors(url, fx):
    try:
        encfs.Bundle(url + "gone.bundle?sig=s3cr3t", key_file=fx.key)
    except encfs.IOFailure as error:
        assert "404" in str(error) and "s3cr3t" not in str(error)
    else:
        raise AssertionError("a missing remote bundle opened")


def test_remote_through_fsspec(url, fx, encfs_fsspec):
    with encfs_fsspec.open("encfs://docs/data.csv", "rb", bundle=url + "app.bundle", key_file=fx.key) as f:
        assert f.read() == fx.source("docs/data.csv")
