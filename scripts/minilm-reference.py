#!/usr/bin/env python3
"""Writes tests/fixtures/minilm-reference.json: all-MiniLM-L6-v2's f32 vectors of
a few texts, computed by a NumPy forward pass of the model's own safetensors
weights and its own tokenizer.json (Hugging Face `tokenizers`), independently
of Strata's code. tests/embedder.rs checks the int8 ONNX runtime against them.

Usage (numpy and tokenizers from PyPI):
  python3 -m venv /tmp/ref && /tmp/ref/bin/pip install numpy tokenizers
  /tmp/ref/bin/python scripts/minilm-reference.py [MODEL_DIR] > tests/fixtures/minilm-reference.json
MODEL_DIR defaults to ~/.local/share/strata/models/all-MiniLM-L6-v2 (scripts/fetch-model.sh).

The model (sentence-transformers/all-MiniLM-L6-v2, Apache-2.0): BERT, 6 post-LN
layers, hidden 384, 12 heads, FFN 1536, exact erf GELU, LayerNorm eps 1e-12,
inputs truncated to 256 word pieces, mean pooling over the attention mask,
L2 normalisation (its modules.json and 1_Pooling/config.json).
"""
import json
import math
import os
import struct
import sys

import numpy as np
from tokenizers import Tokenizer

TEXTS = [
    "I adopted a grey cat named Miso.",
    "My new kitten sleeps on the keyboard.",
    "The quarterly tax filing deadline is in April, and the accountant needs every receipt from the renovation before then.",
    "다음 주에 부산에서 결혼식이 있어요 👰",
    "word " * 600,  # more than the 256 word pieces kept (and than the 2,048 graphemes Strata clips to)
]


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        dt = {"F32": np.float32, "I64": np.int64}[info["dtype"]]
        out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(info["shape"])
    return out


def layer_norm(x, w, b, eps=1e-12):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def embed(w, ids):
    x = w["embeddings.word_embeddings.weight"][ids].astype(np.float64)
    x = x + w["embeddings.position_embeddings.weight"][: len(ids)]
    x = x + w["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    heads, d = 12, 32
    for l in range(6):
        p = f"encoder.layer.{l}."
        lin = lambda t, n: t @ w[p + n + ".weight"].T.astype(np.float64) + w[p + n + ".bias"]
        q = lin(x, "attention.self.query").reshape(-1, heads, d).transpose(1, 0, 2)
        k = lin(x, "attention.self.key").reshape(-1, heads, d).transpose(1, 0, 2)
        v = lin(x, "attention.self.value").reshape(-1, heads, d).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        s = s / s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(-1, heads * d)
        x = layer_norm(x + lin(a, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
        h = gelu(lin(x, "intermediate.dense"))
        x = layer_norm(x + lin(h, "output.dense"), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    v = x.mean(0)
    return v / np.linalg.norm(v)


def main():
    home = os.path.expanduser("~/.local/share/strata/models/all-MiniLM-L6-v2")
    d = sys.argv[1] if len(sys.argv) > 1 else home
    w = load(os.path.join(d, "model.safetensors"))
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    tok.enable_truncation(256)
    tok.no_padding()
    cases = []
    for t in TEXTS:
        ids = tok.encode(t).ids
        cases.append({"text": t, "ids": len(ids), "embedding": [round(float(x), 7) for x in embed(w, ids)]})
    json.dump({"model": "all-MiniLM-L6-v2 (f32 safetensors)", "written_by": "scripts/minilm-reference.py", "cases": cases}, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
