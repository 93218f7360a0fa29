//! The replay buffer of the off-policy algorithms (SAC, TD3, DDPG): a preallocated ring of
//! transitions (s, a, r, s', terminated) for N envs, sampled uniformly (Stable-Baselines3's
//! `ReplayBuffer`, `optimize_memory_usage = False`).
//!
//! Layout, row-major: `observations` and `next_observations` `[capacity, N, obs_dim]`, `actions`
//! `[capacity, N, act_dim]`, `rewards`, `terminated`, `truncated` `[capacity, N]`, f32 (flags as
//! u8). `capacity` = ⌈`buffer_size` / N⌉ rows, as SB3 (`buffer_size` counts transitions).
//!
//! A time-limit end (`truncated` and not `terminated`) is stored with the episode's real last
//! observation as s' and is *not* a terminal for the target: the target bootstraps from it
//! (SB3's `handle_timeout_termination = True`).

use crate::error::{ProximaError, Result};
use rand::Rng;

/// Bytes one transition of an env with `obs_dim` observation and `act_dim` action values takes.
pub fn bytes_per_transition(obs_dim: usize, act_dim: usize) -> usize {
    4 * (2 * obs_dim + act_dim + 1) + 2
}

/// The most memory a replay buffer may take: the machine's available memory less a quarter
/// (read from `/proc/meminfo` where there is one), else 8 GiB.
pub fn memory_limit() -> u64 {
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    available.map_or(8 << 30, |b| b / 4 * 3)
}

/// "1.23 GB"-style size for messages.
pub fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.2} GB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / (1u64 << 20) as f64),
        b => format!("{:.1} kB", b as f64 / 1024.0),
    }
}

/// A batch of transitions sampled from the buffer, `B` rows (shapes as the buffer's, one row
/// per transition).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplaySample {
    /// B.
    pub len: usize,
    /// s, `[B, obs_dim]`.
    pub observations: Vec<f32>,
    /// a as stored (the squashed action in [−1, 1] for SAC/TD3), `[B, act_dim]`.
    pub actions: Vec<f32>,
    /// r, `[B]`.
    pub rewards: Vec<f32>,
    /// s', `[B, obs_dim]` (the real last observation where the episode ended).
    pub next_observations: Vec<f32>,
    /// 1 where s' is terminal (no bootstrap), else 0 — a time-limit cut is 0; `[B]`.
    pub dones: Vec<f32>,
}

/// The ring buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayBuffer {
    /// Rows (steps of all N envs) it holds at most.
    pub capacity: usize,
    /// N.
    pub n_envs: usize,
    /// Flattened observation length.
    pub obs_dim: usize,
    /// Flattened action length.
    pub act_dim: usize,
    /// Next row to write.
    pub pos: usize,
    /// Whether the ring has wrapped (every row holds a transition).
    pub full: bool,
    pub(crate) observations: Vec<f32>,
    pub(crate) next_observations: Vec<f32>,
    pub(crate) actions: Vec<f32>,
    pub(crate) rewards: Vec<f32>,
    pub(crate) terminated: Vec<u8>,
    pub(crate) truncated: Vec<u8>,
}

impl ReplayBuffer {
    /// A buffer of `buffer_size` transitions (⌈buffer_size / n_envs⌉ rows), all memory
    /// allocated now.
    ///
    /// # Errors
    /// `Config` for a size of 0, or one that would take more than [`memory_limit`] (the message
    /// says how much it needs).
    pub fn new(buffer_size: usize, n_envs: usize, obs_dim: usize, act_dim: usize) -> Result<Self> {
        let bad = |m: String| Err(ProximaError::Config(m));
        if buffer_size == 0 || n_envs == 0 {
            return bad(format!("buffer_size = {buffer_size} with n_envs = {n_envs}: both must be at least 1"));
        }
        let capacity = buffer_size.div_ceil(n_envs);
        let need = (capacity as u128) * (n_envs as u128) * bytes_per_transition(obs_dim, act_dim) as u128;
        let limit = memory_limit();
        if need > limit as u128 {
            return bad(format!(
                "buffer_size = {buffer_size}: a replay buffer of {buffer_size} transitions of {obs_dim} observation and {act_dim} action values needs {}, more than the {} this machine can give it (3/4 of its available memory); lower buffer_size",
                human_bytes(need.min(u64::MAX as u128) as u64),
                human_bytes(limit)
            ));
        }
        let rows = capacity * n_envs;
        Ok(ReplayBuffer {
            capacity,
            n_envs,
            obs_dim,
            act_dim,
            pos: 0,
            full: false,
            observations: vec![0.0; rows * obs_dim],
            next_observations: vec![0.0; rows * obs_dim],
            actions: vec![0.0; rows * act_dim],
            rewards: vec![0.0; rows],
            terminated: vec![0; rows],
            truncated: vec![0; rows],
        })
    }

