"""Stand-in for train.sensevoice.export: the "fine-tuned" model is the starting point's
model.onnx and tokens.txt, copied (the job's init/init.pt names it)."""
import argparse
import os
import shutil
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    job = os.path.dirname(os.path.abspath(a.checkpoint))
    with open(os.path.join(job, "init", "init.pt")) as f:
        base = f.read()
    os.makedirs(a.out, exist_ok=True)
    for name in ("model.onnx", "tokens.txt"):
        shutil.copy(os.path.join(base, name), os.path.join(a.out, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
