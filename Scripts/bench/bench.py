#!/usr/bin/env python3
"""Side-by-side read benchmark of encfs and its peers (issue 4).

Usage (normally through Scripts/bench.sh, which passes --bin, --nullfuse and --repo):
  bench.py --out DIR --bin DIR --nullfuse BIN --repo DIR [--quick] [--reps N]
           [--systems a,b,...] [--dataset random|resources] [--fio-seconds N]
           [--read-ahead-kb KB] [--baseline-bin DIR]

Run through Scripts/bench.sh, which installs the peers, builds the release
binaries and nullfuse, and unmounts whatever is left if this script dies.
This script makes the data set, builds each system's image, measures, and
writes OUT/results.md and OUT/results.json.

Systems: plain (the source directory), nullfuse (FUSE passthrough, no
crypto), squashfuse (uncompressed image), gocryptfs -ro, encfs; with
--baseline-bin DIR also encfs-base: the same encfs-pack and encfs-mount
commands with another build's binaries from DIR (Scripts/build-baseline.sh),
on a bundle of its own, so that two builds are compared in one run (the
results then add a table of encfs / encfs-base ratios of medians); on request
encfs-base-uring, the same with --transport uring, compared with encfs-uring.

Each repetition runs every system in turn (interleaved, so that drift on a
shared machine hits all of them alike; the order rotates by one each
repetition, so none always follows the same system):
  pack      build the image from the data set, then `sync` (timed together:
            encfs-pack fsyncs its output, the others do not);
  round A   backing store warmed into the page cache (cat), fresh mount
            (timed: command start until the first stat in the mount
            succeeds), sequential read of the big file with dd bs=1M (the
            FUSE file's page cache is empty on a fresh mount), the same read
            again (warm), fio 4 KiB random reads with 1 and 4 jobs, daemon
            VmHWM (and the RssAnon/RssFile split: details → rss_a_mib), unmount;
  round B   sync + drop_caches, fresh mount, every small file read once
            (find | xargs cat), daemon VmHWM, unmount.
With --dataset resources the data set is compressible and resembles shipped
resources (big.bin is a SQLite database of text rows; small/ holds generated
JS, CSS, JSON, HTML, CSV and text with a tenth already-compressed media, and a
duplicated directory); --dataset mixed is a second compressible tree made
differently (MixedDataSet: text, markup and images). Both default to the
systems plain, encfs (--compress none), encfs-zstd (--compress zstd at
encfs-pack's default level; BENCH_ENCFS_ZSTD_ARGS is appended to its
encfs-pack command), squashfuse-ll-zstd (mksquashfs -comp zstd at its
defaults, mounted with squashfuse_ll) and squashfuse-ll-zstd-matched
(mksquashfs at encfs-pack's default level); squashfuse-zstd (the same image
with high-level squashfuse) and encfs-zstd-matched (encfs at mksquashfs's
default level) on request. The levels are read from each tool's --help.
During each fio run, placement.py samples the daemon's threads (how many,
which CPU each last ran on, how much CPU each used), fio's threads, and the
CPU time everything else on the machine used (results.json: details →
fio_1/fio_4 → placement; a table in results.md). Nothing is pinned.
Daemons' stderr goes to OUT/logs/SYSTEM.log. --read-ahead-kb sets every FUSE
mount's bdi read_ahead_kb right after mounting (the kernel default is 128).
"""

import argparse
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

import executable_page_cache
from benchlib import MiB, die, drop_caches, log, run
import benchlib
from placement import Placement

PROG = "bench"
GiB = 1 << 30

# Fixed, public, benchmark-only secrets: the data set and the images must be
# the same on every run. Never use these for anything else.
DATA_KEY = "42" * 32
DATA_IV = "00" * 16
SMALL_IV = "11" * 16
BENCH_KEY = "5e" * 32
GOCRYPTFS_PASSWORD = "pw"
SEED = 20240404
FIXED_MTIME = 1704067200  # 2024-01-01T00:00:00Z

SYSTEMS = ["plain", "nullfuse", "squashfuse", "gocryptfs", "encfs"]
# Compressed systems: available on request, and the default with --dataset resources.
# squashfuse-zstd and squashfuse-ll-zstd: mksquashfs -comp zstd at its
# defaults, mounted with squashfuse (high-level FUSE) and squashfuse_ll
# (low-level); encfs-zstd: encfs-pack --compress zstd at its defaults. The
# -matched systems pack at the other tool's default level, so that each tool
# is compared at its own default and at one level (benchlib.zstd_default_levels).
COMPRESSED_SYSTEMS = ["squashfuse-zstd", "squashfuse-ll-zstd", "squashfuse-ll-zstd-matched",
                      "encfs-zstd", "encfs-zstd-matched"]
RESOURCE_SYSTEMS = ["plain", "squashfuse-ll-zstd", "squashfuse-ll-zstd-matched", "encfs", "encfs-zstd"]
# The compressible data sets (--dataset resources and mixed).
COMPRESSIBLE = ("resources", "mixed")
BASELINE = "encfs-base"  # only with --baseline-bin; listed right after encfs
# encfs with --transport classic (/dev/fuse) and with --transport uring
# (FUSE over io_uring), beside encfs's default (classic); only when asked
# for with --systems.
CLASSIC = "encfs-classic"
URING = "encfs-uring"
# encfs-base with --transport uring, beside encfs-uring; only with
# --baseline-bin and when asked for.
BASELINE_URING = "encfs-base-uring"
# encfs-zstd with --transport uring, beside encfs-zstd (classic, the
# default); only when asked for.
ZSTD_URING = "encfs-zstd-uring"
# encfs-zstd with the --baseline-bin binaries (their own compressed bundle),
# to compare two builds on compressed bundles; only with --baseline-bin and
# when asked for.
ZSTD_BASELINE = "encfs-zstd-base"
# encfs-zstd with 64 KiB chunks instead of the default for compressed bundles.
ZSTD_32K = "encfs-zstd-32k"
# The pairs (this build, the baseline build) compared by ratio tables.
BASELINE_PAIRS = [("encfs", BASELINE), (URING, BASELINE_URING), ("encfs-zstd", ZSTD_BASELINE)]
# Old names that now mean another system: encfs-zstd-classic was encfs-zstd
# with --transport classic, which is the default now.
ALIASES = {"encfs-zstd-classic": "encfs-zstd"}
BASELINE_TOOLS = ["encfs-pack", "encfs-mount"]
FUSE_SYSTEMS = ["nullfuse", "squashfuse", "gocryptfs", "encfs"]


