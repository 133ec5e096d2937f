#!/usr/bin/python3
"""Writes tests/fixtures/golden.json: tiny Transformers built from PyTorch's own modules
(nn.TransformerEncoderLayer / nn.TransformerDecoderLayer) with fixed random weights, the weights
renamed to nmt's parameter names, some inputs, and the logits PyTorch computes (in float64).
tests/test_golden.cpp loads the weights into nmt's C++ model and compares the logits.

usage: /usr/bin/python3 scripts/make_golden.py [--out tests/fixtures/golden.json]
Needs Debian's python3-torch (the same 1.13 build as libtorch-dev).
"""
import argparse, json, math, os

import torch
import torch.nn as nn

PAD, BOS, EOS = 0, 2, 3

CASES = [
    dict(name="post_sinusoidal_tied_all", d_model=8, heads=2, encoder_layers=2, decoder_layers=2,
         d_ff=16, norm="post", positional="sinusoidal", tie_embeddings="all", src_vocab=13,
         tgt_vocab=13, max_positions=16),
    dict(name="pre_learned_untied", d_model=12, heads=3, encoder_layers=1, decoder_layers=2,
         d_ff=20, norm="pre", positional="learned", tie_embeddings="none", src_vocab=11,
         tgt_vocab=9, max_positions=16),
    dict(name="post_learned_tied_decoder", d_model=8, heads=4, encoder_layers=1,
         decoder_layers=1, d_ff=8, norm="post", positional="learned", tie_embeddings="decoder",
         src_vocab=10, tgt_vocab=12, max_positions=16),
]


def sinusoids(positions, d):
    pe = torch.zeros(positions, d, dtype=torch.float64)
    pos = torch.arange(positions, dtype=torch.float64).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


def build(c, gen):
    d, pre = c["d_model"], c["norm"] == "pre"
    enc = nn.ModuleList(nn.TransformerEncoderLayer(d, c["heads"], c["d_ff"], dropout=0.0,
                                                   batch_first=True, norm_first=pre)
                        for _ in range(c["encoder_layers"]))
    dec = nn.ModuleList(nn.TransformerDecoderLayer(d, c["heads"], c["d_ff"], dropout=0.0,
                                                   batch_first=True, norm_first=pre)
                        for _ in range(c["decoder_layers"]))
    m = nn.Module()
    m.enc, m.dec = enc, dec
    m.src_embed = nn.Parameter(torch.empty(c["src_vocab"], d))
    m.tgt_embed = m.src_embed if c["tie_embeddings"] == "all" else nn.Parameter(torch.empty(c["tgt_vocab"], d))
    m.out_proj = nn.Parameter(torch.empty(c["tgt_vocab"], d)) if c["tie_embeddings"] == "none" else None
    if c["positional"] == "learned":
        m.src_pos = nn.Parameter(torch.empty(c["max_positions"], d))
        m.tgt_pos = nn.Parameter(torch.empty(c["max_positions"], d))
    if pre:
        m.enc_norm, m.dec_norm = nn.LayerNorm(d), nn.LayerNorm(d)
    m.double()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.rand(p.shape, generator=gen, dtype=torch.float64) - 0.5)
    return m


def forward(m, c, src, tgt_in):
    d = c["d_model"]
    def embed(tokens, table, pos_table):
        T = tokens.size(1)
        pos = pos_table[:T] if pos_table is not None else sinusoids(c["max_positions"], d)[:T]
        return table[tokens] * math.sqrt(d) + pos
    learned = c["positional"] == "learned"
    x = embed(src, m.src_embed, m.src_pos if learned else None)
    src_pad = src.eq(PAD)
    for layer in m.enc:
        x = layer(x, src_key_padding_mask=src_pad)
    if c["norm"] == "pre":
        x = m.enc_norm(x)
    T = tgt_in.size(1)
    causal = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    y = embed(tgt_in, m.tgt_embed, m.tgt_pos if learned else None)
    for layer in m.dec:
        y = layer(y, x, tgt_mask=causal, memory_key_padding_mask=src_pad)
    if c["norm"] == "pre":
        y = m.dec_norm(y)
    out = m.out_proj if m.out_proj is not None else m.tgt_embed
    return y @ out.t()


