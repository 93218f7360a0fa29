"""Reward functions for ``tests/lm_hf_cli.rs``, imported by ``proxima lm grpo --reward rewards:NAME``."""


def fraction(completions, target, **kwargs):
    """The share of each completion's letters that are its row's target letter."""
    return [c.count(t) / max(len(c), 1) for c, t in zip(completions, target)]


def boom(completions, **kwargs):
    raise ValueError("boom from the reward")


def short(completions, **kwargs):
    return [1.0]
