"""Serializing a request's cache for the transfer to decode, and rebuilding it on the other site.

Payload format: ``MAGIC``, an 8-byte little-endian header length, a JSON header (the manifest), then
the tensors' raw bytes in manifest order, each exactly as stored (codec storage dtype: bf16 as its
2-byte bit pattern, fp32 as 4 bytes, ...), so the transfer is lossless. The manifest names, per tensor,
its layer, part (``growing``, ``window``, ``recurrent``, ``conv``), name, dtype and shape.

What is shipped for a request of ``length`` tokens whose first ``since`` tokens the decode side
already holds (``since`` block-aligned, 0 for a full transfer):

- growing layers: tokens [since, length) only — the tail blocks, the last one possibly partial;
- window layers: the window entries at positions >= since (``min(window, length - since)`` tokens);
- linear layers: the whole recurrent state and conv state (they summarise the entire prompt).

``data_bytes`` of a payload is what the planner's ``S_kv`` counts; the header is framing on top.
"""

from __future__ import annotations

import json
import struct

import numpy as np

from .cache import BlockPool, Codecs, Layout, RequestCache

MAGIC = b"PRFKV1\n"


def serialize(cache: RequestCache, since: int = 0) -> bytes:
    """The transfer payload of ``cache`` for a decode side that holds its first ``since`` tokens."""
    if since % cache.pool.block_size or since > cache.length:
        raise ValueError(f"since={since} must be a block-aligned length <= {cache.length}")
    entries, blobs = [], []

    def put(layer, part, name, arr, codec_name):
        arr = np.ascontiguousarray(arr)
        entries.append({"layer": layer, "part": part, "name": name, "dtype": codec_name,
                        "shape": list(arr.shape), "nbytes": arr.nbytes})
        blobs.append(arr.tobytes())

    for layer in sorted(cache.layout.growing):
        for name, arr in cache.kv_raw(layer, since, cache.length).items():
            put(layer, "growing", name, arr, cache.codecs.kv.name)
    for layer in sorted(cache.layout.window):
        held = len(cache.windows[layer]["k"])
        new = min(held, cache.length - since)       # entries at positions >= since
        for name, arr in cache.windows[layer].items():
            put(layer, "window", name, arr[held - new:], cache.codecs.kv.name)
    for layer in sorted(cache.layout.recurrent):
        for name, arr in cache.states[layer].items():
            put(layer, "recurrent" if name == "state" else "conv", name, arr, cache.codecs.for_state(name).name)
    header = json.dumps({"length": cache.length, "since": since, "block_size": cache.pool.block_size,
                         "tensors": entries}).encode()
    return MAGIC + struct.pack("<Q", len(header)) + header + b"".join(blobs)


def read_header(blob: bytes) -> tuple[dict, int]:
    """The manifest of a payload and the offset of its first data byte."""
    if not blob.startswith(MAGIC):
        raise ValueError("not a prfaas reference cache payload")
    (n,) = struct.unpack_from("<Q", blob, len(MAGIC))
    start = len(MAGIC) + 8
    return json.loads(blob[start:start + n]), start + n


def data_bytes(blob: bytes) -> dict[str, int]:
    """Bytes of tensor data in a payload, by part, plus ``total`` and ``framing`` (magic + header)."""
    header, offset = read_header(blob)
    out = {"growing": 0, "window": 0, "recurrent": 0, "conv": 0}
    for e in header["tensors"]:
        out[e["part"]] += e["nbytes"]
    out["total"] = sum(out.values())
    out["framing"] = offset
    assert offset + out["total"] == len(blob)
    return out


def deserialize(blob: bytes, layout: Layout, pool: BlockPool, codecs: Codecs,
                prefix: RequestCache | None = None) -> RequestCache:
    """Rebuild the request's cache on the receiving site's ``pool``.

    When the payload is incremental (``since > 0``), ``prefix`` is the receiver's own cache of the first
    ``since`` tokens (from its prefix cache: shared blocks plus the window entries at that length); its
    blocks are shared, not copied.
    """
    header, offset = read_header(blob)
    since, length = header["since"], header["length"]
    if header["block_size"] != pool.block_size:
        raise ValueError("block sizes differ between sites")
    if since:
        if prefix is None or prefix.length != since:
            raise ValueError(f"incremental payload needs the receiver to hold the first {since} tokens")
        cache = RequestCache(layout, pool, codecs, length=since,
                             windows={l: {n: a.copy() for n, a in w.items()} for l, w in prefix.windows.items()})
        for bid in prefix.block_table:
            pool.retain(bid)
            cache.block_table.append(bid)
    else:
        cache = RequestCache(layout, pool, codecs)
    growing: dict[int, dict[str, np.ndarray]] = {}
    for e in header["tensors"]:
        c = codecs.kv if e["part"] in ("growing", "window") else codecs.for_state(e["name"])
        if c.name != e["dtype"]:
            raise ValueError(f"layer {e['layer']} {e['name']}: payload dtype {e['dtype']}, receiver stores {c.name}")
        arr = np.frombuffer(blob, dtype=c.storage, count=int(np.prod(e["shape"], dtype=np.int64)),
                            offset=offset).reshape(e["shape"]).copy()
        offset += e["nbytes"]
        if e["part"] == "growing":
            growing.setdefault(e["layer"], {})[e["name"]] = arr
        elif e["part"] == "window":
            window = layout.window[e["layer"]][0]
            full = np.concatenate([cache.windows[e["layer"]][e["name"]], arr])
            cache.windows[e["layer"]][e["name"]] = full[max(0, len(full) - window):]
        else:
            cache.states[e["layer"]][e["name"]] = arr
    cache.reserve(length)
    for layer, values in growing.items():
        cache.kv_write(layer, since, values, raw=True)
    cache.length = length
    return cache