def tree_bytes(path):
    """Apparent size of every non-directory below path (st_size, symlinks not followed)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in filenames:
            total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


# ---------------------------------------------------------------- data set

class DataSet:
    """The deterministic source tree: big.bin, small/ (nested), site/."""

    def __init__(self, root, quick, repo):
        self.quick = quick
        self.big_bytes = GiB // 4 if quick else GiB
        self.small_files = 5000 if quick else 20000
        self.path = os.path.join(root, "data-quick" if quick else "data-full")
        self.stamp = self.path + ".json"
        self.repo = repo
        self.big = os.path.join(self.path, "big.bin")
        self.small = os.path.join(self.path, "small")

    def spec(self):
        return {"format": 2, "big_bytes": self.big_bytes, "small_files": self.small_files,
                "small_size_range": [1024, 65536], "seed": SEED}

    def ensure(self):
        try:
            with open(self.stamp) as f:
                if json.load(f) == self.spec() and os.path.isfile(self.big):
                    log(f"data set: reusing {self.path}")
                    return
        except (OSError, ValueError):
            pass
        log(f"data set: generating {self.path}")
        started = time.monotonic()
        if os.path.exists(self.stamp):
            os.unlink(self.stamp)
        shutil.rmtree(self.path, ignore_errors=True)
        os.makedirs(self.path)
        self._generate_big()
        self._make_small()
        self._make_site()
        for dirpath, dirnames, filenames in os.walk(self.path):
            for name in filenames + dirnames:
                os.utime(os.path.join(dirpath, name), (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)
        os.utime(self.path, (FIXED_MTIME, FIXED_MTIME))
        os.sync()
        with open(self.stamp, "w") as f:
            json.dump(self.spec(), f)
        log(f"data set: done in {time.monotonic() - started:.1f} s")

    def _generate_big(self):
        # AES-256-CTR over zeros with a fixed key: incompressible, fast, the same everywhere.
        run(f"openssl enc -aes-256-ctr -K {DATA_KEY} -iv {DATA_IV} -nosalt -in /dev/zero 2>/dev/null"
            f" | head -c {self.big_bytes} > '{self.big}'")
        if os.path.getsize(self.big) != self.big_bytes:
            die("could not generate big.bin (openssl enc)")

    def _make_small(self):
        rng = random.Random(SEED)
        extensions = [".bin", ".dat", ".json", ".txt", ".png", ".js"]
        stream = subprocess.Popen(["openssl", "enc", "-aes-256-ctr", "-K", DATA_KEY, "-iv", SMALL_IV,
                                   "-nosalt", "-in", "/dev/zero"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, bufsize=1 << 20)
        made = set()
        try:
            for i in range(self.small_files):
                # A nested tree: 16 top directories, up to 3 levels, ~20-150 files per leaf.
                parts = [f"d{rng.randrange(16):02d}"]
                depth = rng.choice([1, 2, 2, 3])
                if depth >= 2:
                    parts.append(f"s{rng.randrange(8)}")
                if depth >= 3:
                    parts.append(f"t{rng.randrange(4)}")
                directory = os.path.join(self.small, *parts)
                if directory not in made:
                    os.makedirs(directory, exist_ok=True)
                    made.add(directory)
                size = rng.randint(1024, 65536)
                content = stream.stdout.read(size)
                if len(content) != size:
                    die("could not generate the small files (openssl enc)")
                with open(os.path.join(directory, f"f{i:05d}{rng.choice(extensions)}"), "wb") as f:
                    f.write(content)
        finally:
            stream.kill()
            stream.wait()

    def _make_site(self):
        site = os.path.join(self.path, "site")
        example = os.path.join(self.repo, "examples", "site")
        if os.path.isdir(example):
            shutil.copytree(example, site, symlinks=True)
        os.makedirs(os.path.join(site, "pages"), exist_ok=True)
        rng = random.Random(SEED + 1)
        words = ("bundle chunk cipher index mount kernel page cache reader entry slot key nonce tag "
                 "directory file stream offset layout header").split()
        for i in range(100):
            paragraphs = "\n".join(
                "<p>" + " ".join(rng.choice(words) for _ in range(rng.randint(40, 200))) + ".</p>"
                for _ in range(rng.randint(2, 12)))
            with open(os.path.join(site, "pages", f"page-{i:03d}.html"), "w") as f:
                f.write(f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Page {i}</title>"
                        f"<link rel=\"stylesheet\" href=\"../css/site.css\"></head>\n<body><h1>Page {i}</h1>\n"
                        f"{paragraphs}\n<a href=\"page-{(i + 1) % 100:03d}.html\">next</a></body></html>\n")
        os.symlink("pages/page-000.html", os.path.join(site, "start.html"))


class ResourceDataSet(DataSet):
    """A compressible tree like the resources people ship: big.bin (a SQLite
    database of text rows), small/ (JS, CSS, JSON, HTML, CSV, text; a tenth
    already-compressed media; small/vendor-copy duplicates small/d00), site/."""

    WORDS = ("function return const let value index bundle chunk render component state props style color "
             "margin padding width height display flex grid user name email created updated status active "
             "page title content section header footer button input label error warning info debug").split()

    def __init__(self, root, quick, repo):
        super().__init__(root, quick, repo)
        self.path = os.path.join(root, "resources-quick" if quick else "resources-full")
        self.stamp = self.path + ".json"
        self.big = os.path.join(self.path, "big.bin")
        self.small = os.path.join(self.path, "small")

    def spec(self):
        return {"format": 1, "kind": "resources", "big_bytes": self.big_bytes, "small_files": self.small_files,
                "seed": SEED}

    def ensure(self):
        super().ensure()
        # The duplicated directory adds files: count what is there.
        self.small_files = sum(len(files) for _, _, files in os.walk(self.small))

    def _text(self, rng, n, kind):
        w = self.WORDS
        out, size = [], 0
        while size < n:
            if kind == ".json":
                piece = '{"id": %d, "%s": "%s %s", "%s": %d},\n' % (rng.randrange(10**6), rng.choice(w), rng.choice(w),
                                                                  rng.choice(w), rng.choice(w), rng.randrange(1000))
            elif kind == ".css":
                piece = ".%s-%s { %s: %dpx; %s: #%06x; }\n" % (rng.choice(w), rng.choice(w), rng.choice(w),
                                                              rng.randrange(64), rng.choice(w), rng.randrange(1 << 24))
            elif kind == ".csv":
                piece = "%d,%s,%s,%d.%02d\n" % (rng.randrange(10**7), rng.choice(w), rng.choice(w), rng.randrange(1000),
                                               rng.randrange(100))
            elif kind == ".js":
                piece = "  %s %s_%d = %s(%s, %d);\n" % (rng.choice(("const", "let", "return")), rng.choice(w),
                                                       rng.randrange(100), rng.choice(w), rng.choice(w), rng.randrange(1000))
            else:
                piece = " ".join(rng.choice(w) for _ in range(12)) + ".\n"
            out.append(piece)
            size += len(piece)
        return "".join(out).encode()[:n]

    def _make_big(self):
        import sqlite3
        rng = random.Random(SEED + 2)
        db = sqlite3.connect(self.big)
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        db.execute("CREATE TABLE records (id INTEGER PRIMARY KEY, name TEXT, email TEXT, status TEXT, body TEXT, score REAL)")
        w = self.WORDS
        row = 0
        while True:
            rows = []
            for _ in range(5000):
                row += 1
                rows.append((row, f"{rng.choice(w)} {rng.choice(w)}", f"{rng.choice(w)}{row}@example.com",
                             rng.choice(("active", "pending", "closed")),
                             " ".join(rng.choice(w) for _ in range(rng.randint(10, 40))), rng.random() * 100))
            db.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?)", rows)
            db.commit()
            if os.path.getsize(self.big) >= self.big_bytes:
                break
        db.close()

    def _make_small(self):
        rng = random.Random(SEED)
        media = [".png", ".jpg", ".mp4"]
        texts = [".js", ".css", ".json", ".html", ".txt", ".csv"]
        noise = random.Random(SEED + 3)
        for i in range(self.small_files):
            parts = [f"d{rng.randrange(16):02d}"]
            if rng.random() < 0.6:
                parts.append(f"s{rng.randrange(8)}")
            directory = os.path.join(self.small, *parts)
            os.makedirs(directory, exist_ok=True)
            size = rng.randint(1024, 65536)
            if rng.random() < 0.1:
                name, data = f"f{i:05d}{rng.choice(media)}", noise.randbytes(size)
            else:
                ext = rng.choice(texts)
                name, data = f"f{i:05d}{ext}", self._text(rng, size, ext)
            with open(os.path.join(directory, name), "wb") as f:
                f.write(data)
        shutil.copytree(os.path.join(self.small, "d00"), os.path.join(self.small, "vendor-copy"))

    def _generate_big(self):
        self._make_big()


class MixedDataSet(DataSet):
    """A second compressible tree, made differently from ResourceDataSet so
    that one generator's quirks do not decide the figures: text, markup and
    images like a documentation site. Words come from a vocabulary of 5,000
    made-up words drawn with Zipf-like frequencies (1 / rank), as in real
    text, instead of resources' 44 equally likely words; small/ holds
    Markdown, HTML, SVG, JSON and prose, a fifth 24-bit BMP images
    (gradients with noisy stripes: compressible about 2-4×) and a tenth
    already-compressed PNG/JPEG stand-ins (random bytes); sizes are
    log-normal (median about 4 KiB, 200 B - 256 KiB), like real trees;
    big.bin is the same kinds of documents and images concatenated, as an
    archive of such a site would be."""

    def __init__(self, root, quick, repo):
        super().__init__(root, quick, repo)
        self.path = os.path.join(root, "mixed-quick" if quick else "mixed-full")
        self.stamp = self.path + ".json"
        self.big = os.path.join(self.path, "big.bin")
        self.small = os.path.join(self.path, "small")
        rng = random.Random(SEED + 10)
        syllables = ["ka", "to", "ri", "men", "sa", "lo", "ver", "an", "ti", "que", "bel", "dor", "is", "un", "ex",
                     "pa", "ro", "mi", "tal", "es", "ion", "ar", "ne", "con", "sta", "pre", "li", "mo", "ven", "ca"]
        words = set()
        while len(words) < 5000:
            words.add("".join(rng.choice(syllables) for _ in range(rng.choice([1, 2, 2, 3, 3, 4]))))
        self.words = sorted(words, key=lambda w: (len(w), w))
        weights, total = [], 0.0
        for rank in range(len(self.words)):
            total += 1.0 / (rank + 1)
            weights.append(total)
        self.cum_weights = weights

    def spec(self):
        return {"format": 1, "kind": "mixed", "big_bytes": self.big_bytes, "small_files": self.small_files,
                "seed": SEED}

    def _words(self, rng, n):
        return rng.choices(self.words, cum_weights=self.cum_weights, k=n)

    def _prose(self, rng, n):
        out, size = [], 0
        while size < n:
            sentence = self._words(rng, rng.randint(6, 24))
            piece = sentence[0].capitalize() + " " + " ".join(sentence[1:]) + ". "
            if rng.random() < 0.2:
                piece += "\n\n"
            out.append(piece)
            size += len(piece)
        return "".join(out)[:n]

    def _document(self, rng, n, kind):
        """n bytes (about) of one kind of text: md, html, svg, json or txt."""
        body = self._prose(rng, max(n, 64))
        if kind == ".md":
            lines = [f"# {' '.join(self._words(rng, 3)).title()}\n"]
            for para in body.split("\n\n"):
                lines.append(f"## {' '.join(self._words(rng, 2))}\n\n{para}\n\n- {' '.join(self._words(rng, 4))}\n")
            text = "\n".join(lines)
        elif kind == ".html":
            paras = "".join(f'  <div class="{rng.choice(self.words[:50])}"><p>{para}</p></div>\n'
                            for para in body.split("\n\n"))
            text = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{self.words[rng.randrange(200)]}"
                    f"</title></head>\n<body>\n{paras}</body></html>\n")
        elif kind == ".svg":
            parts = ['<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 512 512">\n']
            size = 0
            while size < n:
                d = " ".join(f"L{rng.randrange(512)} {rng.randrange(512)}" for _ in range(rng.randint(4, 20)))
                piece = f'  <path fill="#{rng.randrange(1 << 24):06x}" d="M{rng.randrange(512)} {rng.randrange(512)} {d}Z"/>\n'
                parts.append(piece)
                size += len(piece)
            text = "".join(parts) + "</svg>\n"
        elif kind == ".json":
            items = []
            size = 0
            while size < n:
                w = self._words(rng, 4)
                piece = f'  {{"key": "{w[0]}.{w[1]}", "text": "{" ".join(w)}", "count": {rng.randrange(10000)}}}'
                items.append(piece)
                size += len(piece) + 2
            text = "[\n" + ",\n".join(items) + "\n]\n"
        else:
            text = body
        return text.encode()[:n]

    @staticmethod
    def _bmp(rng, n):
        """A 24-bit BMP of about n bytes: a smooth gradient, each row shifted, with a noisy stripe."""
        width = rng.choice([64, 128, 256, 512])
        height = max(1, n // (width * 3))
        a, b = rng.randrange(1, 7), rng.randrange(256)
        base = bytes((i * a + b) & 255 for i in range(width * 3 * 2))
        rows = []
        for y in range(height):
            shift = (y * 3) % (width * 3)
            row = bytearray(base[shift:shift + width * 3])
            at = rng.randrange(width * 3)
            row[at:at + 24] = rng.randbytes(24)[:len(row[at:at + 24])]
            rows.append(bytes(row))
        pixels = b"".join(rows)
        header = (b"BM" + (54 + len(pixels)).to_bytes(4, "little") + bytes(4) + (54).to_bytes(4, "little")
                  + (40).to_bytes(4, "little") + width.to_bytes(4, "little") + height.to_bytes(4, "little")
                  + (1).to_bytes(2, "little") + (24).to_bytes(2, "little") + bytes(4)
                  + len(pixels).to_bytes(4, "little") + bytes(16))
        return header + pixels

    def _item(self, rng, noise, size):
        """(extension, bytes) of one generated file of about size bytes."""
        roll = rng.random()
        if roll < 0.1:
            return rng.choice([".png", ".jpg"]), noise.randbytes(size)
        if roll < 0.3:
            return ".bmp", self._bmp(rng, size)
        ext = rng.choice([".md", ".html", ".svg", ".json", ".txt"])
        return ext, self._document(rng, size, ext)

    def _generate_big(self):
        rng, noise = random.Random(SEED + 11), random.Random(SEED + 12)
        written = 0
        with open(self.big, "wb") as f:
            while written < self.big_bytes:
                _, data = self._item(rng, noise, rng.randint(64 << 10, 1 << 20))
                data = data[:self.big_bytes - written]
                f.write(data)
                written += len(data)

    def _make_small(self):
        rng, noise = random.Random(SEED + 13), random.Random(SEED + 14)
        sections = ["docs", "blog", "api", "assets/img", "assets/icons", "locale", "guides", "reference"]
        for i in range(self.small_files):
            parts = [rng.choice(sections)]
            if rng.random() < 0.7:
                parts.append(f"{self.words[rng.randrange(40)]}")
            directory = os.path.join(self.small, *parts)
            os.makedirs(directory, exist_ok=True)
            size = int(min(256 << 10, max(200, rng.lognormvariate(8.3, 1.1))))
            ext, data = self._item(rng, noise, size)
            with open(os.path.join(directory, f"f{i:05d}{ext}"), "wb") as f:
                f.write(data)


# ---------------------------------------------------------------- systems

class System:
    """How to build, mount and find the backing store of one system."""

    def __init__(self, name, bench):
        self.name = name
        self.bench = bench
        self.mountpoint = os.path.join(bench.out, "mnt", name)

    #: Whether pack() builds an image (timed as "pack/build").
    builds = False

    # Overridden where it applies.
    def pack(self):
        pass

    def output(self):
        """The image, bundle or directory pack() writes (removed before each timed build)."""
        return None

    def size(self):
        return None

    def mount_command(self):
        return None

    def backing_file(self):
        """The file that holds the big file's bytes, warmed into the page cache before round A."""
        return self.bench.data.big

    @property
    def is_fuse(self):
        return self.mount_command() is not None

    def root(self):
        return self.mountpoint if self.is_fuse else self.bench.data.path