    /// Bytes the buffer holds.
    pub fn memory_bytes(&self) -> u64 {
        (self.capacity * self.n_envs * bytes_per_transition(self.obs_dim, self.act_dim)) as u64
    }

    /// Rows filled so far (at most `capacity`).
    pub fn len(&self) -> usize {
        if self.full {
            self.capacity
        } else {
            self.pos
        }
    }

    /// Whether nothing was stored yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores one step of the N envs: `obs`, `next_obs` `[N, obs_dim]` (s' = the real last
    /// observation where an episode ended), `actions` `[N, act_dim]`, `rewards`, `terminated`,
    /// `truncated` `[N]`; the oldest row is overwritten once full.
    ///
    /// # Errors
    /// `InvalidArgument` when a length does not fit; nothing is stored then.
    pub fn add(
        &mut self,
        obs: &[f32],
        next_obs: &[f32],
        actions: &[f32],
        rewards: &[f32],
        terminated: &[bool],
        truncated: &[bool],
    ) -> Result<()> {
        let (n, od, ad) = (self.n_envs, self.obs_dim, self.act_dim);
        let lens = [obs.len(), next_obs.len(), actions.len(), rewards.len(), terminated.len(), truncated.len()];
        if lens != [n * od, n * od, n * ad, n, n, n] {
            return Err(ProximaError::InvalidArgument(format!(
                "replay buffer add: lengths {lens:?}, expected {:?}",
                [n * od, n * od, n * ad, n, n, n]
            )));
        }
        let r = self.pos;
        self.observations[r * n * od..(r + 1) * n * od].copy_from_slice(obs);
        self.next_observations[r * n * od..(r + 1) * n * od].copy_from_slice(next_obs);
        self.actions[r * n * ad..(r + 1) * n * ad].copy_from_slice(actions);
        self.rewards[r * n..(r + 1) * n].copy_from_slice(rewards);
        for e in 0..n {
            self.terminated[r * n + e] = terminated[e] as u8;
            self.truncated[r * n + e] = truncated[e] as u8;
        }
        self.pos = (self.pos + 1) % self.capacity;
        self.full |= self.pos == 0;
        Ok(())
    }

    /// `batch_size` transitions drawn uniformly with replacement (a row among those filled,
    /// then an env), into `out` (reused). `dones` = terminated (a time-limit cut is not a
    /// terminal).
    ///
    /// # Errors
    /// `InvalidArgument` when the buffer is empty.
    pub fn sample_into<R: Rng + ?Sized>(&self, batch_size: usize, rng: &mut R, out: &mut ReplaySample) -> Result<()> {
        let rows = self.len();
        if rows == 0 {
            return Err(ProximaError::InvalidArgument("sampling an empty replay buffer".into()));
        }
        let (n, od, ad) = (self.n_envs, self.obs_dim, self.act_dim);
        out.len = batch_size;
        for v in [&mut out.observations, &mut out.next_observations, &mut out.actions, &mut out.rewards, &mut out.dones]
        {
            v.clear();
        }
        for _ in 0..batch_size {
            let i = rng.random_range(0..rows) * n + rng.random_range(0..n);
            out.observations.extend_from_slice(&self.observations[i * od..(i + 1) * od]);
            out.next_observations.extend_from_slice(&self.next_observations[i * od..(i + 1) * od]);
            out.actions.extend_from_slice(&self.actions[i * ad..(i + 1) * ad]);
            out.rewards.push(self.rewards[i]);
            out.dones.push(self.terminated[i] as f32);
        }
        Ok(())
    }

