//! What a `proxima lm` command reports and writes besides weights: the progress a progress bar
//! draws, `progress.csv` and TensorBoard rows, `config.json`, and the final summary.

use proxima::io::write_atomic;
use proxima::log::{keep_rows_up_to, CsvLogger, TensorBoardWriter};
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
    /// Opens the logs of a run: a new `progress.csv`, or (`resume_step` = the checkpoint's step)
    /// the one there with its rows up to that step kept. Returns the logs and the `seconds` of
    /// the last row kept (0 for a new run), which a resumed run's clock continues from. The last
    /// column of every command's logs is `seconds`.
    pub(crate) fn open(dir: &Path, columns: &[&'static str], resume_step: Option<usize>) -> Result<(Logs, f64)> {
        let path = dir.join("progress.csv");
        let mut seconds = 0.0;
        if let Some(step) = resume_step {
            let kept = keep_rows_up_to(&path, "step", step as f64, "seconds")?;
            seconds = kept.ok_or_else(|| ProximaError::Checkpoint(format!("{}: missing", path.display())))?;
        }
        let logs = Logs {
            csv: CsvLogger::create(&path, columns, resume_step.is_some())?,
            tb: TensorBoardWriter::create(dir)?,
            columns: columns.to_vec(),
        };
        Ok((logs, seconds))
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
