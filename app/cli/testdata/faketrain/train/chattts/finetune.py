"""Stand-in for train.chattts.finetune.

train: records its command line (the job's directory written {job}) in --out/args.json and
prints the trainer's JSON-line events for --epochs steps. export: writes --out/speaker.json, a
16-dimensional speaker vector made from the learning rate and the epochs, so two jobs of the
same settings export the same voice.
"""
import argparse
import json
import os
import sys


def emit(**rec):
    print(json.dumps(rec), flush=True)


def train(argv):
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


def export(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    with open(os.path.join(a.run, "args.json")) as f:
        args = json.load(f)
    lr = float(args[args.index("--lr") + 1])
    epochs = int(args[args.index("--epochs") + 1])
    os.makedirs(a.out, exist_ok=True)
    data = [lr, float(epochs)] + [0.0] * 14
    with open(os.path.join(a.out, "speaker.json"), "w") as f:
        json.dump({"dim": len(data), "data": data}, f)
    return 0


if __name__ == "__main__":
    cmd, rest = sys.argv[1], sys.argv[2:]
    sys.exit(train(rest) if cmd == "train" else export(rest))
