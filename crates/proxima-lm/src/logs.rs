//! What a `proxima lm` command reports and writes besides weights: the progress a progress bar
//! draws, `progress.csv` and TensorBoard rows, `config.json`, and the final summary.

use proxima::io::write_atomic;
use proxima::log::{CsvLogger, TensorBoardWriter};
use proxima::{ProximaError, Result};
use std::path::Path;

/// Progress of a running command, for a progress bar.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Steps done.
    pub step: usize,
    /// A one-line summary of the latest numbers.
    pub message: String,
}

/// Logs: progress.csv + TensorBoard, one row per evaluation.
pub(crate) struct Logs {
    csv: CsvLogger,
    tb: TensorBoardWriter,
    columns: Vec<&'static str>,
}

impl Logs {
    pub(crate) fn create(dir: &Path, columns: &[&'static str]) -> Result<Logs> {
        Ok(Logs {
            csv: CsvLogger::create(&dir.join("progress.csv"), columns, false)?,
            tb: TensorBoardWriter::create(dir)?,
            columns: columns.to_vec(),
        })
    }
    pub(crate) fn write(&mut self, row: &[f64]) -> Result<()> {
        self.csv.write(row)?;
        let step = row[0] as u64;
        for (c, v) in self.columns.iter().zip(row).skip(1) {
            self.tb.add_scalar(&format!("lm/{c}"), *v, step)?;
        }
        self.tb.flush()
    }
}

pub(crate) fn write_config<T: serde::Serialize>(dir: &Path, cfg: &T) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| ProximaError::io(dir, e))?;
    let text = serde_json::to_string_pretty(cfg).expect("config serialises");
    write_atomic(&dir.join("config.json"), text.as_bytes())
}

/// What a finished command measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    /// Greedy exact-match accuracy on the 1000 held-out prompts, at the start (the policy the
    /// run started from) and at the end.
    pub held_out_accuracy_start: f64,
    /// At the end.
    pub held_out_accuracy_end: f64,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Command-specific final numbers (name, value).
    pub extra: Vec<(String, f64)>,
}
