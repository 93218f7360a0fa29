//! A Hugging Face tokenizer (`tokenizer.json`, through the `tokenizers` crate, the library behind
//! `transformers`' fast tokenizers) with the special tokens `tokenizer_config.json` and
//! `generation_config.json` name: end of sequence (where a completion stops) and padding.

use proxima::{ProximaError, Result};
use serde_json::Value;
use std::path::Path;

/// A model directory's tokenizer.
pub struct HfTokenizer {
    inner: tokenizers::Tokenizer,
    /// The ids that end a completion: `generation_config.json`'s `eos_token_id`s, else
    /// `tokenizer_config.json`'s `eos_token`.
    pub eos_token_ids: Vec<u32>,
    /// The padding id: `pad_token` of `tokenizer_config.json`, else the first end-of-sequence id, else 0.
    pub pad_token_id: u32,
    /// `tokenizer_config.json`'s `chat_template`, or the `chat_template.jinja` file's text.
    pub chat_template: Option<String>,
}

fn read_json(path: &Path) -> Result<Option<Value>> {
    if !path.exists() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(path).map_err(|err| ProximaError::Io { path: path.display().to_string(), err })?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ProximaError::Config(format!("{}: not JSON: {e}", path.display())))
}

/// A special token as `tokenizer_config.json` writes it: a string, or `{"content": ...}`.
fn token_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(String::from),
        _ => None,
    }
}

impl HfTokenizer {
    /// Reads `dir/tokenizer.json` and the special tokens beside it.
    ///
    /// # Errors
    /// `Io` for a missing `tokenizer.json`; `Config` for one the `tokenizers` crate cannot read, or
    /// a side file that is not JSON.
    pub fn load(dir: &Path) -> Result<HfTokenizer> {
        let path = dir.join("tokenizer.json");
        if !path.exists() {
            return Err(ProximaError::Io {
                path: path.display().to_string(),
                err: std::io::ErrorKind::NotFound.into(),
            });
        }
        let inner = tokenizers::Tokenizer::from_file(&path)
            .map_err(|e| ProximaError::Config(format!("{}: {e}", path.display())))?;
        let tc = read_json(&dir.join("tokenizer_config.json"))?.unwrap_or(Value::Null);
        let gc = read_json(&dir.join("generation_config.json"))?.unwrap_or(Value::Null);
        let id_of = |v: Option<&Value>| token_text(v).and_then(|t| inner.token_to_id(&t));
        let mut eos_token_ids: Vec<u32> = match gc.get("eos_token_id") {
            Some(Value::Number(n)) => n.as_u64().map(|n| vec![n as u32]).unwrap_or_default(),
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_u64).map(|n| n as u32).collect(),
            _ => Vec::new(),
        };
        if eos_token_ids.is_empty() {
            eos_token_ids.extend(id_of(tc.get("eos_token")));
        }
        let pad_token_id = id_of(tc.get("pad_token")).or(eos_token_ids.first().copied()).unwrap_or(0);
        let chat_template = match tc.get("chat_template").and_then(Value::as_str) {
            Some(t) => Some(t.to_string()),
            None => std::fs::read_to_string(dir.join("chat_template.jinja")).ok(),
        };
        Ok(HfTokenizer { inner, eos_token_ids, pad_token_id, chat_template })
    }

    /// The ids of `text` (with the tokenizer's own special tokens, e.g. a BOS, when
    /// `add_special_tokens`).
    ///
    /// # Errors
    /// `InvalidArgument` when the tokenizer fails on the text.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, add_special_tokens)
            .map_err(|e| ProximaError::InvalidArgument(format!("tokenizing {text:?}: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    /// The text of `ids` (special tokens left out when `skip_special_tokens`).
    ///
    /// # Errors
    /// `InvalidArgument` for an id the vocabulary lacks.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|e| ProximaError::InvalidArgument(format!("decoding {ids:?}: {e}")))
    }

    /// The vocabulary's size, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}
