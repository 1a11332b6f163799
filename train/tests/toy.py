"""A toy regression task for trainer tests (fast, deterministic)."""
from __future__ import annotations

import torch
from torch import nn

from train.trainer import Task


class ToyData(torch.utils.data.Dataset):
    def __init__(self, n: int = 64, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 8, generator=g)
        w = torch.randn(8, 4, generator=g)
        self.y = torch.tanh(self.x @ w) + 0.1 * torch.randn(n, 4, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def lengths(self):
        return [1] * len(self.x)


class ListSampler:
    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)

    def __len__(self):
        return len(self.batches)


def toy_model(dropout: float = 0.0, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Dropout(dropout), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


class ToyTask(Task):
    """Global batch g of ``per_rank * world`` samples per step; rank r takes the r-th
    slice, so W ranks see exactly the samples one process sees in one batch of
    ``per_rank * W``.  ``sizes`` gives each rank its own batch size instead (the
    global batch is their sum).  ``extra`` adds rank-specific extra batches (uneven
    inputs), in every epoch, or only in the epochs listed in ``extra_epochs``."""

    def __init__(self, n=64, per_rank=4, world_for_split=None, extra=None, sizes=None, extra_epochs=None):
        self.ds = ToyData(n)
        self.per_rank = per_rank
        self.split = world_for_split
        self.extra = extra or {}
        self.sizes = sizes
        self.extra_epochs = extra_epochs

    def train_part(self, part, epoch):
        return self.ds

    def collate(self, items):
        return torch.stack([a for a, _ in items]), torch.stack([b for _, b in items])

    def batch_sampler(self, ds, cfg, info, epoch, part, start):
        split = self.split or info.world_size
        sizes = self.sizes or [self.per_rank] * split
        g = sum(sizes)
        offs = [sum(sizes[:r]) for r in range(len(sizes))]
        g_idx = torch.randperm(len(ds), generator=torch.Generator().manual_seed(epoch)).tolist()
        batches = []
        for s in range(0, len(ds) - g + 1, g):
            grp = g_idx[s:s + g]
            if info.world_size == 1:
                batches.append(grp)
            else:
                batches.append(grp[offs[info.rank]:offs[info.rank] + sizes[info.rank]])
        if self.extra_epochs is None or epoch in self.extra_epochs:
            batches += [batches[i % len(batches)] for i in range(self.extra.get(info.rank, 0))]
        return ListSampler(batches[start:])

    def loss(self, model, batch):
        x, y = batch
        per = ((model(x) - y) ** 2).sum(1)
        return per.mean(), {"loss_sum": float(per.sum().detach()), "samples": len(x), "tokens": len(x)}

    def validate(self, model, info):
        x, y = self.ds.x, self.ds.y
        return {"loss_sum": float(((model(x) - y) ** 2).sum()), "n": float(len(x))}


class SplitTask(ToyTask):
    """One process: each global batch of ``sizes`` is given as consecutive micro-batches
    (for gradient accumulation), so it sees what W ranks with those sizes see."""

    def batch_sampler(self, ds, cfg, info, epoch, part, start):
        g = sum(self.sizes)
        g_idx = torch.randperm(len(ds), generator=torch.Generator().manual_seed(epoch)).tolist()
        batches = []
        for s in range(0, len(ds) - g + 1, g):
            o = s
            for n in self.sizes:
                batches.append(g_idx[o:o + n])
                o += n
        return ListSampler(batches[start:])


class RecordData(torch.utils.data.Dataset):
    def __init__(self, base: ToyData, lens):
        self.base, self.lens = base, lens

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        return i, self.base.x[i], self.base.y[i]

    def lengths(self):
        return self.lens


class RecordTask(ToyTask):
    """The trainer's own batching (DynamicBatchSampler over lengths 1..9) that records which
    samples each epoch trained (collate sees only real batches, never zero-weight pads)."""

    def __init__(self, n=40):
        super().__init__(n)
        self.lens = [1 + (i * 7) % 9 for i in range(n)]
        self.seen = {}
        self.epoch = 0

    def train_part(self, part, epoch):
        self.epoch = epoch
        return RecordData(self.ds, self.lens)

    def collate(self, items):
        self.seen.setdefault(self.epoch, []).extend(i for i, _, _ in items)
        return torch.stack([a for _, a, _ in items]), torch.stack([b for _, _, b in items])

    batch_sampler = Task.batch_sampler