    /// The buffer's arrays by name, for a checkpoint (`save_replay_buffer`): only the filled
    /// rows, and `pos`/`full`/shape as the metadata [`ReplayBuffer::from_parts`] reads back.
    pub fn to_parts(&self) -> (Vec<(&'static str, Vec<f32>)>, String) {
        let rows = self.len() * self.n_envs;
        let f = |v: &[u8]| v[..rows].iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let arrays = vec![
            ("observations", self.observations[..rows * self.obs_dim].to_vec()),
            ("next_observations", self.next_observations[..rows * self.obs_dim].to_vec()),
            ("actions", self.actions[..rows * self.act_dim].to_vec()),
            ("rewards", self.rewards[..rows].to_vec()),
            ("terminated", f(&self.terminated)),
            ("truncated", f(&self.truncated)),
        ];
        let meta = serde_json::json!({
            "capacity": self.capacity, "n_envs": self.n_envs, "obs_dim": self.obs_dim,
            "act_dim": self.act_dim, "pos": self.pos, "full": self.full,
        });
        (arrays, meta.to_string())
    }

    /// Puts arrays written by [`ReplayBuffer::to_parts`] back into this buffer (of the same
    /// shape).
    ///
    /// # Errors
    /// `Checkpoint` when the metadata or an array does not fit this buffer, a value is not
    /// finite or a flag is not 0 or 1; nothing is changed then.
    pub fn load_parts(&mut self, meta: &str, get: &dyn Fn(&str) -> Option<Vec<f32>>) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Checkpoint(format!("replay buffer: {m}")));
        let m: serde_json::Value = match serde_json::from_str(meta) {
            Ok(m) => m,
            Err(e) => return bad(format!("malformed metadata ({e})")),
        };
        let num = |k: &str| m.get(k).and_then(|v| v.as_u64()).map(|v| v as usize);
        let shape = [num("capacity"), num("n_envs"), num("obs_dim"), num("act_dim")];
        if shape != [Some(self.capacity), Some(self.n_envs), Some(self.obs_dim), Some(self.act_dim)] {
            let saved: Vec<String> = shape.iter().map(|v| v.map_or("?".into(), |v| v.to_string())).collect();
            return bad(format!(
                "saved for capacity {}, n_envs {}, obs_dim {}, act_dim {}; this run's are {}, {}, {}, {}",
                saved[0], saved[1], saved[2], saved[3], self.capacity, self.n_envs, self.obs_dim, self.act_dim
            ));
        }
        let (Some(pos), Some(full)) = (num("pos"), m.get("full").and_then(|v| v.as_bool())) else {
            return bad("no pos/full in the metadata".into());
        };
        if pos >= self.capacity {
            return bad(format!("pos {pos} outside capacity {}", self.capacity));
        }
        let rows = if full { self.capacity } else { pos } * self.n_envs;
        // Read and check every array first: nothing is changed unless all of them fit.
        let read = |name: &str, width: usize, flag: bool| -> Result<Vec<f32>> {
            let v = get(name).ok_or_else(|| ProximaError::Checkpoint(format!("replay buffer: `{name}` is missing")))?;
            if v.len() != rows * width {
                let m = format!("replay buffer: `{name}` holds {} values, expected {}", v.len(), rows * width);
                return Err(ProximaError::Checkpoint(m));
            }
            match v.iter().position(|&x| if flag { x != 0.0 && x != 1.0 } else { !x.is_finite() }) {
                Some(i) => {
                    let why = if flag { "a flag must be 0 or 1" } else { "not finite" };
                    Err(ProximaError::Checkpoint(format!("replay buffer: `{name}`[{i}] is {} ({why})", v[i])))
                }
                None => Ok(v),
            }
        };
        let (od, ad) = (self.obs_dim, self.act_dim);
        let arrays = [
            read("observations", od, false)?,
            read("next_observations", od, false)?,
            read("actions", ad, false)?,
            read("rewards", 1, false)?,
            read("terminated", 1, true)?,
            read("truncated", 1, true)?,
        ];
        let [o, no, a, r, te, tr] = arrays;
        self.observations[..o.len()].copy_from_slice(&o);
        self.next_observations[..no.len()].copy_from_slice(&no);
        self.actions[..a.len()].copy_from_slice(&a);
        self.rewards[..r.len()].copy_from_slice(&r);
        self.terminated.iter_mut().zip(&te).for_each(|(d, &f)| *d = f as u8);
        self.truncated.iter_mut().zip(&tr).for_each(|(d, &f)| *d = f as u8);
        self.pos = pos;
        self.full = full;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn step(buf: &mut ReplayBuffer, k: f32, term: [bool; 2], trunc: [bool; 2]) {
        buf.add(&[k, k + 0.5], &[k + 1.0, k + 1.5], &[-k, -k - 0.5], &[k, k + 0.5], &term, &trunc).unwrap();
    }

