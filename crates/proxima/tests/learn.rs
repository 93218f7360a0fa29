//! Training as a library call: `Trainer::learn(total_timesteps, callback)` without a run
//! directory, callbacks that observe and stop it, and the run directory as one such observer.

use proxima::config::Config;
use proxima::policy::Policy;
use proxima::train::{Callback, NoCallback, RunDir, Trainer, UpdateReport};

fn trainer(total: u64) -> Trainer {
    let sets =
        ["n_envs=2".to_string(), "n_steps=32".into(), "batch_size=32".into(), format!("total_timesteps={total}")];
    Trainer::new("CartPole-v1", Config::resolve("cleanrl", None, &sets).unwrap()).unwrap()
}

#[test]
fn learn_runs_every_iteration_and_tells_the_callback() {
    let mut tr = trainer(640);
    let mut seen = Vec::new();
    tr.learn(640, &mut |t: &Trainer, r: &UpdateReport| {
        assert_eq!(t.update, r.update, "the callback sees the trainer after the iteration");
        seen.push((r.update, r.global_step));
        Ok(true)
    })
    .unwrap();
    assert_eq!(seen, (1..=10).map(|u| (u, 64 * u)).collect::<Vec<_>>());
    assert!(tr.is_done());
}

#[test]
fn on_training_start_runs_once_before_the_first_iteration() {
    struct Counts(usize, Vec<u64>);
    impl Callback for Counts {
        fn on_training_start(&mut self, trainer: &Trainer) -> proxima::Result<()> {
            assert_eq!(trainer.update, 0, "before the first iteration");
            self.0 += 1;
            Ok(())
        }
        fn on_update(&mut self, _: &Trainer, r: &UpdateReport) -> proxima::Result<bool> {
            self.1.push(r.update);
            Ok(true)
        }
    }
    let mut c = Counts(0, Vec::new());
    trainer(192).learn(192, &mut c).unwrap();
    assert_eq!((c.0, c.1), (1, vec![1, 2, 3]));
}

#[test]
fn a_callback_returning_false_stops_training_and_errors_propagate() {
    let mut tr = trainer(640);
    tr.learn(640, &mut |_: &Trainer, r: &UpdateReport| Ok(r.update < 3)).unwrap();
    assert_eq!((tr.update, tr.global_step), (3, 192));
    struct Fails;
    impl Callback for Fails {
        fn on_update(&mut self, _: &Trainer, _: &UpdateReport) -> proxima::Result<bool> {
            Err(proxima::ProximaError::InvalidArgument("stop here".into()))
        }
    }
    let e = tr.learn(640, &mut Fails).unwrap_err().to_string();
    assert!(e.contains("stop here"), "{e}");
    assert_eq!(tr.update, 4, "the iteration ran, then the callback's error stopped training");
}

#[test]
fn learn_with_a_new_total_follows_it_and_matches_a_run_of_that_length() {
    // A trainer built for 320 steps and told to learn 640 ends where one built for 640 does.
    let (mut a, mut b) = (trainer(320), trainer(640));
    a.learn(640, &mut NoCallback).unwrap();
    b.learn(640, &mut NoCallback).unwrap();
    assert_eq!((a.num_updates, a.global_step, a.cfg.total_timesteps), (10, 640, 640));
    assert_eq!(a.policy.params().unwrap(), b.policy.params().unwrap());
    let e = trainer(320).learn(0, &mut NoCallback).unwrap_err().to_string();
    assert!(e.contains("total_timesteps"), "{e}");
}

#[test]
fn the_run_directory_is_one_observer() {
    let dir = std::env::temp_dir().join(format!("proxima-learn-rundir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut tr = trainer(192);
    let mut run_dir = RunDir::create(&dir, &mut tr).unwrap();
    let t0 = std::time::Instant::now();
    tr.learn(192, &mut run_dir).unwrap();
    let summary = run_dir.finish(&tr, t0).unwrap();
    let csv = std::fs::read_to_string(dir.join("progress.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 3, "{csv}");
    assert!(summary.model.is_file() && dir.join("eval.json").is_file() && dir.join("config.toml").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}
