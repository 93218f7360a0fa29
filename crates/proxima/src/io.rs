//! Files: atomic writes, and the one safetensors reader/writer (f32 tensors by name plus string
//! metadata), with its validation. Training checkpoints ([`crate::checkpoint`]) and the
//! language models' weights (`proxima-lm`'s `weights` module) are both written and read here.
//!
//! Writes are atomic: the bytes go to a temporary file in the same directory, which is synced
//! and renamed over the target, so a crash at any moment leaves either the old file or the new
//! one, never a torn one. Reading parses only safetensors (no code execution) and refuses any
//! tensor that is not f32 before the caller sees it.

use crate::error::{ProximaError, Result};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use std::collections::HashMap;
use std::path::Path;

/// Writes `bytes` to `path` atomically: temp file in the same directory, fsync, rename, fsync
/// of the directory.
///
/// # Errors
/// `Io` naming the path (the target is untouched on error and the temp file removed).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ProximaError::io(path, e)
    })
}

/// One tensor to write: its name, shape and values (row-major).
pub type NamedTensor<'a> = (String, Vec<usize>, &'a [f32]);

/// Writes f32 tensors and `metadata` as one safetensors file, atomically ([`write_atomic`]).
///
/// # Errors
/// `Checkpoint` if serialisation fails (a shape that does not match its values); `Io`.
pub fn write_f32_safetensors(
    path: &Path,
    tensors: &[NamedTensor<'_>],
    metadata: HashMap<String, String>,
) -> Result<()> {
    let bytes: Vec<Vec<u8>> =
        tensors.iter().map(|(_, _, v)| v.iter().flat_map(|x| x.to_le_bytes()).collect()).collect();
    let views = tensors
        .iter()
        .zip(&bytes)
        .map(|((n, s, _), b)| {
            Ok((
                n.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).map_err(|e| ProximaError::Checkpoint(e.to_string()))?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let bytes = safetensors::serialize(views, Some(metadata)).map_err(|e| ProximaError::Checkpoint(e.to_string()))?;
    write_atomic(path, &canonical_header(bytes)?)
}

/// The same safetensors file with its JSON header's keys (and the `__metadata__` map's) in
/// sorted order: `safetensors::serialize` writes the metadata in a `HashMap`'s order, which
/// differs from process to process, so two identical runs would write files that differ byte
/// for byte. The tensor data and their offsets are untouched; the header is padded with spaces
/// to a multiple of 8 bytes, as the format asks.
fn canonical_header(bytes: Vec<u8>) -> Result<Vec<u8>> {
    use std::collections::BTreeMap;
    let bad = |m: String| ProximaError::Checkpoint(format!("serialised header: {m}"));
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let mut header: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + n]).map_err(|e| bad(e.to_string()))?;
    if let Some(md) = header.get_mut("__metadata__") {
        let sorted: BTreeMap<String, String> = serde_json::from_value(md.take()).map_err(|e| bad(e.to_string()))?;
        *md = serde_json::to_value(sorted).map_err(|e| bad(e.to_string()))?;
    }
    let mut text = serde_json::to_vec(&header).map_err(|e| bad(e.to_string()))?;
    text.resize(text.len().next_multiple_of(8), b' ');
    let mut out = Vec::with_capacity(8 + text.len() + bytes.len() - 8 - n);
    out.extend((text.len() as u64).to_le_bytes());
    out.extend(text);
    out.extend(&bytes[8 + n..]);
    Ok(out)
}

/// A safetensors file read by [`read_f32_safetensors`]: its metadata and f32 tensors by name.
#[derive(Clone, Debug)]
pub struct F32Tensors {
    /// The header's `__metadata__` (empty when absent).
    pub metadata: HashMap<String, String>,
    tensors: HashMap<String, (Vec<usize>, Vec<f32>)>,
    /// The file's path as shown in errors.
    pub path: String,
}

impl F32Tensors {
    /// The tensor called `name`: its shape and values.
    pub fn get(&self, name: &str) -> Option<(&[usize], &[f32])> {
        self.tensors.get(name).map(|(s, v)| (s.as_slice(), v.as_slice()))
    }

    /// The tensors' names (in no particular order).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// How many tensors the file holds.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether the file holds no tensor.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// A `Checkpoint` error naming the file: `"<path>: <m>"`.
    pub fn error(&self, m: impl std::fmt::Display) -> ProximaError {
        ProximaError::Checkpoint(format!("{}: {m}", self.path))
    }
}

/// Reads a safetensors file whose tensors are all f32. `check_metadata` sees the header's
/// metadata (and an error maker that names the file) before any tensor is decoded, so a file
/// that is not what the caller expects is refused for that first, whatever its tensors.
///
/// # Errors
/// `Io` if unreadable; `Checkpoint` naming the file if it is not a valid safetensors file, its
/// header is unreadable, `check_metadata` refuses it, or a tensor is not f32.
pub fn read_f32_safetensors<T>(
    path: &Path,
    check_metadata: impl FnOnce(&HashMap<String, String>, &dyn Fn(String) -> ProximaError) -> Result<T>,
) -> Result<(T, F32Tensors)> {
    let bytes = std::fs::read(path).map_err(|e| ProximaError::io(path, e))?;
    read_f32_safetensors_bytes(&bytes, &path.display().to_string(), check_metadata)
}

/// What is missing from a safetensors file cut short (a copy or download that stopped): `None`
/// when its header is whole and its tensors end within the file, or its start is no safetensors
/// header length at all (garbage).
fn truncated(bytes: &[u8]) -> Option<String> {
    const MAX_HEADER: u64 = 100 << 20; // safetensors' own bound
    let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let cut = |need: u64| Some(format!("truncated: it needs at least {need} bytes, the file has {}", bytes.len()));
    if n > MAX_HEADER {
        return None;
    }
    let Some(header) = bytes.get(8..8 + n as usize) else { return cut(8 + n) };
    let header: serde_json::Value = serde_json::from_slice(header).ok()?;
    let end = header.as_object()?.values().filter_map(|t| t.get("data_offsets")?.get(1)?.as_u64()).max()?;
    let need = (8 + n).saturating_add(end); // `end` is the file's word: it may be anything
    if need > bytes.len() as u64 {
        return cut(need);
    }
    None
}

/// [`read_f32_safetensors`] of a file's bytes already read (`shown`: the file's name in errors).
///
/// # Errors
/// As [`read_f32_safetensors`], but no `Io`.
pub fn read_f32_safetensors_bytes<T>(
    bytes: &[u8],
    shown: &str,
    check_metadata: impl FnOnce(&HashMap<String, String>, &dyn Fn(String) -> ProximaError) -> Result<T>,
) -> Result<(T, F32Tensors)> {
    let bad = |m: String| ProximaError::Checkpoint(format!("{shown}: {m}"));
    if bytes.starts_with(b"PK\x03\x04") {
        return Err(bad("a zip archive (a Stable-Baselines3 `.zip`?), not a safetensors file: Proxima reads its own \
             files; to start from an SB3 model's weights, make the same Proxima model and call \
             `set_parameters(sb3_model.policy.state_dict())`"
            .into()));
    }
    let st = SafeTensors::deserialize(bytes).map_err(|e| match truncated(bytes) {
        Some(m) => bad(m),
        None => bad(format!("not a valid safetensors file ({e})")),
    })?;
    let (_, header) = SafeTensors::read_metadata(bytes).map_err(|e| bad(format!("unreadable header ({e})")))?;
    let metadata = header.metadata().clone().unwrap_or_default();
    let checked = check_metadata(&metadata, &bad)?;
    let mut tensors = HashMap::new();
    for (name, view) in st.tensors() {
        if view.dtype() != Dtype::F32 {
            return Err(bad(format!("tensor `{name}` has dtype {:?}, expected F32", view.dtype())));
        }
        let v: Vec<f32> =
            view.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
        tensors.insert(name, (view.shape().to_vec(), v));
    }
    Ok((checked, F32Tensors { metadata, tensors, path: shown.to_string() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let dir = std::env::temp_dir().join(format!("proxima-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.safetensors");
        let md: HashMap<String, String> = [("kind".to_string(), "test".to_string())].into();
        write_f32_safetensors(&path, &[("a".into(), vec![2, 2], &[1.0, 2.0, 3.0, -0.5])], md.clone()).unwrap();
        let (_, f) = read_f32_safetensors(&path, |_, _| Ok(())).unwrap();
        assert_eq!(
            (f.get("a"), f.len(), &f.metadata),
            (Some((&[2usize, 2][..], &[1.0f32, 2.0, 3.0, -0.5][..])), 1, &md)
        );
        // A shape that does not match the values is refused, and nothing is written.
        let e = write_f32_safetensors(&dir.join("bad"), &[("a".into(), vec![3], &[1.0])], HashMap::new());
        assert!(e.is_err() && !dir.join("bad").exists());
        // An f64 tensor, a truncated file and garbage are refused by name.
        let f64_view = TensorView::new(Dtype::F64, vec![1], &[0u8; 8]).unwrap();
        std::fs::write(dir.join("f64"), safetensors::serialize([("x", f64_view)], None).unwrap()).unwrap();
        let e = read_f32_safetensors(&dir.join("f64"), |_, _| Ok(())).unwrap_err().to_string();
        assert!(e.contains("`x` has dtype F64, expected F32"), "{e}");
        // The metadata is checked first.
        let e = read_f32_safetensors(&dir.join("f64"), |md, bad| match md.get("kind") {
            Some(_) => Ok(()),
            None => Err(bad("no kind".into())),
        });
        assert!(e.unwrap_err().to_string().ends_with("f64: no kind"));
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(dir.join("trunc"), &bytes[..bytes.len() - 3]).unwrap();
        let e = read_f32_safetensors(&dir.join("trunc"), |_, _| Ok(())).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "truncated: it needs at least {} bytes, the file has {}",
                bytes.len(),
                bytes.len() - 3
            )),
            "{e}"
        );
        // Cut inside the header too; garbage is no safetensors file.
        std::fs::write(dir.join("trunc"), &bytes[..20]).unwrap();
        let e = read_f32_safetensors(&dir.join("trunc"), |_, _| Ok(())).unwrap_err().to_string();
        assert!(e.contains("truncated: it needs at least") && e.contains("the file has 20"), "{e}");
        std::fs::write(dir.join("junk"), b"hello world, not safetensors").unwrap();
        let e = read_f32_safetensors(&dir.join("junk"), |_, _| Ok(())).unwrap_err().to_string();
        assert!(e.contains("not a valid safetensors"), "{e}");
        assert!(!dir.read_dir().unwrap().any(|e| e.unwrap().file_name().to_string_lossy().contains(".tmp.")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_same_tensors_and_metadata_give_the_same_bytes() {
        // Each HashMap iterates in its own random order; the file must not depend on it.
        let dir = std::env::temp_dir().join(format!("proxima-io-canon-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tensors: Vec<NamedTensor<'_>> = vec![
            ("w".into(), vec![2], &[1.0, 2.0]),
            ("b".into(), vec![1], &[0.5]),
            ("a.m.w".into(), vec![2], &[3.0, 4.0]),
        ];
        let files: Vec<Vec<u8>> = (0..8)
            .map(|i| {
                let md: HashMap<String, String> = (0..40).map(|k| (format!("key{k}"), format!("v{k}"))).collect();
                let path = dir.join(format!("f{i}"));
                write_f32_safetensors(&path, &tensors, md).unwrap();
                std::fs::read(&path).unwrap()
            })
            .collect();
        assert!(files.iter().all(|f| f == &files[0]), "files of the same content differ");
        // And the file is still one the reader (and safetensors itself) accepts.
        let (_, f) = read_f32_safetensors(&dir.join("f0"), |_, _| Ok(())).unwrap();
        assert_eq!((f.get("b"), f.metadata.len()), (Some((&[1usize][..], &[0.5f32][..])), 40));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
