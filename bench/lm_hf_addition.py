"""GRPO on a Hugging Face checkpoint, Proxima against TRL, on the addition task of ``proxima lm``: a Llama-shaped model
(2 layers, width 64, grouped-query attention; a character tokenizer over the digits, ``+``, ``=``, EOS and padding)
is made here, pre-trained by Proxima's ``SFTTrainer`` (650 steps of 128 rows, Adam 2e-3) to a partial accuracy and saved as a Hugging Face directory;
then GRPO from that checkpoint with a Python reward function (exact match of the reversed sum), once with
``proxima.lm.GRPOTrainer`` and once with TRL's ``GRPOTrainer``, the same ``GRPOConfig`` values. Greedy accuracy on
1,000 held-out prompts (never trained on) is measured with ``transformers``' ``generate`` on each saved model.

    python bench/lm_hf_addition.py OUT_DIR [--steps 600] [--sft-steps 650] [--lr 5e-4] [--loss-type dapo] [--lora R] [--skip-trl] [--from-sft DIR]

Prints one JSON line per stage (sft, proxima, trl) with the wall time of its training and the held-out accuracy."""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

VOCAB = {**{str(d): d for d in range(10)}, "+": 10, "=": 11, "<eos>": 12, "<pad>": 13}


def problems():
    """The 10,000 prompts ``ab+cd=`` with their answers (the sum's digits reversed), split once into 9,000 training
    and 1,000 held-out prompts."""
    rows = [{"prompt": f"{a:02d}+{b:02d}=", "answer": str(a + b)[::-1]} for a in range(100) for b in range(100)]
    random.Random(0).shuffle(rows)
    return rows[1000:], rows[:1000]


def make_model(path: str) -> None:
    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tok.decoder = decoders.Fuse()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>").save_pretrained(path)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(VOCAB), hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                      tie_word_embeddings=True, eos_token_id=12, pad_token_id=13, bos_token_id=None)
    LlamaForCausalLM(cfg).save_pretrained(path)


def accuracy(path: str, held_out) -> float:
    """Greedy exact-match accuracy with ``transformers``' ``generate``."""
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    tok = AutoTokenizer.from_pretrained(path)
    ids = torch.tensor([tok(r["prompt"])["input_ids"] for r in held_out])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False,
                             pad_token_id=13, eos_token_id=12)
    answers = tok.batch_decode(out[:, ids.shape[1]:], skip_special_tokens=True)
    return sum(a == r["answer"] for a, r in zip(answers, held_out)) / len(held_out)


def exact_match(completions, answer, **kwargs):
    return [1.0 if c == a else 0.0 for c, a in zip(completions, answer)]


def grpo_config(cls, out: str, steps: int, lr: float, loss_type: str, **extra):
    # 32 prompts × G = 8 per step, as `proxima lm grpo`'s defaults; TRL's dapo loss.
    return cls(output_dir=out, learning_rate=lr, loss_type=loss_type, max_steps=steps, per_device_train_batch_size=256,
               num_generations=8, beta=0.04, max_completion_length=4, temperature=1.0, seed=1, logging_steps=50,
               **extra)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--sft-steps", type=int, default=650)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--loss-type", default="dapo")
    ap.add_argument("--lora", type=int, default=0, help="train LoRA adapters of this rank (all linear layers, alpha 2r)")
    ap.add_argument("--skip-trl", action="store_true")
    ap.add_argument("--from-sft", help="start GRPO from this SFT directory (skip the SFT stage)")
    a = ap.parse_args()
    torch.set_num_threads(1)

    train, held_out = problems()
    base, sft = os.path.join(a.out, "init"), a.from_sft or os.path.join(a.out, "sft")
    if not a.from_sft:
        make_sft(base, sft, train, held_out, a.sft_steps)
    grpo_runs(a, sft, train, held_out)


def make_sft(base: str, sft: str, train, held_out, steps: int) -> None:
    from proxima.lm import SFTConfig, SFTTrainer

    make_model(base)
    t = time.time()
    trainer = SFTTrainer(base, args=SFTConfig(output_dir=sft, learning_rate=2e-3, max_steps=steps,
                                              per_device_train_batch_size=128, seed=1, logging_steps=0),
                         train_dataset=[{"prompt": r["prompt"], "completion": r["answer"]} for r in train])
    trainer.train()
    trainer.save_model()
    print(json.dumps({"stage": "sft", "seconds": round(time.time() - t, 1), "held_out_accuracy": accuracy(sft, held_out)}), flush=True)


def grpo_runs(a, sft: str, train, held_out) -> None:
    from proxima.lm import GRPOConfig, GRPOTrainer

    peft = dict(r=a.lora, lora_alpha=2 * a.lora, target_modules="all-linear") if a.lora else None
    t = time.time()
    g = GRPOTrainer(sft, reward_funcs=exact_match, args=grpo_config(GRPOConfig, os.path.join(a.out, "proxima"), a.steps, a.lr, a.loss_type),
                    train_dataset=train, peft_config=peft)
    g.train()
    g.save_model()
    print(json.dumps({"stage": "proxima", "lora": a.lora, "seconds": round(time.time() - t, 1),
                      "held_out_accuracy": accuracy(os.path.join(a.out, "proxima"), held_out),
                      "final_reward": g.state.log_history[-1]["reward"]}), flush=True)
    if a.skip_trl:
        return
    import datasets
    import trl

    t = time.time()
    args = grpo_config(trl.GRPOConfig, os.path.join(a.out, "trl"), a.steps, a.lr, a.loss_type, use_cpu=True, report_to="none",
                       save_strategy="no", bf16=False)
    model = AutoModelForCausalLM.from_pretrained(sft)
    if peft:
        import peft as peft_lib

        peft = peft_lib.LoraConfig(task_type="CAUSAL_LM", **peft)
    tr = trl.GRPOTrainer(model=model, reward_funcs=exact_match, args=args, train_dataset=datasets.Dataset.from_list(train),
                         processing_class=AutoTokenizer.from_pretrained(sft), peft_config=peft)
    tr.train()
    if peft:
        tr.model = tr.model.merge_and_unload()
    tr.save_model()
    print(json.dumps({"stage": "trl", "lora": a.lora, "version": trl.__version__, "seconds": round(time.time() - t, 1),
                      "held_out_accuracy": accuracy(os.path.join(a.out, "trl"), held_out)}), flush=True)


if __name__ == "__main__":
    main()
