"""Writes the plant-store wheel of one Linux architecture from a static build, without
building anything (maturin's `bin` bindings would run cargo again):

    python3 packages/wheel.py ARCH BINARY OUT_DIR      # scripts/package python runs it

The wheel is a zip (PEP 427): the pure-Python package `plant_store` (packages/python), the
binary as a script (pip puts it on PATH as `plant-store`), and the dist-info: METADATA,
WHEEL with a manylinux and a musllinux tag (the binary is static, so one wheel serves
glibc and musl systems alike), the pytest11 entry point, the licenses, and RECORD (each
file's sha256). The same inputs give the same bytes (fixed times and order)."""

import base64
import hashlib
import os
import re
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "packages", "python")

# The platform tags of each architecture: glibc 2.17 or later (any system with that
# architecture's glibc, as the binary needs none), or musl 1.1 or later.
PLATFORMS = {
    "x86_64": ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64"],
    "aarch64": ["manylinux_2_17_aarch64", "manylinux2014_aarch64", "musllinux_1_1_aarch64"],
    "armv7": ["manylinux_2_17_armv7l", "manylinux2014_armv7l", "musllinux_1_1_armv7l"],
    "riscv64": ["manylinux_2_17_riscv64", "musllinux_1_1_riscv64"],
}
# Zip entries' time: 1980-01-01, the earliest a zip can say.
EPOCH = (1980, 1, 1, 0, 0, 0)


def version():
    """The crate's version, which every package carries."""
    with open(os.path.join(ROOT, "Cargo.toml")) as f:
        return re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)


def metadata(version):
    with open(os.path.join(SOURCE, "README.md")) as f:
        readme = f.read()
    return (
        "Metadata-Version: 2.4\n"
        "Name: plant-store\n"
        "Version: %s\n"
        "Summary: plant-store, a small HTTP store of plants, as the server behind a client's"
        " test suite: the binary, a Server, its test control and a pytest plugin\n"
        "License-Expression: MIT OR Apache-2.0\n"
        "License-File: LICENSE-MIT\n"
        "License-File: LICENSE-APACHE\n"
        "Requires-Python: >=3.9\n"
        "Classifier: Framework :: Pytest\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Classifier: Programming Language :: Python :: 3\n"
        "Classifier: Topic :: Software Development :: Testing\n"
        "Description-Content-Type: text/markdown\n"
        "\n%s" % (version, readme)
    ).encode()


def write(arch, binary, out_dir):
    version_ = version()
    tags = PLATFORMS[arch]
    name = "plant_store-%s-py3-none-%s.whl" % (version_, ".".join(tags))
    dist_info = "plant_store-%s.dist-info" % version_
    files = []  # (name in the wheel, bytes, executable)
    package = os.path.join(SOURCE, "plant_store")
    for module in sorted(os.listdir(package)):
        if module.endswith(".py") or module == "py.typed":
            with open(os.path.join(package, module), "rb") as f:
                files.append(("plant_store/" + module, f.read(), False))
    with open(binary, "rb") as f:
        files.append(("plant_store-%s.data/scripts/plant-store" % version_, f.read(), True))
    wheel = "Wheel-Version: 1.0\nGenerator: plant-store packages/wheel.py\nRoot-Is-Purelib: false\n"
    wheel += "".join("Tag: py3-none-%s\n" % tag for tag in tags)
    files.append((dist_info + "/METADATA", metadata(version_), False))
    files.append((dist_info + "/WHEEL", wheel.encode(), False))
    files.append((dist_info + "/entry_points.txt", b"[pytest11]\nplant_store = plant_store.plugin\n", False))
    for license_ in ("LICENSE-MIT", "LICENSE-APACHE"):
        with open(os.path.join(ROOT, license_), "rb") as f:
            files.append((dist_info + "/licenses/" + license_, f.read(), False))
    record = ""
    for path, data, _ in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += "%s,sha256=%s,%d\n" % (path, digest, len(data))
    record += dist_info + "/RECORD,,\n"
    files.append((dist_info + "/RECORD", record.encode(), False))
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, name)
    with zipfile.ZipFile(target + ".part", "w") as wheel_zip:
        for path, data, executable in files:
            entry = zipfile.ZipInfo(path, EPOCH)
            entry.external_attr = (0o100755 if executable else 0o100644) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            wheel_zip.writestr(entry, data, compresslevel=9)
    os.replace(target + ".part", target)
    return target


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in PLATFORMS:
        sys.exit("usage: wheel.py %s BINARY OUT_DIR" % "|".join(PLATFORMS))
    print(write(*sys.argv[1:]))
