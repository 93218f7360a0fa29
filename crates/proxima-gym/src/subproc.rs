//! N bridged envs stepped in parallel by Proxima's own worker processes (`vector_env =
//! "subproc"`, after Stable-Baselines3's `SubprocVecEnv`).
//!
//! **Why not Gymnasium's `AsyncVectorEnv`.** It pickles every step's messages through
//! `multiprocessing` pipes and blocks on them: ≈ 280 µs per step on this project's 2-core
//! machine, against ≈ 37 µs for a MuJoCo step. Here a step is raw bytes, and both sides *spin* on
//! a non-blocking pipe while a rollout runs (a blocked process takes 20–50 µs to wake on a virtual
//! machine; spinning, a round trip takes 2–3 µs), yielding the core between polls (on a busy
//! machine the spinning would otherwise take it from the processes doing work), and falling
//! back to blocking after 2 ms without a message (the update phase). Off-policy algorithms
//! (one env step between gradient steps) find the workers asleep each time and gain nothing.
//!
//! **Layout.** The N envs are split into `workers + 1` contiguous groups, as equal as possible:
//! the first `workers` groups are stepped by one process each, the last one in this process while
//! the workers step theirs. The default is one group per core
//! (`std::thread::available_parallelism`), so on 2 cores 2 envs are one worker's and one here.
//! `gym:` envs: each worker is `python -c subproc_worker.py` (the user's Python) and the local
//! group the bridge's own [`GymEnv`]s. `atari:` envs ([`SubprocVectorEnv::make_atari`]): each
//! worker is the program that registered itself with [`crate::set_worker_program`] (the CLI) run
//! as `PROGRAM __atari-worker CONFIG` ([`crate::atari_worker::serve`], the same protocol), and the
//! local group [`make_atari_env`]'s envs; ALE keeps Python's lock while it emulates, so only
//! another process can step a game beside this one.
//!
//! **Same results.** The worker converts observations, rewards and actions exactly as [`GymEnv`]
//! does, seeds env `i` with `seed + i`, and autoresets in the same step with an unseeded reset
//! (as `SyncVectorEnv` resets the envs it steps), so training on `subproc` is bit-identical to
//! `off` (the tests compare them step by step and after training).
//!
//! **Failures.** An exception in a worker (making, resetting or stepping its envs) comes back as
//! an `Env` error with its traceback and the env indices; a worker that dies (killed, crashed) is
//! an error naming it and its exit status, never a hang. Workers run in a process group of their
//! own (signals for the run reach the trainer, which saves and then closes them), exit when the
//! parent closes their stdin, and are killed when it dies (`PR_SET_PDEATHSIG` on Linux, so one
//! stuck inside an env's step does not outlive a run that quit at once).

use crate::atari_worker::{GAME_OVER, LIFE_LOST};
use crate::{make_atari_env, python_for_workers, GymEnv, PREFIX};
use proxima_env::atari::{GameEpisode, ATARI_PREFIX};
use proxima_env::vec_env::{BatchEnv, BatchStep};
use proxima_env::{Action, Env, EnvError, Result, Space};
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The worker's Python source.
const WORKER_PY: &str = include_str!("subproc_worker.py");

/// How long a reader spins on a pipe before it blocks.
const SPIN: Duration = Duration::from_millis(2);

/// N bridged envs: `workers` Python processes and one group stepped here (see the module doc).
pub struct SubprocVectorEnv {
    id: String,
    n: usize,
    obs_dim: usize,
    act_dim: usize,
    observation_space: Space,
    action_space: Space,
    workers: Vec<Worker>,
    /// The last group's envs, `n - local.len()..n`.
    local: Vec<Box<dyn Env>>,
    /// Bytes per observation value in the workers' replies: 4 (f32, `gym:` envs) or 1 (the
    /// Atari worker's uint8 frames, every value an integer 0..=255).
    obs_bytes: usize,
    /// Entries of one env's action mask in the workers' replies (0: the envs have none).
    mask_dim: usize,
    /// The workers' envs' masks for their current observations, `[n, mask_dim]` (the local
    /// group's rows unused: asked of its envs).
    masks: Vec<bool>,
}