def nmt_names(m, c):
    """nmt's parameter name -> tensor."""
    d = c["d_model"]
    p = {"src_embed.weight": m.src_embed}
    if c["tie_embeddings"] != "all":
        p["tgt_embed.weight"] = m.tgt_embed
    if c["tie_embeddings"] == "none":
        p["out_proj.weight"] = m.out_proj
    if c["positional"] == "learned":
        p["src_pos.weight"], p["tgt_pos.weight"] = m.src_pos, m.tgt_pos
    def lin(prefix, w, b):
        p[prefix + ".weight"], p[prefix + ".bias"] = w, b
    for i, l in enumerate(m.enc):
        e = f"encoder.{i}."
        lin(e + "self_attn.qkv", l.self_attn.in_proj_weight, l.self_attn.in_proj_bias)
        lin(e + "self_attn.out", l.self_attn.out_proj.weight, l.self_attn.out_proj.bias)
        lin(e + "self_attn_norm", l.norm1.weight, l.norm1.bias)
        lin(e + "ffn.fc1", l.linear1.weight, l.linear1.bias)
        lin(e + "ffn.fc2", l.linear2.weight, l.linear2.bias)
        lin(e + "ffn_norm", l.norm2.weight, l.norm2.bias)
    for i, l in enumerate(m.dec):
        e = f"decoder.{i}."
        lin(e + "self_attn.qkv", l.self_attn.in_proj_weight, l.self_attn.in_proj_bias)
        lin(e + "self_attn.out", l.self_attn.out_proj.weight, l.self_attn.out_proj.bias)
        lin(e + "self_attn_norm", l.norm1.weight, l.norm1.bias)
        ca = l.multihead_attn
        lin(e + "cross_attn.q", ca.in_proj_weight[:d], ca.in_proj_bias[:d])
        lin(e + "cross_attn.kv", ca.in_proj_weight[d:], ca.in_proj_bias[d:])
        lin(e + "cross_attn.out", ca.out_proj.weight, ca.out_proj.bias)
        lin(e + "cross_attn_norm", l.norm2.weight, l.norm2.bias)
        lin(e + "ffn.fc1", l.linear1.weight, l.linear1.bias)
        lin(e + "ffn.fc2", l.linear2.weight, l.linear2.bias)
        lin(e + "ffn_norm", l.norm3.weight, l.norm3.bias)
    if c["norm"] == "pre":
        lin("encoder_norm", m.enc_norm.weight, m.enc_norm.bias)
        lin("decoder_norm", m.dec_norm.weight, m.dec_norm.bias)
    return p


def tensor_json(t):
    t = t.detach().to(torch.float64)
    return {"shape": list(t.shape), "data": [round(float(v), 12) for v in t.reshape(-1)]}


def case_json(c, model_cfg, params, src, tgt_in, logits):
    """One fixture case: the config, nmt-named weights, the inputs and PyTorch's logits."""
    return {
        "name": c["name"], "model": model_cfg, "src_vocab": c["src_vocab"],
        "tgt_vocab": c["tgt_vocab"], "params": {k: tensor_json(v) for k, v in params.items()},
        "src": src.tolist(), "tgt_in": tgt_in.tolist(), "logits": tensor_json(logits),
    }


def write_fixture(path, cases):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"torch_version": torch.__version__, "cases": cases}, f)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "golden.json"))
    a = ap.parse_args()
    gen = torch.Generator().manual_seed(20261122)
    cases = []
    for c in CASES:
        m = build(c, gen)
        m.eval()
        # Row 1 is padded on both sides; every row ends in EOS, every target starts with BOS.
        src = torch.tensor([[5, 7, 4, 6, EOS], [8, 4, EOS, PAD, PAD]])
        tgt_in = torch.tensor([[BOS, 4, 5, 6], [BOS, 7, PAD, PAD]])
        src = src.clamp(max=c["src_vocab"] - 1)
        tgt_in = tgt_in.clamp(max=c["tgt_vocab"] - 1)
        logits = forward(m, c, src, tgt_in)
        model_cfg = {k: c[k] for k in ("d_model", "heads", "encoder_layers", "decoder_layers",
                                       "d_ff", "norm", "positional", "tie_embeddings", "max_positions")}
        cases.append(case_json(c, model_cfg, nmt_names(m, c), src, tgt_in, logits))
    write_fixture(a.out, cases)


if __name__ == "__main__":
    main()
