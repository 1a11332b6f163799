"""Exports the Qwen3-shaped decoder (train/llm/model.py) as an onnx-community model directory:

    config.json  generation_config.json  tokenizer.json  tokenizer_config.json
    onnx/model.onnx (+ model.onnx_data with --external)   onnx/model_fp16.onnx
    onnx/model_int8.onnx   onnx/model_q4.onnx   onnx/model_q4f16.onnx

Variants are rewritten on the ONNX graph (Python has no onnxruntime here): fp16 keeps fp32
arithmetic inside but stores weights and takes/returns KV and logits in float16, as the
published model_fp16.onnx does at its interface; int8 is dynamic MatMulInteger quantisation;
q4 is com.microsoft MatMulNBits (4-bit, block 32, symmetric) with float32 interface.

    /usr/bin/python3 -m train.llm.export --size tiny --seed 20 --out testdata/llm/qwen3-tiny
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import tempfile

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from train.llm.model import SIZES, Config, Decoder, init_random
from train.onnxquant import quantize_matmuls

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>",
            "</tool_response>", "<think>", "</think>"]
SPECIAL_FLAG = {"<|endoftext|>": True, "<|im_start|>": True, "<|im_end|>": True}

# Qwen3's chat template (Apache-2.0, from the Qwen3 tokenizer_config.json), so the tiny model
# renders prompts exactly as the real one does.
QWEN3_TEMPLATE_FILE = os.path.join(os.path.dirname(__file__), "qwen3_chat_template.jinja")

TRAIN_TEXT = """You are Parley, a friendly private voice assistant running on the user's own computer.
What time is it? It is half past ten in the morning. Set a timer for five minutes.
The weather today is sunny with a light breeze. Tell me a joke about computers.
Hello! How can I help you today? I would like to hear some music, please.
The quick brown fox jumps over the lazy dog. Thinking about the answer before speaking.
{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}} function call tool result
"""


def byte_runes():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def train_bpe(text: str, n_merges: int):
    """A few byte-level BPE merges learned from TRAIN_TEXT (deterministic)."""
    br = byte_runes()
    words = collections.Counter()
    for w in text.replace("\n", " ").split(" "):
        if w:
            words[tuple(br[b] for b in (" " + w).encode())] += 1
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = max(sorted(pairs), key=lambda p: pairs[p])
        merges.append(best)
        nw = collections.Counter()
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            nw[tuple(out)] += n
        words = nw
    return merges


def write_tokenizer(out: str, c: Config):
    br = byte_runes()
    vocab = {br[b]: b for b in range(256)}
    n_special = len(SPECIALS)
    merges = train_bpe(TRAIN_TEXT, c.vocab_size - 256 - n_special - 8)
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    first_special = c.vocab_size - n_special
    assert len(vocab) <= first_special
    added = [{"id": first_special + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": SPECIAL_FLAG.get(s, False)} for i, s in enumerate(SPECIALS)]
    pattern = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}, bl]},
        "post_processor": bl, "decoder": bl,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [a + " " + b for a, b in merges]},
    }
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(QWEN3_TEMPLATE_FILE, encoding="utf-8") as f:
        template = f.read()
    cfg = {"add_bos_token": False, "add_prefix_space": False, "bos_token": None, "eos_token": "<|im_end|>",
           "pad_token": "<|endoftext|>", "unk_token": None, "errors": "replace", "model_max_length": c.max_position_embeddings,
           "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "clean_up_tokenization_spaces": False,
           "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added},
           "chat_template": template}
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
    return {s: first_special + i for i, s in enumerate(SPECIALS)}


def export_fp32(model: Decoder, path: str, external: bool):
    c = model.c
    b, s, past = 1, 3, 2
    ids = torch.randint(0, c.vocab_size, (b, s))
    mask = torch.ones(b, past + s, dtype=torch.int64)
    pos = torch.arange(past, past + s).unsqueeze(0)
    pkv = []
    in_names = ["input_ids", "attention_mask", "position_ids"]
    out_names = ["logits"]
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"},
            "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
            "position_ids": {0: "batch_size", 1: "sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"}}
    for i in range(c.num_hidden_layers):
        for kv in ("key", "value"):
            pkv.append(torch.randn(b, c.num_key_value_heads, past, c.head_dim))
            n, o = f"past_key_values.{i}.{kv}", f"present.{i}.{kv}"
            in_names.append(n)
            out_names.append(o)
            axes[n] = {0: "batch_size", 2: "past_sequence_length"}
            axes[o] = {0: "batch_size", 2: "total_sequence_length"}
    tmp = tempfile.mkdtemp()
    try:
        raw = os.path.join(tmp, "model.onnx")
        torch.onnx.export(model, (ids, mask, pos, *pkv), raw, input_names=in_names, output_names=out_names,
                          dynamic_axes=axes, opset_version=17, do_constant_folding=True)
        m = onnx.load(raw)
    finally:
        shutil.rmtree(tmp)
    save(m, path, external)
    return m


def save(m: onnx.ModelProto, path: str, external: bool):
    data = os.path.basename(path) + "_data"
    if os.path.exists(path + "_data"):
        os.remove(path + "_data")
    if external:
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                        size_threshold=1024)
    else:
        onnx.save_model(m, path)


def to_fp16(m: onnx.ModelProto) -> onnx.ModelProto:
    """float16 weights and interface (KV in, KV and logits out); fp32 arithmetic inside."""
    m = onnx.ModelProto.FromString(m.SerializeToString())
    g = m.graph
    front = []
    for t in list(g.initializer):
        if t.data_type != TensorProto.FLOAT:
            continue
        arr = numpy_helper.to_array(t).astype(np.float16)
        name = t.name
        t.CopyFrom(numpy_helper.from_array(arr, name + "_fp16"))
        front.append(helper.make_node("Cast", [name + "_fp16"], [name], to=TensorProto.FLOAT, name=name + "_cast"))
    for inp in g.input:
        if inp.name.startswith("past_key_values."):
            inp.type.tensor_type.elem_type = TensorProto.FLOAT16
            internal = inp.name + "_fp32"
            for n in g.node:
                for i, x in enumerate(n.input):
                    if x == inp.name:
                        n.input[i] = internal
            front.append(helper.make_node("Cast", [inp.name], [internal], to=TensorProto.FLOAT, name=internal + "_cast"))
    back = []
    for out in g.output:
        internal = out.name + "_fp32"
        for n in g.node:
            for i, x in enumerate(n.output):
                if x == out.name:
                    n.output[i] = internal
            for i, x in enumerate(n.input):
                if x == out.name:
                    n.input[i] = internal
        out.type.tensor_type.elem_type = TensorProto.FLOAT16
        back.append(helper.make_node("Cast", [internal], [out.name], to=TensorProto.FLOAT16, name=out.name + "_cast"))
    nodes = front + list(g.node) + back
    del g.node[:]
    g.node.extend(nodes)
    return m


def to_q4(m: onnx.ModelProto, block: int = 32) -> onnx.ModelProto:
    """MatMul with a constant [K, N] weight -> com.microsoft MatMulNBits (4-bit, symmetric)."""
    m = onnx.ModelProto.FromString(m.SerializeToString())
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    nodes = []
    done = {}
    for n in g.node:
        if n.op_type != "MatMul" or n.input[1] not in inits or len(inits[n.input[1]].dims) != 2:
            nodes.append(n)
            continue
        wname = n.input[1]
        w = numpy_helper.to_array(inits[wname]).astype(np.float32)  # [K, N]
        K, N = w.shape
        if wname not in done:
            nb = (K + block - 1) // block
            wt = np.zeros((N, nb * block), np.float32)
            wt[:, :K] = w.T
            wt = wt.reshape(N, nb, block)
            scale = np.abs(wt).max(axis=2) / 7.0
            scale[scale == 0] = 1.0
            q = np.clip(np.round(wt / scale[:, :, None]) + 8, 0, 15).astype(np.uint8)
            packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)  # [N, nb, block/2]
            g.initializer.extend([numpy_helper.from_array(packed, wname + "_q4"),
                                  numpy_helper.from_array(scale.reshape(-1).astype(np.float32), wname + "_q4_scales")])
            done[wname] = (K, N)
        nodes.append(helper.make_node("MatMulNBits", [n.input[0], wname + "_q4", wname + "_q4_scales"], list(n.output),
                                      domain="com.microsoft", K=K, N=N, bits=4, block_size=block,
                                      name=(n.name or n.output[0]) + "_q4"))
    del g.node[:]
    g.node.extend(nodes)
    used = {i for x in g.node for i in x.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    if not any(o.domain == "com.microsoft" for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--type", choices=["qwen3", "qwen2", "llama"], default="qwen3")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", default="fp32,fp16,int8,q4,q4f16")
    ap.add_argument("--external", action="store_true", help="fp32 weights in onnx/model.onnx_data")
    ap.add_argument("--tokenizer-from", help="copy tokenizer.json/tokenizer_config.json from this directory "
                    "(the real Qwen3 one for 0.6b) instead of writing the tiny one")
    a = ap.parse_args()
    base = SIZES[a.size]
    c = Config(**{**base.__dict__, "model_type": a.type})
    if a.type != "qwen3":
        # Qwen2 and Llama derive the head size from the hidden size (Qwen3 sets it apart).
        c.head_dim = c.hidden_size // c.num_attention_heads
    torch.manual_seed(a.seed)
    model = Decoder(c).eval()
    init_random(model, a.seed)
    os.makedirs(os.path.join(a.out, "onnx"), exist_ok=True)
    if a.tokenizer_from:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(a.tokenizer_from, f), os.path.join(a.out, f))
        eos = [c.eos_token_id, c.bos_token_id]
    else:
        sp = write_tokenizer(a.out, c)
        c.eos_token_id, c.bos_token_id = sp["<|im_end|>"], sp["<|endoftext|>"]
        eos = [sp["<|im_end|>"], sp["<|endoftext|>"]]
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c.hf(eos_token_id=c.eos_token_id, bos_token_id=c.bos_token_id,
                       **{"transformers.js_config": {"kv_cache_dtype": {"q4f16": "float16", "fp16": "float16"}}}), f, indent=2)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": c.bos_token_id, "eos_token_id": eos, "do_sample": True, "temperature": 0.6,
                   "top_k": 20, "top_p": 0.95}, f, indent=2)
    variants = a.variants.split(",")
    onnx_dir = os.path.join(a.out, "onnx")
    with torch.no_grad():
        m = export_fp32(model, os.path.join(onnx_dir, "model.onnx"), a.external)
    m = onnx.load(os.path.join(onnx_dir, "model.onnx"))  # with external data resolved
    if "fp16" in variants:
        save(to_fp16(m), os.path.join(onnx_dir, "model_fp16.onnx"), a.external)
    if "int8" in variants:
        q = onnx.ModelProto.FromString(m.SerializeToString())
        quantize_matmuls(q)
        save(q, os.path.join(onnx_dir, "model_int8.onnx"), False)
    if "q4" in variants or "q4f16" in variants:
        q4 = to_q4(m)
        if "q4" in variants:
            save(q4, os.path.join(onnx_dir, "model_q4.onnx"), False)
        if "q4f16" in variants:
            save(to_fp16(q4), os.path.join(onnx_dir, "model_q4f16.onnx"), False)
    print(f"wrote {a.out}: {c.model_type} {a.size}, variants {variants}")


if __name__ == "__main__":
    main()