class Plain(System):
    def size(self):
        return tree_bytes(self.bench.data.path)


class NullFUSE(System):
    def mount_command(self):
        return [self.bench.args.nullfuse, self.bench.data.path, self.mountpoint]


class SquashFUSE(System):
    builds = True

    def __init__(self, name, bench):
        super().__init__(name, bench)
        self.image = os.path.join(bench.out, "build", "data.squashfs")

    def output(self):
        return self.image

    def pack(self):
        if os.path.exists(self.image):
            os.unlink(self.image)
        run(["mksquashfs", self.bench.data.path, self.image, "-noI", "-noD", "-noF", "-noX",
             "-noappend", "-no-progress", "-quiet"])
        os.sync()

    def size(self):
        return os.path.getsize(self.image)

    def mount_command(self):
        return ["squashfuse", self.image, self.mountpoint]

    def backing_file(self):
        return self.image


class SquashFUSEZstd(SquashFUSE):
    """mksquashfs -comp zstd at its defaults (level 15 in squashfs-tools 4.5, 128 KiB blocks, fragments,
    duplicates found), mounted with squashfuse (high-level FUSE)."""

    def __init__(self, name, bench):
        super().__init__(name, bench)
        self.image = os.path.join(bench.out, "build", f"data.{name}")

    def level(self):
        """None: mksquashfs's default level."""
        return None

    def pack(self):
        if os.path.exists(self.image):
            os.unlink(self.image)
        level = self.level()
        run(["mksquashfs", self.bench.data.path, self.image, "-comp", "zstd"]
            + ([] if level is None else ["-Xcompression-level", str(level)])
            + ["-noappend", "-no-progress", "-quiet"])
        os.sync()


