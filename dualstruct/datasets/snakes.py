"""The snakes grid-labelling task (PyStruct's example): label every pixel of small images
with the position of the snake segment on it (0 background, 1–10 head to tail).

File ``snakes/snakes.npz`` (no pickle): per split ``shapes_<split>`` (n, 2) image heights and
widths, ``X_<split>`` (pixels, 3) uint8 RGB and ``Y_<split>`` (pixels,) labels, the images
concatenated in row-major order.
"""

from __future__ import annotations

import zipfile

import numpy as np

from ..models.graph import grid_edges
from ._base import DATA_ENV, find_data_file

SNAKES_RELPATH = "snakes/snakes.npz"
SPLITS = ("train", "test")


def load_snakes(path, split="train"):
    """Images and label maps of one split of the snakes data.

    Parameters
    ----------
    path : str or Path
        The ``snakes.npz`` file.
    split : {"train", "test"}, default "train"

    Returns
    -------
    images : list of ndarray
        (h, w, 3) uint8 RGB images.
    maps : list of ndarray
        (h, w) int label maps: 0 for the background, 1–10 for the snake's segments.

    Raises
    ------
    ValueError
        Naming the file and what is wrong.

    Examples
    --------
    >>> from dualstruct.datasets import load_snakes
    >>> images, maps = load_snakes("snakes/snakes.npz", "test")   # doctest: +SKIP
    >>> len(images)                                              # doctest: +SKIP
    100
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not a readable .npz archive ({exc})") from None
    with archive:
        names = [f"shapes_{split}", f"X_{split}", f"Y_{split}"]
        missing = [k for k in names if k not in archive.files]
        if missing:
            raise ValueError(f"{path}: missing arrays {missing}")
        shapes, pixels, labels = (archive[k] for k in names)
    shapes = np.asarray(shapes, dtype=np.int64)
    if shapes.ndim != 2 or shapes.shape[1] != 2 or np.any(shapes < 1):
        raise ValueError(f"{path}: {names[0]} must be (n, 2) positive heights and widths")
    sizes = shapes.prod(axis=1)
    total = int(sizes.sum())
    if pixels.shape != (total, 3) or labels.shape != (total,):
        raise ValueError(
            f"{path}: {names[1]} must be ({total}, 3) and {names[2]} ({total},) "
            f"for the shapes given, got {pixels.shape} and {labels.shape}"
        )
    starts = np.concatenate([[0], np.cumsum(sizes)])
    images = [pixels[a:b].reshape(h, w, 3) for (h, w), a, b in zip(shapes, starts, starts[1:])]
    maps = [
        labels[a:b].astype(np.int64).reshape(h, w)
        for (h, w), a, b in zip(shapes, starts, starts[1:])
    ]
    return images, maps


def fetch_snakes(split="train", data_home=None):
    """:func:`load_snakes` of ``snakes/snakes.npz`` in the data folder.

    Parameters
    ----------
    split : {"train", "test"}, default "train"
    data_home : str or Path, optional
        A data folder to look in first (then ``$DUALSTRUCT_DATA`` and the user cache).

    Returns
    -------
    images, maps
        As :func:`load_snakes`.

    Examples
    --------
    >>> from dualstruct.datasets import fetch_snakes
    >>> images, maps = fetch_snakes("train")        # doctest: +SKIP
    >>> len(images), images[0].shape[2]             # doctest: +SKIP
    (200, 3)
    """
    path = find_data_file(SNAKES_RELPATH, data_home)
    if path is None:
        raise FileNotFoundError(
            f"snakes data not found: put {SNAKES_RELPATH} under the folder "
            f"${DATA_ENV} names (or pass data_home)"
        )
    return load_snakes(path, split)


def snakes_graphs(images, edge_features="colours"):
    """Graph inputs for :class:`~dualstruct.models.EdgeFeatureGraphCRF` (or
    :class:`~dualstruct.models.GraphCRF` with ``edge_features=None``): one node per pixel
    with the one-hot colours of the pixel and of its four neighbours (above, below, left,
    right; "outside" counts as a colour) and a bias, and 4-connected grid edges (to the right
    and lower neighbours). Edge features: ``"direction"``, a one-hot direction (right, down);
    ``"colours"``, per direction the one-hot colours of the edge's two pixels and the
    direction itself, so that the pair table can depend on what the edge joins.

    Colours are the distinct RGB values of all images given, in sorted order; pass train and
    test images together or fix the colours first if they may differ."""
    if edge_features not in ("colours", "direction", None):
        raise ValueError(
            f"edge_features must be 'colours', 'direction' or None, got {edge_features!r}"
        )
    palette = np.unique(np.concatenate([im.reshape(-1, 3) for im in images]), axis=0)
    n_colours = len(palette) + 1  # + outside
    graphs = []
    for im in images:
        h, w = im.shape[:2]
        flat = im.reshape(-1, 3)
        codes = np.empty(h * w, dtype=np.int64)
        for c, rgb in enumerate(palette):
            codes[np.all(flat == rgb, axis=1)] = c
        padded = np.full((h + 2, w + 2), n_colours - 1)
        padded[1:-1, 1:-1] = codes.reshape(h, w)
        shifts = [
            padded[1:-1, 1:-1],
            padded[:-2, 1:-1],
            padded[2:, 1:-1],
            padded[1:-1, :-2],
            padded[1:-1, 2:],
        ]
        feats = np.zeros((h * w, 5 * n_colours + 1))
        for s, shifted in enumerate(shifts):
            feats[np.arange(h * w), s * n_colours + shifted.ravel()] = 1.0
        feats[:, -1] = 1.0
        if edge_features is None:
            graphs.append((feats, grid_edges(h, w)))
            continue
        edges, direction = grid_edges(h, w, directions=True)
        if edge_features == "colours":
            dirs = direction.argmax(axis=1)
            z = np.zeros((len(edges), 2 * (2 * n_colours + 1)))
            block = dirs * (2 * n_colours + 1)
            rows = np.arange(len(edges))
            z[rows, block + codes[edges[:, 0]]] = 1.0
            z[rows, block + n_colours + codes[edges[:, 1]]] = 1.0
            z[rows, block + 2 * n_colours] = 1.0
            direction = z
        graphs.append((feats, edges, direction))
    return graphs
