"""Writes the plant-store container image of one architecture as an OCI archive, by hand
(no daemon, no root, no buildah): one gzip layer on an empty base holding the static
binary, `/data` (the database's volume, owned by user 65532) and `/tmp`.

    python3 packages/oci.py ARCH BINARY OUT_DIR        # scripts/package image runs it

The archive is an OCI image layout in a tar (`podman load`, `skopeo copy oci-archive:…`)
that also carries `manifest.json`, so `docker load` takes it too. It names the image
`plant-store:VERSION`. The same inputs give the same bytes (fixed times and order)."""

import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

from wheel import version

# Each architecture as OCI names it.
PLATFORMS = {
    "x86_64": {"architecture": "amd64", "os": "linux"},
    "aarch64": {"architecture": "arm64", "os": "linux", "variant": "v8"},
}
USER = 65532
BINARY = "usr/local/bin/plant-store"
CREATED = "1970-01-01T00:00:00Z"


def tar_entry(tar, name, mode, data=None, uid=0):
    entry = tarfile.TarInfo(name)
    entry.mode, entry.uid, entry.gid, entry.mtime = mode, uid, uid, 0
    if data is None:
        entry.type = tarfile.DIRTYPE
        tar.addfile(entry)
    else:
        entry.size = len(data)
        tar.addfile(entry, io.BytesIO(data))


def layer(binary):
    """The layer's tar, uncompressed."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for directory in ("usr/", "usr/local/", "usr/local/bin/"):
            tar_entry(tar, directory, 0o755)
        with open(binary, "rb") as f:
            tar_entry(tar, BINARY, 0o755, f.read())
        tar_entry(tar, "data/", 0o755, uid=USER)
        tar_entry(tar, "tmp/", 0o1777)
    return out.getvalue()


def blob(data, media_type):
    """A content descriptor of `data`."""
    return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}


def write(arch, binary, out_dir):
    version_ = version()
    platform = PLATFORMS[arch]
    diff = layer(binary)
    compressed = io.BytesIO()
    with gzip.GzipFile(fileobj=compressed, mode="wb", compresslevel=9, mtime=0) as gz:
        gz.write(diff)
    layer_gz = compressed.getvalue()
    labels = {
        "org.opencontainers.image.title": "plant-store",
        "org.opencontainers.image.description": "A small HTTP store of plants: tiny_http, a fixed worker pool, SQLite.",
        "org.opencontainers.image.version": version_,
        "org.opencontainers.image.licenses": "MIT OR Apache-2.0",
    }
    config = dict(platform)
    config.update({
        "created": CREATED,
        "config": {
            "User": "%d:%d" % (USER, USER),
            # Test control stays off unless PLANT_STORE_TEST_CONTROL and
            # PLANT_STORE_CONTROL_TOKEN are set on the container.
            "Env": ["PATH=/usr/local/bin", "PLANT_STORE_ADDR=0.0.0.0:8080", "PLANT_STORE_DB=/data/plants.db"],
            "Entrypoint": ["/" + BINARY],
            "Cmd": ["serve"],
            "WorkingDir": "/data",
            "ExposedPorts": {"8080/tcp": {}},
            "Volumes": {"/data": {}},
            "StopSignal": "SIGTERM",
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(diff).hexdigest()]},
        "history": [{"created": CREATED, "created_by": "packages/oci.py: %s, /data, /tmp" % BINARY}],
    })
    config_json = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": blob(config_json, "application/vnd.oci.image.config.v1+json"),
        "layers": [blob(layer_gz, "application/vnd.oci.image.layer.v1.tar+gzip")],
        "annotations": labels,
    }
    manifest_json = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    descriptor = blob(manifest_json, manifest["mediaType"])
    descriptor["platform"] = platform
    descriptor["annotations"] = {
        "org.opencontainers.image.ref.name": version_,
        "io.containerd.image.name": "docker.io/library/plant-store:" + version_,
    }
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [descriptor]}
    path_of = lambda d: "blobs/sha256/" + d["digest"].split(":")[1]  # noqa: E731
    docker = [{
        "Config": path_of(manifest["config"]),
        "RepoTags": ["plant-store:" + version_],
        "Layers": [path_of(manifest["layers"][0])],
    }]
    entries = [
        ("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode()),
        ("index.json", json.dumps(index, sort_keys=True, indent=1).encode()),
        ("manifest.json", json.dumps(docker, sort_keys=True).encode()),
        (path_of(manifest["config"]), config_json),
        (path_of(manifest["layers"][0]), layer_gz),
        (path_of(descriptor), manifest_json),
    ]
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, "plant-store-%s-image-%s.tar" % (version_, arch))
    with tarfile.open(target + ".part", "w", format=tarfile.USTAR_FORMAT) as archive:
        for directory in ("blobs/", "blobs/sha256/"):
            tar_entry(archive, directory, 0o755)
        for name, data in entries:
            tar_entry(archive, name, 0o644, data)
    os.replace(target + ".part", target)
    return target


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in PLATFORMS:
        sys.exit("usage: oci.py %s BINARY OUT_DIR" % "|".join(PLATFORMS))
    print(write(*sys.argv[1:]))
