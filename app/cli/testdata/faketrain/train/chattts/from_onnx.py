"""Stand-in for train.chattts.from_onnx: --out/init.pt names the model it was given."""
import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "init.pt"), "w") as f:
        f.write(a.model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
