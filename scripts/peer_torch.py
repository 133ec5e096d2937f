#!/usr/bin/python3
"""The PyTorch peer: the trainer and translator a PyTorch user would write instead of nmt.

The speed benchmarks (scripts/bench_train.sh, bench_translate.sh, bench_gpu.sh) run it beside nmt
in the same run, on the same data, SentencePiece model, steps and threads, and report nmt's speed
as a ratio to it. It builds the model of configs/multi30k_en_de_base.json from PyTorch's own
modules: a post-norm nn.Transformer (d_model 256, 4 heads, 3+3 layers, feed-forward 1024,
dropout 0.1) with one embedding shared by source, target and output projection, sinusoidal
positions; it trains with token-based batches (sentences sorted by length), Adam with the Noam
schedule, label smoothing 0.1 and gradient clipping at 1, and translates greedily, running the
decoder over the whole prefix at every step (no cache), as nn.Transformer invites.

    peer_torch.py train --spm M --src F --tgt F [--steps N] [--max-tokens T] [--warmup W]
                        [--threads T] [--save CKPT] [--device D] [--bf16] [--tf32]
    peer_torch.py translate --ckpt CKPT --spm M --src F --out F [--batch B] [--threads T]
                            [--device D] [--bf16] [--tf32]

Each subcommand prints one JSON line on stdout when it ends: train {"phase", "device", "bf16",
"tf32", "steps", "tgt_tokens", "seconds", "tgt_tok_per_s"}, translate {"phase", "sentences",
"seconds", "sent_per_s", "tok_per_s"}; train also writes {"step", "loss", "tgt_tok_per_s"} to
stderr every 50 steps. Target tokens count each target's pieces and its end-of-sentence mark.

--device cuda runs on a GPU. --bf16 runs the model's forward pass under
torch.autocast(bfloat16) on the device it runs on (the loss stays float32); --tf32 allows TF32
products on CUDA. On CUDA cuDNN's fused attention is switched off: with bf16 it made this model
6-7x slower (torch 2.11, H100). The seeds are fixed (torch 1, batching 1), so two runs on one
machine train the same steps. Needs torch and sentencepiece (Debian: python3-torch and
python3-sentencepiece, hence /usr/bin/python3).
"""
import argparse, contextlib, json, math, random, sys, time

import sentencepiece as spm
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, UNK, BOS, EOS = 0, 1, 2, 3  # nmt's SentencePiece ids
MAX_LEN = 128  # pieces per sentence, end mark not counted
PROGRESS_EVERY = 50


class Transformer(nn.Module):
    """nn.Transformer with a shared embedding, sinusoidal positions and a tied output layer."""

    def __init__(self, vocab, d=256, heads=4, layers=3, ffn=1024, dropout=0.1, positions=1024):
        super().__init__()
        self.d = d
        self.emb = nn.Embedding(vocab, d, padding_idx=PAD)
        nn.init.normal_(self.emb.weight, 0, d ** -0.5)
        pos = torch.arange(positions, dtype=torch.float).unsqueeze(1)
        freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float) * (-math.log(10000.0) / d))
        pe = torch.zeros(positions, d)
        pe[:, 0::2] = torch.sin(pos * freq)
        pe[:, 1::2] = torch.cos(pos * freq)
        self.register_buffer("pe", pe)
        self.drop = nn.Dropout(dropout)
        self.tf = nn.Transformer(d, heads, layers, layers, ffn, dropout, batch_first=True)

    def embed(self, ids):
        return self.drop(self.emb(ids) * math.sqrt(self.d) + self.pe[:ids.size(1)])

    def encode(self, src):
        return self.tf.encoder(self.embed(src), src_key_padding_mask=src.eq(PAD))

    def decode(self, tgt, memory, src_pad):
        n = tgt.size(1)
        causal = torch.triu(torch.full((n, n), float("-inf"), device=tgt.device), 1)
        h = self.tf.decoder(self.embed(tgt), memory, tgt_mask=causal,
                            tgt_key_padding_mask=tgt.eq(PAD), memory_key_padding_mask=src_pad)
        return F.linear(h, self.emb.weight)

    def forward(self, src, tgt_in):
        return self.decode(tgt_in, self.encode(src), src.eq(PAD))


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def load_pairs(sp, src_path, tgt_path):
    """(source + EOS, BOS + target + EOS) for each pair whose sides have 1..MAX_LEN pieces."""
    pairs = []
    for s, t in zip(sp.encode(read_lines(src_path)), sp.encode(read_lines(tgt_path))):
        if 0 < len(s) <= MAX_LEN and 0 < len(t) <= MAX_LEN:
            pairs.append((s + [EOS], [BOS] + t + [EOS]))
    return pairs


def make_batches(pairs, max_tokens, rng):
    """One epoch of batches (lists of pair indices), in random order. Pairs are sorted by source
    length (ties at random) and cut so that a batch padded to its longest side, source or target,
    holds at most max_tokens positions (a longer pair gets a batch of its own)."""
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]), rng.random()))
    batches, batch, width = [], [], 0
    for i in order:
        need = max(len(pairs[i][0]), len(pairs[i][1]))
        if batch and max(width, need) * (len(batch) + 1) > max_tokens:
            batches.append(batch)
            batch, width = [], 0
        batch.append(i)
        width = max(width, need)
    if batch:
        batches.append(batch)
    rng.shuffle(batches)
    return batches


def pad(seqs, device):
    n = max(len(s) for s in seqs)
    return torch.tensor([s + [PAD] * (n - len(s)) for s in seqs], device=device)


