//! The `algo` key: which algorithm a config trains, as a type instead of a string.

use crate::error::ProximaError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// An algorithm a config may name (its `algo` key), written in configs, on the command line and
/// in messages as its lowercase name (`ppo`, `sac`, …: [`AlgoName::as_str`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AlgoName {
    /// Proximal Policy Optimization (`ppo`; PPO-Clip or the KL-penalty objectives).
    Ppo,
    /// Advantage actor-critic, synchronous (`a2c`).
    A2c,
    /// Asynchronous advantage actor-critic (`a3c`): worker threads, each with its own envs.
    A3c,
    /// Trust Region Policy Optimization (`trpo`).
    Trpo,
    /// REINFORCE, with or without a learned baseline (`reinforce`).
    Reinforce,
    /// Phasic Policy Gradient (`ppg`).
    Ppg,
    /// Soft Actor-Critic (`sac`).
    Sac,
    /// Twin Delayed DDPG (`td3`).
    Td3,
    /// Deep Deterministic Policy Gradient (`ddpg`).
    Ddpg,
    /// Truncated Quantile Critics (`tqc`, sb3-contrib's `TQC`).
    Tqc,
}

impl AlgoName {
    /// Every algorithm, in the order help texts and error messages list them.
    pub const ALL: [AlgoName; 10] = [
        AlgoName::Ppo,
        AlgoName::A2c,
        AlgoName::A3c,
        AlgoName::Trpo,
        AlgoName::Reinforce,
        AlgoName::Ppg,
        AlgoName::Sac,
        AlgoName::Td3,
        AlgoName::Ddpg,
        AlgoName::Tqc,
    ];

    /// The name configs and the command line use: `ppo`, `a2c`, `a3c`, `trpo`, `reinforce`,
    /// `ppg`, `sac`, `td3`, `ddpg` or `tqc`.
    pub const fn as_str(self) -> &'static str {
        match self {
            AlgoName::Ppo => "ppo",
            AlgoName::A2c => "a2c",
            AlgoName::A3c => "a3c",
            AlgoName::Trpo => "trpo",
            AlgoName::Reinforce => "reinforce",
            AlgoName::Ppg => "ppg",
            AlgoName::Sac => "sac",
            AlgoName::Td3 => "td3",
            AlgoName::Ddpg => "ddpg",
            AlgoName::Tqc => "tqc",
        }
    }

    /// Whether it learns off-policy, from a replay buffer (SAC, TD3, DDPG, TQC).
    pub fn is_off_policy(self) -> bool {
        matches!(self, AlgoName::Sac | AlgoName::Td3 | AlgoName::Ddpg | AlgoName::Tqc)
    }

    /// Whether its actor is SAC's squashed Gaussian with a learned temperature (SAC, TQC).
    pub fn has_temperature(self) -> bool {
        matches!(self, AlgoName::Sac | AlgoName::Tqc)
    }

    /// Whether it takes one gradient step on the whole rollout, so has no minibatch size to
    /// check (A2C, A3C, REINFORCE).
    pub fn steps_on_whole_rollout(self) -> bool {
        matches!(self, AlgoName::A2c | AlgoName::A3c | AlgoName::Reinforce)
    }

    /// The algorithm named exactly `name`, or the message that explains an unknown name (with
    /// a "did you mean" when one is close, and every known name).
    fn named(name: &str) -> Result<AlgoName, String> {
        if let Some(algo) = AlgoName::ALL.into_iter().find(|a| a.as_str() == name) {
            return Ok(algo);
        }
        let hint =
            crate::did_you_mean::closest(name, &ALGOS).map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default();
        Err(format!("algo = `{name}`{hint}: known algorithms are {}", ALGOS.join(", ")))
    }
}

/// The names `algo` may take, in [`AlgoName::ALL`]'s order.
pub const ALGOS: [&str; 10] = {
    let mut names = [""; 10];
    let mut i = 0;
    while i < names.len() {
        names[i] = AlgoName::ALL[i].as_str();
        i += 1;
    }
    names
};

impl fmt::Display for AlgoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AlgoName {
    type Err = ProximaError;

    /// The algorithm named exactly (lowercase) `name`.
    ///
    /// # Errors
    /// `Config` naming `name`, the closest known name when there is one, and every known name.
    fn from_str(name: &str) -> Result<Self, ProximaError> {
        AlgoName::named(name).map_err(ProximaError::Config)
    }
}

impl Serialize for AlgoName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A string, read as [`AlgoName::from_str`] reads it (its message for an unknown name); another
/// type is serde's usual "invalid type" error.
impl<'de> Deserialize<'de> for AlgoName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        AlgoName::named(&name).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_explained() {
        for a in AlgoName::ALL {
            assert_eq!(a.as_str().parse::<AlgoName>().unwrap(), a);
            assert_eq!(a.to_string(), a.as_str());
        }
        assert_eq!(ALGOS, ["ppo", "a2c", "a3c", "trpo", "reinforce", "ppg", "sac", "td3", "ddpg", "tqc"]);
        let e = "sacc".parse::<AlgoName>().unwrap_err().to_string();
        assert!(e.contains("algo = `sacc` (did you mean `sac`?): known algorithms are ppo, a2c,"), "{e}");
        let e = "PPO".parse::<AlgoName>().unwrap_err().to_string();
        assert!(e.contains("(did you mean `ppo`?)"), "names are lowercase: {e}");
        let e = "zzzzzzzzzz".parse::<AlgoName>().unwrap_err().to_string();
        assert!(!e.contains("did you mean") && e.ends_with("ddpg, tqc"), "{e}");
        let off: Vec<_> = AlgoName::ALL.into_iter().filter(|a| a.is_off_policy()).collect();
        assert_eq!(off, [AlgoName::Sac, AlgoName::Td3, AlgoName::Ddpg, AlgoName::Tqc]);
    }
}