class SquashFUSELLZstd(SquashFUSEZstd):
    """The same image as squashfuse-zstd (mksquashfs's defaults), mounted with squashfuse_ll (low-level FUSE,
    squashfuse's faster front end)."""

    def mount_command(self):
        return ["squashfuse_ll", self.image, self.mountpoint]


class SquashFUSELLZstdMatched(SquashFUSELLZstd):
    """squashfuse-ll-zstd packed at encfs-pack's default zstd level instead of mksquashfs's: the two tools
    at one level."""

    def level(self):
        return self.bench.zstd_levels[0]


class GocryptFS(System):
    builds = True

    def __init__(self, name, bench):
        super().__init__(name, bench)
        self.cipher = os.path.join(bench.out, "build", "gocryptfs")
        self.passfile = os.path.join(bench.out, "build", "gocryptfs.pass")
        self._backing = None

    def output(self):
        return self.cipher

    def pack(self):
        shutil.rmtree(self.cipher, ignore_errors=True)
        os.makedirs(self.cipher)
        with open(self.passfile, "w") as f:
            f.write(GOCRYPTFS_PASSWORD + "\n")
        # scrypt N=2^10: a cheap KDF, so mount time is the file system's, as with an encfs key file.
        run(["gocryptfs", "-init", "-q", "-scryptn", "10", "-passfile", self.passfile, self.cipher])
        rw = os.path.join(self.bench.out, "mnt", "gocryptfs-rw")
        os.makedirs(rw, exist_ok=True)
        run(["gocryptfs", "-q", "-passfile", self.passfile, self.cipher, rw])
        try:
            run(["cp", "-a", self.bench.data.path + "/.", rw + "/"])
        finally:
            self.bench.unmount(rw)
        os.sync()
        self._backing = None

    def size(self):
        return tree_bytes(self.cipher)

    def mount_command(self):
        return ["gocryptfs", "-ro", "-q", "-passfile", self.passfile, self.cipher, self.mountpoint]

    def backing_file(self):
        if self._backing is None:
            # big.bin's ciphertext is the largest file under the encrypted names.
            largest, largest_size = None, -1
            for dirpath, _, filenames in os.walk(self.cipher):
                for name in filenames:
                    p = os.path.join(dirpath, name)
                    s = os.lstat(p).st_size
                    if s > largest_size:
                        largest, largest_size = p, s
            self._backing = largest
        return self._backing


class EncFS(System):
    builds = True

    def __init__(self, name, bench, bin_dir=None):
        super().__init__(name, bench)
        self.bin = bin_dir or bench.args.bin
        # data.encfs, data.encfs-base: each build packs and mounts its own
        # bundle, so a format change between the builds is measured too.
        self.bundle = os.path.join(bench.out, "build", f"data.{name}")

    def output(self):
        return self.bundle

    def pack(self):
        if os.path.exists(self.bundle):
            os.unlink(self.bundle)
        run([os.path.join(self.bin, "encfs-pack"), self.bench.data.path, self.bundle,
             "--key-file", self.bench.key_file, "--quiet"] + self.bench.args.encfs_pack_args.split())
        os.sync()

    def size(self):
        return os.path.getsize(self.bundle)

    def mount_command(self):
        return ([os.path.join(self.bin, "encfs-mount"), self.bundle, self.mountpoint,
                 "--key-file", self.bench.key_file] + self.bench.args.encfs_mount_args.split())

    def backing_file(self):
        return self.bundle


class EncFSZstd(EncFS):
    """encfs-pack --compress zstd (its default level and chunk size for compressed bundles)."""

    def pack(self):
        if os.path.exists(self.bundle):
            os.unlink(self.bundle)
        run([os.path.join(self.bin, "encfs-pack"), self.bench.data.path, self.bundle,
             "--key-file", self.bench.key_file, "--quiet", "--compress", self.compress()] + self.chunk_size_args()
            + self.bench.args.encfs_pack_args.split() + os.environ.get("BENCH_ENCFS_ZSTD_ARGS", "").split())
        os.sync()

    def compress(self):
        """--compress's value: zstd at encfs-pack's default level."""
        return "zstd"

    def chunk_size_args(self):
        """None: encfs-pack's default chunk size for compressed bundles."""
        return []


class EncFSZstdMatched(EncFSZstd):
    """encfs-zstd packed at mksquashfs's default zstd level instead of encfs-pack's: the two tools at one level."""

    def compress(self):
        return f"zstd:{self.bench.zstd_levels[1]}"


class EncFSZstd32K(EncFSZstd):
    """encfs-zstd packed with --chunk-size 32K (the default before 64K): the chunk-size trade-off (sequential against 4 KiB random) side by side."""

    def chunk_size_args(self):
        return ["--chunk-size", "32K"]


class EncFSClassic(EncFS):
    """encfs with --transport classic: libfuse's /dev/fuse loop, to compare with the rings."""

    def mount_command(self):
        return super().mount_command() + ["--transport", "classic"]


class EncFSZstdUring(EncFSZstd):
    """encfs-zstd with --transport uring: compressed reads over the per-CPU FUSE rings."""

    def mount_command(self):
        return super().mount_command() + ["--transport", "uring"]


class EncFSZstdBase(EncFSZstd):
    """encfs-zstd built from another revision (--baseline-bin): the same commands and arguments as encfs-zstd."""

    def __init__(self, name, bench):
        super().__init__(name, bench, bin_dir=bench.args.baseline_bin)


class EncFSUring(EncFS):
    """encfs with --transport uring: the per-CPU FUSE rings, to compare with /dev/fuse."""

    def mount_command(self):
        return super().mount_command() + ["--transport", "uring"]


class EncFSBase(EncFS):
    """encfs built from another revision (--baseline-bin): the same commands and arguments as encfs."""

    def __init__(self, name, bench):
        super().__init__(name, bench, bin_dir=bench.args.baseline_bin)


class EncFSBaseUring(EncFSBase):
    """encfs-base with --transport uring: the baseline of encfs-uring."""

    def mount_command(self):
        return super().mount_command() + ["--transport", "uring"]


# ---------------------------------------------------------------- metrics

# key, heading, unit, better ("higher"/"lower"), formatter
def fmt_int(v):
    return f"{v:,.0f}"


def fmt_k(v):
    return f"{v / 1000:,.1f}k" if v >= 10000 else f"{v:,.0f}"


def fmt_s(v):
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def fmt_mib(v):
    return f"{v:,.1f}"


