#!/usr/bin/env python3
"""oci_fixture.py CASE OUT [--base DIR] [--outside DIR]: write a test OCI
image, with real sha256 digests, for tests/unit/unit_kilnd_oci.c and
tests/e2e/82-kilnd-oci.sh.

CASE:
  layout      OUT is an OCI image layout directory, tagged "v1", with two
              layers (below) and a config carrying Env, WorkingDir, User,
              Cmd and Entrypoint
  archive     the same layout as an OCI archive (a tar) at OUT
  docker      the same image as a `docker save` archive (manifest.json,
              <config sha256>.json, <id>/layer.tar) at OUT
  two-tags    a layout holding two images, tagged v1 and v2
  dotdot, absolute, symlink-escape, hardlink-escape, whiteout-escape,
  digest, size, truncated, big, truncated-archive, device-in-archive:
              hostile images (a layout, or an archive for the last two)

The two layers (with --base DIR, the tree DIR is an extra layer below
them, as the e2e test boots the result):
  layer 1 (gzip): etc/old, etc/over ("one"), keep/k, opq/a, opq/sub/b,
                  del/x, bin/tool (0755), link -> keep/k (symlink),
                  hard (hard link to keep/k), fifo, dev/null (char device:
                  not created), empty/ (0750)
  layer 2 (tar):  etc/.wh.old, .wh.del, opq/c, opq/.wh..wh..opq (after
                  opq/c: the opaque marker hides only the layers below),
                  etc/over ("two"), etc/new, keep/.wh.nothing (a whiteout
                  of nothing)
--outside DIR: the directory symlink-escape and hardlink-escape aim at.
"""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import time

MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_TAR = "application/vnd.oci.image.layer.v1.tar"
MT_TGZ = "application/vnd.oci.image.layer.v1.tar+gzip"
MTIME = 1700000000


def entry(name, kind="file", data=b"", mode=0o644, target=None, uid=0, gid=0, size=None):
    return dict(name=name, kind=kind, data=data, mode=mode, target=target, uid=uid, gid=gid, size=size)


def make_tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            ti = tarfile.TarInfo(e["name"])
            ti.mtime = MTIME
            ti.mode = e["mode"]
            ti.uid, ti.gid = e["uid"], e["gid"]
            data = None
            if e["kind"] == "file":
                ti.type = tarfile.REGTYPE
                ti.size = len(e["data"])
                data = io.BytesIO(e["data"])
            elif e["kind"] == "dir":
                ti.type = tarfile.DIRTYPE
            elif e["kind"] == "symlink":
                ti.type = tarfile.SYMTYPE
                ti.linkname = e["target"]
            elif e["kind"] == "hardlink":
                ti.type = tarfile.LNKTYPE
                ti.linkname = e["target"]
            elif e["kind"] == "fifo":
                ti.type = tarfile.FIFOTYPE
            elif e["kind"] == "chr":
                ti.type = tarfile.CHRTYPE
                ti.devmajor, ti.devminor = 1, 3
            if e["size"] is not None:   # a header that claims more than it holds
                ti.size = e["size"]
                data = io.BytesIO(e["data"] + b"\0" * (e["size"] - len(e["data"])))
            t.addfile(ti, data)
    raw = buf.getvalue()
    # tarfile strips a leading "/" from names it writes; put it back where
    # a test wants an absolute name (the header's name field, checksum
    # recomputed).
    for e in entries:
        if e["name"].startswith("/"):
            raw = fix_abs(raw, e["name"])
    return raw


def fix_abs(raw, name):
    b = bytearray(raw)
    stripped = name.lstrip("/").encode()
    for off in range(0, len(b), 512):
        if b[off:off + len(stripped)] == stripped and b[off + len(stripped)] == 0:
            new = name.encode()
            b[off:off + 100] = new + b"\0" * (100 - len(new))
            b[off + 148:off + 156] = b"        "
            csum = sum(b[off:off + 512])
            b[off + 148:off + 156] = ("%06o\0 " % csum).encode()
            break
    return bytes(b)


def tree_entries(base):
    out = []
    for dirpath, dirs, files in os.walk(base):
        dirs.sort()
        rel = os.path.relpath(dirpath, base)
        if rel != ".":
            st = os.lstat(dirpath)
            out.append(entry(rel, "dir", mode=st.st_mode & 0o7777))
        for f in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            p = os.path.join(dirpath, f)
            r = os.path.normpath(os.path.join(rel, f))
            st = os.lstat(p)
            if os.path.islink(p):
                out.append(entry(r, "symlink", target=os.readlink(p)))
            elif os.path.isfile(p):
                with open(p, "rb") as fh:
                    out.append(entry(r, "file", fh.read(), st.st_mode & 0o7777))
    return out


