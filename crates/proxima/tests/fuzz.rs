//! Property-based fuzzing (proptest) of the three places that take untrusted input: the config
//! parser, the checkpoint loader and the environments' step functions. Each property is
//! "never panics, never hangs, returns Ok or a typed error".
//!
//! The fast suite runs a few hundred cases per target; `bench/fuzz.sh` runs them for longer
//! (`PROPTEST_CASES`). Inputs that once crashed are kept as explicit regression cases below.

use proptest::prelude::*;
use proxima::checkpoint;
use proxima::config::Config;
use proxima::env::{make, Action, NATIVE_ENV_IDS};
use proxima::train::Trainer;
use std::sync::OnceLock;

/// `default` cases from a fixed seed in the fast suite (so CI is deterministic); with
/// `PROPTEST_CASES` / `PROPTEST_RNG_SEED` set (bench/fuzz.sh) as many cases from a random seed.
fn cases(default: u32) -> ProptestConfig {
    let mut c = ProptestConfig::default(); // reads the PROPTEST_* variables
    c.failure_persistence = None;
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = default;
        if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
            c.rng_seed = proptest::test_runner::RngSeed::Fixed(20_261_130);
        }
    }
    c
}

const KEYS: [&str; 8] =
    ["n_steps", "batch_size", "gamma", "net_arch", "clip_range_vf", "activation", "learning_rate", "n_stepz"];

fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| format!("{v:?}")),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("true".to_string()),
        "\"[a-z]{0,8}\"",
        prop::collection::vec(0usize..200, 0..4).prop_map(|v| format!("{v:?}")),
        "[ -~]{0,12}", // printable garbage, often not TOML at all
    ]
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn config_resolve_never_panics(
        lines in prop::collection::vec((prop::sample::select(KEYS.to_vec()), toml_value()), 0..6),
        sets in prop::collection::vec((prop::sample::select(KEYS.to_vec()), toml_value()), 0..4),
        raw in "[ -~\n]{0,40}",
    ) {
        let file: String = lines.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
        let sets: Vec<String> = sets.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if let Ok(cfg) = Config::resolve("cleanrl", Some(&file), &sets) {
            prop_assert!(cfg.clone().into_config().validate().is_ok());
            prop_assert_eq!(cfg.n_steps * cfg.n_envs % cfg.batch_size, 0);
        }
        let _ = Config::resolve("sb3", Some(&raw), &[raw.clone()]);
    }
}

/// A small valid checkpoint (CartPole, 2×8 network) to mutate.
fn valid_checkpoint() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let cfg = Config::resolve(
            "cleanrl",
            None,
            &["n_envs=1".into(), "n_steps=8".into(), "batch_size=8".into(), "net_arch=[8, 8]".into()],
        )
        .unwrap();
        let tr = Trainer::new("Pendulum-v1", cfg).unwrap();
        let path = std::env::temp_dir().join(format!("proxima-fuzz-base-{}.safetensors", std::process::id()));
        tr.save(&path).unwrap();
        let b = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        b
    })
}

