"""Content hashes used as identities: files, arrays, and delivered camera images."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_array(array: Any) -> str:
    """Hash of an array's dtype, shape and C-order bytes (independent of its file container)."""
    array = np.ascontiguousarray(array)
    digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    digest.update(array.tobytes())
    return digest.hexdigest()


def images_digest(images: Any) -> str:
    """One sha256 over every camera image (sorted by camera name)."""
    digest = hashlib.sha256()
    for camera in sorted(images):
        digest.update(camera.encode())
        digest.update(np.ascontiguousarray(images[camera]).tobytes())
    return digest.hexdigest()


def image_hashes(images: Any) -> dict[str, str]:
    """One sha256 per camera image, in the images' own (the benchmark spec's) camera order."""
    return {camera: sha256_bytes(np.ascontiguousarray(image).tobytes()) for camera, image in images.items()}
