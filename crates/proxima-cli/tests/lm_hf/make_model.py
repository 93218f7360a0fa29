"""A tiny random Qwen2-shaped model over <pad>, <eos> and ten letters, with a character tokenizer, for
``tests/lm_hf_cli.rs``: ``python make_model.py DIR``."""

import sys, torch, transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
d = sys.argv[1]
LETTERS = "abcdefghij"
vocab = {"<pad>": 0, "<eos>": 1, **{c: i + 2 for i, c in enumerate(LETTERS)}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
tok.decoder = decoders.Fuse()
transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>").save_pretrained(d)
torch.manual_seed(0)
cfg = transformers.Qwen2Config(vocab_size=len(vocab), hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                               tie_word_embeddings=True, eos_token_id=1, pad_token_id=0)
model = transformers.Qwen2ForCausalLM(cfg)
with torch.no_grad():
    for p in model.parameters():
        if p.dim() > 1:
            p.normal_(0, 0.2)
model.save_pretrained(d)
