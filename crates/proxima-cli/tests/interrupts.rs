//! Nothing lost: a run killed (SIGKILL) or stopped (SIGINT, SIGTERM) at any moment, from before
//! its first checkpoint to its end, and resumed, ends with the very files of the uninterrupted
//! run: `model.safetensors` byte for byte, `progress.csv` timings aside. The same for an
//! ablation. And two identical runs write identical checkpoint files.
//!
//! The kill moments are set by the run's own progress (the number of rows in `progress.csv`), and
//! the test hook `PROXIMA_TEST_HOLD_UPDATE=N` (see `src/signals.rs`) makes the run wait after its
//! N-th update until the signal has come (`N:forever`: until it is ended), so that every signal
//! lands where the test says however fast this machine is (a release build included); where each
//! kill landed is printed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_proxima");

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("proxima-int-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[String]) -> (i32, String) {
    let out = Command::new(BIN).args(args).output().expect("run proxima");
    let se = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!se.contains("panicked"), "proxima {args:?} panicked:\n{se}");
    (out.status.code().unwrap_or(-1), se)
}

/// 40 updates of 2 envs × 64 steps, a checkpoint every 5.
const UPDATES: usize = 40;

fn train_args(dir: &Path) -> Vec<String> {
    let mut a: Vec<String> = ["train", "CartPole-v1", "--seed", "7", "--total-timesteps", "5120", "--quiet"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(["--run-dir".to_string(), dir.to_str().unwrap().to_string()]);
    for s in ["n_envs=2", "n_steps=64", "batch_size=64", "checkpoint_freq=5", "eval_episodes=0"] {
        a.extend(["--set".to_string(), s.to_string()]);
    }
    a
}

/// progress.csv without its wall-clock columns (time_elapsed, sps).
fn csv_without_timings(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("progress.csv")).unwrap();
    text.lines()
        .map(|l| {
            l.split(',').enumerate().filter(|(i, _)| *i != 2 && *i != 3).map(|(_, x)| x).collect::<Vec<_>>().join(",")
        })
        .collect()
}

fn rows(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("progress.csv")).map_or(0, |t| t.lines().count().saturating_sub(1))
}

/// Checkpoint files written (a temp file being written does not count).
fn checkpoints(dir: &Path) -> usize {
    let names = std::fs::read_dir(dir.join("checkpoints")).into_iter().flatten().flatten();
    names.filter(|e| !e.file_name().to_string_lossy().starts_with('.')).count()
}

/// The test hook's variable: a run started with it set to `hold` waits after that update until a
/// signal comes (`N`), or until it is ended (`N:forever`).
const HOLD: &str = "PROXIMA_TEST_HOLD_UPDATE";

/// Starts a run held at `hold` ([`HOLD`]) and waits until it has written `k` rows (`k` = 0:
/// until its config.toml exists, before any update). Returns the child, still running, and the
/// rows seen.
fn start_and_wait_for(args: &[String], dir: &Path, k: usize, hold: &str) -> (Child, usize) {
    let mut child =
        Command::new(BIN).args(args).env(HOLD, hold).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    loop {
        let ready = if k == 0 { dir.join("config.toml").is_file() } else { rows(dir) >= k };
        if ready {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the run ended before reaching {k} rows");
        assert!(t0.elapsed() < Duration::from_secs(120), "no progress in 120 s");
        std::thread::sleep(Duration::from_millis(1));
    }
    (child, rows(dir))
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig} failed");
}

fn uninterrupted(base: &Path) -> (PathBuf, Vec<u8>, Vec<String>) {
    let full = base.join("full");
    let (code, se) = run(&train_args(&full));
    assert_eq!(code, 0, "{se}");
    let model = std::fs::read(full.join("model.safetensors")).unwrap();
    let csv = csv_without_timings(&full);
    assert_eq!(csv.len(), 1 + UPDATES);
    (full, model, csv)
}

/// Resumes `dir` (as often as it takes: a stop on the resumed run too is allowed) and checks
/// it against the uninterrupted run.
fn resume_and_compare(dir: &Path, model: &[u8], csv: &[String], what: &str) -> String {
    let (code, se) = run(&["train".into(), "--resume".into(), dir.to_str().unwrap().into(), "--quiet".into()]);
    assert_eq!(code, 0, "{what}: resume failed:\n{se}");
    assert!(
        std::fs::read(dir.join("model.safetensors")).unwrap() == model,
        "{what}: the model differs from the uninterrupted run's"
    );
    assert_eq!(csv_without_timings(dir), csv, "{what}: progress.csv differs");
    se
}

