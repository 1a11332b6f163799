"""Stand-in for train.sensevoice.train: records its command line (the job's directory written
{job}) in --out/args.json and prints the trainer's JSON-line events for --epochs steps."""
import argparse
import json
import os
import sys


def emit(**rec):
    print(json.dumps(rec), flush=True)


def main():
    argv = sys.argv[1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--lr", type=float, required=True)
    a, _ = ap.parse_known_args(argv)
    os.makedirs(a.out, exist_ok=True)
    job = os.path.dirname(os.path.abspath(a.out))
    with open(os.path.join(a.out, "args.json"), "w") as f:
        json.dump([x.replace(job, "{job}") for x in argv], f)
    emit(event="start", world_size=1, device="cpu", step=0, total_steps=a.epochs)
    for step in range(1, a.epochs + 1):
        emit(event="train", step=step, epoch=step, loss=1.0 / step, eta_s=a.epochs - step, lr=a.lr)
    emit(event="done", step=a.epochs, epoch=a.epochs, checkpoint=os.path.join(a.out, "last.pt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