fn load_bytes(bytes: &[u8], tag: u64) {
    let path = std::env::temp_dir().join(format!("proxima-fuzz-{}-{tag}.safetensors", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    if let Ok(ck) = checkpoint::load(&path) {
        if let Ok(p) = ck.build_policy(&candle_core::Device::Cpu) {
            // Whatever loaded must be usable.
            let _ = p.act(
                &vec![0.0; p.spec().obs_dim],
                true,
                &mut <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0),
            );
        }
        let _ = Trainer::resume(&ck, None);
    }
    let _ = std::fs::remove_file(&path);
}

proptest! {
    #![proptest_config(cases(128))]

    #[test]
    fn checkpoint_loader_never_panics_on_mutations(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in proptest::option::of(any::<prop::sample::Index>()),
        tag in any::<u64>(),
    ) {
        let mut b = valid_checkpoint().to_vec();
        for (i, v) in flips {
            let i = i.index(b.len());
            b[i] = v;
        }
        if let Some(c) = cut {
            b.truncate(c.index(b.len()));
        }
        load_bytes(&b, tag);
    }

    #[test]
    fn checkpoint_loader_never_panics_on_header_edits(
        // Rewrite a piece of the JSON header: the metadata (policy_spec, trainer_state, …) is
        // where a corrupt file could ask for a huge network or a malformed state.
        at in any::<prop::sample::Index>(),
        text in prop_oneof!["[0-9]{1,12}", "[\\[\\]{},:\"a-z_ 0-9]{0,24}", Just("99999999999".to_string())],
        tag in any::<u64>(),
    ) {
        let b = valid_checkpoint();
        let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
        let header = String::from_utf8_lossy(&b[8..8 + n]).to_string();
        let i = at.index(header.len());
        let j = (i + text.len()).min(header.len());
        if header.is_char_boundary(i) && header.is_char_boundary(j) {
            let new_header = format!("{}{}{}", &header[..i], text, &header[j..]);
            let mut out = (new_header.len() as u64).to_le_bytes().to_vec();
            out.extend_from_slice(new_header.as_bytes());
            out.extend_from_slice(&b[8 + n..]);
            load_bytes(&out, tag);
        }
    }

    #[test]
    fn env_step_never_panics(
        env_index in 0usize..5,
        state in prop::collection::vec(prop_oneof![any::<f64>(), -10.0f64..10.0, Just(f64::NAN), Just(f64::INFINITY), Just(1e300)], 0..6),
        actions in prop::collection::vec(prop_oneof![
            (0usize..5).prop_map(|a| (Some(a), vec![])),
            prop::collection::vec(prop_oneof![any::<f32>(), -3.0f32..3.0], 0..3).prop_map(|v| (None, v)),
        ], 1..30),
        seed in any::<u64>(),
    ) {
        let mut env = make(NATIVE_ENV_IDS[env_index]).unwrap();
        env.reset(Some(seed)).unwrap();
        let _ = env.set_state(&state);
        for (d, c) in &actions {
            let a = match d { Some(a) => Action::Discrete(*a), None => Action::Continuous(c) };
            if let Ok(r) = env.step(a) {
                prop_assert_eq!(r.observation.len(), env.observation_space().flat_dim());
                if r.terminated || r.truncated {
                    env.reset(None).unwrap();
                }
            }
        }
    }
}

/// A checkpoint whose `policy_spec` claims a network of 10¹⁰ units is refused before anything
/// is allocated: the claimed network is compared with the file's tensors before it is built.
#[test]
fn a_checkpoint_claiming_a_huge_network_is_refused_before_allocating_it() {
    let b = valid_checkpoint();
    let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    let header = String::from_utf8_lossy(&b[8..8 + n]).to_string();
    assert!(header.contains("[8,8]"), "{header}");
    let new_header = header.replacen("[8,8]", "[10000000000,8]", 1);
    let mut out = (new_header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(new_header.as_bytes());
    out.extend_from_slice(&b[8 + n..]);
    let path = std::env::temp_dir().join(format!("proxima-fuzz-huge-{}.safetensors", std::process::id()));
    std::fs::write(&path, &out).unwrap();
    let e = checkpoint::load(&path).unwrap().build_policy(&candle_core::Device::Cpu).unwrap_err().to_string();
    assert!(e.contains("policy_spec"), "{e}");
    let _ = std::fs::remove_file(&path);
}

/// Oversized rollouts (`n_steps × n_envs` past usize included), env counts and layer widths are
/// refused by validation, before anything is allocated.
#[test]
fn oversized_rollouts_env_counts_and_layer_widths_are_refused_without_overflow() {
    for sets in [
        vec!["n_steps=9223372036854775807".to_string(), "n_envs=4".into()],
        vec!["n_steps=100000000".into()],
        vec!["n_envs=1000000".into()],
        vec!["net_arch=[64, 100000000]".into()],
    ] {
        let e = Config::resolve("cleanrl", None, &sets).unwrap_err().to_string();
        assert!(e.contains("exceeds") || e.contains("at most"), "{sets:?}: {e}");
    }
}