const MOMENTS: [usize; 10] = [0, 1, 3, 6, 11, 16, 22, 28, 34, 39];

#[test]
fn sigkill_at_ten_moments_then_resume_ends_as_the_uninterrupted_run() {
    let base = tmp("sigkill");
    let (_, model, csv) = uninterrupted(&base);
    let mut restarted = 0;
    for k in MOMENTS {
        let dir = base.join(format!("killed-{k}"));
        // Held after update k + 1 until killed: the kill lands in update k + 1 or after it.
        let (mut child, seen) = start_and_wait_for(&train_args(&dir), &dir, k, &format!("{}:forever", k + 1));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let (at, ckpts) = (rows(&dir), checkpoints(&dir));
        let se = resume_and_compare(&dir, &model, &csv, &format!("SIGKILL after {k} rows"));
        restarted += usize::from(se.contains("restarting the run from its config.toml"));
        println!("SIGKILL at {seen}..{at} of {UPDATES} updates ({ckpts} checkpoints): resumed, identical");
    }
    // The moments before the first checkpoint (update 5) restart from config.toml.
    assert!(restarted >= 2, "only {restarted} kills landed before the first checkpoint");
}

#[test]
fn sigint_at_ten_moments_saves_exits_130_and_resumes_exactly() {
    let base = tmp("sigint");
    let (_, model, csv) = uninterrupted(&base);
    for k in MOMENTS {
        let dir = base.join(format!("stopped-{k}"));
        // Held after update k (the first, for k = 0) until the signal, which comes after row k,
        // and so before or during the hold: it stops after that update.
        let stop = k.max(1);
        let (child, seen) = start_and_wait_for(&train_args(&dir), &dir, k, &stop.to_string());
        signal(&child, "-INT");
        let out = child.wait_with_output().unwrap();
        let se = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(130), "SIGINT after {k} rows:\n{se}");
        assert!(se.contains(&format!("SIGINT: stopped after update {stop} ")), "{se}");
        assert!(
            se.contains("SIGINT: stopped after update") && se.contains("continue with: proxima train --resume"),
            "{se}"
        );
        // The stop saved the update it finished: a checkpoint and the model of that update.
        let at = rows(&dir);
        let ck = proxima::checkpoint::load(&dir.join("model.safetensors")).unwrap();
        assert_eq!(ck.meta.update as usize, at, "model.safetensors is not of the last update");
        assert!(dir.join(format!("checkpoints/update_{at:06}.safetensors")).is_file());
        resume_and_compare(&dir, &model, &csv, &format!("SIGINT after {k} rows"));
        println!("SIGINT at {seen} rows: stopped after update {at}, resumed, identical");
    }
}

#[test]
fn sigterm_exits_143_a_second_signal_exits_at_once_and_a_copy_of_the_first_is_one_request() {
    let base = tmp("sigterm");
    let (_, model, csv) = uninterrupted(&base);
    let dir = base.join("term");
    let (child, _) = start_and_wait_for(&train_args(&dir), &dir, 8, "8");
    signal(&child, "-TERM");
    let out = child.wait_with_output().unwrap();
    let se = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(143), "{se}");
    assert!(se.contains("SIGTERM: stopped after update 8 "), "{se}");
    resume_and_compare(&dir, &model, &csv, "SIGTERM");
    second_signal_quits_at_once(&base, &model, &csv);
    // The same signal twice within microseconds, as coreutils' `timeout` sends it (to the command,
    // then to its process group): one request, so the run stops after its update and saves.
    let dir = base.join("copies");
    let (child, _) = start_and_wait_for(&train_args(&dir), &dir, 8, "8");
    let pid = child.id().to_string();
    let sent = Command::new("sh").args(["-c", "kill -INT $0; kill -INT $0", &pid]).status().unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    let se = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(130), "{se}");
    assert!(se.contains("SIGINT: stopped after update 8 ") && !se.contains("quitting at once"), "{se}");
    resume_and_compare(&dir, &model, &csv, "a SIGINT sent twice at once");
    a3c_stopped_says_it_cannot_resume(&base);
}

