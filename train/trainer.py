"""A small DDP / ZeRO-1 trainer.

Features: DDP (gloo on CPU, NCCL on CUDA), ZeRO stage 1 through
``ZeroRedundancyOptimizer`` (``zero=True``), ``Join`` for ranks with uneven batch
counts, gradient accumulation, gradient clipping, AMP (bf16/fp16) on CUDA,
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
               stats dict with float 'loss_sum', 'samples', 'tokens')."""
        raise NotImplementedError

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


def load_checkpoint(path: str) -> dict:
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        ck = torch.load(path, map_location="cpu")
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
        self.amp = cfg.amp if self.info.device.type == "cuda" else "none"
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
        self.scaler = torch.cuda.amp.GradScaler(enabled=self.amp == "fp16")
        self.step = 0
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
                        "world_size": self.info.world_size, "best": self.best},
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
        return path

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
        return torch.autocast(device_type="cuda", dtype=dt)

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
        self.ddp.train()
        self.emit({"event": "start", "world_size": info.world_size, "backend": info.backend,
                   "device": str(info.device), "zero": self.zero, "amp": self.amp,
                   "params": sum(p.numel() for p in self.model.parameters()), "step": self.step,
                   "config": cfg.to_dict()})
        t_start = time.time()
        win = {"loss": 0.0, "samples": 0.0, "tokens": 0.0, "n": 0, "t": time.time()}
        steps_at_start = self.step
        done = False
        last_val: Dict[str, float] = {}
        while self.pos["epoch"] < cfg.max_epochs and not done:
            epoch = self.pos["epoch"]
            nparts = self.task.num_parts()
            order = list(range(nparts))
            random.Random(cfg.seed * 31 + epoch).shuffle(order)
            while self.pos["part"] < nparts and not done:
                part = order[self.pos["part"]]
                ds = self.task.train_part(part, epoch)
                start = self.pos["batch"]
                sampler = self.task.batch_sampler(ds, cfg, info, epoch, part, start)
                n_local = len(sampler)
                counts = [n_local, -n_local]
                if info.distributed:
                    t = torch.tensor(counts, dtype=torch.int64, device=info.device)
                    dist.all_reduce(t, op=dist.ReduceOp.MAX)
                    counts = t.tolist()
                n_max, n_min = counts[0], -counts[1]
                uneven = n_max != n_min
                limit = n_local
                use_join = uneven and info.distributed
                if uneven and cfg.grad_accum > 1:
                    # Join cannot shadow skipped gradient syncs; use the common prefix.
                    limit, use_join = n_min, False
                    print(f"rank {info.rank}: uneven batch counts ({n_min}..{n_max}) with grad_accum>1: "
                          f"using the first {n_min} batches", file=sys.stderr)
                g = torch.Generator()
                g.manual_seed(cfg.seed * 1_000_003 + epoch * 10_007 + part * 101 + info.rank)
                loader = DataLoader(ds, batch_sampler=sampler, collate_fn=self.task.collate,
                                    num_workers=cfg.num_workers, worker_init_fn=seed_worker, generator=g,
                                    persistent_workers=False)
                if self.total_steps == 0 and cfg.max_epochs:
                    per_epoch = math.ceil(n_max * nparts / cfg.grad_accum)
                    self.total_steps = per_epoch * cfg.max_epochs
                joinables = [self.ddp] + ([self.opt] if self.zero else [])
                join = contextlib.nullcontext()
                if use_join:
                    from torch.distributed.algorithms.join import Join

                    join = Join(joinables)
                micro = 0
                with join:
                    for i, batch in enumerate(loader):
                        if i >= limit:
                            break
                        batch = self._to_device(batch)
                        last_of_part = i + 1 >= limit
                        sync = ((start + i + 1) % cfg.grad_accum == 0) or last_of_part
                        ctx = self.ddp.no_sync() if (info.distributed and not sync and not use_join) else contextlib.nullcontext()
                        with ctx:
                            with self._autocast():
                                loss, st = self.task.loss(self.ddp, batch)
                            self.scaler.scale(loss / cfg.grad_accum).backward()
                        micro += 1
                        win["loss"] += st["loss_sum"]
                        win["samples"] += st["samples"]
                        win["tokens"] += st["tokens"]
                        self.pos["batch"] = start + i + 1
                        if not sync:
                            continue
                        gn = self._optimizer_step()
                        win["n"] += 1
                        if self.step % cfg.log_interval == 0 and not use_join:
                            self._log(win, gn, t_start, steps_at_start)
                        if cfg.val_interval and self.step % cfg.val_interval == 0 and not use_join:
                            last_val = self.validate()
                        if cfg.save_interval and self.step % cfg.save_interval == 0 and not use_join:
                            self.save()
                        if (cfg.max_steps and self.step >= cfg.max_steps) or (stop_at_step and self.step >= stop_at_step):
                            done = True
                            break
                if not done:
                    self.pos["part"] += 1
                    self.pos["batch"] = 0
            if not done:
                self.pos = {"epoch": epoch + 1, "part": 0, "batch": 0}
                last_val = self.validate() or last_val
                if not cfg.save_interval:
                    self.save()
        path = self.save() if getattr(self, "saved_step", -1) != self.step else latest_checkpoint(cfg.out_dir)
        res = {"event": "done", "step": self.step, "epoch": self.pos["epoch"],
               "elapsed_s": round(time.time() - t_start, 3), "checkpoint": path, **{f"val_{k}": v for k, v in last_val.items()}}
        self.emit(res)
        return res

    def _log(self, win: dict, gn: float, t_start: float, steps_at_start: int) -> None:
        vals = pdist.all_reduce_sum([win["loss"], win["samples"], win["tokens"]], self.info)
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
        }
        self.emit(rec)
        win.update({"loss": 0.0, "samples": 0.0, "tokens": 0.0, "n": 0, "t": now})
