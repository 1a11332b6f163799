"""Train the speaker encoder with AAM-softmax on a speaker corpus (train.speaker.corpus).

    /usr/bin/python3 -m train.launch --nproc 2 -m train.speaker.train \
        --train CORPUS/train.jsonl --val CORPUS/val.jsonl --size demo --out train/out/speaker \
        --epochs 12 --lr 0.002 --warmup 100 --scheduler cosine

Every flag of ``TrainConfig`` is available (``--help``); a batch holds --batch-size frames
(at most --batch-size-sample-max items), each item a random --crop-frames window of one
utterance, in a fresh random order each epoch. Validation reports the
speaker-classification accuracy on held-in utterances; `train.speaker.evaluate` measures the
equal error rate on held-out speakers. Export with
``python3 -m train.speaker.export --checkpoint OUT/ckpt-XXXXXXXX.pt --out DIR``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.nn.functional as F

from .. import dist as pdist
from ..sensevoice.train import add_train_flags, build_config
from ..trainer import CheckpointError, Task, TrainConfig, Trainer
from . import model as spm
from .features import fbank, load


class ManifestError(ValueError):
    pass


def read_manifest(path: str) -> List[dict]:
    """Rows with key, source (relative to the manifest) and an integer speaker."""
    if not os.path.isfile(path):
        raise ManifestError(f"{path}: manifest not found")
    base = os.path.dirname(os.path.abspath(path))
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise ManifestError(f"{path}:{n}: invalid JSON: {e.msg}") from None
            if not isinstance(r, dict) or not isinstance(r.get("source"), str) or \
                    not isinstance(r.get("speaker"), int) or isinstance(r.get("speaker"), bool) or r["speaker"] < 0:
                raise ManifestError(f"{path}:{n}: want an object with a string 'source' and an integer 'speaker' >= 0")
            r["source"] = os.path.normpath(os.path.join(base, r["source"]))
            rows.append(r)
    if not rows:
        raise ManifestError(f"{path}: manifest is empty")
    return rows


class CropDataset:
    """Each item: a random crop of one utterance's features (fixed per epoch and seed)."""

    def __init__(self, rows: List[dict], crop: int, seed: int):
        self.rows, self.crop, self.seed, self.epoch = rows, crop, seed, 0
        self.cache: Dict[int, torch.Tensor] = {}

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.rows)

    def lengths(self) -> List[int]:
        return [self.crop] * len(self.rows)

    def feats(self, i: int) -> torch.Tensor:
        f = self.cache.get(i)
        if f is None:
            f = fbank(load(self.rows[i]["source"]))
            self.cache[i] = f
        return f

    def __getitem__(self, i: int):
        f = self.feats(i)
        rng = np.random.default_rng([self.seed, self.epoch, i])
        if f.shape[0] >= self.crop:
            s = int(rng.integers(0, f.shape[0] - self.crop + 1))
            x = f[s:s + self.crop]
        else:  # short utterance: repeat it to the crop length, as 3D-Speaker does
            x = f.repeat((self.crop + f.shape[0] - 1) // f.shape[0], 1)[:self.crop]
        x = x - x.mean(dim=0, keepdim=True)  # the crop is the utterance the encoder sees
        return x, self.rows[i]["speaker"]


class ShuffledBatches:
    """Fixed-size batches of a fresh random order each epoch, the same number on every rank.

    Every crop has the same length, so the length-sorting sampler of the ASR recipes would
    put one speaker's consecutive utterances together; a speaker encoder needs many speakers
    per batch (batch norm and the softmax both see the batch)."""

    def __init__(self, n: int, batch: int, world: int, rank: int, seed: int, epoch: int, start: int = 0):
        order = np.random.default_rng([seed, epoch]).permutation(n).tolist()
        per_rank = n // (batch * world)
        if per_rank == 0:
            raise ValueError(f"{n} training items cannot fill one batch of {batch} on each of {world} ranks")
        self.batches = [order[(i * world + rank) * batch:(i * world + rank + 1) * batch] for i in range(per_rank)]
        self.start = start

    def __iter__(self):
        return iter(self.batches[self.start:])

    def __len__(self) -> int:
        return len(self.batches) - self.start


def collate(items):
    return {"x": torch.stack([x for x, _ in items]), "y": torch.tensor([y for _, y in items], dtype=torch.long)}


class SpeakerTask(Task):
    def __init__(self, train_rows: List[dict], val_rows: List[dict], cfg: TrainConfig, mcfg: spm.SpeakerConfig,
                 crop: int):
        self.train_rows, self.val_rows, self.cfg, self.mcfg, self.crop = train_rows, val_rows, cfg, mcfg, crop
        self.ds = CropDataset(train_rows, crop, cfg.seed)
        self.speakers = 1 + max(r["speaker"] for r in train_rows)

    def train_part(self, part: int, epoch: int):
        self.ds.set_epoch(epoch)
        return self.ds

    def collate(self, items):
        return collate(items)

    def batch_sampler(self, ds, cfg: TrainConfig, info: pdist.DistInfo, epoch: int, part: int, start: int):
        batch = max(1, min(cfg.batch_size_sample_max, cfg.batch_size // self.crop))
        return ShuffledBatches(len(ds), batch, info.world_size, info.rank, cfg.seed, epoch, start)

    def loss(self, model, batch):
        total = model(batch["x"], batch["y"])
        n = batch["x"].shape[0]
        return total / n, {"loss_sum": float(total.detach()), "samples": n, "tokens": float(n * self.crop)}

    def validate(self, model, info: pdist.DistInfo) -> Dict[str, float]:
        if not self.val_rows:
            return {}
        net = model.module if hasattr(model, "module") else model
        rows = self.val_rows[info.rank::info.world_size]
        ok = 0.0
        with torch.no_grad():
            w = F.normalize(net.head.weight)
            for r in rows:
                emb = net.encoder(fbank(load(r["source"])).unsqueeze(0).to(info.device))
                ok += float(int((F.normalize(emb) @ w.T).argmax()) == r["speaker"])
        return {"correct": ok, "n": float(len(rows))}

    def summarize_val(self, s):
        return {"speaker_acc": s["correct"] / max(1.0, s["n"]), "utts": int(s["n"])}

    def checkpoint_extra(self) -> dict:
        return {"speaker_config": self.mcfg.to_dict(), "speakers": self.speakers, "crop": self.crop}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.speaker.train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True, help="training manifest (train.speaker.corpus)")
    ap.add_argument("--val", help="validation manifest (training speakers, other utterances)")
    ap.add_argument("--size", default="demo", choices=sorted(spm.SIZES))
    ap.add_argument("--crop-frames", type=int, default=200, help="training crop, in 10 ms frames")
    ap.add_argument("--margin", type=float, default=0.2, help="AAM-softmax angular margin")
    ap.add_argument("--out", dest="out_dir", default="train/out/speaker")
    ap.add_argument("--epochs", dest="max_epochs", type=int, default=10)
    ap.add_argument("--warmup", dest="warmup_steps", type=int, default=0)
    add_train_flags(ap)
    ap.set_defaults(batch_size=200 * 32, batch_size_sample_max=32, max_token_length=100000)
    a = ap.parse_args(argv)
    cfg = build_config(a)
    torch.set_num_threads(int(os.environ.get("PARLEY_TORCH_THREADS", "1")))
    info = pdist.init(cfg.device)
    try:
        train_rows = read_manifest(a.train)
        val_rows = read_manifest(a.val) if a.val else []
        mcfg = spm.config_for(a.size)
        torch.manual_seed(cfg.seed)
        task = SpeakerTask(train_rows, val_rows, cfg, mcfg, a.crop_frames)
        model = spm.TrainingModel(mcfg, task.speakers, margin=a.margin)
        Trainer(cfg, model, task, info).fit()
    finally:
        pdist.destroy()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (CheckpointError, ManifestError, ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
