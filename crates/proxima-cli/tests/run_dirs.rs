//! Run directories given to the wrong command: `proxima lm …` on a reinforcement-learning run and
//! `proxima train|eval` on a language-model run say which kind of run it is and name the command
//! that reads it (never "damaged", never a bare "No such file"); `lm eval` reads an lm
//! checkpoint file and an unfinished run's latest checkpoint; `train --resume` says when the
//! run's `config.toml` was edited, since the checkpoint's config is the one it continues with.

mod common;

use common::{proxima, tmp};
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `lm sft` of 4 steps into `dir`, a checkpoint every 2.
fn lm_run(dir: &Path) {
    let args = ["lm", "sft", "--steps", "4", "--batch-size", "32", "--eval-every", "2", "-q", "--run-dir", s(dir)];
    let (code, _, se) = proxima(&args);
    assert_eq!(code, 0, "{se}");
}

/// `train CartPole-v1` of 4 updates of 2 envs × 32 steps into `dir`, a checkpoint every 2.
fn rl_run(dir: &Path) {
    let (code, _, se) = proxima(&[
        "train",
        "CartPole-v1",
        "--total-timesteps",
        "256",
        "--quiet",
        "--run-dir",
        s(dir),
        "--set",
        "n_envs=2",
        "--set",
        "n_steps=32",
        "--set",
        "batch_size=32",
        "--set",
        "checkpoint_freq=2",
        "--set",
        "eval_episodes=0",
    ]);
    assert_eq!(code, 0, "{se}");
}

/// `lm eval PATH --json`'s held-out accuracy, and its stderr.
fn lm_accuracy(path: &Path) -> (f64, String) {
    let (code, so, se) = proxima(&["lm", "eval", s(path), "--json"]);
    assert_eq!(code, 0, "lm eval {}: {se}", path.display());
    let v: serde_json::Value = serde_json::from_str(so.trim()).unwrap();
    (v["held_out_accuracy"].as_f64().unwrap(), se)
}

