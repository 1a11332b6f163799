"""A small DDP / ZeRO-1 trainer.

Features: DDP (gloo on CPU, NCCL on CUDA), ZeRO stage 1 through
``ZeroRedundancyOptimizer`` (``zero=True``), zero-weight padding batches for ranks
with uneven batch counts (every rank takes every optimizer step, so step count,
schedule, optimizer state and logging stay in lock-step), loss normalised by the
global sample count of each optimizer step (over ranks and accumulated
micro-batches), gradient accumulation, gradient clipping, AMP (bf16/fp16) on CUDA,
warm-up schedules, validation, checkpoints every N steps holding model,
optimizer (consolidated under ZeRO), scheduler, grad scaler, data position and
every rank's RNG state, and exact resume.  Progress goes to stdout as JSON
lines (rank 0 only)::

    {"event": "train", "step": 120, "epoch": 0, "loss": 1.93, "lr": 0.0005,
     "tokens_per_s": 5210.4, "samples_per_s": 20.1, "mem_mb": 812.0, "eta_s": 340.2, ...}

plus ``val``, ``checkpoint``, ``start`` and ``done`` events.

The trainer is model-agnostic: a ``Task`` supplies the loss, the data parts and
(optionally) validation.
"""
from __future__ import annotations

import contextlib
import glob
import json
import math
import os
import random
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader

from . import dist as pdist
from .data import DynamicBatchSampler, seed_worker


class Remaining:
    """A batch sampler without the samples in ``taken`` (batches left empty are dropped),
    from its ``start``-th remaining batch on."""

    def __init__(self, sampler, taken: set, start: int = 0):
        self.batches = []
        for b in sampler:
            kept = [i for i in b if i not in taken]
            if kept:
                self.batches.append(kept)
        self.batches = self.batches[start:]

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class CheckpointError(RuntimeError):
    pass


@dataclass
class TrainConfig:
    out_dir: str = "train/out/run"
    max_epochs: int = 1
    max_steps: int = 0  # optimizer steps; 0 = no limit
    optim: str = "adamw"  # adamw | adam | sgd
    lr: float = 1e-3
    weight_decay: float = 0.0
    betas: Sequence[float] = (0.9, 0.98)
    zero: bool = False  # ZeRO-1: shard optimizer state over ranks
    scheduler: str = "constant"  # constant | noam | cosine (all with linear/noam warm-up)
    warmup_steps: int = 0
    grad_accum: int = 1
    clip: float = 0.0  # max grad norm; 0 = off
    amp: str = "none"  # none | bf16 | fp16 (CUDA only)
    batch_size: int = 4000  # token budget per device: max_len * count
    batch_size_sample_max: int = 64
    sort_size: int = 512
    max_token_length: int = 3000
    data_split_num: int = 1
    num_workers: int = 0
    seed: int = 0
    log_interval: int = 10
    val_interval: int = 0  # optimizer steps; 0 = end of each epoch only
    save_interval: int = 0  # optimizer steps; 0 = end of each epoch and at the end
    keep_checkpoints: int = 3
    resume: str = ""  # checkpoint path, or "auto" for the newest in out_dir
    device: str = "auto"
    # seconds this run may train; the cosine is fitted to the steps that fit (measured after
    # the warm-up), and the run saves and stops when the time is up.  0 = no limit.
    time_budget_s: float = 0.0
    find_unused_parameters: bool = False

    def to_dict(self) -> dict:
        d = asdict(self)
        d["betas"] = list(self.betas)
        return d


