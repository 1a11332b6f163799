"""Scenarios run by every rank of a spawned gloo group (see test_distributed)."""
from __future__ import annotations

import io
import json
import os
import sys
import time

import torch

import train.trainer as trm
from train import dist as pdist
from train.trainer import CheckpointError, TrainConfig, Trainer
from train.tests.toy import RecordTask, ToyTask, toy_model


class SlowToy(ToyTask):
    """Steps of about 20 ms, so that a 3 s budget holds a schedule of many steps."""

    def loss(self, model, batch):
        time.sleep(0.02)
        return super().loss(model, batch)


def params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def run(cfg: TrainConfig, task, info, dropout=0.0, stop_at=0):
    model = toy_model(dropout)
    tr = Trainer(cfg, model, task, info, out=io.StringIO())
    tr.fit(stop_at_step=stop_at)
    return tr


def scenarios(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "PARLEY_DIST_TIMEOUT": "60"})
    torch.set_num_threads(1)
    info = pdist.init("cpu")
    res = {}
    base = dict(max_epochs=1, max_steps=5, lr=1e-2, optim="adam", log_interval=1, seed=3, device="cpu")

    # 1. plain DDP Adam, 5 steps
    tr = run(TrainConfig(out_dir=os.path.join(out_dir, "ddp"), **base), ToyTask(), info)
    torch.save(params(tr.model), os.path.join(out_dir, f"ddp-{rank}.pt"))

    # 2. ZeRO-1 Adam; record how much optimizer state this rank holds
    tr = run(TrainConfig(out_dir=os.path.join(out_dir, "zero"), zero=True, **base), ToyTask(), info)
    torch.save(params(tr.model), os.path.join(out_dir, f"zero-{rank}.pt"))
    local = sum(t.numel() for st in tr.opt.optim.state.values() for t in st.values()
                if torch.is_tensor(t) and t.dim() > 0)
    res["zero_state_numel"] = local
    res["zero_is_zero"] = tr.zero

    # 3. uneven inputs: rank 1 has 3 extra batches; rank 0 pads with zero-weight batches
    cfg = TrainConfig(out_dir=os.path.join(out_dir, "uneven"), max_epochs=1, lr=1e-2, optim="adam",
                      log_interval=1, seed=3, device="cpu", zero=True)
    tr = run(cfg, ToyTask(extra={1: 3}), info)
    res["uneven_steps"] = tr.step
    torch.save(params(tr.model), os.path.join(out_dir, f"uneven-{rank}.pt"))

    # 3b. an uneven epoch, then an even one (DDP Adam, cosine with warm-up, log every 5 steps):
    # the ranks must still hold the same weights, steps and learning rate at the end.
    cfg = TrainConfig(out_dir=os.path.join(out_dir, "uneven2"), max_epochs=2, lr=1e-2, optim="adam",
                      scheduler="cosine", warmup_steps=2, log_interval=5, seed=3, device="cpu")
    tr = run(cfg, ToyTask(extra={1: 3}, extra_epochs={0}), info)
    res["uneven_even_steps"] = tr.step
    res["uneven_even_lr"] = tr.sched.get_last_lr()[0]
    torch.save(params(tr.model), os.path.join(out_dir, f"uneven2-{rank}.pt"))

    # 3c. --max-steps inside an uneven epoch (rank 0 ran out of batches first): must not hang
    cfg = TrainConfig(out_dir=os.path.join(out_dir, "uneven3"), max_epochs=2, max_steps=10, lr=1e-2,
                      optim="adam", log_interval=5, seed=3, device="cpu", zero=True)
    tr = run(cfg, ToyTask(extra={1: 3}), info)
    res["uneven_max_steps"] = tr.step

    # 3d. unequal batch sizes (1 and 12 samples): every sample weighs the same, as in one
    # process on the combined batch of 13
    cfg = TrainConfig(out_dir=os.path.join(out_dir, "sizes"), max_epochs=1, max_steps=4, lr=1e-2,
                      optim="adam", log_interval=1, seed=3, device="cpu")
    tr = run(cfg, ToyTask(sizes=[1, 12]), info)
    torch.save(params(tr.model), os.path.join(out_dir, f"sizes-{rank}.pt"))

    # 4. checkpoint -> resume, ZeRO + dropout + grad accumulation + clipping + warm-up
    rcfg = dict(max_epochs=3, lr=1e-2, optim="adamw", zero=True, grad_accum=2, clip=1.0, warmup_steps=3,
                scheduler="cosine", log_interval=1, seed=5, device="cpu", keep_checkpoints=10)
    straight = run(TrainConfig(out_dir=os.path.join(out_dir, "straight"), max_steps=9, **rcfg), ToyTask(),
                   info, dropout=0.2)
    first = run(TrainConfig(out_dir=os.path.join(out_dir, "resume"), max_steps=9, **rcfg), ToyTask(),
                info, dropout=0.2, stop_at=5)
    ck = os.path.join(out_dir, "resume", "ckpt-00000005.pt")
    second = run(TrainConfig(out_dir=os.path.join(out_dir, "resume"), max_steps=9, resume=ck, **rcfg),
                 ToyTask(), info, dropout=0.2)
    res["resume_max_diff"] = float((params(straight.model) - params(second.model)).abs().max())
    res["resume_steps"] = [straight.step, first.step, second.step]
    res["resume_pos"] = [straight.pos, second.pos]

    # 5. ranks that resume different checkpoints (a non-shared --out) must all stop with the
    # same clear error before training, not train apart until a collective fails or hangs
    other = ck if rank == 0 else os.path.join(out_dir, "resume", "ckpt-00000009.pt")
    try:
        run(TrainConfig(out_dir=os.path.join(out_dir, f"apart-{rank}"), max_steps=12, resume=other, **rcfg),
            ToyTask(), info, dropout=0.2)
        res["apart_error"] = ""
    except CheckpointError as e:
        res["apart_error"] = str(e)

    # 6. a time budget with clocks that disagree (rank 1's runs 1.5x fast): rank 0 decides the
    # schedule and the stop for all, so the ranks end at the same step with the same weights
    real = time.time

    class Skewed:
        t0 = real()

        def __getattr__(self, name):
            return getattr(time, name)

        def time(self):
            return self.t0 + (real() - self.t0) * (1.5 if rank == 1 else 1.0)

    trm.time = Skewed()
    try:
        cfg = TrainConfig(out_dir=os.path.join(out_dir, "budget"), max_epochs=1000, lr=1e-2, optim="adam",
                          scheduler="cosine", warmup_steps=2, time_budget_s=3.0, log_interval=0, seed=3, device="cpu")
        tr = run(cfg, SlowToy(), info)
    finally:
        trm.time = time
    res["budget_steps"] = [tr.step, tr.total_steps]
    res["budget_lr"] = tr.sched.get_last_lr()[0]
    torch.save(params(tr.model), os.path.join(out_dir, f"budget-{rank}.pt"))

    # 7. a world-size change: 2 ranks stop mid-epoch (the parent resumes them on 1 process),
    # and 2 ranks resume what 1 process (the parent, before) stopped
    tr, seen = world_change_run(os.path.join(out_dir, "w2to1"), info, stop_at=4)
    res["w2to1_seen"] = seen
    tr, seen = world_change_run(os.path.join(out_dir, "w1to2"), info, resume="auto")
    res["w1to2_seen"] = seen
    res["w1to2_events"] = tr.out.getvalue() if rank == 0 else ""
    res["w1to2_steps"] = [tr.step, tr.total_steps]

    with open(os.path.join(out_dir, f"res-{rank}.json"), "w") as f:
        json.dump(res, f)
    pdist.destroy()
    pdist.exit_worker()


def world_change_run(out_dir: str, info, stop_at: int = 0, resume: str = ""):
    """RecordTask over 2 epochs with a cosine schedule; -> the trainer and the samples each
    epoch trained here."""
    cfg = TrainConfig(out_dir=out_dir, max_epochs=2, lr=1e-2, optim="adam", scheduler="cosine", warmup_steps=2,
                      log_interval=1, seed=3, device="cpu", batch_size=20, batch_size_sample_max=4, sort_size=8,
                      resume=resume)
    task = RecordTask()
    tr = Trainer(cfg, toy_model(), task, info, out=io.StringIO())
    tr.fit(stop_at_step=stop_at)
    return tr, {str(k): v for k, v in task.seen.items()}