METRICS = [
    ("pack_s", "pack/build (s)", "lower", fmt_s),
    ("size_mib", "size (MiB)", "lower", fmt_mib),
    ("mount_s", "mount (s)", "lower", fmt_s),
    ("seq_cold_mibs", "seq read, image cached, FUSE cache empty (MiB/s)", "higher", fmt_int),
    ("seq_warm_mibs", "warm re-read (MiB/s)", "higher", fmt_int),
    ("rand4k_1_iops", "4 KiB random, 1 job (IOPS)", "higher", fmt_k),
    ("rand4k_4_iops", "4 KiB random, 4 jobs (IOPS)", "higher", fmt_k),
    ("small_files_per_s", "small files after drop_caches (files/s)", "higher", fmt_int),
    ("rss_mib", "daemon peak RSS (MiB)", "lower", fmt_mib),
]


class Bench:
    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.out)
        kinds = {"random": DataSet, "resources": ResourceDataSet, "mixed": MixedDataSet}
        self.data = kinds[args.dataset](self.out, args.quick, args.repo)
        self.key_file = os.path.join(self.out, "build", "bench.key")
        self.fio_seconds = args.fio_seconds or (3 if args.quick else 10)
        classes = {"plain": Plain, "nullfuse": NullFUSE, "squashfuse": SquashFUSE,
                   "gocryptfs": GocryptFS, "encfs": EncFS, "squashfuse-zstd": SquashFUSEZstd, "encfs-zstd": EncFSZstd,
                   "squashfuse-ll-zstd": SquashFUSELLZstd, "squashfuse-ll-zstd-matched": SquashFUSELLZstdMatched,
                   "encfs-zstd-matched": EncFSZstdMatched,
                   CLASSIC: EncFSClassic, URING: EncFSUring, ZSTD_URING: EncFSZstdUring, ZSTD_32K: EncFSZstd32K}
        available = list(SYSTEMS) + [CLASSIC, URING] + COMPRESSED_SYSTEMS + [ZSTD_URING, ZSTD_32K]
        default = list(RESOURCE_SYSTEMS if args.dataset in COMPRESSIBLE else SYSTEMS)
        if args.baseline_bin:
            missing = [t for t in BASELINE_TOOLS if not os.access(os.path.join(args.baseline_bin, t), os.X_OK)]
            if missing:
                die(f"--baseline-bin {args.baseline_bin} has no {' or '.join(missing)}",
                    "build one with Scripts/build-baseline.sh REV")
            classes[BASELINE] = EncFSBase
            classes[BASELINE_URING] = EncFSBaseUring
            classes[ZSTD_BASELINE] = EncFSZstdBase
            available += [BASELINE, BASELINE_URING, ZSTD_BASELINE]
            default.append(BASELINE)
        wanted = [ALIASES.get(n, n) for n in args.systems.split(",")] if args.systems else default
        for name in wanted:
            if name in (BASELINE, BASELINE_URING, ZSTD_BASELINE) and not args.baseline_bin:
                die(f"{name} needs --baseline-bin DIR")
            if name not in classes:
                die(f"unknown system ({name})", f"choose from {','.join(available)}")
        self.systems = [classes[n](n, self) for n in available if n in wanted]
        # (encfs-pack's, mksquashfs's) default zstd levels, for the -matched systems and the report; read only
        # when a compressed system runs, so the uncompressed runs do not depend on either tool's --help.
        self.zstd_levels = (benchlib.zstd_default_levels(args.bin) if any(n in COMPRESSED_SYSTEMS for n in wanted)
                            else (None, None))
        self.raw = {s.name: {m[0]: [] for m in METRICS} for s in self.systems}
        self.details = {s.name: [] for s in self.systems}
        self.mounted = set()

    # ------------------------------------------------------------ mounts

    @staticmethod
    def vm_hwm_mib(pid):
        return benchlib.proc_status_mib(pid, ("VmHWM",)).get("VmHWM")

    @staticmethod
    def settle_executable(system):
        """Gives the daemon's executable the same page cache before every warm mount
        (executable_page_cache.settle). Round B's drop_caches does the dropping there."""
        command = system.mount_command()
        path = shutil.which(command[0]) if command else None
        if path:
            executable_page_cache.settle(path)

    @staticmethod
    def rss_split_mib(pid):
        """The daemon's resident memory now, split as /proc/PID/status does: anonymous
        (heap, stacks, scratch) and file-backed (the executable's and libraries' pages).
        The file-backed part depends on how the executable's page cache was filled, not
        on the daemon: read(2) (cp, install, cat) leaves large folios that an exec maps
        whole, about 1 MiB more than pages faulted in by an exec (docs/PERFORMANCE.md,
        "Memory")."""
        split = benchlib.proc_status_mib(pid, ("RssAnon", "RssFile"))
        if not split:
            return None
        return {"anon": split.get("RssAnon"), "file": split.get("RssFile")}

    def mount(self, system):
        """Mounts system; returns (seconds from command start to the first successful stat, daemon pid)."""
        mp = system.mountpoint
        self.mounted.add(mp)
        elapsed, pid = benchlib.mount(system.mount_command(), mp, os.path.join(mp, "big.bin"),
                                      os.path.join(self.out, "logs", f"{system.name}.log"), system.name)
        if pid is None:
            die(f"{system.name}: cannot find the daemon serving {mp}")
        return elapsed, pid

    def unmount(self, mp, pid=None):
        benchlib.unmount(mp, pid)
        self.mounted.discard(mp)

    def unmount_all(self):
        for mp in sorted(self.mounted, reverse=True):
            self.unmount(mp)

    @staticmethod
    def bdi_read_ahead(path):
        dev = os.stat(path).st_dev
        return f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb"

    def read_ahead_kb(self, path):
        """The mount's read-ahead; first set to --read-ahead-kb when given (FUSE mounts only)."""
        knob = self.bdi_read_ahead(path)
        try:
            if self.args.read_ahead_kb:
                with open(knob, "w") as f:
                    f.write(f"{self.args.read_ahead_kb}\n")
            with open(knob) as f:
                return int(f.read())
        except OSError as e:
            if self.args.read_ahead_kb:
                die(f"cannot set the read-ahead of {path} ({knob}): {e.strerror}")
            return None

    # ------------------------------------------------------------ workloads

    @staticmethod
    def cat(path):
        benchlib.read_through(path)

    @staticmethod
    def dd(path):
        return benchlib.dd(path)

    def fio(self, system, path, jobs, pid=None):
        """fio 4 KiB random reads, psync; O_DIRECT through FUSE so every read reaches the daemon.
        The daemon's threads, where they and fio ran, and the other load are sampled meanwhile."""
        direct = 1 if system.is_fuse else 0
        with Placement(pid) as placement:
            result = run(["fio", "--name=rand4k", f"--filename={path}", "--readonly", "--rw=randread",
                          "--bs=4k", "--ioengine=psync", f"--direct={direct}", f"--numjobs={jobs}",
                          "--time_based", f"--runtime={self.fio_seconds}", "--group_reporting",
                          "--randrepeat=1", "--invalidate=0", "--output-format=json"])
        report = json.loads(result.stdout[result.stdout.index("{"):])
        job = report["jobs"][0]["read"]
        return job["iops"], {"iops": job["iops"], "bw_kib": job["bw"], "lat_mean_us": job["lat_ns"]["mean"] / 1000,
                             "lat_p99_us": job.get("clat_ns", {}).get("percentile", {}).get("99.000000", 0) / 1000,
                             "placement": placement.summary()}

    def read_small_files(self, root):
        started = time.monotonic()
        run(f"cd '{root}' && find small -type f -print0 | xargs -0 cat > /dev/null")
        return self.data.small_files / (time.monotonic() - started)

    # ------------------------------------------------------------ rounds

    def record(self, system, key, value):
        self.raw[system.name][key].append(value)

    def do_pack(self, system, rep):
        if system.builds:
            # Outside the timing: remove the last build and write back
            # everything dirty, so a build pays neither for freeing its old
            # output nor for the previous system's writeback.
            old = system.output()
            if old and os.path.isdir(old):
                shutil.rmtree(old, ignore_errors=True)
            elif old and os.path.exists(old):
                os.unlink(old)
            os.sync()
            started = time.monotonic()
            system.pack()
            elapsed = time.monotonic() - started
            self.record(system, "pack_s", elapsed)
        size = system.size()
        if size is not None:
            self.record(system, "size_mib", size / MiB)
        if system.builds:
            log(f"  pack {system.name}: {elapsed:.2f} s, {size / MiB:,.1f} MiB")

    def round_a(self, system, rep, detail):
        self.cat(system.backing_file())
        if system.is_fuse:
            self.settle_executable(system)
        mount_s, pid = (self.mount(system) if system.is_fuse else (None, None))
        root = system.root()
        big = os.path.join(root, "big.bin")
        if mount_s is not None:
            self.record(system, "mount_s", mount_s)
            detail["read_ahead_kb"] = self.read_ahead_kb(root)
            detail["daemon_pid"] = pid
        cold = self.dd(big)
        warm = self.dd(big)
        self.record(system, "seq_cold_mibs", cold)
        self.record(system, "seq_warm_mibs", warm)
        detail["loadavg_before_fio"] = self.load_averages()
        r1, d1 = self.fio(system, big, 1, pid)
        r4, d4 = self.fio(system, big, 4, pid)
        self.record(system, "rand4k_1_iops", r1)
        self.record(system, "rand4k_4_iops", r4)
        detail["loadavg_1min"] = self.load_average()
        detail["fio_1"] = d1
        detail["fio_4"] = d4
        if pid:
            detail["vmhwm_a_mib"] = self.vm_hwm_mib(pid)
            detail["rss_a_mib"] = self.rss_split_mib(pid)
            self.unmount(system.mountpoint, pid)
        p1 = d1["placement"]
        log(f"  {system.name}: mount {'-' if mount_s is None else f'{mount_s:.3f} s'}, seq {cold:,.0f} MiB/s, "
            f"warm {warm:,.0f} MiB/s, rand4k {r1:,.0f} / {r4:,.0f} IOPS; 1 job: {p1['daemon_threads'] or '-'} threads, "
            f"same CPU {p1['same_cpu_fraction']}, other load {p1['other_load_cpus']} CPUs")

    def round_b(self, system, rep, detail):
        drop_caches()
        pid = None
        if system.is_fuse:
            mount_s, pid = self.mount(system)
            detail["mount_cold_s"] = mount_s
        rate = self.read_small_files(system.root())
        self.record(system, "small_files_per_s", rate)
        if pid:
            detail["vmhwm_b_mib"] = self.vm_hwm_mib(pid)
            detail["rss_b_mib"] = self.rss_split_mib(pid)
            self.unmount(system.mountpoint, pid)
            peaks = [v for v in (detail.get("vmhwm_a_mib"), detail.get("vmhwm_b_mib")) if v is not None]
            if peaks:
                self.record(system, "rss_mib", max(peaks))
        log(f"  {system.name}: small files {rate:,.0f} files/s")

    @staticmethod
    def load_average():
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])

    @staticmethod
    def load_averages():
        """1, 5 and 15 minute load averages and the runnable/total task count, as /proc/loadavg says."""
        with open("/proc/loadavg") as f:
            one, five, fifteen, tasks = f.read().split()[:4]
        return {"1min": float(one), "5min": float(five), "15min": float(fifteen), "runnable_tasks": tasks}

    def in_turn(self, rep):
        """The systems in the order of repetition `rep` (see `turn_order`)."""
        return self.turn_order(self.systems, rep)

    @staticmethod
    def turn_order(systems, rep):
        """`systems` reversed every other repetition, and rotated by one every two.

        Rotation alone keeps neighbours: encfs-base, listed after encfs,
        would run right after it in every repetition but the one that
        wraps. Reversing odd repetitions runs each system before and after
        its neighbours equally often; rotating every two repetitions (not
        every one, which with two systems would undo the reversal) moves
        each system through the positions.
        """
        turn = (rep // 2) % max(len(systems), 1)
        order = systems[turn:] + systems[:turn]
        return order[::-1] if rep % 2 else order

    def run(self):
        started = time.monotonic()
        self.load_start = self.load_average()
        os.makedirs(os.path.join(self.out, "build"), exist_ok=True)
        os.makedirs(os.path.join(self.out, "mnt"), exist_ok=True)
        with open(self.key_file, "w") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(BENCH_KEY + "\n")
        self.data.ensure()
        reps = self.args.reps
        for rep in range(reps):
            log(f"pack, repetition {rep + 1}/{reps}")
            # A build that follows a heavy writer (gocryptfs's cp through
            # FUSE) starts while the virtual disk is still busy with it even
            # after `sync`; rotating the order, and reversing it every other
            # repetition, gives every build every place and both neighbours.
            builders = [s for s in self.systems if s.builds]
            others = [s for s in self.systems if not s.builds]
            for s in others + self.turn_order(builders, rep):
                self.do_pack(s, rep)
        for rep in range(reps):
            log(f"round A (mount, sequential, random), repetition {rep + 1}/{reps}")
            for s in self.in_turn(rep):
                detail = {"rep": rep}
                self.details[s.name].append(detail)
                self.round_a(s, rep, detail)
        for rep in range(reps):
            log(f"round B (small files after drop_caches), repetition {rep + 1}/{reps}")
            for s in self.in_turn(rep):
                self.round_b(s, rep, self.details[s.name][rep])
        self.elapsed = time.monotonic() - started
        self.load_end = self.load_average()
        self.report()

    # ------------------------------------------------------------ report

    def machine(self):
        cpu = "unknown"
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        cpu = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GiB

        def version(cmd, pattern=None):
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
                text = (r.stdout + r.stderr).strip()
                if pattern:
                    m = re.search(pattern, text)
                    return m.group(0) if m else text.splitlines()[0]
                return text.splitlines()[0] if text else "unknown"
            except (OSError, subprocess.TimeoutExpired, IndexError):
                return "unknown"

        commit = version(["git", "-C", self.args.repo, "describe", "--always", "--dirty", "--abbrev=12"])
        base_commit = None
        if self.args.baseline_bin:
            # Written by Scripts/build-baseline.sh; a directory from elsewhere may not have it.
            try:
                with open(os.path.join(self.args.baseline_bin, "COMMIT")) as f:
                    base_commit = f.read().strip()[:12] or None
            except OSError:
                pass
        return {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "nproc": os.cpu_count(),
            "cpu": cpu,
            "memory_gib": round(mem_gib, 1),
            "kernel": platform.release(),
            "os": version(["bash", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
            "encfs_commit": commit,
            "encfs_base_commit": base_commit,
            "gocryptfs": version(["gocryptfs", "-version"], r"gocryptfs [^;]+"),
            "squashfuse": version(["dpkg-query", "-W", "-f=${Version}", "squashfuse"]),
            "mksquashfs": version(["mksquashfs", "-version"], r"mksquashfs version \S+"),
            "fio": version(["fio", "--version"]),
            "libfuse": version(["pkg-config", "--modversion", "fuse3"]),
            "loadavg_1min_start": self.load_start,
            "loadavg_1min_end": self.load_end,
        }

    def summary(self, name, key):
        values = self.raw[name][key]
        if not values:
            return None
        return {"median": statistics.median(values), "min": min(values), "max": max(values), "reps": values}

    @staticmethod
    def ratio(results, key, name="encfs", ref=BASELINE):
        """The ratio of name's median to ref's, or None when either is missing or ref's is 0."""
        s, r = results.get(name, {}).get(key), results.get(ref, {}).get(key)
        if s is None or r is None or r["median"] == 0:
            return None
        return s["median"] / r["median"]

    def report(self):
        machine = self.machine()
        config = {
            "read_ahead_kb": self.args.read_ahead_kb or None,
            "quick": self.args.quick, "repetitions": self.args.reps, "fio_seconds": self.fio_seconds,
            "big_file_bytes": self.data.big_bytes, "small_files": self.data.small_files,
            "data_bytes": tree_bytes(self.data.path), "encfs_pack_args": self.args.encfs_pack_args,
            "encfs_mount_args": self.args.encfs_mount_args, "out": self.out,
            "baseline_bin": self.args.baseline_bin or None, "dataset": self.args.dataset,
            "zstd_default_levels": {"encfs": self.zstd_levels[0], "mksquashfs": self.zstd_levels[1]},
        }
        results = {name: {key: self.summary(name, key) for key, *_ in METRICS} for name in self.raw}
        doc = {"machine": machine, "config": config,
               "metrics": {key: {"heading": heading, "better": better} for key, heading, better, _ in METRICS},
               "results": results, "details": self.details, "elapsed_s": round(self.elapsed, 1)}
        ratios = {f"{name}/{ref}": {key: self.ratio(results, key, name, ref) for key, *_ in METRICS}
                  for name, ref in BASELINE_PAIRS if name in results and ref in results}
        if ratios:
            doc["ratios"] = ratios
        with open(os.path.join(self.out, "results.json"), "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        markdown = self.markdown(machine, config, results)
        with open(os.path.join(self.out, "results.md"), "w") as f:
            f.write(markdown)
        print(markdown)

    def placement_table(self, names):
        """Markdown lines: each system's threads, where they ran and the other load during the fio runs."""
        def median(name, jobs, key):
            values = [d[f"fio_{jobs}"]["placement"][key] for d in self.details[name]
                      if d.get(f"fio_{jobs}") and d[f"fio_{jobs}"]["placement"].get(key) is not None]
            return None if not values else statistics.median(values)

        def cell(v, fmt="{:.2f}"):
            return "–" if v is None else fmt.format(v)

        lines = ["### Threads, CPU placement and other load during 4 KiB random reads\n",
                 "Medians over the repetitions. Threads = the daemon's threads after the run (most seen); busy = "
                 "threads that used CPU in the 1-job run; same CPU = share of 50 ms samples in which the busiest "
                 "daemon thread last ran on the CPU of the busiest fio thread; other load = CPUs' worth of work by "
                 "everything but the daemon, fio and the benchmark, averaged over the run (/proc/stat); steal = time "
                 "the hypervisor took. Nothing is pinned.\n",
                 "| system | threads | busy, 1 job | same CPU, 1 job | same CPU, 4 jobs | daemon CPU s, 1 job | "
                 "other load, 1 job | other load, 4 jobs | steal, 1 job | load avg before |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        for name in names:
            if not any(d.get("fio_1") for d in self.details[name]):
                continue
            threads = median(name, 1, "daemon_threads")
            most = median(name, 1, "daemon_threads_max")
            loads = [d["loadavg_before_fio"]["1min"] for d in self.details[name] if d.get("loadavg_before_fio")]
            lines.append(f"| {name} | {cell(threads, '{:.0f}')} ({cell(most, '{:.0f}')}) | "
                         f"{cell(median(name, 1, 'daemon_threads_busy'), '{:.0f}')} | "
                         f"{cell(median(name, 1, 'same_cpu_fraction'))} | {cell(median(name, 4, 'same_cpu_fraction'))} | "
                         f"{cell(median(name, 1, 'daemon_cpu_s'))} | {cell(median(name, 1, 'other_load_cpus'))} | "
                         f"{cell(median(name, 4, 'other_load_cpus'))} | {cell(median(name, 1, 'steal_cpus'))} | "
                         f"{'–' if not loads else f'{min(loads):.2f}-{max(loads):.2f}'} |")
        lines.append("")
        return lines

    def markdown(self, machine, config, results):
        names = list(results)
        lines = []
        mode = "quick" if config["quick"] else "full"
        lines.append(f"## encfs benchmark ({mode})\n")
        lines.append(f"- machine: {machine['nproc']} CPUs, {machine['cpu']}, {machine['memory_gib']} GiB RAM; "
                     f"kernel {machine['kernel']}; {machine['os']}")
        base = ""
        if config["baseline_bin"]:
            base = f"; {BASELINE} {machine['encfs_base_commit'] or 'unknown commit'} ({config['baseline_bin']})"
        lines.append(f"- date: {machine['date']}; encfs {machine['encfs_commit']}{base}")
        lines.append(f"- peers: {machine['gocryptfs']}; squashfuse {machine['squashfuse']}; "
                     f"{machine['mksquashfs']}; {machine['fio']}; libfuse {machine['libfuse']}")
        if self.args.dataset == "mixed":
            lines.append(f"- data (--dataset mixed): a {config['big_file_bytes'] / MiB:,.0f} MiB archive-like file of "
                         f"generated text, markup and images (big.bin), {config['small_files']:,} files (Markdown, "
                         f"HTML, SVG, JSON, prose from 5,000 made-up words with Zipf-like frequencies; a fifth 24-bit "
                         f"BMP, a tenth random bytes as PNG/JPEG; log-normal sizes, median about 4 KiB), a small "
                         f"HTML site ({config['data_bytes'] / MiB:,.1f} MiB in all)")
        elif self.args.dataset == "resources":
            lines.append(f"- data (--dataset resources): a {config['big_file_bytes'] / MiB:,.0f} MiB SQLite database (big.bin), "
                         f"{config['small_files']:,} files of 1-64 KiB (JS, CSS, JSON, HTML, CSV, text; a tenth random "
                         f"bytes as media; one directory duplicated), a small HTML site "
                         f"({config['data_bytes'] / MiB:,.1f} MiB in all)")
        else:
            lines.append(f"- data: {config['big_file_bytes'] / MiB:,.0f} MiB incompressible file, "
                         f"{config['small_files']:,} files of 1-64 KiB in a nested tree, a small HTML site "
                         f"({config['data_bytes'] / MiB:,.1f} MiB in all)")
        if any(n in COMPRESSED_SYSTEMS for n in names):
            encfs_level, squashfs_level = self.zstd_levels
            lines.append(f"- zstd levels: encfs-zstd = `encfs-pack --compress zstd` (its default, level {encfs_level}); "
                         f"squashfuse-zstd and squashfuse-ll-zstd = `mksquashfs -comp zstd` (its default, level "
                         f"{squashfs_level}); squashfuse-ll-zstd-matched = mksquashfs at encfs's default "
                         f"(`-Xcompression-level {encfs_level}`); encfs-zstd-matched = encfs at mksquashfs's default "
                         f"(`--compress zstd:{squashfs_level}`)")
        extra = ""
        if config["encfs_pack_args"] or config["encfs_mount_args"]:
            extra = f"; encfs-pack {config['encfs_pack_args']!r}, encfs-mount {config['encfs_mount_args']!r}"
        lines.append(f"- {config['repetitions']} repetitions per figure: median [min-max]; "
                     f"fio {config['fio_seconds']} s per run{extra}")
        lines.append(f"- load average (1 min) at start {machine['loadavg_1min_start']:.2f}, at end "
                     f"{machine['loadavg_1min_end']:.2f} (the benchmark itself adds about 1-4; more means other work"
                     f" shared the CPUs and the figures are noisier)")
        cold = [f"{name} {statistics.median(v):.3f} s" for name in names
                if (v := [d["mount_cold_s"] for d in self.details[name] if d.get("mount_cold_s") is not None])]
        if cold:
            lines.append(f"- mount with nothing cached (after drop_caches), median: {', '.join(cold)}")
        ra = []
        for name in names:
            seen = sorted({d["read_ahead_kb"] for d in self.details[name] if d.get("read_ahead_kb")})
            if seen:
                ra.append(f"{name} {'/'.join(str(k) for k in seen)} KiB")
        if ra:
            how = (f"set to {self.args.read_ahead_kb} KiB by --read-ahead-kb" if self.args.read_ahead_kb
                   else "as each daemon left it")
            lines.append(f"- FUSE read-ahead (bdi read_ahead_kb, {how}): {', '.join(ra)}")
        lines.append("")

        def header(title):
            cols = ["system"] + [f"{h} {'↑' if b == 'higher' else '↓'}" for _, h, b, _ in METRICS]
            lines.append(title + "\n")
            lines.append("| " + " | ".join(cols) + " |")
            lines.append("|" + "---|" * len(cols))

        header("### Figures (median [min-max]; ↑ higher is better, ↓ lower is better)")
        for name in names:
            cells = [name]
            for key, _, _, fmt in METRICS:
                s = results[name][key]
                cells.append("–" if s is None else f"{fmt(s['median'])} [{fmt(s['min'])}-{fmt(s['max'])}]")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")

        if "nullfuse" in results or "gocryptfs" in results:
            header("### Ratios of medians: to nullfuse / to gocryptfs")
            for name in names:
                cells = [name]
                for key, *_ in METRICS:
                    parts = []
                    for ref in ("nullfuse", "gocryptfs"):
                        r = self.ratio(results, key, name, ref)
                        parts.append("–" if r is None else f"{r:.2f}×")
                    cells.append(" / ".join(parts))
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")

        pairs = [(a, b) for a, b in (("encfs-zstd", "squashfuse-ll-zstd"), ("encfs-zstd", "squashfuse-ll-zstd-matched"),
                                     ("encfs-zstd-matched", "squashfuse-ll-zstd"), ("encfs-zstd", "squashfuse-zstd"),
                                     ("encfs-zstd", "encfs")) if a in results and b in results]
        if pairs:
            # Issue 31's targets are ratios of compressed encfs to squashfuse_ll and to uncompressed encfs.
            header("### Compressed: ratios of medians (default levels, matched levels, to uncompressed encfs)")
            for a, b in pairs:
                cells = [f"{a} / {b}"]
                for key, *_ in METRICS:
                    r = self.ratio(results, key, a, b)
                    cells.append("–" if r is None else f"{r:.2f}×")
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")

        lines.extend(self.placement_table(names))

        for name, ref in BASELINE_PAIRS:
            if name not in results or ref not in results:
                continue
            # One row per metric: the two builds side by side, each one's
            # spread, and whether their min-max ranges meet (if they do, the
            # difference is within this run's noise). One repetition has no
            # range, so both columns stay empty then.
            def cell(v, fmt):
                return "–" if v is None else f"{fmt(v['median'])} [{fmt(v['min'])}-{fmt(v['max'])}]"

            def spread(v):
                if v is None or v["median"] == 0 or len(v["reps"]) < 2:
                    return "–"
                return f"{(v['max'] - v['min']) / v['median'] * 100:.0f} %"

            lines.append(f"### {name} / {ref}: ratio of medians\n")
            lines.append("Spread = (max - min) / median of each build; overlap = their min-max ranges meet"
                         " (both need 2 or more repetitions).\n")
            lines.append(f"| metric | {name} | {ref} | {name} / {ref} | spread {name} / {ref} | overlap |")
            lines.append("|---|---|---|---|---|---|")
            for key, heading, better, fmt in METRICS:
                s, b = results[name][key], results[ref][key]
                if s is None and b is None:
                    continue
                r = self.ratio(results, key, name, ref)
                overlap = "–" if s is None or b is None or min(len(s["reps"]), len(b["reps"])) < 2 else (
                    "yes" if s["min"] <= b["max"] and b["min"] <= s["max"] else "no")
                lines.append(f"| {heading} {'↑' if better == 'higher' else '↓'} | {cell(s, fmt)} | {cell(b, fmt)} | "
                             f"{'–' if r is None else f'{r:.2f}×'} | {spread(s)} / {spread(b)} | {overlap} |")
            lines.append("")
        lines.append("Method: pack/build = mksquashfs `-noI -noD -noF -noX` (squashfuse; the -zstd systems: zstd levels above), gocryptfs `-init` (scrypt N=2^10) + rw mount"
                     " + `cp -a` + unmount, `encfs-pack --key-file`; each followed by `sync` inside the timing, with the previous build removed and a `sync` before it, the order of the systems reversed every other repetition and rotated every two;"
                     " size = image bytes, or the sum of file sizes for directories."
                     " Mount = command start until the first stat in the mount succeeds, backing store in page cache"
                     " (cold-cache mount times are in results.json as mount_cold_s)."
                     " Sequential = `dd bs=1M` of the big file on a fresh mount after `cat`-ing the image"
                     " (or gocryptfs's ciphertext file, or the source file) into the page cache, then again (warm)."
                     " Random = fio randread bs=4k psync, time-based; `--direct=1` on FUSE mounts so every read"
                     " reaches the daemon (nullfuse and gocryptfs drop O_DIRECT on their backing files), buffered"
                     " from the page cache for plain."
                     " Small files = `find small -type f | xargs cat` after `sync; echo 3 > drop_caches` and a"
                     " fresh mount. RSS = the daemon's VmHWM after round A or B, the larger."
                     " Rounds A and B run the systems in turn, the order reversed every other repetition and rotated by one every two, so each system runs before and after each neighbour."
                     + (f" {BASELINE} = the same encfs-pack and encfs-mount commands, with the binaries from"
                        f" --baseline-bin and a bundle of its own, listed right after encfs (so it runs right after it in even repetitions and right before it in odd ones)."
                        if BASELINE in results else "")
                     + (f" {BASELINE_URING} = the same as {BASELINE} with `--transport uring`."
                        if BASELINE_URING in results else "")
                     + (f" {ZSTD_BASELINE} = encfs-zstd's commands with the --baseline-bin binaries and a bundle of its own."
                        if ZSTD_BASELINE in results else ""))
        lines.append(f"\nBenchmark time (measurements only, after the build): {self.elapsed / 60:.1f} min.")
        return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--bin", required=True, help="directory of the encfs release binaries")
    parser.add_argument("--nullfuse", required=True, help="the compiled nullfuse binary")
    parser.add_argument("--repo", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--systems", default="")
    parser.add_argument("--dataset", choices=["random", "resources", "mixed"], default="random",
                        help="random: incompressible big.bin and small files (the default); resources, mixed: "
                             "compressible")
    parser.add_argument("--fio-seconds", type=int, default=0)
    parser.add_argument("--read-ahead-kb", type=int, default=0,
                        help="set every FUSE mount's bdi read_ahead_kb to this after mounting")
    parser.add_argument("--baseline-bin", default="",
                        help=f"directory of another build's encfs-pack and encfs-mount: adds the system {BASELINE}")
    parser.add_argument("--encfs-pack-args", default=os.environ.get("BENCH_ENCFS_PACK_ARGS", ""))
    parser.add_argument("--encfs-mount-args", default=os.environ.get("BENCH_ENCFS_MOUNT_ARGS", ""))
    args = parser.parse_args()
    benchlib.set_program(PROG)
    if args.reps < 1:
        die("--reps must be at least 1")
    if args.baseline_bin:
        args.baseline_bin = os.path.abspath(args.baseline_bin)
    if os.geteuid() != 0:
        die("must run as root (drop_caches, mounts)")
    benchlib.run_unmounting_at_exit(Bench(args))


if __name__ == "__main__":
    main()