    #[test]
    fn wraps_around_and_keeps_the_newest_rows() {
        let mut buf = ReplayBuffer::new(6, 2, 1, 1).unwrap(); // 3 rows of 2 envs
        assert_eq!((buf.capacity, buf.len()), (3, 0));
        for k in 0..5 {
            step(&mut buf, k as f32, [false; 2], [false; 2]);
        }
        assert!(buf.full);
        assert_eq!((buf.len(), buf.pos), (3, 2));
        // Rows now hold steps 3, 4, 2 (row 0 and 1 overwritten).
        assert_eq!(&buf.observations, &[3.0, 3.5, 4.0, 4.5, 2.0, 2.5]);
        let mut s = ReplaySample::default();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        buf.sample_into(500, &mut rng, &mut s).unwrap();
        let mut seen: Vec<f32> = s.observations.clone();
        seen.sort_by(f32::total_cmp);
        seen.dedup();
        assert_eq!(seen, vec![2.0, 2.5, 3.0, 3.5, 4.0, 4.5], "every stored transition is drawn, no stale one");
        // Each sample is one transition: s' = s + 1, a = −s, r = s.
        for i in 0..s.len {
            let o = s.observations[i];
            assert_eq!((s.next_observations[i], s.actions[i], s.rewards[i]), (o + 1.0, -o, o));
        }
    }

    #[test]
    fn a_time_limit_cut_is_not_a_terminal() {
        let mut buf = ReplayBuffer::new(2, 2, 1, 1).unwrap(); // 1 row
        step(&mut buf, 1.0, [true, false], [false, true]);
        let mut s = ReplaySample::default();
        buf.sample_into(200, &mut rand_chacha::ChaCha8Rng::seed_from_u64(2), &mut s).unwrap();
        for i in 0..s.len {
            let want = if s.observations[i] == 1.0 { 1.0 } else { 0.0 };
            assert_eq!(s.dones[i], want, "env 0 terminated (done), env 1 truncated (bootstrapped)");
        }
    }

    #[test]
    fn bad_sizes_are_clear_errors_and_the_parts_round_trip() {
        let e = ReplayBuffer::new(usize::MAX / 2, 1, 17, 6).unwrap_err().to_string();
        assert!(e.contains("buffer_size") && e.contains("needs") && e.contains("GB"), "{e}");
        assert!(ReplayBuffer::new(0, 1, 3, 1).is_err());
        let mut buf = ReplayBuffer::new(4, 1, 1, 1).unwrap();
        assert!(buf
            .sample_into(1, &mut rand_chacha::ChaCha8Rng::seed_from_u64(0), &mut ReplaySample::default())
            .is_err());
        assert!(buf.add(&[1.0], &[1.0], &[1.0], &[1.0], &[false, false], &[false]).is_err());
        for k in 0..3 {
            buf.add(&[k as f32], &[1.0], &[2.0], &[3.0], &[k == 1], &[k == 2]).unwrap();
        }
        let (arrays, meta) = buf.to_parts();
        let mut back = ReplayBuffer::new(4, 1, 1, 1).unwrap();
        back.load_parts(&meta, &|n| arrays.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone())).unwrap();
        assert_eq!(back, buf);
        let mut other = ReplayBuffer::new(8, 1, 1, 1).unwrap();
        assert!(other.load_parts(&meta, &|_| None).unwrap_err().to_string().contains("capacity"));
        for (name, bad, why) in [("rewards", f32::NAN, "not finite"), ("terminated", 7.0, "0 or 1")] {
            let mut fresh = ReplayBuffer::new(4, 1, 1, 1).unwrap();
            let get = |n: &str| {
                let mut v = arrays.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone())?;
                if n == name {
                    v[1] = bad;
                }
                Some(v)
            };
            let e = fresh.load_parts(&meta, &get).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains(why), "{e}");
            assert_eq!(fresh, ReplayBuffer::new(4, 1, 1, 1).unwrap(), "nothing loaded from a damaged buffer");
        }
        // A 1M-transition buffer of a 17-dim observation, 6-dim action env: ~150 MB.
        assert_eq!(human_bytes(1_000_000 * bytes_per_transition(17, 6) as u64), "158.3 MB");
    }
}
