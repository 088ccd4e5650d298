"""Inspects what scripts/package wrote, as CI does (.ci/packages): each file's structure
and digests, and the binary inside it run (`--version`; an image's binary also served and
asked with `healthcheck`), under qemu-user for a foreign architecture.

    python3 packages/check.py wheel|npm|image FILE

Prints one line per file: what it is, its size and the binary's `--version`."""

import base64
import csv
import gzip
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile

from oci import PLATFORMS as IMAGE_PLATFORMS
from wheel import PLATFORMS as WHEEL_PLATFORMS
from wheel import version

# The packages' architecture names, each with the machine that runs it natively and the
# emulator that runs it elsewhere.
ARCHES = {"x86_64": "qemu-x86_64", "aarch64": "qemu-aarch64", "armv7": "qemu-arm", "riscv64": "qemu-riscv64"}
NPM_CPU = {"x64": "x86_64", "arm64": "aarch64", "arm": "armv7", "riscv64": "riscv64"}
# 2 MiB: the riscv64 wheel of 1.0.0 is 2,000,815 bytes (the sizes are in docs/packages.md).
MAX_WHEEL_BYTES = 2 * 1024 * 1024
MAX_IMAGE_BYTES = 4_000_000
LICENSE = "MIT OR Apache-2.0"


def fail(why):
    sys.exit("check: " + why)


def program(arch, path):
    """How to run a binary of `arch` here."""
    native = {"x86_64": "x86_64", "aarch64": "aarch64", "armv7l": "armv7", "riscv64": "riscv64"}
    if native.get(platform.machine()) == arch:
        return [path]
    return [shutil.which(ARCHES[arch]) or ARCHES[arch], path]


