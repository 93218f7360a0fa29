"""One GRPO step's wall time, Proxima against TRL's ``GRPOTrainer``, on the same model and batch: a
SmolLM2-135M-shaped Llama (30 layers, width 576, 9 heads over 3 key/value heads, MLP 1536, vocabulary 49,152, tied
embeddings; random weights and a word-level tokenizer over its vocabulary, made here, nothing downloaded), float32,
one thread each, one after the other. Each step samples ``--prompts`` prompts × ``--generations`` completions of
exactly ``--new`` tokens (the tokenizer has an EOS the random model practically never samples), scores them with the
same Python reward function, and takes one optimiser step over the generation batch (β 0, loss "dapo", Adam 1e-6).

    python bench/lm_grpo_step.py OUT_DIR [--prompts 4] [--generations 4] [--prompt-len 32] [--new 32] [--steps 3]

Prints one JSON line per side: each step's wall time (the first includes lazy set-up), and their median."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

VOCAB = 49152


def make_model(path: str) -> None:
    """The model directory: random SmolLM2-135M-shaped weights and a word-level tokenizer (``w0`` … ``w49151``,
    ``w0`` the EOS and padding)."""
    if os.path.exists(os.path.join(path, "config.json")):
        return
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(VOCAB)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins the words with spaces
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="w0", pad_token="w0").save_pretrained(path)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048, rope_theta=100000.0,
                      tie_word_embeddings=True, bos_token_id=None, eos_token_id=0, pad_token_id=0)
    LlamaForCausalLM(cfg).save_pretrained(path)


def reward_len(completions, **kwargs):
    """A cheap deterministic reward: the number of distinct words, mod 7."""
    return [float(len(set(c.split())) % 7) for c in completions]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--only", choices=["proxima", "trl"], default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    path = os.path.join(a.out, "smollm2-135m-shaped-tok")
    make_model(path)
    g = torch.Generator().manual_seed(1)
    rows = [{"prompt": " ".join(f"w{i}" for i in torch.randint(1, VOCAB, (a.prompt_len,), generator=g).tolist())}
            for _ in range(a.prompts * a.steps)]
    common = dict(max_steps=a.steps, per_device_train_batch_size=a.prompts * a.generations,
                  num_generations=a.generations, max_completion_length=a.new, learning_rate=1e-6, beta=0.0,
                  loss_type="dapo", temperature=1.0, seed=1)
    if a.only in (None, "proxima"):
        from proxima.lm import GRPOConfig, GRPOTrainer

        tr = GRPOTrainer(model=path, reward_funcs=reward_len, train_dataset=rows,
                         args=GRPOConfig(output_dir=os.path.join(a.out, "proxima"), shuffle_dataset=False,
                                         logging_steps=0, **common))
        times = []
        while not tr._engine.is_done():
            t = time.perf_counter()
            tr._engine.step()
            times.append(time.perf_counter() - t)
        report("proxima", times, a)
    if a.only in (None, "trl"):
        from transformers import TrainerCallback
        from trl import GRPOConfig, GRPOTrainer

        class Clock(TrainerCallback):
            def __init__(self):
                self.times, self.t = [], 0.0

            def on_step_begin(self, args, state, control, **kw):
                self.t = time.perf_counter()

            def on_step_end(self, args, state, control, **kw):
                self.times.append(time.perf_counter() - self.t)

        from datasets import Dataset

        clock = Clock()
        cfg = GRPOConfig(output_dir=os.path.join(a.out, "trl"), report_to=[], save_strategy="no", use_cpu=True,
                         bf16=False, shuffle_dataset=False, **common)
        tr = GRPOTrainer(model=path, reward_funcs=reward_len, args=cfg, train_dataset=Dataset.from_list(rows),
                         callbacks=[clock])
        tr.train()
        report("trl", clock.times, a)


def report(side: str, times: list[float], a: argparse.Namespace) -> None:
    print(json.dumps({"side": side, "prompts": a.prompts, "generations": a.generations, "prompt_len": a.prompt_len,
                      "new_tokens": a.new, "step_seconds": [round(t, 2) for t in times],
                      "median_after_first": round(statistics.median(times[1:] or times), 2)}), flush=True)


if __name__ == "__main__":
    main()
