//! The worker process of `vector_env = "subproc"` for `atari:` envs: the program registered with
//! [`crate::set_worker_program`] (the `proxima` CLI) run as `PROGRAM __atari-worker CONFIG`
//! makes `k` envs of `atari:SPEC` ([`make_atari_env`]: the game in ale-py, Proxima's wrappers
//! around it) and answers the parent's messages with the protocol of `subproc_worker.py` (its
//! module doc), so the parent's [`crate::SubprocVectorEnv`] reads it as it reads a Python
//! worker, with two differences: observations cross as uint8 (the frames' own values, a quarter
//! of the bytes), and the step reply adds, in the flag byte of each env whose episode ended,
//! whether a life was lost (4) or the game ended (8), and after the final observations each
//! ended game's score (f64) and raw frames (u64), in env order: what [`GameEpisode::of`] reads
//! from the env's info.
//!
//! Every conversion is the in-process one, so the results are the same bits as stepping the envs
//! in the training process: the observations are the env's f32 values, an ended episode's env is
//! reset with no seed, env `j` of the worker is reset with `seed + first + j`.

use crate::make_atari_env;
use proxima_env::atari::GameEpisode;
use proxima_env::{Action, Env};
use std::io::{Read, Write};

/// The first argument that makes the registered program serve as a worker ([`serve`]).
pub const ARG: &str = "__atari-worker";

/// A step reply's flag bits past terminated (1) and truncated (2): the ended episode was a lost
/// life, or the game's end (its score and frames follow the final observations).
pub(crate) const LIFE_LOST: u8 = 4;
pub(crate) const GAME_OVER: u8 = 8;

/// Serves as a worker of the parent on this process's stdin and stdout, its config (`spec`,
/// `first`, `k`) the JSON `config`; returns the process's exit code (0 when the parent closed
/// the pipe, 1 after an error, which was sent to the parent).
pub fn serve(config: &str) -> i32 {
    let mut out = protocol_stdout();
    let mut input = std::io::stdin().lock();
    match run(config, &mut input, &mut out) {
        Ok(()) => 0,
        Err(msg) => {
            let _ = reply(&mut out, b'E', msg.as_bytes());
            // The parent reads the message, then closes the pipe.
            let mut byte = [0u8; 1];
            while matches!(input.read(&mut byte), Ok(n) if n > 0) {}
            1
        }
    }
}

/// The protocol's output: this process's stdout, from now on only the protocol's (anything the
/// game or Python print goes to stderr); Ctrl-C ignored (the parent saves, then closes this
/// worker) and, on Linux, killed when the parent dies.
#[cfg(unix)]
fn protocol_stdout() -> Box<dyn Write> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain libc calls on this process's own descriptors and signal dispositions; the
    // duplicated descriptor is owned by the File alone.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        #[cfg(target_os = "linux")]
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let fd = libc::dup(1);
        if fd >= 0 && libc::dup2(2, 1) >= 0 {
            return Box::new(std::fs::File::from_raw_fd(fd));
        }
    }
    Box::new(std::io::stdout())
}

#[cfg(not(unix))]
fn protocol_stdout() -> Box<dyn Write> {
    Box::new(std::io::stdout())
}

/// One reply: a tag byte, a u32 payload length and the payload.
fn reply(out: &mut dyn Write, tag: u8, payload: &[u8]) -> std::io::Result<()> {
    out.write_all(&[tag])?;
    out.write_all(&(payload.len() as u32).to_le_bytes())?;
    out.write_all(payload)?;
    out.flush()
}

