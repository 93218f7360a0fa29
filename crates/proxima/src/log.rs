//! Run logs: `progress.csv` and a TensorBoard event file.
//!
//! The event file is written in TensorFlow's record format (length, masked CRC-32C, a
//! serialised `tensorflow.Event` protobuf, masked CRC-32C) with `Summary.Value.simple_value`
//! scalars, which `tensorboard` reads directly. The three protobuf messages involved are encoded
//! by hand here (a dozen lines) rather than pulling in a protobuf toolchain.

use crate::error::{ProximaError, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// `text` (a CSV file with a header) with its rows rearranged into `columns` by name (cells of
/// columns `columns` lacks are dropped, columns `text` lacks are empty).
fn with_columns(text: &str, columns: &[&str]) -> String {
    let mut lines = text.lines();
    let old: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let at: Vec<Option<usize>> = columns.iter().map(|c| old.iter().position(|o| o == c)).collect();
    let mut out = format!("{}\n", columns.join(","));
    for line in lines.filter(|l| !l.is_empty()) {
        let cells: Vec<&str> = line.split(',').collect();
        let row: Vec<&str> = at.iter().map(|i| i.and_then(|i| cells.get(i).copied()).unwrap_or("")).collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// Appends rows to a CSV file with a fixed header.
pub struct CsvLogger {
    path: PathBuf,
    out: BufWriter<File>,
    columns: Vec<String>,
}

impl CsvLogger {
    /// Creates (or truncates) `path` and writes the header. When `append` is set and the file
    /// exists, rows are appended instead (resume); a file written with other columns (an
    /// earlier version's) is first rewritten, atomically, with these columns: each old row's
    /// cells moved to their column by name, empty where the old file had no such column.
    ///
    /// # Errors
    /// `Io` naming the path.
    pub fn create(path: &Path, columns: &[&str], append: bool) -> Result<Self> {
        let header = columns.join(",");
        let existing = if append { std::fs::read_to_string(path).ok() } else { None };
        if let Some(text) = existing.as_deref().filter(|t| t.lines().next().is_some_and(|h| h != header)) {
            crate::io::write_atomic(path, with_columns(text, columns).as_bytes())?;
        }
        let keep = existing.is_some_and(|t| t.lines().next().is_some());
        let file = if keep { OpenOptions::new().append(true).open(path) } else { File::create(path) }
            .map_err(|e| ProximaError::io(path, e))?;
        let mut out = BufWriter::new(file);
        if !keep {
            writeln!(out, "{header}").map_err(|e| ProximaError::io(path, e))?;
        }
        Ok(CsvLogger { path: path.to_path_buf(), out, columns: columns.iter().map(|s| s.to_string()).collect() })
    }

    /// Writes one row (values in column order) and flushes. NaN means "not measured yet" (no
    /// episode finished, a statistic the algorithm does not have) and is written as an empty
    /// cell, as pandas and spreadsheets read a missing value.
    ///
    /// # Errors
    /// `InvalidArgument` for a row of the wrong width; `Io`.
    pub fn write(&mut self, values: &[f64]) -> Result<()> {
        if values.len() != self.columns.len() {
            return Err(ProximaError::InvalidArgument(format!(
                "CSV row has {} values for {} columns",
                values.len(),
                self.columns.len()
            )));
        }
        let row: Vec<String> = values
            .iter()
            .map(|v| match v {
                v if v.is_nan() => String::new(),
                v if v.fract() == 0.0 && v.abs() < 1e15 => format!("{}", *v as i64),
                v => format!("{v}"),
            })
            .collect();
        writeln!(self.out, "{}", row.join(","))
            .and_then(|_| self.out.flush())
            .map_err(|e| ProximaError::io(&self.path, e))
    }
}

/// For a resume: drops the rows of the CSV file at `path` whose `key` column (e.g. `update`,
/// `step`) exceeds `upto` (the resumed run writes them again), atomically, and returns the
/// `time` column of the last row kept (0 when only the header is left): the training time the
/// resumed clock continues from. `None` when there is no such file.
///
/// # Errors
/// `Io`; `Config` for a header without `key` or `time`.
pub fn keep_rows_up_to(path: &Path, key: &str, upto: f64, time: &str) -> Result<Option<f64>> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(None) };
    let header: Vec<&str> = text.lines().next().unwrap_or("").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| ProximaError::Config(format!("{}: no `{name}` column", path.display())))
    };
    let (k, t) = (col(key)?, col(time)?);
    let cell = |l: &str, i: usize| l.split(',').nth(i).and_then(|x| x.parse::<f64>().ok());
    let kept: Vec<&str> = text
        .lines()
        .enumerate()
        .filter(|(i, l)| *i == 0 || cell(l, k).is_some_and(|v| v <= upto))
        .map(|(_, l)| l)
        .collect();
    crate::io::write_atomic(path, format!("{}\n", kept.join("\n")).as_bytes())?;
    Ok(Some(kept.iter().skip(1).last().and_then(|l| cell(l, t)).unwrap_or(0.0)))
}