/// Two signals in a row: the second, sent once the first has been acknowledged and twice
/// [`DUPLICATE_WINDOW`] later (so it cannot count as a copy), ends the process at once — the run
/// is held after update 6 until it is ended — without the save, and says so; the files already
/// there are whole, and the run resumes exactly from them.
fn second_signal_quits_at_once(base: &Path, model: &[u8], csv: &[String]) {
    use std::io::{BufRead, Read};
    let dir = base.join("twice");
    let (mut child, _) = start_and_wait_for(&train_args(&dir), &dir, 6, "6:forever");
    signal(&child, "-INT");
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut se = String::new();
    while !se.contains("stopping after the current update") {
        let read = stderr.read_line(&mut se).unwrap();
        assert!(read > 0, "the process ended before acknowledging the first SIGINT:\n{se}");
    }
    std::thread::sleep(2 * DUPLICATE_WINDOW);
    signal(&child, "-INT");
    stderr.read_to_string(&mut se).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{se}");
    assert!(se.contains("SIGINT again: quitting at once, without saving") && !se.contains("stopped after"), "{se}");
    resume_and_compare(&dir, model, csv, "two SIGINTs");
}

/// The CLI's window in which a second signal is a copy of the first (`signals::DUPLICATE_WINDOW`).
const DUPLICATE_WINDOW: Duration = Duration::from_millis(100);

/// A3C saves its model but cannot resume: the message says so instead of a resume hint.
fn a3c_stopped_says_it_cannot_resume(base: &Path) {
    let dir = base.join("a3c");
    let args: Vec<String> = [
        "train",
        "CartPole-v1",
        "--algo",
        "a3c",
        "--workers",
        "1",
        "--total-timesteps",
        "1000000",
        "--quiet",
        "--run-dir",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([dir.to_str().unwrap().to_string()])
    .collect();
    let (child, _) = start_and_wait_for(&args, &dir, 2, "2");
    signal(&child, "-INT");
    let out = child.wait_with_output().unwrap();
    let se = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(130), "{se}");
    assert!(se.contains("A3C runs cannot be resumed") && !se.contains("continue with"), "{se}");
    assert!(dir.join("model.safetensors").is_file());
}

#[test]
fn two_identical_runs_write_identical_checkpoint_files() {
    let base = tmp("identical");
    let (a, b) = (base.join("a"), base.join("b"));
    for d in [&a, &b] {
        let (code, se) = run(&train_args(d));
        assert_eq!(code, 0, "{se}");
    }
    let mut files = vec!["model.safetensors".to_string()];
    for e in std::fs::read_dir(a.join("checkpoints")).unwrap() {
        files.push(format!("checkpoints/{}", e.unwrap().file_name().to_string_lossy()));
    }
    assert_eq!(files.len(), 1 + UPDATES / 5);
    for f in &files {
        let (x, y) = (std::fs::read(a.join(f)).unwrap(), std::fs::read(b.join(f)).unwrap());
        assert!(x == y, "{f} differs between two identical runs");
    }
}