#[test]
fn lm_eval_reads_a_checkpoint_file_and_an_unfinished_runs_latest_checkpoint() {
    let base = tmp("lm-eval");
    let done = base.join("done");
    lm_run(&done);
    let (whole, _) = lm_accuracy(&done);
    // The checkpoint of the last step holds the final model's weights.
    let ckpt = done.join("checkpoints/step_000004.safetensors");
    assert!(ckpt.is_file(), "the last step's checkpoint is kept");
    assert_eq!(lm_accuracy(&ckpt).0, whole);
    // A run stopped after its last checkpoint, before writing its model: its checkpoint, with a note.
    let unfinished = base.join("unfinished");
    std::fs::create_dir_all(unfinished.join("checkpoints")).unwrap();
    for f in ["config.json", "progress.csv", "checkpoints/step_000004.safetensors"] {
        std::fs::copy(done.join(f), unfinished.join(f)).unwrap();
    }
    let (acc, se) = lm_accuracy(&unfinished);
    assert_eq!(acc, whole);
    assert!(se.contains("has no model.safetensors yet") && se.contains("proxima lm resume"), "{se}");
    assert!(se.contains("step_000004.safetensors"), "{se}");
    // Stopped before its first checkpoint: nothing to evaluate, and what to do.
    std::fs::remove_dir_all(unfinished.join("checkpoints")).unwrap();
    let (code, _, se) = proxima(&["lm", "eval", s(&unfinished)]);
    assert_eq!(code, 1, "{se}");
    assert!(se.contains("holds no model yet") && se.contains(&format!("proxima lm resume {}", s(&unfinished))), "{se}");
    assert!(!se.contains("No such file"), "{se}");
    // A directory that is no run at all.
    let (code, _, se) = proxima(&["lm", "eval", s(&base)]);
    assert_eq!(code, 1, "{se}");
    assert!(se.contains("holds no model.safetensors, and no config.json of a `proxima lm` run"), "{se}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn rl_commands_on_an_lm_run_say_so_and_name_the_lm_command() {
    let base = tmp("rl-on-lm");
    let lm = base.join("lm");
    lm_run(&lm);
    let shown = s(&lm);
    for args in [vec!["train", "--resume", shown, "--quiet"], vec!["eval", shown]] {
        let (code, _, se) = proxima(&args);
        assert_eq!(code, 1, "{args:?}: {se}");
        assert!(se.contains("a language-model run directory (`proxima lm`)"), "{args:?}: {se}");
        assert!(
            se.contains(&format!("proxima lm eval {shown}")) && se.contains(&format!("proxima lm resume {shown}")),
            "{args:?}: {se}"
        );
        assert!(!se.contains("damaged"), "{args:?}: {se}");
    }
    for file in ["model.safetensors", "checkpoints/step_000004.safetensors"] {
        let (code, _, se) = proxima(&["eval", s(&lm.join(file))]);
        assert_eq!(code, 1, "{se}");
        assert!(se.contains("a language-model file") && se.contains("`proxima lm eval` reads it"), "{se}");
    }
    let (code, _, se) = proxima(&["train", "CartPole-v1", "--quiet", "--run-dir", shown]);
    assert_eq!(code, 1, "{se}");
    assert!(se.contains("already holds a language-model run") && se.contains("proxima lm resume"), "{se}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn lm_commands_on_an_rl_run_say_so_and_name_the_rl_command() {
    let base = tmp("lm-on-rl");
    let rl = base.join("rl");
    rl_run(&rl);
    let shown = s(&rl);
    let (code, _, se) = proxima(&["lm", "eval", shown]);
    assert_eq!(code, 1, "{se}");
    assert!(
        se.contains("a reinforcement-learning run directory") && se.contains(&format!("proxima eval {shown}")),
        "{se}"
    );
    let (code, _, se) = proxima(&["lm", "eval", s(&rl.join("checkpoints/update_000002.safetensors"))]);
    assert_eq!(code, 1, "{se}");
    assert!(se.contains("a reinforcement-learning checkpoint") && se.contains("`proxima eval`"), "{se}");
    let (code, _, se) = proxima(&["lm", "resume", shown]);
    assert_eq!(code, 1, "{se}");
    assert!(se.contains(&format!("continue it with `proxima train --resume {shown}`")), "{se}");
    let (code, _, se) = proxima(&["lm", "sft", "--steps", "2", "-q", "--run-dir", shown]);
    assert_eq!(code, 1, "{se}");
    assert!(se.contains("holds a reinforcement-learning run") && !se.contains("lm resume"), "{se}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn resume_warns_that_an_edited_config_toml_is_not_used() {
    let base = tmp("edited");
    let run = base.join("run");
    rl_run(&run);
    let config = run.join("config.toml");
    // Extending the run as it is: no warning (--total-timesteps is the flag's to set).
    let (code, _, se) = proxima(&["train", "--resume", s(&run), "--total-timesteps", "384", "--quiet"]);
    assert_eq!(code, 0, "{se}");
    assert!(!se.contains("warning"), "{se}");
    // Edited: a comment (no difference) and two values.
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("learning_rate = 0.00025\n") && text.contains("n_epochs = 4\n"), "{text}");
    let edited = format!("# tuned\n{}", text.replace("learning_rate = 0.00025", "learning_rate = 0.001"));
    std::fs::write(&config, edited.replace("n_epochs = 4", "n_epochs = 3")).unwrap();
    let (code, _, se) = proxima(&["train", "--resume", s(&run), "--total-timesteps", "512", "--quiet"]);
    assert_eq!(code, 0, "{se}");
    assert!(
        se.contains(&format!("warning: {} differs from the config saved in the checkpoint", config.display())),
        "{se}"
    );
    assert!(se.contains("learning_rate = 0.001 in the file, 0.00025 in the checkpoint"), "{se}");
    assert!(se.contains("n_epochs = 3 in the file, 4 in the checkpoint"), "{se}");
    assert!(se.contains("the file is not used") && !se.contains("total_timesteps ="), "{se}");
    // The run went on with the checkpoint's config, and the file says so again.
    let ck = proxima::checkpoint::load(&run.join("model.safetensors")).unwrap();
    assert!(ck.meta.config_toml.contains("learning_rate = 0.00025\n"));
    assert_eq!(std::fs::read_to_string(&config).unwrap(), format!("env_id = \"CartPole-v1\"\n{}", ck.meta.config_toml));
    let _ = std::fs::remove_dir_all(&base);
}