/// Writes scalars to a TensorBoard event file (`events.out.tfevents.<time>.<host>.<pid>.proxima`, a
/// new file for every process, so a resumed run keeps the earlier ones).
pub struct TensorBoardWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    (crc.rotate_right(15)).wrapping_add(0xa282_ead8)
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a length-delimited field (wire type 2).
fn bytes_field(field: u32, data: &[u8], out: &mut Vec<u8>) {
    varint(((field as u64) << 3) | 2, out);
    varint(data.len() as u64, out);
    out.extend_from_slice(data);
}

/// A serialised `tensorflow.Event` with wall_time (field 1, double), step (2, int64) and either
/// file_version (3, string) or a summary (5) of one `simple_value` scalar.
fn event(wall_time: f64, step: i64, file_version: Option<&str>, scalar: Option<(&str, f32)>) -> Vec<u8> {
    let mut e = Vec::with_capacity(64);
    varint((1 << 3) | 1, &mut e);
    e.extend_from_slice(&wall_time.to_le_bytes());
    varint(2 << 3, &mut e);
    varint(step as u64, &mut e);
    if let Some(v) = file_version {
        bytes_field(3, v.as_bytes(), &mut e);
    }
    if let Some((tag, value)) = scalar {
        let mut val = Vec::with_capacity(tag.len() + 8);
        bytes_field(1, tag.as_bytes(), &mut val); // Summary.Value.tag
        varint((2 << 3) | 5, &mut val); // Summary.Value.simple_value (float)
        val.extend_from_slice(&value.to_le_bytes());
        let mut summary = Vec::with_capacity(val.len() + 4);
        bytes_field(1, &val, &mut summary); // Summary.value
        bytes_field(5, &summary, &mut e); // Event.summary
    }
    e
}

impl TensorBoardWriter {
    /// Creates a new event file in `dir` and writes the `brain.Event:2` header record.
    ///
    /// # Errors
    /// `Io` naming the path.
    pub fn create(dir: &Path) -> Result<Self> {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        // Never over an earlier process's file (a resume within the same second): the pid, then a
        // counter, make the name new; `create_new` refuses an existing one.
        let (secs, pid) = (now as u64, std::process::id());
        let mut k = 0;
        let (path, file) = loop {
            let suffix = if k == 0 { String::new() } else { format!(".{k}") };
            let path = dir.join(format!("events.out.tfevents.{secs}.{host}.{pid}.proxima{suffix}"));
            match File::options().write(true).create_new(true).open(&path) {
                Ok(f) => break (path, f),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && k < 1000 => k += 1,
                Err(e) => return Err(ProximaError::io(&path, e)),
            }
        };
        let mut w = TensorBoardWriter { path, out: BufWriter::new(file) };
        w.record(&event(now, 0, Some("brain.Event:2"), None))?;
        w.flush()?;
        Ok(w)
    }