def run_version(arch, data):
    """Writes the binary out and runs `--version`: its output."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plant-store")
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o755)
        out = subprocess.run(program(arch, path) + ["--version"], stdout=subprocess.PIPE, universal_newlines=True)
    # Packages carry the default build: webhooks, https and test control.
    expected = r"plant-store %s \(schema \d+; features: webhooks, tls, test-control\)\n" % re.escape(version())
    if out.returncode != 0 or not re.fullmatch(expected, out.stdout):
        fail("%s binary: --version said %r (status %d)" % (arch, out.stdout, out.returncode))
    return out.stdout.strip()


def check_wheel(path):
    name = os.path.basename(path)
    match = re.fullmatch(r"plant_store-([^-]+)-py3-none-([^-]+)\.whl", name)
    if not match or match.group(1) != version():
        fail("%s: not plant_store-%s-py3-none-PLATFORM.whl" % (name, version()))
    tags = match.group(2).split(".")
    arch = next((a for a, t in WHEEL_PLATFORMS.items() if t == tags), None)
    if arch is None:
        fail("%s: unknown platform tags %s" % (name, tags))
    if not any(t.startswith("manylinux") for t in tags) or not any(t.startswith("musllinux") for t in tags):
        fail("%s: needs a manylinux and a musllinux tag" % name)
    dist_info = "plant_store-%s.dist-info/" % version()
    with zipfile.ZipFile(path) as wheel:
        files = {i.filename: wheel.read(i) for i in wheel.infolist()}
        modes = {i.filename: i.external_attr >> 16 for i in wheel.infolist()}
    record = list(csv.reader(io.StringIO(files[dist_info + "RECORD"].decode())))
    if {row[0] for row in record} != set(files):
        fail("%s: RECORD does not list exactly the wheel's files" % name)
    for file_name, digest, size in record:
        if file_name == dist_info + "RECORD":
            continue
        data = files[file_name]
        want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        if digest != want or int(size) != len(data):
            fail("%s: %s does not match its RECORD line" % (name, file_name))
    wheel_file = files[dist_info + "WHEEL"].decode()
    if sorted(re.findall(r"^Tag: py3-none-(\S+)$", wheel_file, re.M)) != sorted(tags):
        fail("%s: WHEEL's tags are not the file name's" % name)
    metadata = files[dist_info + "METADATA"].decode()
    for line in ("Name: plant-store", "Version: " + version(), "License-Expression: " + LICENSE, "Requires-Python: >=3.9"):
        if line not in metadata.splitlines():
            fail("%s: METADATA has no %r" % (name, line))
    if "[pytest11]\nplant_store = plant_store.plugin" not in files[dist_info + "entry_points.txt"].decode():
        fail("%s: no pytest11 entry point" % name)
    for needed in ("plant_store/__init__.py", "plant_store/plugin.py", dist_info + "licenses/LICENSE-MIT",
                   dist_info + "licenses/LICENSE-APACHE"):
        if needed not in files:
            fail("%s: no %s" % (name, needed))
    binary = "plant_store-%s.data/scripts/plant-store" % version()
    if modes.get(binary) != 0o100755:
        fail("%s: no executable %s" % (name, binary))
    size = os.path.getsize(path)
    if size > MAX_WHEEL_BYTES:
        fail("%s: %d bytes, more than %d" % (name, size, MAX_WHEEL_BYTES))
    print("%s: %d bytes; %s" % (name, size, run_version(arch, files[binary])))


def check_npm(path):
    name = os.path.basename(path)
    with tarfile.open(path) as tgz:
        members = {m.name: m for m in tgz.getmembers()}
        read = lambda n: tgz.extractfile(members[n]).read()  # noqa: E731
        manifest = json.loads(read("package/package.json"))
        if manifest["version"] != version() or manifest.get("license") != LICENSE:
            fail("%s: version %s, license %s" % (name, manifest["version"], manifest.get("license")))
        for license_ in ("LICENSE-MIT", "LICENSE-APACHE"):
            if "package/" + license_ not in members:
                fail("%s: no %s" % (name, license_))
        if manifest["name"] == "plant-store":
            wanted = {"@plant-store/linux-" + cpu: version() for cpu in NPM_CPU}
            if manifest.get("optionalDependencies") != wanted or manifest.get("dependencies"):
                fail("%s: its dependencies are not the four platform packages" % name)
            for needed in ("package/index.js", "package/index.d.ts", "package/bin/plant-store.js"):
                if needed not in members:
                    fail("%s: no %s" % (name, needed))
            print("%s: %d bytes; launcher and module" % (name, os.path.getsize(path)))
            return
        cpu = manifest["cpu"][0]
        if manifest["name"] != "@plant-store/linux-" + cpu or manifest["os"] != ["linux"]:
            fail("%s: name %s for os %s cpu %s" % (name, manifest["name"], manifest["os"], cpu))
        binary = members.get("package/bin/plant-store")
        if binary is None or binary.mode & 0o111 != 0o111:
            fail("%s: no executable bin/plant-store" % name)
        print("%s: %d bytes; %s" % (name, os.path.getsize(path), run_version(NPM_CPU[cpu], read(binary.name))))


def check_image(path):
    name = os.path.basename(path)
    with tarfile.open(path) as archive:
        read = lambda n: archive.extractfile(n).read()  # noqa: E731
        blob = lambda d: read("blobs/sha256/" + d["digest"].split(":")[1])  # noqa: E731
        if json.loads(read("oci-layout")) != {"imageLayoutVersion": "1.0.0"}:
            fail("%s: no OCI layout" % name)
        index = json.loads(read("index.json"))
        [descriptor] = index["manifests"]
        digests = {}

        def verified(d):
            data = blob(d)
            if "sha256:" + hashlib.sha256(data).hexdigest() != d["digest"] or len(data) != d["size"]:
                fail("%s: blob %s does not match its descriptor" % (name, d["digest"]))
            digests[d["digest"]] = len(data)
            return data

        manifest = json.loads(verified(descriptor))
        config = json.loads(verified(manifest["config"]))
        [layer_descriptor] = manifest["layers"]
        layer = gzip.decompress(verified(layer_descriptor))
        docker = json.loads(read("manifest.json"))
    arch = next((a for a, p in IMAGE_PLATFORMS.items() if p == descriptor["platform"]), None)
    if arch is None or config["architecture"] != descriptor["platform"]["architecture"]:
        fail("%s: platform %s" % (name, descriptor["platform"]))
    if config["rootfs"]["diff_ids"] != ["sha256:" + hashlib.sha256(layer).hexdigest()]:
        fail("%s: the layer's diff_id is not its digest" % name)
    if docker[0]["RepoTags"] != ["plant-store:" + version()]:
        fail("%s: manifest.json names %s" % (name, docker[0]["RepoTags"]))
    c = config["config"]
    env = dict(v.split("=", 1) for v in c["Env"])
    expected = {
        "User": "65532:65532", "Volumes": {"/data": {}}, "ExposedPorts": {"8080/tcp": {}},
        "Entrypoint": ["/usr/local/bin/plant-store"], "Cmd": ["serve"],
    }
    for key, value in expected.items():
        if c.get(key) != value:
            fail("%s: config %s is %r, not %r" % (name, key, c.get(key), value))
    if env.get("PLANT_STORE_ADDR") != "0.0.0.0:8080" or not env.get("PLANT_STORE_DB", "").startswith("/data/"):
        fail("%s: the environment %s" % (name, env))
    if any(k in env for k in ("PLANT_STORE_TEST_CONTROL", "PLANT_STORE_CONTROL_TOKEN", "PLANT_STORE_TOKEN")):
        fail("%s: test control or a token is set in the image" % name)
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        files = {m.name: m for m in tar.getmembers()}
        if set(files) != {"usr", "usr/local", "usr/local/bin", "usr/local/bin/plant-store", "data", "tmp"}:
            fail("%s: the layer holds %s" % (name, sorted(files)))
        if (files["data"].uid, files["data"].gid) != (65532, 65532) or files["tmp"].mode != 0o1777:
            fail("%s: /data is not user 65532's, or /tmp is not 1777" % name)
        binary = tar.extractfile("usr/local/bin/plant-store").read()
    size = sum(digests.values())
    if size > MAX_IMAGE_BYTES:
        fail("%s: %d bytes of blobs, more than %d" % (name, size, MAX_IMAGE_BYTES))
    said = run_version(arch, binary)
    served = serve_as_the_image(arch, binary, c, env)
    print("%s: %d bytes (layer, config, manifest); %s; %s" % (name, size, said, served))


def serve_as_the_image(arch, binary, config, env):
    """Runs the image's command line with its environment (but a free port of the
    loopback, and /data in a temporary directory), asks it with `healthcheck`, and
    checks that test control is off."""
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "plant-store")
        with open(path, "wb") as f:
            f.write(binary)
        os.chmod(path, 0o755)
        env = dict(env, PLANT_STORE_ADDR="127.0.0.1:0", PLANT_STORE_DB=os.path.join(root, "plants.db"))
        command = program(arch, path) + config["Cmd"]
        server = subprocess.Popen(command, env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  universal_newlines=True)
        try:
            line = server.stdout.readline()
            if not line.startswith("listening on http://"):
                fail("the image's command did not listen: %r" % line)
            addr = line.split("http://")[1].strip()
            health = subprocess.run(program(arch, path) + ["healthcheck"], env=dict(env, PLANT_STORE_ADDR=addr))
            if health.returncode != 0:
                fail("healthcheck of the image's server: status %d" % health.returncode)
            try:
                urllib.request.urlopen("http://%s/_control/reset" % addr, data=b"")
                fail("test control is on in the image")
            except urllib.error.HTTPError as e:
                if e.code != 404:
                    fail("/_control/reset answered %d, not 404" % e.code)
        finally:
            server.terminate()
            status = server.wait(30)
        if status != 0:
            fail("the image's server exited %d on SIGTERM" % status)
    return "served, healthy, test control off"


if __name__ == "__main__":
    kinds = {"wheel": check_wheel, "npm": check_npm, "image": check_image}
    if len(sys.argv) < 3 or sys.argv[1] not in kinds:
        sys.exit("usage: check.py wheel|npm|image FILE...")
    for file in sys.argv[2:]:
        kinds[sys.argv[1]](file)
