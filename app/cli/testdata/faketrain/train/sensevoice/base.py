"""Stand-in for train.sensevoice.base: --out/init.pt names the starting point it was given."""
import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--onnx", default="")
    ap.add_argument("--official", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "init.pt"), "w") as f:
        f.write(a.onnx or a.official)
    return 0


if __name__ == "__main__":
    sys.exit(main())
