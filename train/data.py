"""Data: FunASR-style JSONL manifests, distributed samplers, dynamic batching.

Manifest lines (one JSON object per line)::

    {"key": "utt1", "source": "wav/utt1.wav", "source_len": 245, "target": "hello",
     "target_len": 1, "text_language": "<|en|>", "emo_target": "<|NEUTRAL|>",
     "event_target": "<|Speech|>", "with_or_wo_itn": "<|woitn|>"}

``source`` may be absolute or relative to the manifest's directory; ``source_len``
is the length used for batching (10 ms frames for audio), ``target_len`` the
target's length in tokens/words.  Every line is validated; errors name the file
and line number.
"""
from __future__ import annotations

import json
import os
import random
from array import array
from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import Sampler


class ManifestError(ValueError):
    """A bad manifest line; the message names the file and line number."""


REQUIRED = {"key": str, "source": str, "source_len": int, "target": str, "target_len": int}
OPTIONAL = {"text_language": str, "emo_target": str, "event_target": str, "with_or_wo_itn": str}


def parse_line(line: str, path: str, lineno: int, base_dir: Optional[str] = None,
               check_audio: bool = False) -> dict:
    where = f"{path}:{lineno}"
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise ManifestError(f"{where}: invalid JSON: {e.msg} (column {e.colno})") from None
    if not isinstance(rec, dict):
        raise ManifestError(f"{where}: want a JSON object, got {type(rec).__name__}")
    for k, typ in REQUIRED.items():
        if k not in rec:
            raise ManifestError(f"{where}: missing field {k!r}")
        v = rec[k]
        if typ is int:
            if isinstance(v, bool) or not isinstance(v, int):
                raise ManifestError(f"{where}: field {k!r} must be an integer, got {v!r}")
            if v < 0:
                raise ManifestError(f"{where}: field {k!r} must be >= 0, got {v}")
        elif not isinstance(v, typ):
            raise ManifestError(f"{where}: field {k!r} must be a string, got {type(v).__name__}")
    if not rec["key"]:
        raise ManifestError(f"{where}: empty key")
    if not rec["source"]:
        raise ManifestError(f"{where}: empty source")
    for k, typ in OPTIONAL.items():
        if k in rec and not isinstance(rec[k], typ):
            raise ManifestError(f"{where}: field {k!r} must be a string, got {type(rec[k]).__name__}")
    pieces = rec.get("join")
    if pieces is not None:  # train.sensevoice.join: more clips after source, each after a gap
        if not isinstance(pieces, list) or not pieces:
            raise ManifestError(f"{where}: field 'join' must be a non-empty list")
        for n, p in enumerate(pieces):
            if (not isinstance(p, dict) or not isinstance(p.get("source"), str) or not p["source"]
                    or isinstance(p.get("gap_s"), bool) or not isinstance(p.get("gap_s"), (int, float))
                    or not 0 <= p["gap_s"] <= 10):
                raise ManifestError(f"{where}: join[{n}] must be {{\"source\": path, \"gap_s\": 0-10 seconds}}")
        if rec.get("gap_fill", "silence") not in ("silence", "noise"):
            raise ManifestError(f"{where}: gap_fill must be \"silence\" or \"noise\", got {rec['gap_fill']!r}")
    for p in [rec] + list(pieces or []):
        if base_dir is not None and not os.path.isabs(p["source"]):
            p["source"] = os.path.normpath(os.path.join(base_dir, p["source"]))
        if check_audio and not os.path.isfile(p["source"]):
            raise ManifestError(f"{where}: audio file {p['source']} not found")
    return rec


def read_manifest(path: str, check_audio: bool = False) -> List[dict]:
    """Read and validate a whole manifest (duplicate keys are errors)."""
    if not os.path.isfile(path):
        raise ManifestError(f"{path}: manifest not found")
    base = os.path.dirname(os.path.abspath(path))
    out, seen = [], {}
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ManifestError(f"{path}:{n}: not UTF-8") from None
            if not line.strip():
                continue
            rec = parse_line(line, path, n, base, check_audio)
            if rec["key"] in seen:
                raise ManifestError(f"{path}:{n}: duplicate key {rec['key']!r} (first on line {seen[rec['key']]})")
            seen[rec["key"]] = n
            out.append(rec)
    if not out:
        raise ManifestError(f"{path}: manifest is empty")
    return out


class ManifestIndex:
    """Line-offset index over a JSONL manifest for corpora too large for memory.

    Holds 8 bytes per line (the byte offset) plus the batching length; records are
    parsed on demand.  ``part(p, k)`` returns the records of part p of k (lines
    i with i % k == p), which is how ``data_split_num`` loading works: one part
    in memory at a time.
    """

    def __init__(self, path: str):
        if not os.path.isfile(path):
            raise ManifestError(f"{path}: manifest not found")
        self.path = path
        self.base = os.path.dirname(os.path.abspath(path))
        self.offsets = array("q")
        self.linenos = array("q")
        off = 0
        with open(path, "rb") as f:
            for n, raw in enumerate(f, 1):
                if raw.strip():
                    self.offsets.append(off)
                    self.linenos.append(n)
                off += len(raw)
        if not self.offsets:
            raise ManifestError(f"{path}: manifest is empty")

    def __len__(self) -> int:
        return len(self.offsets)

    def get(self, i: int, f=None) -> dict:
        own = f is None
        if own:
            f = open(self.path, "rb")
        try:
            f.seek(self.offsets[i])
            raw = f.readline()
        finally:
            if own:
                f.close()
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ManifestError(f"{self.path}:{self.linenos[i]}: not UTF-8") from None
        return parse_line(line, self.path, self.linenos[i], self.base)

    def part(self, p: int, k: int) -> List[dict]:
        if not 0 <= p < k:
            raise ValueError(f"part {p} out of range for data_split_num={k}")
        with open(self.path, "rb") as f:
            return [self.get(i, f) for i in range(p, len(self), k)]