class Task:
    """What the trainer needs from a model family."""

    def num_parts(self) -> int:
        return 1

    def train_part(self, part: int, epoch: int):
        """Dataset of one data part (``__len__``, ``__getitem__``, ``lengths()``)."""
        raise NotImplementedError

    def collate(self, items):
        raise NotImplementedError

    def batch_sampler(self, ds, cfg: TrainConfig, info: pdist.DistInfo, epoch: int, part: int, start: int):
        bs = DynamicBatchSampler(ds.lengths(), cfg.batch_size, info.world_size, info.rank,
                                 sort_size=cfg.sort_size, batch_size_sample_max=cfg.batch_size_sample_max,
                                 max_token_length=cfg.max_token_length, seed=cfg.seed * 7919 + part,
                                 start_step=start)
        bs.set_epoch(epoch)
        return bs

    def loss(self, model: nn.Module, batch) -> tuple:
        """-> (loss to back-propagate, averaged over this rank's batch;
               stats dict with float 'loss_sum', 'samples', 'tokens').

        The trainer rescales the mean by ``batch_weight(batch)`` over the step's
        global weight, so every sample counts the same whatever batch or rank it
        is in.  Other numeric stats are summed over ranks and the log window
        and reported in the ``train`` events."""
        raise NotImplementedError

    def batch_weight(self, batch) -> float:
        """How many samples ``loss`` averaged over (the first dimension of the batch's
        first tensor by default).  Override to weight by frames instead."""
        t = batch
        if isinstance(batch, dict):
            t = next((v for v in batch.values() if torch.is_tensor(v)), None)
        elif isinstance(batch, (list, tuple)) and batch:
            t = batch[0]
        if torch.is_tensor(t) and t.dim() > 0:
            return float(t.shape[0])
        if t is not None and hasattr(t, "__len__"):
            return float(len(t))
        raise TypeError(f"cannot tell the sample count of a {type(batch).__name__} batch; "
                        "override Task.batch_weight")

    def validate(self, model: nn.Module, info: pdist.DistInfo) -> Dict[str, float]:
        """Per-rank sums; the trainer all-reduces them.  Return {} for no validation."""
        return {}

    def summarize_val(self, sums: Dict[str, float]) -> Dict[str, float]:
        return sums

    def checkpoint_extra(self) -> dict:
        return {}


def _rng_state() -> dict:
    s = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        s["cuda"] = torch.cuda.get_rng_state()
    return s


def _set_rng_state(s: dict) -> None:
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])
    if "cuda" in s and torch.cuda.is_available():
        torch.cuda.set_rng_state(s["cuda"])


def load_torch(path: str):
    """torch.load of a file this project wrote (checkpoints carry RNG states and configs):
    torch 2.6+ loads only bare tensors by default, torch 1.13 has no such default.  A
    directory is a checkpoint saved by save_split."""
    if os.path.isdir(path):
        return _load_split(path)
    return _load_file(path)


def _load_file(path: str):
    return torch.load(path, map_location="cpu", weights_only=False)


def save_split(obj: dict, out_dir: str, max_bytes: int) -> List[str]:
    """Save a checkpoint dict as out_dir/part-NNN.pt files of about max_bytes at most each (a
    single tensor larger than that gets a part of its own): its "model" tensors spread over
    the parts, everything else in part-000.  For carrying a model through a channel with a
    per-file limit; load_torch(out_dir) puts it together again."""
    model = obj.get("model") or {}
    parts: List[dict] = [{}]
    size = 0
    for k, v in model.items():
        n = v.numel() * v.element_size() if torch.is_tensor(v) else 0
        if parts[-1] and size + n > max_bytes:
            parts.append({})
            size = 0
        parts[-1][k] = v
        size += n
    os.makedirs(out_dir, exist_ok=True)
    for old in glob.glob(os.path.join(out_dir, "part-*.pt")):
        os.remove(old)
    paths = []
    for i, tensors in enumerate(parts):
        head = {k: v for k, v in obj.items() if k != "model"} if i == 0 else {}
        head.update({"model": tensors, "part": i, "parts": len(parts)})
        path = os.path.join(out_dir, f"part-{i:03d}.pt")
        torch.save(head, path + ".partial")
        os.replace(path + ".partial", path)
        paths.append(path)
    return paths


def _load_split(path: str) -> dict:
    files = sorted(glob.glob(os.path.join(path, "part-*.pt")))
    if not files:
        raise FileNotFoundError(f"{path}: a directory without part-*.pt files is not a checkpoint")
    obj = _load_file(files[0])
    want = obj.get("parts")
    if want != len(files):
        raise CheckpointError(f"{path}: {len(files)} part files, the first says {want}")
    model = dict(obj["model"])
    for f in files[1:]:
        model.update(_load_file(f)["model"])
    obj["model"] = model
    del obj["part"], obj["parts"]
    return obj


def _grad_scaler(enabled: bool):
    """torch.amp.GradScaler("cuda") where it exists (torch 2.3+, which deprecates the old
    name), else torch.cuda.amp.GradScaler (Debian's torch 1.13)."""
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


