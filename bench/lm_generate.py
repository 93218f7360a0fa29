"""Generation throughput, Proxima against ``transformers``' ``generate``, on the same model: a SmolLM2-135M-shaped
Llama (30 layers, width 576, 9 heads over 3 key/value heads, MLP 1536, vocabulary 49,152, tied embeddings; random
weights, made here, nothing downloaded), float32, one thread each, one after the other. Greedy decoding of a batch of
prompts (random token ids, no end-of-sequence token, so every row runs to ``max_new_tokens``) twice — the first
call and a warm one — then sampling at temperature 1 with top-p 0.95. Each side first generates two tokens untimed (the weights paged in, lazy set-up done).

    python bench/lm_generate.py OUT_DIR [--batch 8] [--prompt 32] [--new 64]

Prints one JSON line per side and mode: wall time of the ``generate`` call, new tokens per second, and (greedy) how
many rows' tokens equal the other side's."""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--new", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(1)
    path = os.path.join(a.out, "smollm2-135m-shaped")
    if not os.path.exists(os.path.join(path, "config.json")):
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                          num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
                          rope_theta=100000.0, tie_word_embeddings=True, bos_token_id=None, eos_token_id=None,
                          pad_token_id=0)
        LlamaForCausalLM(cfg).save_pretrained(path)
    g = torch.Generator().manual_seed(1)
    prompts = torch.randint(1, 49152, (a.batch, a.prompt), generator=g)
    rows = prompts.tolist()
    n = a.batch * a.new

    from proxima.lm import CausalLM

    ours = CausalLM(path)
    theirs = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    # One short call each first: weights paged in, lazy initialisation done (not counted).
    ours.generate(rows, max_new_tokens=2, eos_token_id=[])
    with torch.no_grad():
        theirs.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=2, pad_token_id=0)
    results = {}
    modes = (("greedy, first call", dict(do_sample=False)), ("greedy", dict(do_sample=False)),
             ("sampled", dict(do_sample=True, temperature=1.0, top_p=0.95)))
    for mode, kw in modes:
        t = time.perf_counter()
        tokens = ours.generate(rows, max_new_tokens=a.new, eos_token_id=[], **kw)
        results[("proxima", mode)] = (time.perf_counter() - t, tokens)
        t = time.perf_counter()
        with torch.no_grad():
            out = theirs.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=a.new,
                                  min_new_tokens=a.new, pad_token_id=0, **kw)
        results[("transformers", mode)] = (time.perf_counter() - t, out[:, a.prompt:].tolist())
    for (side, mode), (secs, tokens) in results.items():
        line = {"side": side, "mode": mode, "batch": a.batch, "prompt": a.prompt, "new_tokens": a.new,
                "seconds": round(secs, 2), "tokens_per_s": round(n / secs, 1)}
        if mode == "greedy":
            other = results[("transformers" if side == "proxima" else "proxima", mode)][1]
            line["rows_equal_to_other_side"] = sum(x == y for x, y in zip(tokens, other))
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
