"""Training throughput: samples/s and tokens/s for 1 versus N processes, in one run.

    python3 -m train.bench                       # CPU: tiny SenseVoice, 1 vs 2 gloo processes
    python3 -m train.bench --size demo --steps 30
    python3 -m train.bench --amp                 # CUDA: one GPU with and without AMP (bf16)

Every configuration trains the same SenseVoice model on the same synthetic
features (random LFR features and token targets, no audio I/O) with the same
per-device token budget, through the real Trainer (DDP over gloo/NCCL).  The
first window of steps is warm-up and not counted.  Prints one JSON line per
configuration and a summary with the speed-up of N processes over 1 (ideal: N
on N free cores).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from typing import List

import torch
import torch.multiprocessing as mp

from . import dist as pdist
from .launch import free_port
from .trainer import Task, TrainConfig, Trainer


class SyntheticSenseVoice(Task):
    def __init__(self, n: int, vocab: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.lens = torch.randint(150, 450, (n,), generator=g).tolist()  # 10 ms frames
        self.vocab, self.seed = vocab, seed

    class DS(torch.utils.data.Dataset):
        def __init__(self, task):
            self.t = task

        def __len__(self):
            return len(self.t.lens)

        def lengths(self):
            return self.t.lens

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(self.t.seed * 100003 + i)
            t = (self.t.lens[i] + 5) // 6
            y = torch.randint(30, self.t.vocab, (max(1, t // 4),), generator=g)
            return torch.randn(t, 560, generator=g), y

    def train_part(self, part, epoch):
        return self.DS(self)

    def collate(self, items):
        n = len(items)
        t = max(x.shape[0] for x, _ in items)
        l = max(len(y) for _, y in items)
        x = torch.zeros(n, t, 560)
        y = torch.zeros(n, l, dtype=torch.int64)
        for i, (a, b) in enumerate(items):
            x[i, : a.shape[0]] = a
            y[i, : len(b)] = b
        return {"x": x, "x_length": torch.tensor([a.shape[0] for a, _ in items], dtype=torch.int32),
                "y": y, "y_length": torch.tensor([len(b) for _, b in items]),
                "rich": torch.full((n, 4), -1, dtype=torch.int64)}

    def loss(self, model, b):
        n = b["x"].shape[0]
        lang = torch.zeros(n, dtype=torch.int32, device=b["x"].device)
        tn = torch.full((n,), 15, dtype=torch.int32, device=b["x"].device)
        total, _ = model(b["x"], b["x_length"], lang, tn, y=b["y"], y_length=b["y_length"], rich=b["rich"])
        return total / n, {"loss_sum": float(total.detach()), "samples": n, "tokens": float(b["x_length"].sum()) * 6}


def worker(rank: int, world: int, port: int, a: dict, amp: str, out_path: str) -> None:
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(a["threads"])
    from .sensevoice import model as svm

    info = pdist.init(a["device"])
    torch.manual_seed(0)
    model = svm.build(svm.config_for(a["size"], vocab_size=a["vocab"]))
    tmp = tempfile.mkdtemp(prefix="parley-bench-")
    cfg = TrainConfig(out_dir=tmp, max_epochs=1000, max_steps=a["warmup"] + a["steps"], lr=1e-4,
                      batch_size=a["batch_size"], batch_size_sample_max=256, sort_size=256,
                      log_interval=a["warmup"], seed=1, device=a["device"], amp=amp, save_interval=10 ** 9)
    buf = io.StringIO()
    tr = Trainer(cfg, model, SyntheticSenseVoice(a["utts"], a["vocab"]), info, out=buf)
    tr.task.validate = lambda *x: {}
    tr.save = lambda *x, **k: None
    tr.fit()
    if info.is_main:
        ev = [json.loads(l) for l in buf.getvalue().splitlines()]
        tr_ev = [e for e in ev if e["event"] == "train"][1:]  # drop the warm-up window
        with open(out_path, "w") as f:
            json.dump(tr_ev, f)
    pdist.destroy()


def run(world: int, a: dict, amp: str = "none") -> dict:
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    t0 = time.time()
    mp.start_processes(worker, args=(world, free_port(), a, amp, out), nprocs=world, join=True, start_method="spawn")
    with open(out) as f:
        ev = json.load(f)
    os.remove(out)
    if not ev:
        raise RuntimeError("no measured steps; raise --steps")
    sps = sum(e["samples_per_s"] for e in ev) / len(ev)
    tps = sum(e["tokens_per_s"] for e in ev) / len(ev)
    return {"procs": world, "amp": amp, "samples_per_s": round(sps, 2), "tokens_per_s": round(tps, 1),
            "mem_mb": ev[-1]["mem_mb"], "wall_s": round(time.time() - t0, 1)}


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--vocab", type=int, default=300)
    ap.add_argument("--procs", default="1,2", help="comma-separated process counts")
    ap.add_argument("--steps", type=int, default=20, help="measured optimizer steps")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=4000, help="token budget per device (10 ms frames)")
    ap.add_argument("--utts", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--amp", action="store_true", help="CUDA: one GPU with and without bf16 AMP")
    a = ap.parse_args(argv)
    d = dict(size=a.size, vocab=a.vocab, steps=a.steps, warmup=a.warmup, batch_size=a.batch_size,
             utts=a.utts, threads=a.threads, device="cpu")
    results = []
    if a.amp:
        if not torch.cuda.is_available():
            print("train.bench: --amp needs CUDA", file=sys.stderr)
            return 2
        d["device"] = "cuda"
        for amp in ("none", "bf16"):
            results.append(run(1, d, amp))
            print(json.dumps({"event": "bench", "device": torch.cuda.get_device_name(0), **d, **results[-1]}), flush=True)
        base = results[0]
        print(json.dumps({"event": "summary", "amp_speedup": round(results[1]["samples_per_s"] / base["samples_per_s"], 3)}))
        return 0
    for n in [int(x) for x in a.procs.split(",")]:
        results.append(run(n, d))
        print(json.dumps({"event": "bench", "device": "cpu", "cpus": os.cpu_count(), **d, **results[-1]}), flush=True)
    base = results[0]
    print(json.dumps({"event": "summary", "baseline_procs": base["procs"],
                      "speedup": {str(r["procs"]): round(r["samples_per_s"] / base["samples_per_s"], 3) for r in results},
                      "load_avg": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