fn ablation_args(out: &Path) -> Vec<String> {
    let mut a: Vec<String> = [
        "ablation",
        "--envs",
        "CartPole-v1,Pendulum-v1",
        "--variants",
        "clip,none",
        "--seeds",
        "1",
        "--total-timesteps",
        "640",
        "--preset",
        "cleanrl",
        "--jobs",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for s in ["n_envs=1", "n_steps=32", "batch_size=32"] {
        a.extend(["--set".to_string(), s.to_string()]);
    }
    a.extend(["--out".to_string(), out.to_str().unwrap().to_string()]);
    a
}

/// results.csv without its wall-time column.
fn results_without_seconds(out: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(out.join("results.csv")).unwrap();
    text.lines().map(|l| l.rsplit_once(',').unwrap().0.to_string()).collect()
}

fn finished_runs(out: &Path) -> Vec<PathBuf> {
    let runs = std::fs::read_dir(out.join("runs")).into_iter().flatten().flatten().map(|e| e.path());
    runs.filter(|d| d.join("eval.json").is_file()).collect()
}

/// Waits until 2 of the 4 runs (20 updates each, run one after the other) have finished and the
/// third has a checkpoint (every 10 updates), then stops the ablation with `sig`. The ablation is
/// held after its 50th update (the third run's 10th, checkpointed) until the signal comes.
fn ablation_stopped_halfway(out: &Path, sig: &str) -> i32 {
    let hold = if sig == "-KILL" { "50:forever" } else { "50" };
    let mut child = Command::new(BIN)
        .args(ablation_args(out))
        .env(HOLD, hold)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        let runs = std::fs::read_dir(out.join("runs")).into_iter().flatten().flatten().map(|e| e.path());
        let midway = runs.filter(|d| !d.join("eval.json").is_file() && checkpoints(d) > 0).count();
        if finished_runs(out).len() >= 2 && midway > 0 {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the ablation ended before the moment to stop it");
        assert!(t0.elapsed() < Duration::from_secs(300), "no progress in 300 s");
        std::thread::sleep(Duration::from_millis(1));
    }
    signal(&child, sig);
    child.wait().unwrap().code().unwrap_or(-1)
}

#[test]
fn an_ablation_stopped_halfway_and_rerun_gives_the_same_results() {
    let base = tmp("ablation");
    let full = base.join("full");
    let (code, se) = run(&ablation_args(&full));
    assert_eq!(code, 0, "{se}");
    let expected = results_without_seconds(&full);
    assert_eq!(expected.len(), 1 + 4);
    for (sig, status) in [("-KILL", -1), ("-INT", 130)] {
        let out = base.join(format!("stopped{sig}"));
        assert_eq!(ablation_stopped_halfway(&out, sig), status, "{sig}");
        let kept: Vec<(PathBuf, std::time::SystemTime)> = finished_runs(&out)
            .into_iter()
            .map(|d| {
                let t = std::fs::metadata(d.join("model.safetensors")).unwrap().modified().unwrap();
                (d, t)
            })
            .collect();
        let (code, se) = run(&ablation_args(&out));
        assert_eq!(code, 0, "{sig}: rerun failed:\n{se}");
        assert!(se.contains("continuing 4 runs"), "{se}");
        assert_eq!(results_without_seconds(&out), expected, "{sig}: results differ from the uninterrupted ablation's");
        for (d, t) in kept {
            let now = std::fs::metadata(d.join("model.safetensors")).unwrap().modified().unwrap();
            assert_eq!(now, t, "{}: a finished run was trained again", d.display());
        }
    }
    // Another ablation's folder is refused, nothing touched.
    let mut other = ablation_args(&full);
    other[6] = "2".into(); // --seeds 2
    let (code, se) = run(&other);
    assert_eq!(code, 1);
    assert!(se.contains("holds another ablation"), "{se}");
}

/// `proxima lm` commands at toy sizes, evaluating (and checkpointing) every 2 steps. `rm` and
/// `dpo` evaluate on every held-out pair (most of this file's time in the debug build): 4 steps.
fn lm_args(command: &str, dir: &Path, sft: &Path, rm: &Path) -> Vec<String> {
    let (sft, rm) = (sft.to_str().unwrap(), rm.to_str().unwrap());
    let own: Vec<&str> = match command {
        "sft" => vec!["--steps", "8", "--batch-size", "32"],
        "rm" => vec!["--sft", sft, "--steps", "4", "--batch-size", "32"],
        "grpo" => vec!["--sft", sft, "--steps", "6", "--prompts", "4", "--group-size", "4"],
        "ppo" => vec![
            "--sft",
            sft,
            "--rm",
            rm,
            "--steps",
            "6",
            "--prompts",
            "8",
            "--batch-size",
            "4",
            "--freezing-actor-steps",
            "1",
        ],
        "dpo" => vec!["--sft", sft, "--pairs", rm, "--steps", "4", "--batch-size", "16"],
        _ => unreachable!(),
    };
    let mut a: Vec<String> = ["lm", command].iter().chain(&own).map(|s| s.to_string()).collect();
    a.extend(["--eval-every", "2", "-q", "--run-dir", dir.to_str().unwrap()].iter().map(|s| s.to_string()));
    a
}

/// An lm run's results: its weights files, byte for byte, and progress.csv without `seconds`.
fn lm_results(dir: &Path) -> (Vec<Vec<u8>>, Vec<String>) {
    let files =
        ["model.safetensors", "critic.safetensors"].iter().filter_map(|f| std::fs::read(dir.join(f)).ok()).collect();
    let text = std::fs::read_to_string(dir.join("progress.csv")).unwrap();
    (files, text.lines().map(|l| l.rsplit_once(',').unwrap().0.to_string()).collect())
}

fn lm_rows(dir: &Path) -> usize {
    rows(dir)
}

/// The steps of `lm <command>` in [`lm_args`].
fn lm_steps(command: &str) -> usize {
    match command {
        "sft" => 8,
        "grpo" | "ppo" => 6,
        _ => 4,
    }
}

/// The step after which `lm <command>` of [`lm_args`] writes its `k`-th row (k ≥ 1): one every 2
/// steps and at the last, after a row for the start (step 0) in grpo, ppo and dpo.
fn lm_row_step(command: &str, k: usize) -> usize {
    let first_at_start = matches!(command, "grpo" | "ppo" | "dpo");
    (2 * k - 2 * usize::from(first_at_start)).min(lm_steps(command))
}

/// Starts an lm run held at step `hold` ([`HOLD`]) and waits until it has written `k` rows (`k`
/// = 0: until its config.json exists).
fn lm_start_and_wait_for(args: &[String], dir: &Path, k: usize, hold: &str) -> Child {
    let mut child =
        Command::new(BIN).args(args).env(HOLD, hold).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    while !(if k == 0 { dir.join("config.json").is_file() } else { lm_rows(dir) >= k }) {
        assert!(child.try_wait().unwrap().is_none(), "the lm run ended before reaching {k} rows");
        assert!(t0.elapsed() < Duration::from_secs(300), "no progress in 300 s");
        std::thread::sleep(Duration::from_millis(1));
    }
    child
}

/// Runs `lm <command>` uninterrupted, then killed after each of `moments` rows (0: before the
/// first) and resumed, then (with `sigint`) stopped by SIGINT after 2 rows and resumed: every
/// time the weights files and progress.csv of the uninterrupted run.
fn lm_killed_and_stopped_resume_exactly(base: &Path, command: &str, moments: &[usize], sigint: bool) {
    let (sft, rm) = (base.join("sft"), base.join("rm"));
    let full = base.join(command);
    let (code, se) = run(&lm_args(command, &full, &sft, &rm));
    assert_eq!(code, 0, "lm {command}: {se}");
    let expected = lm_results(&full);
    for &k in moments {
        let dir = base.join(format!("{command}-killed-{k}"));
        // Held (until killed) after the step of the next row: the kill lands before or in it.
        let hold = format!("{}:forever", lm_row_step(command, k + 1).max(1));
        let mut child = lm_start_and_wait_for(&lm_args(command, &dir, &sft, &rm), &dir, k, &hold);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let at = lm_rows(&dir);
        let (code, se) = run(&["lm".into(), "resume".into(), dir.to_str().unwrap().into(), "-q".into()]);
        assert_eq!(code, 0, "lm {command} killed at {k} rows: resume failed:\n{se}");
        assert!(
            lm_results(&dir) == expected,
            "lm {command} killed at {k} rows: results differ from the uninterrupted run's"
        );
        println!("lm {command}: SIGKILL at {at} rows, resumed, identical");
    }
    // A finished run is not resumed.
    let (code, se) = run(&["lm".into(), "resume".into(), full.to_str().unwrap().into()]);
    assert_eq!(code, 1);
    assert!(se.contains("is complete"), "{se}");
    if !sigint {
        return;
    }
    // SIGINT: saves where it stands, exits 130, resumes exactly.
    let dir = base.join(format!("{command}-stopped"));
    // Held after the step of the second row, which the signal follows: it stops there.
    let stop = lm_row_step(command, 2);
    let child = lm_start_and_wait_for(&lm_args(command, &dir, &sft, &rm), &dir, 2, &stop.to_string());
    signal(&child, "-INT");
    let out = child.wait_with_output().unwrap();
    let se = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(130), "lm {command}: {se}");
    assert!(se.contains(&format!("stopped after step {stop} of")), "lm {command}: {se}");
    assert!(se.contains("continue with: proxima lm resume"), "{se}");
    let (code, se) = run(&["lm".into(), "resume".into(), dir.to_str().unwrap().into(), "-q".into()]);
    assert_eq!(code, 0, "{se}");
    assert!(lm_results(&dir) == expected, "lm {command} after SIGINT: results differ");
}