/// `od` observation values of `bytes` bytes each (f32, or u8) from `src` into `dst`.
fn read_obs(src: &[u8], bytes: usize, dst: &mut [f32]) {
    if bytes == 1 {
        dst.iter_mut().zip(src).for_each(|(d, &b)| *d = f32::from(b));
    } else {
        dst.iter_mut().zip(src.chunks_exact(4)).for_each(|(d, c)| *d = f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
}

/// One worker process and the contiguous envs `first..first + k` it steps.
struct Worker {
    index: usize,
    first: usize,
    k: usize,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    payload: Vec<u8>,
}

/// "env index 3" or "env indices 0–1" (inclusive).
fn envs_label(first: usize, k: usize) -> String {
    match k {
        1 => format!("env index {first}"),
        _ => format!("env indices {first}–{}", first + k - 1),
    }
}

/// The sizes of `groups` contiguous groups of `n` envs, as equal as possible (larger first).
fn group_sizes(n: usize, groups: usize) -> Vec<usize> {
    (0..groups).map(|g| n / groups + usize::from(g < n % groups)).collect()
}

/// The groups of `n` envs for `workers` workers and this process (default: one group per core).
fn groups_of(n: usize, workers: Option<usize>) -> Result<Vec<usize>> {
    if n == 0 {
        return Err(EnvError::InvalidArgument("a vector env needs n_envs ≥ 1".into()));
    }
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let groups = workers.map_or(cores.min(n), |w| (w + 1).min(n)).max(1);
    Ok(group_sizes(n, groups))
}

impl SubprocVectorEnv {
    /// `n` envs of `gymnasium.make(spec)`, in `workers + 1` groups (default: one group per core,
    /// at most `n`).
    ///
    /// # Errors
    /// As [`GymEnv::make`] (the local group is made first, so an unknown id gets its usual
    /// message); `InvalidArgument` for `n = 0`; `Env` when a worker cannot be started (the
    /// Python executable) or fails to make its envs (its traceback).
    pub fn make(spec: &str, n: usize, workers: Option<usize>) -> Result<SubprocVectorEnv> {
        let sizes = groups_of(n, workers)?;
        let local = (0..sizes[sizes.len() - 1]).map(|_| GymEnv::make(spec)).collect::<Result<Vec<_>>>()?;
        let mut env = SubprocVectorEnv::with_local(format!("{PREFIX}{spec}"), n, Vec::new());
        env.set_spaces(local[0].observation_space(), local[0].action_space());
        // Masked envs: each worker sends its envs' masks with every observation.
        env.mask_dim = if local[0].has_action_masks() { env.action_space.mask_dim() } else { 0 };
        env.masks = vec![true; n * env.mask_dim];
        let config = env.worker_config(spec, &local[0].spaces);
        env.set_local(local.into_iter().map(|e| Box::new(e) as Box<dyn Env>).collect());
        let python = python_for_workers()?;
        env.spawn_workers(&sizes, &config, |config| {
            let mut command = Command::new(&python);
            command.args(["-c", &format!("{}\n{WORKER_PY}", crate::dict_obs::DICT_CHECK_PY), config]);
            (command, format!("`{python}`"))
        })?;
        Ok(env)
    }

    /// `n` envs of `atari:SPEC` ([`make_atari_env`]: an ALE game inside Proxima's Atari wrappers),
    /// in `workers + 1` groups as [`SubprocVectorEnv::make`]'s; each worker runs the program
    /// registered with [`crate::set_worker_program`].
    ///
    /// # Errors
    /// As [`make_atari_env`]; `Unsupported` when no program is registered (outside the CLI); `Env`
    /// when a worker cannot start or fails to make its envs.
    pub fn make_atari(spec: &str, n: usize, workers: Option<usize>) -> Result<SubprocVectorEnv> {
        let sizes = groups_of(n, workers)?;
        let local = (0..sizes[sizes.len() - 1]).map(|_| make_atari_env(spec)).collect::<Result<Vec<_>>>()?;
        let program = crate::worker_program().ok_or_else(|| {
            EnvError::Unsupported(format!(
                "vector_env = `subproc` with `{ATARI_PREFIX}{spec}` steps the games in worker processes of the `proxima` CLI; this program has none: use vector_env = `off`"
            ))
        })?;
        let mut env = SubprocVectorEnv::with_local(format!("{ATARI_PREFIX}{spec}"), n, local);
        env.obs_bytes = 1;
        let config = serde_json::json!({"spec": spec, "id": env.id, "act_dim": env.act_dim});
        env.spawn_workers(&sizes, &config, |config| {
            let mut command = Command::new(&program);
            command.args([crate::atari_worker::ARG, config]);
            (command, format!("`{}`", program.display()))
        })?;
        Ok(env)
    }

    /// The vector env of `local` (the last group; its spaces are every env's), no workers yet.
    fn with_local(id: String, n: usize, local: Vec<Box<dyn Env>>) -> SubprocVectorEnv {
        let mut env = SubprocVectorEnv {
            id,
            n,
            obs_dim: 0,
            act_dim: 0,
            observation_space: Space::Discrete { n: 1 },
            action_space: Space::Discrete { n: 1 },
            workers: Vec::new(),
            local: Vec::new(),
            obs_bytes: 4,
            mask_dim: 0,
            masks: Vec::new(),
        };
        env.set_local(local);
        env
    }

    fn set_local(&mut self, local: Vec<Box<dyn Env>>) {
        if let Some(e) = local.first() {
            self.set_spaces(e.observation_space(), e.action_space());
        }
        self.local = local;
    }

    fn set_spaces(&mut self, observation_space: Space, action_space: Space) {
        (self.obs_dim, self.act_dim) = (observation_space.flat_dim(), action_space.flat_dim());
        (self.observation_space, self.action_space) = (observation_space, action_space);
    }

    /// Starts one worker per group but the last (`command(config)` says how, and names the
    /// program for errors) and waits for each to be ready.
    fn spawn_workers(
        &mut self,
        sizes: &[usize],
        config: &serde_json::Value,
        command: impl Fn(&str) -> (Command, String),
    ) -> Result<()> {
        let mut first = 0;
        for (index, &k) in sizes[..sizes.len() - 1].iter().enumerate() {
            let mut config = config.clone();
            config["first"] = first.into();
            config["k"] = k.into();
            let (cmd, program) = command(&config.to_string());
            self.workers.push(Worker::spawn(cmd, &program, index, first, k)?);
            first += k;
        }
        for w in 0..self.workers.len() {
            self.read_reply(w)?; // "ready", or the worker's error making its envs
        }
        Ok(())
    }

    /// What every worker is told (its own `first` and `k` are filled in by [`Worker::spawn`]).
    fn worker_config(&self, spec: &str, spaces: &crate::Spaces) -> serde_json::Value {
        serde_json::json!({
            "spec": spec,
            "id": self.id,
            "obs_shape": spaces.obs_shape,
            "obs_dtype": spaces.obs_dtype,
            "structured": spaces.structured.is_some(),
            "act_shape": spaces.act_shape,
            "act_dtype": spaces.act_dtype,
            "discrete": matches!(self.action_space, Space::Discrete { .. }),
            "act_dim": self.act_dim,
            "mask_dim": self.mask_dim,
        })
    }

    /// Reads worker `w`'s reply into its payload buffer.
    fn read_reply(&mut self, w: usize) -> Result<()> {
        let id = self.id.clone();
        let worker = &mut self.workers[w];
        let mut header = [0u8; 5];
        worker.read_exact(&mut header, &id)?;
        let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
        worker.payload.resize(len, 0);
        let mut payload = std::mem::take(&mut worker.payload);
        let read = worker.read_exact(&mut payload, &id);
        worker.payload = payload;
        read?;
        match header[0] {
            b'O' => Ok(()),
            b'E' => Err(EnvError::Env(format!(
                "{}\n(in subproc worker {} of {id}, {})",
                String::from_utf8_lossy(&worker.payload),
                worker.index,
                envs_label(worker.first, worker.k)
            ))),
            tag => Err(EnvError::Env(format!("{id}: subproc worker {} sent an unknown reply {tag}", worker.index))),
        }
    }

    /// The local group's first env index.
    fn local_first(&self) -> usize {
        self.n - self.local.len()
    }

    /// Checks that every Discrete action is in range before any is sent.
    fn check_actions(&self, actions: &[f32]) -> Result<()> {
        if actions.len() != self.n * self.act_dim {
            return Err(EnvError::InvalidArgument(format!(
                "{}: expected {} action values ({} envs × {}), got {}",
                self.id,
                self.n * self.act_dim,
                self.n,
                self.act_dim,
                actions.len()
            )));
        }
        if let Space::Discrete { n } = self.action_space {
            if let Some(&a) = actions.iter().find(|&&a| !(a >= 0.0 && (a as usize) < n && a.fract() == 0.0)) {
                return Err(EnvError::InvalidAction(format!(
                    "{}: {a} is not in {}",
                    self.id,
                    self.action_space.describe()
                )));
            }
        }
        Ok(())
    }

    /// Steps the local group (autoreset as `SyncVectorEnv` does) into its rows of `out`.
    fn step_local(&mut self, actions: &[f32], out: &mut BatchStep) -> Result<()> {
        let (first, od, ad) = (self.local_first(), self.obs_dim, self.act_dim);
        let discrete = matches!(self.action_space, Space::Discrete { .. });
        for (j, env) in self.local.iter_mut().enumerate() {
            let i = first + j;
            let a = &actions[i * ad..(i + 1) * ad];
            let here = |e: EnvError| match e {
                EnvError::Env(m) => EnvError::Env(format!("{m}\n(env index {i}, stepped in the training process)")),
                other => other,
            };
            let action = if discrete { Action::Discrete(a[0] as usize) } else { Action::Continuous(a) };
            let r = env.step(action).map_err(here)?;
            let obs = if r.terminated || r.truncated {
                out.final_obs[i] = Some(r.observation);
                out.games[i] = GameEpisode::of(&r.info);
                env.reset(None).map_err(here)?.0
            } else {
                r.observation
            };
            out.obs[i * od..(i + 1) * od].copy_from_slice(&obs);
            (out.rewards[i], out.terminated[i], out.truncated[i]) = (r.reward, r.terminated, r.truncated);
        }
        Ok(())
    }

    /// Worker `w`'s envs' masks, `k · mask_dim` bytes (1 = valid) at `at` of its reply, into
    /// their rows of `self.masks`.
    fn take_masks(&mut self, w: usize, at: usize) {
        let md = self.mask_dim;
        let worker = &self.workers[w];
        let rows = &mut self.masks[worker.first * md..(worker.first + worker.k) * md];
        for (m, &b) in rows.iter_mut().zip(&worker.payload[at..]) {
            *m = b != 0;
        }
    }

    /// Worker `w`'s step reply (in its payload buffer) into its rows of `out`.
    fn take_step_reply(&self, w: usize, out: &mut BatchStep) -> Result<()> {
        let (od, ob, worker) = (self.obs_dim, self.obs_bytes, &self.workers[w]);
        let (first, k, p) = (worker.first, worker.k, &worker.payload);
        let fixed = k * (od * ob + 8 + 1 + self.mask_dim);
        let flags_of = p.get(k * od * ob + k * 8..k * (od * ob + 9)).unwrap_or(&[]);
        let ended = flags_of.iter().filter(|&&b| b & 3 != 0).count();
        let games = flags_of.iter().filter(|&&b| b & GAME_OVER != 0).count();
        let expected = fixed + ended * od * ob + games * 16;
        if p.len() != expected {
            return Err(EnvError::Env(format!(
                "{}: subproc worker {} sent a step reply of {} bytes (expected {expected})",
                self.id,
                worker.index,
                p.len(),
            )));
        }
        read_obs(&p[..k * od * ob], ob, &mut out.obs[first * od..(first + k) * od]);
        let (rewards, flags) = (k * od * ob, k * od * ob + k * 8);
        let mut final_at = fixed;
        for j in 0..k {
            let r = &p[rewards + 8 * j..rewards + 8 * j + 8];
            out.rewards[first + j] = f64::from_le_bytes(r.try_into().expect("8 bytes"));
            let flag = p[flags + j];
            (out.terminated[first + j], out.truncated[first + j]) = (flag & 1 != 0, flag & 2 != 0);
            if flag & 3 != 0 {
                let mut last = vec![0f32; od];
                read_obs(&p[final_at..final_at + od * ob], ob, &mut last);
                out.final_obs[first + j] = Some(last);
                final_at += od * ob;
            }
        }
        // The Atari worker's games, after the final observations, in env order.
        for j in (0..k).filter(|&j| p[flags + j] & (GAME_OVER | LIFE_LOST) != 0) {
            out.games[first + j] = Some(if p[flags + j] & GAME_OVER != 0 {
                let score = f64::from_le_bytes(p[final_at..final_at + 8].try_into().expect("8 bytes"));
                let frames = u64::from_le_bytes(p[final_at + 8..final_at + 16].try_into().expect("8 bytes"));
                final_at += 16;
                GameEpisode::Over { score, frames: frames as usize }
            } else {
                GameEpisode::LifeLost
            });
        }
        Ok(())
    }
}

impl Worker {
    /// Starts `command` (`program` names it in errors) as the worker of envs `first..first + k`.
    fn spawn(mut command: Command, program: &str, index: usize, first: usize, k: usize) -> Result<Worker> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped());
        // A process group of its own: signals meant for the run (the terminal's Ctrl-C, a
        // `kill -- -PGID`, `timeout`, a batch system) reach the trainer, which saves and then
        // closes the workers, instead of killing the workers mid-rollout.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| EnvError::Env(format!("cannot start a subproc worker with {program}: {e}")))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        set_nonblocking(&stdout)?;
        Ok(Worker { index, first, k, child, stdin, stdout, payload: Vec::new() })
    }

    /// Sends one message (a tag and its payload).
    fn send(&mut self, msg: &[u8], id: &str) -> Result<()> {
        let sent = self.stdin.as_mut().map(|s| s.write_all(msg));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => Err(self.died(id)),
        }
    }

    /// Fills `buf` from the worker's stdout: spinning for [`SPIN`], then blocking in `poll`.
    fn read_exact(&mut self, buf: &mut [u8], id: &str) -> Result<()> {
        let (mut got, mut spin_until) = (0, Instant::now() + SPIN);
        while got < buf.len() {
            match self.stdout.read(&mut buf[got..]) {
                Ok(0) => return Err(self.died(id)),
                Ok(n) => {
                    got += n;
                    spin_until = Instant::now() + SPIN;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() > spin_until {
                        wait_readable(&self.stdout);
                    } else {
                        // Give the core away if anything else wants it (a busy machine: without
                        // this, spinning made runs several times slower); free when nothing does.
                        std::thread::yield_now();
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(EnvError::Env(format!("{id}: reading subproc worker {}: {e}", self.index))),
            }
        }
        Ok(())
    }

    /// The error for a worker whose pipe closed: its exit status (its stderr is above).
    fn died(&mut self, id: &str) -> EnvError {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(2);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break s.to_string(),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                _ => break "still running, its pipe closed".to_string(),
            }
        };
        EnvError::Env(format!(
            "{id}: subproc worker {} ({}) stopped ({status}); its output, if any, is above",
            self.index,
            envs_label(self.first, self.k)
        ))
    }
}