    /// The event file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn record(&mut self, data: &[u8]) -> Result<()> {
        let len = (data.len() as u64).to_le_bytes();
        let mut rec = Vec::with_capacity(data.len() + 16);
        rec.extend_from_slice(&len);
        rec.extend_from_slice(&masked_crc(&len).to_le_bytes());
        rec.extend_from_slice(data);
        rec.extend_from_slice(&masked_crc(data).to_le_bytes());
        self.out.write_all(&rec).map_err(|e| ProximaError::io(&self.path, e))
    }

    /// Adds scalar `tag` = `value` at `step`. NaN ("not measured yet", as in [`CsvLogger`]) is
    /// skipped, so a curve has no point there; ±inf is written as it is.
    pub fn add_scalar(&mut self, tag: &str, value: f64, step: u64) -> Result<()> {
        if value.is_nan() {
            return Ok(());
        }
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        self.record(&event(now, step as i64, None, Some((tag, value as f32))))
    }

    /// Flushes buffered records to disk.
    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| ProximaError::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_file_of_an_earlier_version_keeps_its_rows_under_the_new_columns() {
        let dir = std::env::temp_dir().join(format!("proxima-csv-columns-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("progress.csv");
        std::fs::write(&path, "global_step,update,gone\n10,1,x\n20,2,y\n").unwrap();
        let mut log = CsvLogger::create(&path, &["global_step", "update", "ent_coef"], true).unwrap();
        log.write(&[30.0, 3.0, 0.5]).unwrap();
        drop(log);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "global_step,update,ent_coef\n10,1,\n20,2,\n30,3,0.5\n");
        std::fs::write(&path, "").unwrap();
        CsvLogger::create(&path, &["a"], true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\n", "an empty file gets its header");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    use super::*;

    #[test]
    fn writers_created_in_the_same_second_keep_separate_files() {
        let dir = std::env::temp_dir().join(format!("proxima-tb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (TensorBoardWriter::create(&dir).unwrap(), TensorBoardWriter::create(&dir).unwrap());
        assert_ne!(a.path(), b.path());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "the second did not overwrite the first");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unmeasured_values_are_empty_cells_and_no_scalars() {
        let dir = std::env::temp_dir().join(format!("proxima-csv-nan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut csv = CsvLogger::create(&dir.join("p.csv"), &["step", "ret", "kl"], false).unwrap();
        csv.write(&[1.0, f64::NAN, 0.25]).unwrap();
        csv.write(&[2.0, -3.5, f64::NAN]).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("p.csv")).unwrap(), "step,ret,kl\n1,,0.25\n2,-3.5,\n");
        let mut tb = TensorBoardWriter::create(&dir).unwrap();
        tb.add_scalar("a/skipped", f64::NAN, 1).unwrap();
        tb.add_scalar("a/kept", 1.0, 1).unwrap();
        tb.flush().unwrap();
        let text = String::from_utf8_lossy(&std::fs::read(tb.path()).unwrap()).to_string();
        assert!(text.contains("a/kept") && !text.contains("a/skipped"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn masked_crc_matches_tensorflow_reference() {
        // TensorFlow's crc32c.Mask of crc32c("") = 0 is 0xa282ead8; the record of an
        // 8-byte zero length field is a fixed, well-known value.
        assert_eq!(masked_crc(b""), 0xa282_ead8);
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn event_file_records_are_framed_and_checksummed() {
        let dir = std::env::temp_dir().join(format!("proxima-tb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut w = TensorBoardWriter::create(&dir).unwrap();
        w.add_scalar("charts/episodic_return", 42.5, 7).unwrap();
        w.flush().unwrap();
        let bytes = std::fs::read(w.path()).unwrap();
        let mut pos = 0;
        let mut n = 0;
        while pos < bytes.len() {
            let len = u64::from_le_bytes(bytes[pos..pos + 8].try_into().unwrap()) as usize;
            assert_eq!(
                u32::from_le_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()),
                masked_crc(&bytes[pos..pos + 8])
            );
            let data = &bytes[pos + 12..pos + 12 + len];
            assert_eq!(u32::from_le_bytes(bytes[pos + 12 + len..pos + 16 + len].try_into().unwrap()), masked_crc(data));
            pos += 16 + len;
            n += 1;
        }
        assert_eq!(n, 2);
        assert!(String::from_utf8_lossy(&bytes).contains("charts/episodic_return"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