fn run(config: &str, input: &mut dyn Read, out: &mut dyn Write) -> Result<(), String> {
    let cfg: serde_json::Value = serde_json::from_str(config).map_err(|e| format!("bad worker config: {e}"))?;
    let field = |k: &str| cfg[k].as_u64().map(|v| v as usize).ok_or(format!("worker config without `{k}`"));
    let (spec, first, k) = (cfg["spec"].as_str().ok_or("worker config without `spec`")?, field("first")?, field("k")?);
    // The training process has printed ALE's banner already.
    crate::atari::AleGame::quiet_ale_log();
    let mut envs =
        (0..k).map(|_| make_atari_env(spec)).collect::<proxima_env::Result<Vec<_>>>().map_err(|e| e.to_string())?;
    let io = |e: std::io::Error| format!("subproc worker: {e}");
    reply(out, b'O', &[]).map_err(io)?;
    let (mut payload, mut actions) = (Vec::new(), vec![0u8; 4 * k]);
    loop {
        let mut tag = [0u8; 1];
        if input.read(&mut tag).map_err(io)? == 0 {
            return Ok(());
        }
        payload.clear();
        match tag[0] {
            b'R' => {
                let mut seed = [0u8; 8];
                input.read_exact(&mut seed).map_err(io)?;
                let seed = u64::from_le_bytes(seed);
                for (j, env) in envs.iter_mut().enumerate() {
                    let (o, _) =
                        env.reset(Some(seed.wrapping_add((first + j) as u64))).map_err(|e| at(e, first + j))?;
                    frame_bytes(&o, &mut payload).map_err(|e| format!("{e} (env index {})", first + j))?;
                }
            }
            b'S' => {
                input.read_exact(&mut actions).map_err(io)?;
                step(&mut envs, first, &actions, &mut payload)?;
            }
            t => return Err(format!("subproc worker: unknown message {t}")),
        }
        reply(out, b'O', &payload).map_err(io)?;
    }
}

/// An observation's values as bytes, each checked to be an integer 0..=255 (an Atari env's
/// frames are), so the parent reads back the very values.
fn frame_bytes(obs: &[f32], out: &mut Vec<u8>) -> Result<(), String> {
    if let Some(v) = obs.iter().find(|&&v| f32::from(v as u8) != v) {
        return Err(format!("subproc worker: observation value {v} is not a byte"));
    }
    out.extend(obs.iter().map(|&v| v as u8));
    Ok(())
}

/// An env's error, naming its index.
fn at(e: proxima_env::EnvError, i: usize) -> String {
    format!("{e}\n(env index {i})")
}

/// Steps every env with its action (f32, Discrete), autoresetting in the same step, into
/// `payload` (the module doc's step reply).
fn step(envs: &mut [Box<dyn Env>], first: usize, actions: &[u8], payload: &mut Vec<u8>) -> Result<(), String> {
    let (mut rewards, mut flags, mut finals, mut games) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (j, (env, a)) in envs.iter_mut().zip(actions.chunks_exact(4)).enumerate() {
        let a = f32::from_le_bytes([a[0], a[1], a[2], a[3]]);
        let r = env.step(Action::Discrete(a as usize)).map_err(|e| at(e, first + j))?;
        rewards.push(r.reward);
        let mut flag = u8::from(r.terminated) | (u8::from(r.truncated) << 1);
        let obs = if r.terminated || r.truncated {
            match GameEpisode::of(&r.info) {
                Some(GameEpisode::LifeLost) => flag |= LIFE_LOST,
                Some(GameEpisode::Over { score, frames }) => {
                    flag |= GAME_OVER;
                    games.extend(score.to_le_bytes().into_iter().chain((frames as u64).to_le_bytes()));
                }
                None => {}
            }
            frame_bytes(&r.observation, &mut finals).map_err(|e| format!("{e} (env index {})", first + j))?;
            env.reset(None).map_err(|e| at(e, first + j))?.0
        } else {
            r.observation
        };
        flags.push(flag);
        frame_bytes(&obs, payload).map_err(|e| format!("{e} (env index {})", first + j))?;
    }
    payload.extend(rewards.iter().flat_map(|r| r.to_le_bytes()));
    payload.extend(flags);
    payload.extend(finals);
    payload.extend(games);
    Ok(())
}