def load_checkpoint(path: str) -> dict:
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        ck = load_torch(path)
    except Exception as e:  # noqa: BLE001
        raise CheckpointError(f"{path}: unreadable checkpoint ({type(e).__name__}: {e})") from e
    if not isinstance(ck, dict) or "model" not in ck or "trainer" not in ck:
        raise CheckpointError(f"{path}: not a parley training checkpoint (no 'model'/'trainer' entries)")
    return ck


def latest_checkpoint(out_dir: str) -> Optional[str]:
    cks = sorted(glob.glob(os.path.join(out_dir, "ckpt-*.pt")))
    return cks[-1] if cks else None


def lr_lambda(cfg: TrainConfig, total_steps: Callable[[], int]) -> Callable[[int], float]:
    w = max(0, cfg.warmup_steps)

    def f(step: int) -> float:
        s = step + 1
        if cfg.scheduler == "noam":  # FunASR WarmupLR
            w1 = max(1, w)
            return (w1 ** 0.5) * min(s ** -0.5, s * w1 ** -1.5)
        warm = min(1.0, s / w) if w else 1.0
        total = total_steps()
        if cfg.scheduler == "cosine" and total > w:
            p = min(1.0, max(0.0, (s - w) / (total - w)))
            return warm * 0.5 * (1 + math.cos(math.pi * p))
        return warm

    if cfg.scheduler not in ("constant", "noam", "cosine"):
        raise ValueError(f"unknown scheduler {cfg.scheduler!r}")
    return f