def layer1():
    return [
        entry("etc", "dir", mode=0o755), entry("etc/old", data=b"old\n"), entry("etc/over", data=b"one\n"),
        entry("keep", "dir", mode=0o755), entry("keep/k", data=b"kept\n"),
        entry("opq", "dir", mode=0o755), entry("opq/a", data=b"a\n"), entry("opq/sub", "dir", mode=0o755),
        entry("opq/sub/b", data=b"b\n"),
        entry("del", "dir", mode=0o755), entry("del/x", data=b"x\n"),
        entry("bin", "dir", mode=0o755), entry("bin/tool", data=b"#!/bin/sh\necho tool\n", mode=0o755),
        entry("link", "symlink", target="keep/k"),
        entry("hard", "hardlink", target="keep/k"),
        entry("fifo", "fifo", mode=0o644),
        entry("dev", "dir", mode=0o755), entry("dev/null", "chr", mode=0o666),
        entry("empty", "dir", mode=0o750),
    ]


def layer2():
    return [
        entry("etc/.wh.old"), entry(".wh.del"),
        entry("opq", "dir", mode=0o755), entry("opq/c", data=b"c\n"), entry("opq/.wh..wh..opq"),
        entry("etc/over", data=b"two\n"), entry("etc/new", data=b"new\n"),
        entry("keep/.wh.nothing"),
    ]


CONFIG = {
    "architecture": "amd64", "os": "linux",
    "config": {
        "Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "KILN_OCI=layered", "EMPTY="],
        "WorkingDir": "/keep", "User": "0:0",
        "Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo hello from oci"],
    },
}


def sha(b):
    return hashlib.sha256(b).hexdigest()


class Layout:
    def __init__(self, out):
        self.out = out
        os.makedirs(os.path.join(out, "blobs", "sha256"), exist_ok=True)
        with open(os.path.join(out, "oci-layout"), "w") as f:
            json.dump({"imageLayoutVersion": "1.0.0"}, f)
        self.manifests = []

    def blob(self, data, mt):
        d = sha(data)
        with open(os.path.join(self.out, "blobs", "sha256", d), "wb") as f:
            f.write(data)
        return {"mediaType": mt, "digest": "sha256:" + d, "size": len(data)}

    def image(self, layers, tag, config=CONFIG):
        """layers: [(bytes, mediatype)]"""
        cfg = dict(config)
        cfg["rootfs"] = {"type": "layers", "diff_ids": []}
        descs = []
        for data, mt in layers:
            try:
                raw = gzip.decompress(data) if mt == MT_TGZ else data
            except EOFError:    # the truncated case
                raw = data
            cfg["rootfs"]["diff_ids"].append("sha256:" + sha(raw))
            descs.append(self.blob(data, mt))
        c = self.blob(json.dumps(cfg).encode(), MT_CONFIG)
        m = {"schemaVersion": 2, "mediaType": MT_MANIFEST, "config": c, "layers": descs}
        md = self.blob(json.dumps(m).encode(), MT_MANIFEST)
        md["annotations"] = {"org.opencontainers.image.ref.name": tag}
        self.manifests.append(md)
        return descs

    def close(self):
        with open(os.path.join(self.out, "index.json"), "w") as f:
            json.dump({"schemaVersion": 2, "manifests": self.manifests}, f)


def gz(b):
    return gzip.compress(b, mtime=0)


def std_layers(base):
    ls = []
    if base:
        ls.append((make_tar(tree_entries(base)), MT_TAR))
    ls += [(gz(make_tar(layer1())), MT_TGZ), (make_tar(layer2()), MT_TAR)]
    return ls


