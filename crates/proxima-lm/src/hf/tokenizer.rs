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
    /// `tokenizer_config.json`'s `bos_token` (the chat templates read it).
    pub bos_token: Option<String>,
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
        let bos_token = token_text(tc.get("bos_token"));
        Ok(HfTokenizer { inner, eos_token_ids, pad_token_id, chat_template, bos_token })
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

    /// Checks that this tokenizer belongs to a model of `cfg`: no token id past the model's
    /// vocabulary (the model may have more rows than the tokenizer has tokens, as many pad theirs).
    ///
    /// # Errors
    /// `Config` naming both sizes.
    pub fn check_fits(&self, cfg: &super::config::HfConfig) -> Result<()> {
        let n = self.vocab_size();
        let special = self.eos_token_ids.iter().chain([&self.pad_token_id]).copied().max().unwrap_or(0) as usize;
        if n > cfg.vocab_size || special >= cfg.vocab_size {
            return Err(ProximaError::Config(format!(
                "the tokenizer ({n} tokens, special ids up to {special}) does not match the model's vocabulary of {} rows: use the tokenizer saved with this model",
                cfg.vocab_size
            )));
        }
        Ok(())
    }

    /// The vocabulary's size, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}

/// A Python string method Jinja templates call (`.strip()`, `.startswith(...)`, ...), as
/// `transformers`' Jinja environment provides them.
fn string_method(s: &str, name: &str, args: &[minijinja::Value]) -> Option<minijinja::Value> {
    let arg = |i: usize| args.get(i).and_then(|a| a.as_str().map(String::from));
    let chars = |i: usize| arg(i).map(|c| c.chars().collect::<Vec<char>>());
    Some(match name {
        "strip" => chars(0).map_or(s.trim().into(), |c| s.trim_matches(|x| c.contains(&x)).into()),
        "lstrip" => chars(0).map_or(s.trim_start().into(), |c| s.trim_start_matches(|x| c.contains(&x)).into()),
        "rstrip" => chars(0).map_or(s.trim_end().into(), |c| s.trim_end_matches(|x| c.contains(&x)).into()),
        "startswith" => s.starts_with(&arg(0)?).into(),
        "endswith" => s.ends_with(&arg(0)?).into(),
        "upper" => s.to_uppercase().into(),
        "lower" => s.to_lowercase().into(),
        "replace" => s.replace(&arg(0)?, &arg(1)?).into(),
        "split" => match arg(0) {
            Some(sep) => s.split(sep.as_str()).map(minijinja::Value::from).collect::<Vec<_>>().into(),
            None => s.split_whitespace().map(minijinja::Value::from).collect::<Vec<_>>().into(),
        },
        _ => return None,
    })
}

impl HfTokenizer {
    /// The text of a conversation through the tokenizer's chat template, as `transformers`'
    /// `apply_chat_template(messages, tokenize=False, add_generation_prompt=...)` renders it:
    /// `messages` a list of `{"role", "content"}` objects; the template sees them with
    /// `add_generation_prompt`, `bos_token`, `eos_token` and `raise_exception`.
    ///
    /// # Errors
    /// `Config` when the tokenizer has no chat template or the template does not parse;
    /// `InvalidArgument` for messages that are not a non-empty list of `{"role": str, "content":
    /// str}`, or when the template fails on them (its `raise_exception` message included).
    pub fn apply_chat_template(&self, messages: &Value, add_generation_prompt: bool) -> Result<String> {
        let well_formed =
            |m: &Value| m.get("role").is_some_and(Value::is_string) && m.get("content").is_some_and(Value::is_string);
        match messages.as_array() {
            Some(list) if !list.is_empty() && list.iter().all(well_formed) => {}
            _ => {
                return Err(ProximaError::InvalidArgument(format!(
                    "a conversation must be a non-empty list of {{\"role\": str, \"content\": str}} messages, got {messages}"
                )))
            }
        }
        let template = self.chat_template.as_deref().ok_or_else(|| ProximaError::Config("the tokenizer has no chat_template (tokenizer_config.json or chat_template.jinja): conversational prompts need one".into()))?;
        let mut env = minijinja::Environment::new();
        env.set_unknown_method_callback(|_state, value, name, args| {
            match value.as_str().and_then(|s| string_method(s, name, args)) {
                Some(v) => Ok(v),
                None => Err(minijinja::Error::new(
                    minijinja::ErrorKind::UnknownMethod,
                    format!("no method {name} on {}", value.kind()),
                )),
            }
        });
        env.add_function("raise_exception", |msg: String| -> std::result::Result<String, minijinja::Error> {
            Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg))
        });
        env.add_template("chat", template).map_err(|e| ProximaError::Config(format!("chat_template: {e}")))?;
        let token = |id: Option<u32>| id.and_then(|i| self.inner.id_to_token(i)).unwrap_or_default();
        let ctx = minijinja::context! {
            messages => minijinja::Value::from_serialize(messages),
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token.clone().unwrap_or_default(),
            eos_token => token(self.eos_token_ids.first().copied()),
        };
        env.get_template("chat")
            .and_then(|t| t.render(ctx))
            .map_err(|e| ProximaError::InvalidArgument(format!("chat_template on these messages: {e}")))
    }
}
