//! The config's observable output, pinned to what the code before the `config/` module split
//! (issue 35) produced, which wrote the fixtures in `tests/fixtures/config/`: every preset's
//! TOML (what a run's `config.toml` holds) byte for byte, a few configs off the presets' values,
//! the list of keys, and the outcome of resolves that reach every validation rule and each
//! layering error, message for message. A fixture changes only with a deliberate change of a
//! preset, a key or a message.

use proxima::config::{Config, PRESETS};
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn every_preset_writes_the_same_toml() {
    let files = std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config")).unwrap();
    let pinned = files
        .filter_map(|f| f.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".toml") && !n.starts_with("variant_"));
    assert_eq!(pinned.count(), PRESETS.len(), "one fixture per preset");
    for p in PRESETS {
        assert_eq!(Config::preset(p).unwrap().to_toml(), fixture(&format!("{p}.toml")), "preset {p}");
    }
}

#[test]
fn configs_off_the_presets_write_the_same_toml() {
    let variants: [(&str, &str, &[&str]); 3] = [
        ("sac_auto_target", "sac", &["ent_coef=auto_0.1", "target_entropy=-2.5"]),
        ("sac_fixed_alpha", "sac", &["ent_coef=0.2", "seed=7"]),
        (
            "cleanrl_options_off",
            "cleanrl",
            &[
                "clip_range_vf=none",
                "max_grad_norm=none",
                "target_kl=0.015",
                "net_arch=[32, 16, 8]",
                "vector_env=subproc",
                "backend=candle",
                "objective=adaptive_kl",
                "normalize_advantage=off",
                "learning_rate=1e-3",
                "gamma=0.5",
            ],
        ),
    ];
    for (label, preset, sets) in variants {
        let toml = Config::resolve(preset, None, &strings(sets)).unwrap().to_toml();
        assert_eq!(toml, fixture(&format!("variant_{label}.toml")), "{label}");
    }
}

#[test]
fn the_keys_are_the_same() {
    assert_eq!(Config::keys().join("\n") + "\n", fixture("keys.txt"));
}

/// With `PROXIMA_REPIN=1` the resolve outcomes are written back to the fixture instead of
/// compared (after a deliberate change of a message: review the fixture's diff).
#[test]
fn resolves_succeed_and_fail_as_before_with_the_same_messages() {
    let mut cases: Vec<serde_json::Value> = serde_json::from_str(&fixture("resolve_results.json")).unwrap();
    assert!(cases.len() > 100, "{} cases", cases.len());
    let repin = std::env::var("PROXIMA_REPIN").is_ok_and(|v| v == "1");
    for case in &mut cases {
        let preset = case["preset"].as_str().unwrap();
        let file = case["file"].as_str();
        let sets: Vec<String> =
            case["sets"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect();
        let ranks = case["ranks"].as_u64().unwrap() as usize;
        let got = match Config::resolve_over(preset, file, &sets, ranks) {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("error: {e}"),
        };
        if repin {
            case["result"] = serde_json::Value::String(got);
        } else {
            assert_eq!(got, case["result"].as_str().unwrap(), "{case}");
        }
    }
    if repin {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config/resolve_results.json");
        std::fs::write(path, serde_json::to_string_pretty(&cases).unwrap() + "\n").unwrap();
    }
}