def tar_dir(src, out, truncate=False):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name in sorted(os.listdir(src)):
            t.add(os.path.join(src, name), arcname=name)
    data = buf.getvalue()
    if truncate:
        data = data[:len(data) // 2 + 100]
    with open(out, "wb") as f:
        f.write(data)


def main():
    args = sys.argv[1:]
    base = outside = None
    if "--base" in args:
        i = args.index("--base")
        base = args[i + 1]
        del args[i:i + 2]
    if "--outside" in args:
        i = args.index("--outside")
        outside = args[i + 1]
        del args[i:i + 2]
    case, out = args
    one = lambda entries: [(make_tar(entries), MT_TAR)]
    if case == "layout":
        lay = Layout(out)
        lay.image(std_layers(base), "v1")
        lay.close()
    elif case in ("archive", "truncated-archive"):
        tmp = out + ".d"
        lay = Layout(tmp)
        lay.image(std_layers(base), "v1")
        lay.close()
        tar_dir(tmp, out, truncate=case == "truncated-archive")
    elif case == "device-in-archive":
        with tarfile.open(out, "w") as t:
            ti = tarfile.TarInfo("index.json")
            ti.type = tarfile.CHRTYPE
            t.addfile(ti)
    elif case == "docker":
        tmp = out + ".d"
        os.makedirs(tmp)
        cfg = dict(CONFIG)
        cfg["rootfs"] = {"type": "layers", "diff_ids": []}
        names = []
        for i, (data, mt) in enumerate(std_layers(base)):
            raw = gzip.decompress(data) if mt == MT_TGZ else data
            cfg["rootfs"]["diff_ids"].append("sha256:" + sha(raw))
            os.makedirs(os.path.join(tmp, "l%d" % i))
            with open(os.path.join(tmp, "l%d" % i, "layer.tar"), "wb") as f:
                f.write(raw)
            names.append("l%d/layer.tar" % i)
        cb = json.dumps(cfg).encode()
        with open(os.path.join(tmp, sha(cb) + ".json"), "wb") as f:
            f.write(cb)
        with open(os.path.join(tmp, "manifest.json"), "w") as f:
            json.dump([{"Config": sha(cb) + ".json", "RepoTags": ["kiln/test:v1"], "Layers": names}], f)
        tar_dir(tmp, out)
    elif case == "two-tags":
        lay = Layout(out)
        lay.image(one([entry("which", data=b"one\n")]), "v1")
        lay.image(one([entry("which", data=b"two\n")]), "example.com/img:v2")
        lay.close()
    elif case == "dotdot":
        lay = Layout(out)
        lay.image(one([entry("a", "dir", mode=0o755), entry("a/../../escaped", data=b"x")]), "v1")
        lay.close()
    elif case == "absolute":
        lay = Layout(out)
        lay.image(one([entry("/" + (outside or "/tmp").strip("/") + "/abs", data=b"x")]), "v1")
        lay.close()
    elif case == "symlink-escape":
        # Layer 1 plants a symlink out of the root, layer 2 writes through it.
        lay = Layout(out)
        lay.image([(make_tar([entry("evil", "symlink", target=outside)]), MT_TAR),
                   (make_tar([entry("evil/pwned", data=b"pwned\n")]), MT_TAR)], "v1")
        lay.close()
    elif case == "hardlink-escape":
        lay = Layout(out)
        lay.image(one([entry("h", "hardlink", target="../../../../etc/passwd")]), "v1")
        lay.close()
    elif case == "whiteout-escape":
        lay = Layout(out)
        lay.image(one([entry("keep", "dir", mode=0o755), entry("keep/.wh..")]), "v1")
        lay.close()
    elif case in ("digest", "size"):
        lay = Layout(out)
        descs = lay.image([(make_tar([entry("f", data=b"original\n")]), MT_TAR)], "v1")
        lay.close()
        p = os.path.join(out, "blobs", "sha256", descs[0]["digest"][7:])
        with open(p, "r+b") as f:
            data = bytearray(f.read())
            if case == "digest":   # same size, other bytes
                i = data.index(b"original")
                data[i:i + 8] = b"tampered"
            else:
                data += b"\0" * 512
            f.seek(0)
            f.write(data)
    elif case == "truncated":
        # A cut gzip stream whose digests are right: libarchive must see it.
        lay = Layout(out)
        data = gz(make_tar([entry("f%d" % i, data=os.urandom(4096)) for i in range(8)]))
        lay.image([(data[:len(data) // 2], MT_TGZ)], "v1")
        lay.close()
    elif case == "big":
        lay = Layout(out)
        lay.image([(gz(make_tar([entry("big", data=b"\0" * (3 << 20))])), MT_TGZ)], "v1")
        lay.close()
    else:
        sys.exit("oci_fixture.py: unknown case " + case)


if __name__ == "__main__":
    main()