// The lm commands in two tests, so that the harness runs them on two threads. `sft` and `grpo`
// (the cheap ones) are killed after each of their first rows (up to their last step: sft's
// fourth row and grpo's, after its row of the start, are their last) and stopped by SIGINT (the stop is the CLI's one code path for every command);
// `rm`, `ppo` and `dpo`, which evaluate on every held-out pair, before the first row and after
// the first.

#[test]
fn lm_sft_and_grpo_killed_or_stopped_resume_exactly() {
    let base = tmp("lm");
    lm_killed_and_stopped_resume_exactly(&base, "sft", &[0, 1, 2, 3], true);
    lm_killed_and_stopped_resume_exactly(&base, "grpo", &[0, 1, 2, 3], true);
    let (code, se) = run(&["lm".into(), "resume".into(), base.to_str().unwrap().into()]);
    assert_eq!(code, 1);
    assert!(se.contains("not an lm run directory"), "{se}");
    lm_resume_from_elsewhere_and_changed_inputs(&base);
}

#[test]
fn lm_rm_ppo_and_dpo_killed_resume_exactly() {
    let base = tmp("lm-rlhf");
    let sft = base.join("sft");
    let (code, se) = run(&lm_args("sft", &sft, &sft, &sft));
    assert_eq!(code, 0, "lm sft: {se}");
    for command in ["rm", "ppo", "dpo"] {
        lm_killed_and_stopped_resume_exactly(&base, command, &[0, 1], false);
    }
}