class Trainer:
    def __init__(self, cfg: TrainConfig, model: nn.Module, task: Task, info: Optional[pdist.DistInfo] = None,
                 out=None):
        self.cfg, self.task = cfg, task
        self.info = info or pdist.init(cfg.device)
        self.out = out or sys.stdout
        if cfg.amp not in ("none", "bf16", "fp16"):
            raise ValueError(f"amp must be none, bf16 or fp16, got {cfg.amp!r}")
        # CPUs: bf16 only (autocast has no fp16 there); with AVX512-BF16 its matrix products run
        # through oneDNN about 1.6x faster than float32 for the recogniser (session 15)
        self.amp = cfg.amp if self.info.device.type == "cuda" else ("bf16" if cfg.amp == "bf16" else "none")
        self.model = model.to(self.info.device)
        if self.info.distributed:
            from torch.nn.parallel import DistributedDataParallel as DDP

            ids = [self.info.device.index] if self.info.device.type == "cuda" else None
            self.ddp = DDP(self.model, device_ids=ids, find_unused_parameters=cfg.find_unused_parameters)
        else:
            self.ddp = self.model
        self.opt = self._make_optimizer()
        self.total_steps = cfg.max_steps or 0
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lr_lambda(cfg, lambda: self.total_steps or 10 ** 9))
        self.scaler = _grad_scaler(self.amp == "fp16")
        self.step = 0
        # the time budget's fitting (_over_budget): when the rate's window opened, how many
        # fits were made, and the length the epochs or max_steps allow
        self._rate_t0, self._budget_fits, self._budget_cap = 0.0, 0, 0
        self.pos = {"epoch": 0, "part": 0, "batch": 0}
        self.best = None
        self.resumed = False
        if cfg.resume:
            path = latest_checkpoint(cfg.out_dir) if cfg.resume == "auto" else cfg.resume
            if path:
                self.load(path)

    # -- optimizer -------------------------------------------------------------------------
    def _make_optimizer(self):
        c = self.cfg
        if c.optim in ("adamw", "adam"):
            cls = torch.optim.AdamW if c.optim == "adamw" else torch.optim.Adam
            kw = dict(lr=c.lr, betas=tuple(c.betas), weight_decay=c.weight_decay)
        elif c.optim == "sgd":
            cls, kw = torch.optim.SGD, dict(lr=c.lr, weight_decay=c.weight_decay)
        else:
            raise ValueError(f"unknown optimizer {c.optim!r}")
        params = [p for p in self.model.parameters() if p.requires_grad]
        if c.zero and self.info.distributed:
            from torch.distributed.optim import ZeroRedundancyOptimizer

            return ZeroRedundancyOptimizer(params, optimizer_class=cls, **kw)
        return cls(params, **kw)

    @property
    def zero(self) -> bool:
        return type(self.opt).__name__ == "ZeroRedundancyOptimizer"

    # -- checkpoints -----------------------------------------------------------------------
    def state(self) -> Optional[dict]:
        """Collective under DDP (ZeRO consolidation, RNG gathering); the dict on rank 0."""
        if self.zero:
            self.opt.consolidate_state_dict(to=0)
        rngs = [None] * self.info.world_size
        if self.info.distributed:
            dist.all_gather_object(rngs, _rng_state())
        else:
            rngs[0] = _rng_state()
        if not self.info.is_main:
            return None
        return {
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(),
            "scaler": self.scaler.state_dict(),
            "trainer": {"step": self.step, "pos": dict(self.pos), "config": self.cfg.to_dict(),
                        "world_size": self.info.world_size, "best": self.best,
                        "total_steps": self.total_steps},
            "rng": rngs,
            **self.task.checkpoint_extra(),
        }

    def save(self, name: Optional[str] = None) -> Optional[str]:
        self.saved_step = self.step
        st = self.state()
        if st is None:
            return None
        os.makedirs(self.cfg.out_dir, exist_ok=True)
        path = os.path.join(self.cfg.out_dir, name or f"ckpt-{self.step:08d}.pt")
        tmp = path + ".partial"
        torch.save(st, tmp)
        os.replace(tmp, path)
        if name is None and self.cfg.keep_checkpoints > 0:
            for old in sorted(glob.glob(os.path.join(self.cfg.out_dir, "ckpt-*.pt")))[:-self.cfg.keep_checkpoints]:
                os.remove(old)
        self.emit({"event": "checkpoint", "step": self.step, "path": path})
        self._hold_for_crash_test()
        return path

    def _hold_for_crash_test(self) -> None:
        """A failpoint for crash tests: with PARLEY_TRAIN_HOLD_AT_STEP=N the run stops right
        after saving step N's checkpoint, once per output directory, and waits to be killed,
        so a test can kill -9 it at a known point however loaded the machine is."""
        want = os.environ.get("PARLEY_TRAIN_HOLD_AT_STEP", "")
        if not want or want != str(self.step):
            return
        marker = os.path.join(self.cfg.out_dir, f".held-{self.step}")
        if os.path.exists(marker):
            return
        open(marker, "w").close()
        sys.stdout.flush()
        while True:
            time.sleep(3600)

    def load(self, path: str) -> None:
        ck = load_checkpoint(path)
        try:
            self.model.load_state_dict(ck["model"])
        except RuntimeError as e:
            raise CheckpointError(f"{path}: model weights do not fit this model: {e}") from e
        self.opt.load_state_dict(ck["optimizer"])
        self.sched.load_state_dict(ck["scheduler"])
        if ck.get("scaler"):
            self.scaler.load_state_dict(ck["scaler"])
        tr = ck["trainer"]
        self.step, self.pos, self.best = tr["step"], dict(tr["pos"]), tr.get("best")
        old = tr.get("config") or {}
        old_world = int(tr.get("world_size") or self.info.world_size)
        self._recount = False
        if old_world != self.info.world_size:
            # The batches of this part so far were cut for old_world ranks: keep which, so the
            # rest of the part is what they did not take, and count the schedule again (its
            # steps per epoch change with the world size: kept, steps past its end ran at LR 0)
            if self.pos.get("batch"):
                self.pos["earlier"] = list(self.pos.get("earlier") or []) + [[old_world, int(self.pos["batch"])]]
            self.pos["batch"] = 0
            self._recount = not self.cfg.max_steps
            self.emit({"event": "world_size_changed", "from": old_world, "to": self.info.world_size,
                       "step": self.step, "pos": self.pos})
        elif (not self.cfg.max_steps and tr.get("total_steps") and old.get("max_epochs") == self.cfg.max_epochs
                and old.get("grad_accum") == self.cfg.grad_accum):
            # The schedule's length is part of its state: recomputing it from the
            # batches left in a half-done epoch would end the cosine early (LR 0).
            self.total_steps = int(tr["total_steps"])
        rngs = ck.get("rng") or []
        if len(rngs) == self.info.world_size and rngs[self.info.rank] is not None:
            _set_rng_state(rngs[self.info.rank])
        elif rngs:
            print(f"resume: checkpoint has RNG state for {len(rngs)} ranks, running {self.info.world_size}; "
                  "RNG streams are not restored exactly", file=sys.stderr)
        self.resumed = True
        self.emit({"event": "resume", "path": path, "step": self.step, **self.pos})

    # -- progress --------------------------------------------------------------------------
    def emit(self, rec: dict) -> None:
        if self.info.is_main:
            self.out.write(json.dumps(rec) + "\n")
            self.out.flush()

    def memory_mb(self) -> float:
        if self.info.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.info.device) / 2 ** 20
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    # -- validation ------------------------------------------------------------------------
    def validate(self) -> Dict[str, float]:
        self.ddp.eval()
        try:
            with torch.no_grad():
                sums = self.task.validate(self.model, self.info)
        finally:
            self.ddp.train()
        if not sums:
            return {}
        keys = sorted(sums)
        vals = pdist.all_reduce_sum([sums[k] for k in keys], self.info)
        res = self.task.summarize_val(dict(zip(keys, vals)))
        self.emit({"event": "val", "step": self.step, "epoch": self.pos["epoch"], **res})
        return res

    # -- training --------------------------------------------------------------------------
    def _autocast(self):
        if self.amp == "none":
            return contextlib.nullcontext()
        dt = torch.bfloat16 if self.amp == "bf16" else torch.float16
        return torch.autocast(device_type=self.info.device.type, dtype=dt)

    def _to_device(self, batch):
        if isinstance(batch, dict):
            return {k: (v.to(self.info.device, non_blocking=True) if torch.is_tensor(v) else v)
                    for k, v in batch.items()}
        if isinstance(batch, (list, tuple)):
            return type(batch)(v.to(self.info.device) if torch.is_tensor(v) else v for v in batch)
        return batch

    def _optimizer_step(self) -> float:
        if self.amp == "fp16":
            self.scaler.unscale_(self.opt)
        gn = 0.0
        if self.cfg.clip > 0:
            gn = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip))
        self.scaler.step(self.opt)
        self.scaler.update()
        self.sched.step()
        self.opt.zero_grad(set_to_none=True)
        self.step += 1
        return gn

    def _epoch_steps(self, epoch: int, part: int, nparts: int) -> int:
        """Optimizer steps in an epoch, estimated from one whole part (all of it, not what
        is left of it after a resume), as the maximum over ranks."""
        ds = self.task.train_part(part, epoch)
        n = len(self.task.batch_sampler(ds, self.cfg, self.info, epoch, part, 0))
        if self.info.distributed:
            t = torch.tensor([n], dtype=torch.int64, device=self.info.device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            n = int(t.item())
        return math.ceil(n * nparts / self.cfg.grad_accum)

    def _part_sampler(self, ds, epoch: int, part: int, start: int):
        """This rank's batches of a part from batch ``start`` on.  After a resume on another
        number of ranks (pos["earlier"]: [world size, batches each rank took], oldest first)
        they are this world's batches without the samples the earlier worlds took, so each
        sample of the part is still trained once."""
        earlier = self.pos.get("earlier") or []
        if not earlier:
            return self.task.batch_sampler(ds, self.cfg, self.info, epoch, part, start)
        taken: set = set()
        for world, n in earlier:
            now = set()
            for r in range(int(world)):
                other = pdist.DistInfo(rank=r, world_size=int(world), device=self.info.device)
                got = 0
                for b in self.task.batch_sampler(ds, self.cfg, other, epoch, part, 0):
                    if got >= n:
                        break
                    kept = [i for i in b if i not in taken]
                    if kept:
                        now.update(kept)
                        got += 1
            taken |= now
        return Remaining(self.task.batch_sampler(ds, self.cfg, self.info, epoch, part, 0), taken, start)

    def _steps_left(self) -> int:
        """Optimizer steps from the current position to the end of the last epoch (the
        maximum over ranks of what is left of this part, then whole parts and epochs)."""
        cfg, epoch = self.cfg, self.pos["epoch"]
        nparts = self.task.num_parts()
        order = self._part_order(epoch, nparts)
        if self.pos["part"] >= nparts:
            return 0
        ds = self.task.train_part(order[self.pos["part"]], epoch)
        n = len(self._part_sampler(ds, epoch, order[self.pos["part"]], self.pos["batch"]))
        if self.info.distributed:
            t = torch.tensor([n], dtype=torch.int64, device=self.info.device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            n = int(t.item())
        rest_parts = nparts - self.pos["part"] - 1
        rest = 0
        if rest_parts > 0:  # the parts still to come in this epoch, as one part counts
            rest = math.ceil(rest_parts * self._epoch_steps(epoch, order[0], nparts) / nparts)
        return math.ceil(n / cfg.grad_accum) + rest + self._epochs_total(epoch + 1)

    # epochs counted batch by batch; past this many, epoch 0's count stands for the rest
    EXACT_EPOCHS = 64

    def _epochs_total(self, first: int) -> int:
        """Optimizer steps of epochs first..max_epochs-1.  With one data part, each epoch's own
        sampler says exactly (batch counts vary by a few % between epochs: the schedule counted
        from epoch 0 alone ended early or late); with several parts (each a load), or many
        epochs, one part of epoch 0 is counted once and stands for every epoch."""
        cfg, nparts = self.cfg, self.task.num_parts()
        if first >= cfg.max_epochs:
            return 0
        if nparts == 1 and cfg.max_epochs <= self.EXACT_EPOCHS:
            return sum(self._epoch_steps(e, 0, 1) for e in range(first, cfg.max_epochs))
        return (cfg.max_epochs - first) * self._epoch_steps(0, self._part_order(0, nparts)[0], nparts)

    def _part_order(self, epoch: int, nparts: int) -> List[int]:
        order = list(range(nparts))
        random.Random(self.cfg.seed * 31 + epoch).shuffle(order)
        return order

    def _reset_initial_lr(self) -> None:
        """The scheduler set the first LR before the run's length was known; set it again."""
        for g, lam in zip(self.opt.param_groups, self.sched.lr_lambdas):
            g["lr"] = g["initial_lr"] * lam(0)
        self.sched._last_lr = [g["lr"] for g in self.opt.param_groups]

    def _agree_on_start(self) -> None:
        """Every rank must start from the same state: the same step and the same weights. Ranks
        that resumed different checkpoints (an --out that is not shared) would train apart
        until a collective failed (gloo) or hung (NCCL); every rank raises the same error."""
        if not self.info.distributed:
            return
        with torch.no_grad():
            fp = sum(float(p.double().sum()) for p in self.model.parameters())
        mine = torch.tensor([float(self.step), fp], dtype=torch.float64, device=self.info.device)
        lo, hi = mine.clone(), mine.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        if lo[0] != hi[0] or lo[1] != hi[1]:
            what = (f"steps {int(lo[0])} to {int(hi[0])}" if lo[0] != hi[0]
                    else f"step {int(lo[0])} with different weights")
            raise CheckpointError(f"rank {self.info.rank}: the ranks start from different states ({what}; this rank: "
                                  f"step {self.step}, resumed {self.resumed}): give every process the same --out "
                                  "(a shared directory) or the same --resume checkpoint")

    def _global_sum(self, v: float) -> float:
        if not self.info.distributed:
            return v
        t = torch.tensor([v], dtype=torch.float64, device=self.info.device)
        dist.all_reduce(t)
        return float(t.item())

    def fit(self, stop_at_step: int = 0) -> dict:
        """Train until max_epochs/max_steps.  ``stop_at_step`` stops early as if the
        job were interrupted there (after saving a checkpoint); the schedule is
        still the one for the full run."""
        cfg, info = self.cfg, self.info
        if not self.resumed:
            # Per-rank streams for dropout etc.; on resume the saved RNG states are used.
            torch.manual_seed(cfg.seed + 1000 * info.rank)
            random.seed(cfg.seed + 1000 * info.rank)
            np.random.seed(cfg.seed + 1000 * info.rank)
        if getattr(self, "_recount", False) and cfg.max_epochs:
            self.total_steps = self.step + self._steps_left()
            self._recount = False
        if self.total_steps == 0 and cfg.max_epochs:
            self.total_steps = self._epochs_total(0)
            if self.step == 0:
                self._reset_initial_lr()
        self._agree_on_start()
        self.ddp.train()
        self.emit({"event": "start", "world_size": info.world_size, "backend": info.backend,
                   "device": str(info.device), "zero": self.zero, "amp": self.amp,
                   "params": sum(p.numel() for p in self.model.parameters()), "step": self.step,
                   "total_steps": self.total_steps, "config": cfg.to_dict()})
        t_start = time.time()
        win: Dict[str, Any] = {"loss": 0.0, "samples": 0.0, "tokens": 0.0, "n": 0, "t": time.time(), "extra": {}}
        steps_at_start = self.step
        done = False
        last_val: Dict[str, float] = {}
        while self.pos["epoch"] < cfg.max_epochs and not done:
            epoch = self.pos["epoch"]
            nparts = self.task.num_parts()
            order = self._part_order(epoch, nparts)
            while self.pos["part"] < nparts and not done:
                part = order[self.pos["part"]]
                ds = self.task.train_part(part, epoch)
                start = self.pos["batch"]
                sampler = self._part_sampler(ds, epoch, part, start)
                n_local = len(sampler)
                n_max = n_local
                if info.distributed:
                    t = torch.tensor([n_local], dtype=torch.int64, device=info.device)
                    dist.all_reduce(t, op=dist.ReduceOp.MAX)
                    n_max = int(t.item())
                g = torch.Generator()
                g.manual_seed(cfg.seed * 1_000_003 + epoch * 10_007 + part * 101 + info.rank)
                loader = DataLoader(ds, batch_sampler=sampler, collate_fn=self.task.collate,
                                    num_workers=cfg.num_workers, worker_init_fn=seed_worker, generator=g,
                                    persistent_workers=False)
                self._part_at = (epoch, part)
                done = self._run_part(iter(loader), ds, start, n_local, n_max, win, t_start, steps_at_start,
                                      stop_at_step, last_val)
                if not done:
                    self.pos["part"] += 1
                    self.pos["batch"] = 0
                    self.pos.pop("earlier", None)
            if not done:
                self.pos = {"epoch": epoch + 1, "part": 0, "batch": 0}
                last_val.update(self.validate())
                if not cfg.save_interval:
                    self.save()
        path = self.save() if getattr(self, "saved_step", -1) != self.step else latest_checkpoint(cfg.out_dir)
        res = {"event": "done", "step": self.step, "epoch": self.pos["epoch"],
               "elapsed_s": round(time.time() - t_start, 3), "checkpoint": path, **{f"val_{k}": v for k, v in last_val.items()}}
        self.emit(res)
        return res

    def _run_part(self, it, ds, start: int, n_local: int, n_max: int, win: dict, t_start: float,
                  steps_at_start: int, stop_at_step: int, last_val: Dict[str, float]) -> bool:
        """Train on one data part; returns True when the run is done.

        Every rank runs n_max micro-batches: a rank with fewer batches (a custom
        sampler) pads with copies of its last batch at weight zero, so all ranks
        take the same optimizer steps, collectives and checkpoints (unlike Join,
        which left the ranks' step counts, schedules and optimizer state apart)."""
        cfg, info = self.cfg, self.info
        pad = None
        i = 0
        while i < n_max:
            # one optimizer step: micro-batches up to the accumulation boundary or the part's end
            group = []
            while i < n_max:
                if i < n_local:
                    batch = self._to_device(next(it))
                    pad = batch
                    group.append((batch, False))
                else:
                    if pad is None:
                        pad = self._fallback_batch(ds)
                    group.append((pad, True))
                i += 1
                if (start + i) % cfg.grad_accum == 0:
                    break
            weights = [0.0 if is_pad else float(self.task.batch_weight(b)) for b, is_pad in group]
            total_w = self._global_sum(sum(weights))
            for k, ((batch, is_pad), w) in enumerate(zip(group, weights)):
                last = k + 1 == len(group)
                ctx = self.ddp.no_sync() if (info.distributed and not last) else contextlib.nullcontext()
                with ctx:
                    with self._autocast():
                        loss, st = self.task.loss(self.ddp, batch)
                    # per-rank mean -> this rank's share of the step's global mean (DDP divides by W)
                    scale = w * info.world_size / total_w if total_w > 0 else 0.0
                    self.scaler.scale(loss * scale).backward()
                for key, v in st.items():  # every rank keeps the same keys: _log all-reduces them
                    if key not in ("loss_sum", "samples", "tokens") and isinstance(v, (int, float)):
                        win["extra"][key] = win["extra"].get(key, 0.0) + (0.0 if is_pad else float(v))
                if not is_pad:
                    win["loss"] += st["loss_sum"]
                    win["samples"] += st["samples"]
                    win["tokens"] += st["tokens"]
            self.pos["batch"] = start + i
            gn = self._optimizer_step()
            win["n"] += 1
            if cfg.log_interval and self.step % cfg.log_interval == 0:
                self._log(win, gn, t_start, steps_at_start)
            if cfg.val_interval and self.step % cfg.val_interval == 0:
                last_val.update(self.validate())
            if cfg.save_interval and self.step % cfg.save_interval == 0:
                self.save()
            if (cfg.max_steps and self.step >= cfg.max_steps) or (stop_at_step and self.step >= stop_at_step):
                return True
            if cfg.time_budget_s and self._over_budget(t_start, steps_at_start):
                return True
        return False

    def _over_budget(self, t_start: float, steps_at_start: int) -> bool:
        """Fits the schedule to the time budget twice: once the warm-up and 10 more steps are
        timed (the first steps, with workers starting and kernels compiling, are left out of the
        rate), and again half-way; then stops when the time is up."""
        cfg, now = self.cfg, time.time()
        done = self.step - steps_at_start
        if done == 10:
            self._rate_t0 = now
        probe = max(30, cfg.warmup_steps + 10)
        fit = self._budget_fits
        if done >= probe and (fit == 0 or (fit == 1 and self.step >= self.total_steps // 2)):
            per_step = (now - self._rate_t0) / max(1, done - 10)
            left = int(max(0.0, cfg.time_budget_s - (now - t_start)) / per_step)
            if fit == 0:
                self._budget_cap = self.total_steps  # what the epochs or max_steps allow
            total = self.step + left
            if self._budget_cap:
                total = min(total, self._budget_cap)
            self.total_steps = max(self.step + 1, total)
            self._budget_fits = fit + 1
            self.emit({"event": "budget", "step": self.step, "total_steps": self.total_steps,
                       "s_per_step": round(per_step, 4), "budget_s": cfg.time_budget_s})
        stop = now - t_start >= cfg.time_budget_s or (self._budget_fits > 0 and self.step >= self.total_steps)
        if self.info.distributed:
            # rank 0's clock decides for all: ranks that fitted their own schedules ended with
            # different weights, and a rank stopping a step early leaves the others waiting
            t = torch.tensor([self.total_steps, self._budget_fits, int(stop)], dtype=torch.int64, device=self.info.device)
            dist.broadcast(t, src=0)
            self.total_steps, self._budget_fits, stop = int(t[0]), int(t[1]), bool(t[2])
        return stop

    def _fallback_batch(self, ds):
        """A padding batch for a rank that has no batch left in this part: its last batch of
        the part, as a run straight through pads with (the forward pass on the pad draws from
        the random streams, so a resumed run must pad with the same batch to stay exact), or
        the part's first sample when this rank has no batch in it at all."""
        epoch, part = getattr(self, "_part_at", (self.pos["epoch"], 0))
        last = None
        for b in self._part_sampler(ds, epoch, part, 0):
            last = b
        if last:
            return self._to_device(self.task.collate([ds[i] for i in last]))
        if len(ds) == 0:
            raise RuntimeError(f"rank {self.info.rank}: no data in this part and no batch to pad with")
        return self._to_device(self.task.collate([ds[0]]))

    def _log(self, win: dict, gn: float, t_start: float, steps_at_start: int) -> None:
        extra = sorted(win["extra"])
        vals = pdist.all_reduce_sum([win["loss"], win["samples"], win["tokens"]] + [win["extra"][k] for k in extra],
                                    self.info)
        now = time.time()
        dt = max(1e-9, now - win["t"])
        done = self.step - steps_at_start
        rate = done / max(1e-9, now - t_start)
        remaining = max(0, self.total_steps - self.step)
        rec = {
            "event": "train", "step": self.step, "epoch": self.pos["epoch"],
            "loss": round(vals[0] / max(1.0, vals[1]), 6), "lr": self.sched.get_last_lr()[0],
            "tokens_per_s": round(vals[2] / dt, 1), "samples_per_s": round(vals[1] / dt, 2),
            "grad_norm": round(gn, 4), "mem_mb": round(self.memory_mb(), 1),
            "eta_s": round(remaining / rate, 1) if rate > 0 else None,
            **{k: v for k, v in zip(extra, vals[3:])},
        }
        self.emit(rec)
        win.update({"loss": 0.0, "samples": 0.0, "tokens": 0.0, "n": 0, "t": now,
                    "extra": {k: 0.0 for k in extra}})