def on_cuda(args):
    return args.device.startswith("cuda")


def setup(args):
    torch.set_num_threads(args.threads)
    if on_cuda(args):
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
        if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
            torch.backends.cuda.enable_cudnn_sdp(False)


def autocast(args):
    # No autocast object at all without --bf16: torch 1.13 CPU builds fail on a CUDA one, even
    # a disabled one.
    if not args.bf16:
        return contextlib.nullcontext()
    return torch.autocast("cuda" if on_cuda(args) else "cpu", dtype=torch.bfloat16)


def sync(args):
    if on_cuda(args):
        torch.cuda.synchronize()


def train(args):
    setup(args)
    torch.manual_seed(1)
    rng = random.Random(1)
    sp = spm.SentencePieceProcessor(model_file=args.spm)
    pairs = load_pairs(sp, args.src, args.tgt)
    model = Transformer(sp.get_piece_size()).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    noam = lambda s: model.d ** -0.5 * min((s + 1) ** -0.5, (s + 1) * args.warmup ** -1.5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, noam)
    model.train()
    sync(args)
    step, tokens, t0 = 0, 0, time.time()
    while step < args.steps:
        for batch in make_batches(pairs, args.max_tokens, rng):
            src = pad([pairs[i][0] for i in batch], args.device)
            tgt = pad([pairs[i][1] for i in batch], args.device)
            with autocast(args):
                logits = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                   tgt[:, 1:].reshape(-1), ignore_index=PAD,
                                   label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            tokens += sum(len(pairs[i][1]) - 1 for i in batch)
            if step % PROGRESS_EVERY == 0:
                print(json.dumps({"step": step, "loss": round(loss.item(), 3),
                                  "tgt_tok_per_s": round(tokens / (time.time() - t0))}),
                      file=sys.stderr, flush=True)
            if step >= args.steps:
                break
    sync(args)
    seconds = time.time() - t0
    if args.save:
        torch.save(model.state_dict(), args.save)
    print(json.dumps({"phase": "train", "device": args.device, "bf16": args.bf16,
                      "tf32": args.tf32, "steps": step, "tgt_tokens": tokens,
                      "seconds": round(seconds, 2), "tgt_tok_per_s": round(tokens / seconds, 1)}))


def greedy(model, src, args):
    """Greedy decoding of one padded batch, re-running the decoder over the whole prefix at every
    step, for up to the source width + 50 steps. Returns each sentence's pieces, without EOS."""
    with autocast(args):
        memory = model.encode(src)
    src_pad = src.eq(PAD)
    ys = torch.full((src.size(0), 1), BOS, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(src.size(1) + 50):
        with autocast(args):
            nxt = model.decode(ys, memory, src_pad)[:, -1].argmax(-1)
        nxt = nxt.masked_fill(done, PAD)
        ys = torch.cat([ys, nxt[:, None]], 1)
        done |= nxt.eq(EOS)
        if done.all():
            break
    out = []
    for row in ys[:, 1:].tolist():
        seq = [t for t in row if t != PAD]
        out.append(seq[:seq.index(EOS)] if EOS in seq else seq)
    return out


@torch.no_grad()
def translate(args):
    setup(args)
    sp = spm.SentencePieceProcessor(model_file=args.spm)
    model = Transformer(sp.get_piece_size())
    model.load_state_dict(torch.load(args.ckpt, map_location="cpu"))
    model.to(args.device).eval()
    ids = [s[:MAX_LEN - 1] + [EOS] for s in sp.encode(read_lines(args.src))]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    hyps = [None] * len(ids)
    sync(args)
    t0, out_tokens = time.time(), 0
    for k in range(0, len(order), args.batch):
        batch = order[k:k + args.batch]
        for i, seq in zip(batch, greedy(model, pad([ids[i] for i in batch], args.device), args)):
            out_tokens += len(seq) + 1
            hyps[i] = sp.decode(seq)
    sync(args)
    seconds = time.time() - t0
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(hyps) + "\n")
    print(json.dumps({"phase": "translate", "sentences": len(ids), "seconds": round(seconds, 2),
                      "sent_per_s": round(len(ids) / seconds, 1),
                      "tok_per_s": round(out_tokens / seconds, 1)}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train for --steps steps; optionally save the weights")
    t.add_argument("--spm", required=True, help="SentencePiece model (nmt's spm.model)")
    t.add_argument("--src", required=True)
    t.add_argument("--tgt", required=True)
    t.add_argument("--steps", type=int, default=100)
    t.add_argument("--max-tokens", type=int, default=4096, help="padded positions per batch")
    t.add_argument("--warmup", type=int, default=4000, help="Noam warm-up steps")
    t.add_argument("--save", help="write the state dict here")
    r = sub.add_parser("translate", help="greedy translation of --src into --out")
    r.add_argument("--ckpt", required=True, help="a state dict saved by train --save")
    r.add_argument("--spm", required=True)
    r.add_argument("--src", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--batch", type=int, default=64, help="sentences per batch")
    for q in (t, r):
        q.add_argument("--threads", type=int, default=2)
        q.add_argument("--device", default="cpu")
        q.add_argument("--bf16", action="store_true", help="forward pass under bf16 autocast")
        q.add_argument("--tf32", action="store_true", help="allow TF32 products (CUDA)")
    args = p.parse_args()
    train(args) if args.cmd == "train" else translate(args)


if __name__ == "__main__":
    main()