/// A run started with relative paths resumes from another working directory (its config.json
/// names its inputs absolutely), and one whose π_ref has changed since is refused.
fn lm_resume_from_elsewhere_and_changed_inputs(base: &Path) {
    let args = |dir: &str, sft: &str| -> Vec<String> {
        let a =
            ["lm", "grpo", "--sft", sft, "--steps", "6", "--prompts", "4", "--group-size", "4", "--eval-every", "2"];
        a.iter().chain(&["-q", "--run-dir", dir]).map(|s| s.to_string()).collect()
    };
    let expected = lm_results(&base.join("grpo"));
    let mut child = Command::new(BIN)
        .args(args("grpo-rel", "sft"))
        .env(HOLD, "6:forever")
        .current_dir(base)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while lm_rows(&base.join("grpo-rel")) < 2 {
        assert!(child.try_wait().unwrap().is_none(), "the run ended too soon");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let out = Command::new(BIN)
        .args(["lm", "resume", base.join("grpo-rel").to_str().unwrap(), "-q"])
        .current_dir("/")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(lm_results(&base.join("grpo-rel")) == expected, "resumed from / : results differ");
    // π_ref replaced between the kill and the resume: refused, not silently continued.
    let other = base.join("sft-other");
    let (code, se) = run(&lm_args("sft", &other, &other, &other)
        .into_iter()
        .map(|a| if a == "8" { "2".into() } else { a })
        .collect::<Vec<_>>());
    assert_eq!(code, 0, "{se}");
    let dir = base.join("grpo-changed");
    let sft_copy = base.join("sft-copy");
    std::fs::create_dir_all(&sft_copy).unwrap();
    std::fs::copy(base.join("sft/model.safetensors"), sft_copy.join("model.safetensors")).unwrap();
    // Held after step 3, once the checkpoint of step 2 is written.
    let mut child =
        lm_start_and_wait_for(&args(dir.to_str().unwrap(), sft_copy.to_str().unwrap()), &dir, 0, "3:forever");
    while checkpoints(&dir) == 0 {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before its first checkpoint");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::copy(other.join("model.safetensors"), sft_copy.join("model.safetensors")).unwrap();
    let (code, se) = run(&["lm".into(), "resume".into(), dir.to_str().unwrap().into()]);
    assert_eq!(code, 1, "{se}");
    assert!(se.contains("hold other weights now"), "{se}");
}
