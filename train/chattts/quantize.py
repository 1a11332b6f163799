"""Add the int8 GPT to an existing ChatTTS export, in place.

    /usr/bin/python3 -m train.chattts.quantize DIR [--bits 7|8]

Writes DIR/gpt.int8.onnx from DIR/gpt.onnx (export.write_int8_gpt: every weight MatMul
dynamically quantized, per output column, symmetric) and names it in config.json
(files.gpt_int8), as ``train.chattts.export --int8`` does. The other files, the model's
identity (model_id) and so every clone voice made with it stay as they were.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

from .export import INT8_BITS, write_int8_gpt


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.quantize", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="an export directory (config.json, gpt.onnx, …)")
    ap.add_argument("--bits", type=int, choices=[7, 8], default=INT8_BITS)
    ap.add_argument("--out", help="write the int8 GPT to this file instead, leaving DIR as it is")
    a = ap.parse_args(argv)
    cpath = os.path.join(a.dir, "config.json")
    try:
        with open(cpath, encoding="utf-8") as f:
            conf = json.load(f)
        gpt = conf["files"]["gpt"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"{cpath}: not a ChatTTS export's config ({e})", file=sys.stderr)
        return 2
    dst = a.out or os.path.join(a.dir, "gpt.int8.onnx")
    tmp = dst + ".tmp"
    n = write_int8_gpt(os.path.join(a.dir, gpt), tmp, a.bits)
    os.replace(tmp, dst)
    if a.out:
        print(json.dumps({"gpt_int8": dst, "matmuls": n, "bits": a.bits, "bytes": os.path.getsize(dst)}))
        return 0
    conf["files"]["gpt_int8"] = "gpt.int8.onnx"
    with open(cpath + ".tmp", "w", encoding="utf-8") as f:
        json.dump(conf, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(cpath + ".tmp", cpath)
    print(json.dumps({"gpt_int8": dst, "matmuls": n, "bits": a.bits, "bytes": os.path.getsize(dst)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
