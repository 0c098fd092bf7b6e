"""The wheel of Scripts/package-python.sh, installed into fresh virtual
environments and used from a directory outside the build tree, with
nothing of the build on any path."""
import glob
import os
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = r'''
import os, sys
import encfs
here = os.path.dirname(encfs.__file__)
assert here.startswith(sys.prefix), (here, sys.prefix)
with encfs.Bundle(sys.argv[1], key_file=sys.argv[2]) as b:
    assert b.read_bytes("docs/b.txt") == b"hello\n"
    with b.open("big.bin") as f:
        f.seek(1 << 20)
        print(len(f.read()), encfs.library_version())
# The libraries the wheel carries are the ones loaded (RUNPATH $ORIGIN),
# not the build machine's: a fresh Debian has no libipsec-mb.
maps = open("/proc/self/maps").read()
for name in ("libencfs.so.0", "libIPSec_MB.so.1", "libzstd.so.1"):
    assert os.path.join(here, name) in maps, name
'''

PANDAS = r'''
import sys, pandas
frame = pandas.read_csv("encfs://docs/data.csv", storage_options={"bundle": sys.argv[1], "key_file": sys.argv[2]})
print(list(frame["name"]))
'''


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([os.path.join(ROOT, "Scripts", "package-python.sh"), str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    wheels = glob.glob(str(out / "encfs-*-py3-none-manylinux_*_x86_64.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def clean_env():
    """No variable that could point at the build tree or its library."""
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}


def venv(tmp_path, name, wheel, system_site_packages=False):
    """A new virtual environment with only the wheel installed into it
    (by this interpreter's pip: a venv without pip of its own is made in a
    second rather than ten)."""
    env_dir = tmp_path / name
    command = [sys.executable, "-m", "venv", "--without-pip"] + (["--system-site-packages"] if system_site_packages else [])
    subprocess.run(command + [str(env_dir)], check=True, env=clean_env())
    python = str(env_dir / "bin" / "python")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-index", "--no-deps",
                    "--disable-pip-version-check", wheel], check=True, env=clean_env())
    return python


def test_wheel_in_a_fresh_venv(wheel, fx, tmp_path):
    python = venv(tmp_path, "plain", wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run([python, "-I", "-c", SCRIPT, fx.app, fx.key], cwd=elsewhere, env=clean_env(),
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[0] == "123"


def test_wheel_registers_fsspec_for_pandas(wheel, fx, tmp_path):
    pytest.importorskip("pandas")
    python = venv(tmp_path, "with-pandas", wheel, system_site_packages=True)
    elsewhere = tmp_path / "elsewhere2"
    elsewhere.mkdir()
    run = subprocess.run([python, "-I", "-c", PANDAS, fx.app, fx.key], cwd=elsewhere, env=clean_env(),
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['alpha', 'beta', 'gamma']"
