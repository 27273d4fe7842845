#!/usr/bin/python3
"""The peer of `headcount bench train`: one training step (forward, backward, Adam) of PyTorch's
own torch.nn.Transformer at the same shapes (d=256, 6+6 layers, 8 heads, FFN 1024, vocabulary
8000, 64 x 32 target tokens), with the same pieces around it: one embedding table shared by
source, target and output, sinusoidal positions, label-smoothed cross-entropy, Adam. Prints one
JSON line. Uses Debian's python3-torch. With --bf16 the forward pass and the loss run under
torch.autocast("cpu", dtype=torch.bfloat16), as a PyTorch user trains in mixed precision on a CPU
with bf16 arithmetic (oneDNN's bf16 kernels).
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--d-model', type=int, default=256)
    p.add_argument('--layers', type=int, default=6)
    p.add_argument('--heads', type=int, default=8)
    p.add_argument('--ffn', type=int, default=1024)
    p.add_argument('--vocab', type=int, default=8000)
    p.add_argument('--sentences', type=int, default=64)
    p.add_argument('--length', type=int, default=32)
    p.add_argument('--steps', type=int, default=5)
    p.add_argument('--warmup', type=int, default=2)
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--bf16', action='store_true', help='bf16 autocast around forward + loss')
    p.add_argument('--device', default='cpu', help='cpu or cuda (autocast on that device)')
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    d = a.d_model
    model = torch.nn.Transformer(d_model=d, nhead=a.heads, num_encoder_layers=a.layers,
                                 num_decoder_layers=a.layers, dim_feedforward=a.ffn, dropout=0.1,
                                 batch_first=True)
    emb = torch.nn.Embedding(a.vocab, d, padding_idx=0)
    dev = torch.device(a.device)
    model.to(dev)
    emb.to(dev)
    params = list(model.parameters()) + list(emb.parameters())
    adam = torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    pos = torch.arange(a.length).unsqueeze(1) / torch.pow(10000.0, torch.arange(0, d, 2) / d)
    pe = torch.zeros(a.length, d)
    pe[:, 0::2] = torch.sin(pos)
    pe[:, 1::2] = torch.cos(pos)
    pe = pe.to(dev)
    src = torch.randint(4, a.vocab, (a.sentences, a.length), device=dev)
    tgt_in = torch.randint(4, a.vocab, (a.sentences, a.length), device=dev)
    tgt_out = torch.randint(4, a.vocab, (a.sentences, a.length), device=dev)
    mask = model.generate_square_subsequent_mask(a.length).to(dev)
    scale = math.sqrt(d)

    def step():
        adam.zero_grad()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.bf16):
            s = F.dropout(emb(src) * scale + pe, 0.1, True)
            t = F.dropout(emb(tgt_in) * scale + pe, 0.1, True)
            h = model(s, t, tgt_mask=mask)
            logits = F.linear(h, emb.weight)
            loss = F.cross_entropy(logits.view(-1, a.vocab).float(), tgt_out.view(-1),
                                   ignore_index=0, label_smoothing=0.1)
        loss.backward()
        adam.step()
        if dev.type == 'cuda':
            torch.cuda.synchronize()

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    median = times[len(times) // 2]
    tokens = a.sentences * a.length
    print(json.dumps({'impl': 'pytorch', 'precision': 'bf16' if a.bf16 else 'fp32',
                      'device': a.device,
                      'threads': a.threads, 'tokens_per_step': tokens,
                      'step_seconds_median': median, 'step_seconds_min': times[0],
                      'step_seconds_max': times[-1], 'target_tokens_per_s': tokens / median}))


if __name__ == '__main__':
    main()
