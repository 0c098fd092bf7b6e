/// Python programs that build source trees. They run with `python3 -c`
/// (never saved as files) and take the target directory as `argv[1]`.
public enum SourceTrees {
    /// The trees' sizes sit around multiples of 64 KiB, which are chunk
    /// boundaries for every chunk size up to 64 KiB, the default (4 KiB)
    /// included.
    public static let chunkSize = 65536

    /// A tree with every kind of entry the format stores: files of 0 bytes,
    /// one byte, around one chunk (cs−1, cs, cs+1), three chunks exactly,
    /// many chunks, odd sizes; nested and empty directories; a 0500
    /// directory; relative, absolute, dangling, long (up to the 4095-byte
    /// maximum) and directory symlinks; names with spaces, UTF-8, invalid
    /// UTF-8 bytes, and a 255-byte name; varied
    /// permission bits; and distinct mtimes with nanoseconds (including one
    /// before 1970 and one after 2100) on files, directories, symlinks and
    /// the root. Contents are seeded random bytes.
    public static let mixed = #"""
import os, random, sys
root = os.fsencode(sys.argv[1])
CS = 65536
def P(rel):
    return os.path.join(root, rel if isinstance(rel, bytes) else rel.encode())
dirs = [("d1", 0o755), ("d1/nested", 0o700), ("d1/nested/deeper", 0o750), ("empty-dir", 0o755),
        ("dir with spaces", 0o755), ("ünïcödé-dir", 0o755), (b"bad-dir-\xc3\x28", 0o711), ("restricted", 0o500)]
files = [("empty", 0, 0o644), ("one-byte", 1, 0o600), ("chunk-minus-one", CS - 1, 0o644),
         ("one-chunk", CS, 0o644), ("chunk-plus-one", CS + 1, 0o640), ("three-chunks", 3 * CS, 0o644),
         ("many-chunks", 40 * CS + 4321, 0o644), ("odd-7", 7, 0o444), ("odd-100003", 100003, 0o664),
         ("with space.txt", 1234, 0o644), ("ünïcödé 文件.txt", 4567, 0o644), (b"bad-\xff\xfe-utf8", 33, 0o644),
         (".hidden", 5, 0o644), ("-leading-dash", 3, 0o604), ("d1/exec.sh", 99, 0o755),
         ("d1/nested/deeper/leaf", 4097, 0o600), ("d1/nested/deeper/chunky", 2 * CS + 1, 0o644),
         ("dir with spaces/file  two  spaces", 10, 0o644), ("ünïcödé-dir/ファイル", 300, 0o644),
         (b"bad-dir-\xc3\x28/inner\x80", 10, 0o644), ("restricted/secret", 64, 0o400),
         ("é" * 127 + "n", 255, 0o644)]
links = [("link-rel", "one-chunk"), ("d1/nested/link-up", "../../many-chunks"), ("link-abs", "/etc/hostname"),
         ("link-dangling", "does/not/exist"), ("link-dir", "d1"), ("link-bad-utf8", b"bad-\xff\xfe-utf8"),
         ("d1/link-abs-dir", "/usr"), ("link-long", "x/" * 600 + "end"), ("link-max", "y" * 4095)]
os.makedirs(root, exist_ok=True)
for name, _ in dirs:
    os.makedirs(P(name), exist_ok=True)
for i, (name, size, _) in enumerate(files):
    with open(P(name), "wb") as f:
        f.write(random.Random(i).randbytes(size))
for name, target in links:
    os.symlink(target, P(name))
for name, _, mode in files:
    os.chmod(P(name), mode)
base = 1_600_000_000 * 10**9
stamp = 0
def touch(path, follow=True):
    global stamp
    stamp += 1
    ns = base + stamp * 86_400_123_456_789 + stamp * 7919
    if stamp == 3:
        ns = -1_234_567_890_123_456_789   # 1930
    if stamp == 5:
        ns = 7_258_118_400_987_654_321    # 2200
    os.utime(path, ns=(ns, ns), follow_symlinks=follow)
for name, _, _ in files:
    touch(P(name))
for name, _ in links:
    touch(P(name), follow=False)
for name, mode in sorted(dirs, key=lambda d: -len(d[0])):
    os.chmod(P(name), mode)
    touch(P(name))
os.chmod(root, 0o750)
touch(root)
"""#

    /// `argv[2]` files of `argv[3]` bytes each whose contents are the
    /// marker in `argv[4]` repeated, under a few directories, plus one file
    /// whose name contains the marker in `argv[5]`. The markers come in
    /// through argv, so they are never written anywhere but the tree.
    public static let marked = #"""
import os, sys
root, count, size, marker, name_marker = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
body = (marker.encode() * (size // len(marker) + 1))[:size]
for i in range(count):
    d = os.path.join(root, "dir%d" % (i % 4))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "file%d" % i), "wb") as f:
        f.write(body)
with open(os.path.join(root, "named-" + name_marker), "wb") as f:
    f.write(b"x")
os.symlink("target-" + name_marker, os.path.join(root, "link"))
"""#

    /// `argv[2]` directories × `argv[3]` files, each holding its own path
    /// (a few bytes), so a spot check needs no source tree.
    public static let wide = #"""
import os, sys
root, dirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(dirs):
    dp = os.path.join(root, "d%04d" % d)
    os.mkdir(dp)
    for f in range(per):
        name = "f%03d" % f
        fd = os.open(os.path.join(dp, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, ("d%04d/%s\n" % (d, name)).encode())
        os.close(fd)
"""#
}
