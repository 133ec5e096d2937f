#!/usr/bin/python3
"""Writes tests/fixtures/golden_rnn.json: tiny RNN encoder-decoders built from PyTorch's own
torch.nn.GRU / LSTM (a packed bidirectional encoder, a unidirectional decoder stepped with input
feeding) and the attention of model.rnn.attention written out below, with fixed random weights
named as nmt names them, some inputs, and the logits PyTorch computes (in float64).
tests/test_rnn.cpp loads the weights into nmt's C++ model and compares the logits.

usage: /usr/bin/python3 scripts/make_golden_rnn.py [--out tests/fixtures/golden_rnn.json]
Needs Debian's python3-torch (the same 1.13 build as libtorch-dev).
"""
import argparse, os

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from make_golden import case_json, write_fixture  # the Transformer's fixture format

PAD, BOS, EOS = 0, 2, 3

CASES = [
    dict(name="gru_bahdanau_tied_all", cell="gru", attention="bahdanau", d_model=6, hidden=8,
         layers=1, tie_embeddings="all", src_vocab=13, tgt_vocab=13),
    dict(name="lstm_luong_dot_untied_2_layers", cell="lstm", attention="luong_dot", d_model=6,
         hidden=10, layers=2, tie_embeddings="none", src_vocab=11, tgt_vocab=9),
    dict(name="gru_luong_general_tied_decoder_2_layers", cell="gru", attention="luong_general",
         d_model=8, hidden=6, layers=2, tie_embeddings="decoder", src_vocab=10, tgt_vocab=12),
    dict(name="lstm_bahdanau_tied_all", cell="lstm", attention="bahdanau", d_model=4, hidden=8,
         layers=1, tie_embeddings="all", src_vocab=12, tgt_vocab=12),
]


def build(c, gen):
    E, H, L = c["d_model"], c["hidden"], c["layers"]
    rnn = nn.LSTM if c["cell"] == "lstm" else nn.GRU
    m = nn.Module()
    m.src_embed = nn.Parameter(torch.empty(c["src_vocab"], E))
    m.tgt_embed = m.src_embed if c["tie_embeddings"] == "all" else nn.Parameter(torch.empty(c["tgt_vocab"], E))
    m.out_proj = nn.Parameter(torch.empty(c["tgt_vocab"], E)) if c["tie_embeddings"] == "none" else None
    m.enc = rnn(E, H // 2, num_layers=L, bidirectional=True, batch_first=True)
    m.bridge = nn.Linear(H, H)
    m.bridge_cell = nn.Linear(H, H) if c["cell"] == "lstm" else None
    m.dec = rnn(2 * E, H, num_layers=L)
    if c["attention"] == "bahdanau":
        m.query, m.key, m.v = nn.Linear(H, H), nn.Linear(H, H, bias=False), nn.Linear(H, 1, bias=False)
    elif c["attention"] == "luong_general":
        m.key = nn.Linear(H, H, bias=False)
    m.combine = nn.Linear(2 * H, E, bias=False)
    m.double()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.rand(p.shape, generator=gen, dtype=torch.float64) - 0.5)
    return m


def forward(m, c, src, tgt_in):
    H, L, lstm = c["hidden"], c["layers"], c["cell"] == "lstm"
    B, S = src.shape
    pad = src.eq(PAD)
    packed = pack_padded_sequence(m.src_embed[src], (~pad).sum(1), batch_first=True,
                                  enforce_sorted=False)
    out, last = m.enc(packed)
    memory, _ = pad_packed_sequence(out, batch_first=True, total_length=S)
    # [layers * 2, B, H / 2] -> [layers, B, H]: each layer's [forward; backward] final states.
    join = lambda t: t.view(L, 2, B, H // 2).permute(0, 2, 1, 3).reshape(L, B, H)
    if lstm:
        state = (torch.tanh(m.bridge(join(last[0]))), torch.tanh(m.bridge_cell(join(last[1]))))
    else:
        state = torch.tanh(m.bridge(join(last)))
    if c["attention"] == "luong_dot":
        keys = memory
    else:
        keys = m.key(memory)
    feed = torch.zeros(B, c["d_model"], dtype=torch.float64)
    outputs = []
    for t in range(tgt_in.size(1)):
        x = torch.cat([m.tgt_embed[tgt_in[:, t]], feed], 1).unsqueeze(0)
        y, state = m.dec(x, state)
        s = y[0]  # [B, H], the top layer
        if c["attention"] == "bahdanau":
            scores = m.v(torch.tanh(m.query(s).unsqueeze(1) + keys)).squeeze(-1)
        else:
            scores = torch.bmm(keys, s.unsqueeze(-1)).squeeze(-1)
        weights = torch.softmax(scores.masked_fill(pad, float("-inf")), -1)
        context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)
        feed = torch.tanh(m.combine(torch.cat([context, s], 1)))
        outputs.append(feed)
    out = m.out_proj if m.out_proj is not None else m.tgt_embed
    return torch.stack(outputs, 1) @ out.t()


def nmt_names(m, c):
    """nmt's parameter name -> tensor."""
    p = {"src_embed.weight": m.src_embed}
    if c["tie_embeddings"] != "all":
        p["tgt_embed.weight"] = m.tgt_embed
    if c["tie_embeddings"] == "none":
        p["out_proj.weight"] = m.out_proj
    for prefix, module in [("encoder", m.enc), ("bridge", m.bridge), ("bridge_cell", m.bridge_cell),
                           ("decoder", m.dec), ("combine", m.combine)]:
        if module is not None:
            for name, t in module.named_parameters():
                p[f"{prefix}.{name}"] = t
    for name in ("query", "key", "v"):
        if hasattr(m, name):
            for pname, t in getattr(m, name).named_parameters():
                p[f"attention.{name}.{pname}"] = t
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "golden_rnn.json"))
    a = ap.parse_args()
    gen = torch.Generator().manual_seed(20261123)
    cases = []
    for c in CASES:
        m = build(c, gen)
        m.eval()
        # Rows 1 and 2 are padded on both sides; every source ends in EOS, every target starts
        # with BOS.
        src = torch.tensor([[5, 7, 4, 6, EOS], [8, 4, EOS, PAD, PAD], [9, EOS, PAD, PAD, PAD]])
        tgt_in = torch.tensor([[BOS, 4, 5, 6], [BOS, 7, PAD, PAD], [BOS, 8, 9, PAD]])
        src = src.clamp(max=c["src_vocab"] - 1)
        tgt_in = tgt_in.clamp(max=c["tgt_vocab"] - 1)
        with torch.no_grad():
            logits = forward(m, c, src, tgt_in)
        model_cfg = {"arch": "rnn", "d_model": c["d_model"], "tie_embeddings": c["tie_embeddings"],
                     "max_positions": 16,
                     "rnn": {k: c[k] for k in ("cell", "hidden", "layers", "attention")}}
        cases.append(case_json(c, model_cfg, nmt_names(m, c), src, tgt_in, logits))
    write_fixture(a.out, cases)


if __name__ == "__main__":
    main()
