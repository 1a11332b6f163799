"""A stand-in for Parley's trainer, for the Go runner's failure-path tests (no torch).

Prints the trainer's JSON-line events for --steps steps, checkpointing (a file holding the
step) every --save-every steps in --out, and resumes from the newest with --resume auto.
Faults on request: --crash-at N (error on stderr, exit 1), --bad-json (garbage and an
overlong line among the events), --no-done (exit 0 without the done event), --sleep S per
step (for cancel tests), --result (print one JSON result object, as preparation steps do).
"""
import argparse
import glob
import json
import os
import sys
import time


def emit(**rec):
    print(json.dumps(rec), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--save-every", type=int, default=2)
    ap.add_argument("--resume", default="")
    ap.add_argument("--crash-at", type=int, default=0)
    ap.add_argument("--bad-json", action="store_true")
    ap.add_argument("--no-done", action="store_true")
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--result", action="store_true")
    a = ap.parse_args()
    if a.result:
        print("preparing…")
        print(json.dumps({"init": os.path.join(a.out, "init.pt"), "size": "tiny"}))
        return 0
    os.makedirs(a.out, exist_ok=True)
    step = 0
    if a.resume == "auto":
        cks = sorted(glob.glob(os.path.join(a.out, "ckpt-*.txt")))
        if cks:
            with open(cks[-1]) as f:
                step = int(f.read())
            emit(event="resume", path=cks[-1], step=step, epoch=step // 5)
    emit(event="start", world_size=1, device="cpu", step=step, total_steps=a.steps, config={"x": [1, 2]})
    while step < a.steps:
        if a.sleep:
            time.sleep(a.sleep)
        step += 1
        if a.crash_at and step == a.crash_at:
            print("Traceback (most recent call last):\n  File \"fake.py\"\nRuntimeError: boom", file=sys.stderr)
            print("error: out of memory at step %d" % step, file=sys.stderr, flush=True)
            return 1
        emit(event="train", step=step, epoch=step // 5, loss=round(10.0 / step, 6), eta_s=a.steps - step, lr=0.001)
        if a.bad_json and step == 2:
            print("{not json", flush=True)
            print("{" + "x" * 200000, flush=True)
            print("plain text line", flush=True)
            print(json.dumps({"event": "train", "step": "NaN-ish", "loss": float("nan")}).replace("NaN", "NaN"), flush=True)
        if step % a.save_every == 0:
            path = os.path.join(a.out, "ckpt-%08d.txt" % step)
            with open(path, "w") as f:
                f.write(str(step))
            emit(event="checkpoint", step=step, path=path)
    if step % 5 == 0:
        emit(event="val", step=step, epoch=step // 5, loss=0.5, cer=0.25)
    if not a.no_done:
        emit(event="done", step=step, epoch=step // 5, checkpoint=os.path.join(a.out, "ckpt-%08d.txt" % step))
    return 0


if __name__ == "__main__":
    sys.exit(main())