impl Drop for Worker {
    /// Closes the worker's stdin (it closes its envs and exits), then waits for it up to 5 s
    /// before killing it.
    fn drop(&mut self) {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) | Err(_) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(unix)]
fn set_nonblocking(stdout: &ChildStdout) -> Result<()> {
    use std::os::fd::AsRawFd;
    let fd = stdout.as_raw_fd();
    // SAFETY: fcntl on a file descriptor this process owns, with valid flags.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) >= 0
    };
    if ok {
        Ok(())
    } else {
        Err(EnvError::Env(format!("subproc worker pipe: fcntl failed: {}", std::io::Error::last_os_error())))
    }
}

#[cfg(unix)]
fn wait_readable(stdout: &ChildStdout) {
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd { fd: stdout.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd; an error (EINTR) just returns to the caller's read loop.
    unsafe {
        libc::poll(&mut pfd, 1, -1);
    }
}

#[cfg(not(unix))]
fn set_nonblocking(_: &ChildStdout) -> Result<()> {
    Err(EnvError::Unsupported("vector_env = \"subproc\" needs a Unix system; use \"async\"".into()))
}

#[cfg(not(unix))]
fn wait_readable(_: &ChildStdout) {}

impl BatchEnv for SubprocVectorEnv {
    fn id(&self) -> &str {
        &self.id
    }
    fn num_envs(&self) -> usize {
        self.n
    }
    fn observation_space(&self) -> Space {
        self.observation_space.clone()
    }
    fn action_space(&self) -> Space {
        self.action_space.clone()
    }
    fn reset(&mut self, seed: u64, obs: &mut [f32]) -> Result<()> {
        let mut msg = vec![b'R'];
        msg.extend(seed.to_le_bytes());
        let id = self.id.clone();
        for w in &mut self.workers {
            w.send(&msg, &id)?;
        }
        let (first, od) = (self.local_first(), self.obs_dim);
        for (j, env) in self.local.iter_mut().enumerate() {
            let (o, _) = env.reset(Some(seed.wrapping_add((first + j) as u64)))?;
            obs[(first + j) * od..(first + j + 1) * od].copy_from_slice(&o);
        }
        for w in 0..self.workers.len() {
            self.read_reply(w)?;
            let worker = &self.workers[w];
            if worker.payload.len() != worker.k * (od * self.obs_bytes + self.mask_dim) {
                return Err(EnvError::Env(format!("{id}: subproc worker {w} sent a reset reply of the wrong size")));
            }
            let rows = &mut obs[worker.first * od..(worker.first + worker.k) * od];
            read_obs(&worker.payload[..worker.k * od * self.obs_bytes], self.obs_bytes, rows);
            let at = worker.k * od * self.obs_bytes;
            self.take_masks(w, at);
        }
        Ok(())
    }
    /// The keys of the group stepped here (every worker's env is the same kind).
    fn observation_keys(&self) -> Vec<proxima_env::ObsKey> {
        self.local.first().map(|e| e.observation_keys()).unwrap_or_default()
    }
    /// The workers' envs' masks as their last replies carried them, and the local group's
    /// asked of its envs.
    fn action_masks(&mut self, out: &mut [bool]) -> Result<bool> {
        let md = self.mask_dim;
        if md == 0 || out.len() != self.n * md {
            return Ok(false);
        }
        let first = self.local_first();
        out[..first * md].copy_from_slice(&self.masks[..first * md]);
        for (env, row) in self.local.iter_mut().zip(out[first * md..].chunks_mut(md)) {
            if !env.action_masks(row)? {
                return Err(EnvError::Env(format!("{}: an env's action_masks() went away", self.id)));
            }
        }
        Ok(true)
    }
    fn step(&mut self, actions: &[f32], out: &mut BatchStep) -> Result<()> {
        self.check_actions(actions)?;
        let (id, ad) = (self.id.clone(), self.act_dim);
        for w in &mut self.workers {
            let mut msg = Vec::with_capacity(1 + 4 * w.k * ad);
            msg.push(b'S');
            msg.extend(actions[w.first * ad..(w.first + w.k) * ad].iter().flat_map(|a| a.to_le_bytes()));
            w.send(&msg, &id)?;
        }
        let n = self.n;
        out.obs.resize(n * self.obs_dim, 0.0);
        out.rewards.resize(n, 0.0);
        out.terminated.resize(n, false);
        out.truncated.resize(n, false);
        out.final_obs.clear();
        out.final_obs.resize(n, None);
        out.games.clear();
        out.games.resize(n, None);
        self.step_local(actions, out)?;
        for w in 0..self.workers.len() {
            self.read_reply(w)?;
            self.take_step_reply(w, out)?;
            if self.mask_dim > 0 {
                let worker = &self.workers[w];
                let at = worker.k * (self.obs_dim * self.obs_bytes + 9);
                self.take_masks(w, at);
            }
        }
        Ok(())
    }
}
