"""A checkout's `torch/distributed/elastic` Python laid over the installed torch.

With `--torch-elastic-src DIR`, every module under `torch.distributed.elastic` that
`DIR/torch/distributed/elastic` holds is loaded from there, the rest from the installed
torch, so a change to torch's elastic code is tested without building torch. The overlay's
content hash (paths and bytes, in path order) goes into every report.
"""

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

PACKAGE = "torch.distributed.elastic"
RELATIVE = os.path.join("torch", "distributed", "elastic")


def overlay_root(src):
    return os.path.join(os.path.abspath(src), RELATIVE)


def content_hash(src):
    """SHA-256 of the overlay's Python files, hex."""
    root = overlay_root(src)
    digest = hashlib.sha256()
    files = []
    for folder, _dirs, names in os.walk(root):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                files.append((os.path.relpath(path, root).replace(os.sep, "/"), path))
    for relative, path in sorted(files):
        digest.update(relative.encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read())
        digest.update(b"\0")
    return digest.hexdigest(), len(files)


class ElasticOverlay(importlib.abc.MetaPathFinder):
    """Finds `torch.distributed.elastic.*` in the overlay first."""

    def __init__(self, src):
        self.root = overlay_root(src)

    def find_spec(self, fullname, path=None, target=None):
        if fullname != PACKAGE and not fullname.startswith(PACKAGE + "."):
            return None
        parts = fullname.split(".")[3:]
        base = os.path.join(self.root, *parts)
        package_init = os.path.join(base, "__init__.py")
        if os.path.isfile(package_init):
            installed = importlib.machinery.PathFinder.find_spec(fullname, path)
            locations = [base]
            if installed is not None and installed.submodule_search_locations:
                locations += list(installed.submodule_search_locations)
            return importlib.util.spec_from_file_location(
                fullname, package_init, submodule_search_locations=locations
            )
        if os.path.isfile(base + ".py"):
            return importlib.util.spec_from_file_location(fullname, base + ".py")
        return None


def install(src):
    """Lays the overlay before torch is imported; returns its content hash."""
    root = overlay_root(src)
    if not os.path.isdir(root):
        raise FileNotFoundError(f"{src}: no {RELATIVE} directory in it")
    digest, count = content_hash(src)
    if count == 0:
        raise FileNotFoundError(f"{src}: {RELATIVE} holds no Python files")
    sys.meta_path.insert(0, ElasticOverlay(src))
    return digest