class ShardSampler(Sampler):
    """``DistributedSampler``'s split with resumable state, and no sample twice.

    Each epoch: a permutation seeded by ``seed + epoch`` (identical on all ranks),
    truncated with ``drop_last`` to a multiple of ``num_replicas``, then rank r takes
    every num_replicas-th index from r.  Without ``drop_last`` the first ``n % W`` ranks
    get one sample more: the trainer evens ranks out with zero-weight batches, so no
    rank trains a real sample twice (``DistributedSampler`` wraps around instead).
    """

    def __init__(self, n: int, num_replicas: int = 1, rank: int = 0, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False):
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} out of range for {num_replicas} replicas")
        self.n, self.num_replicas, self.rank = n, num_replicas, rank
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch = 0
        if drop_last:
            self.total_size = n // num_replicas * num_replicas
        else:
            self.total_size = n
        self.num_samples = len(range(rank, self.total_size, num_replicas))

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def indices(self) -> List[int]:
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            idx = torch.randperm(self.n, generator=g).tolist()
        else:
            idx = list(range(self.n))
        return idx[self.rank: self.total_size: self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices())

    def __len__(self) -> int:
        return self.num_samples

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "seed": self.seed}

    def load_state_dict(self, s: dict) -> None:
        self.epoch, self.seed = s["epoch"], s["seed"]


class DynamicBatchSampler(Sampler):
    """Token-budget batching with a sort buffer, per device.

    Per epoch: shuffle all indices (seed + epoch, same on every rank); take
    ``sort_size * world_size`` of them at a time, sort that buffer by length, and
    cut it into batches whose ``max_len * count <= batch_size`` (tokens) and
    ``count <= batch_size_sample_max``; samples longer than ``max_token_length``
    are dropped.  Consecutive batches go to ranks 0..W-1 in turn (so the ranks
    of one step get batches of similar lengths), groups of W batches are
    shuffled.  The last group may be short: its batches go to the first ranks and
    the others get one batch fewer (the trainer evens ranks out with zero-weight
    batches, so no sample is trained twice in an epoch), or it is dropped with
    ``drop_last``.  ``start_step`` skips this rank's first batches (resume).
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, world_size: int = 1, rank: int = 0,
                 sort_size: int = 1024, batch_size_sample_max: int = 200, max_token_length: int = 5000,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False, start_step: int = 0):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} out of range for world size {world_size}")
        if batch_size <= 0 or batch_size_sample_max <= 0 or sort_size <= 0:
            raise ValueError("batch_size, batch_size_sample_max and sort_size must be positive")
        self.lengths = [int(x) for x in lengths]
        self.batch_size, self.world_size, self.rank = batch_size, world_size, rank
        self.sort_size, self.sample_max, self.max_len = sort_size, batch_size_sample_max, max_token_length
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch = 0
        self.start_step = start_step

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _all_batches(self) -> List[List[int]]:
        n = len(self.lengths)
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            idx = torch.randperm(n, generator=g).tolist()
        else:
            idx = list(range(n))
        idx = [i for i in idx if 0 < self.lengths[i] <= self.max_len and self.lengths[i] <= self.batch_size]
        buf = self.sort_size * self.world_size
        batches: List[List[int]] = []
        for s in range(0, len(idx), buf):
            chunk = sorted(idx[s:s + buf], key=lambda i: (self.lengths[i], i))
            cur: List[int] = []
            cur_max = 0
            for i in chunk:
                m = max(cur_max, self.lengths[i])
                if cur and (m * (len(cur) + 1) > self.batch_size or len(cur) + 1 > self.sample_max):
                    batches.append(cur)
                    cur, m = [], self.lengths[i]
                cur.append(i)
                cur_max = m
            if cur:
                batches.append(cur)
        return batches

    def rank_batches(self) -> List[List[int]]:
        batches = self._all_batches()
        w = self.world_size
        groups = [batches[i:i + w] for i in range(0, len(batches), w)]
        if self.shuffle:
            rng = random.Random(self.seed * 1000003 + self.epoch)
            full = [g for g in groups if len(g) == w]
            part = [g for g in groups if len(g) < w]
            rng.shuffle(full)
            groups = full + part
        if groups and len(groups[-1]) < w and self.drop_last:
            groups.pop()
        return [g[self.rank] for g in groups if self.rank < len(g)]

    def __iter__(self) -> Iterator[List[int]]:
        return iter(self.rank_batches()[self.start_step:])

    def __len__(self) -> int:
        return max(0, len(self.rank_batches()) - self.start_step)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "start_step": self.start_step, "seed": self.seed}

    def load_state_dict(self, s: dict) -> None:
        self.epoch, self.start_step, self.seed = s["epoch"], s["start_step"], s["seed"]


def seed_worker(worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: seed Python and NumPy from the worker's torch
    seed (itself derived from the DataLoader's generator), so augmentation is
    reproducible for a given seed, epoch and rank."""
    s = torch.initial_seed() % 2 ** 32
    random.seed(s)
    np.random.seed(s)


def sample_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """A per-sample RNG independent of worker count and order."""
    return np.random.default_rng([seed, epoch, index])
