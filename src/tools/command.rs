//! run_command: `sh -c` in the workspace, in its own process group, killed as a group on timeout or
//! when the caller drops the future.
//!
//! The group matters: `sh -c 'make test'` forks, and killing only `sh` would leave its children
//! running (and holding the output pipes open). On unix the child is spawned with
//! `process_group(0)`, so its pid is the group id, and `kill(-pgid, SIGKILL)` reaches everything it
//! started (except what moved itself to another group or session, e.g. with `setsid`).
//!
//! Output: stdout and stderr are captured separately (not interleaved); each keeps its beginning and
//! its end when it is longer than the output cap allows, with a note of how much was cut between.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use super::{Exit, Tap, ToolOutput};

/// Kills the process group when dropped, unless disarmed: the turn was cancelled mid-command.
/// `through_waiter`: the sandbox's waiter is asked instead (`SIGTERM`), and ends its whole Landlock domain
/// (`crate::sandbox`'s waiter: a `SIGKILL` would leave it no chance to end the orphans).
struct GroupKill(Option<i32>, bool);

impl GroupKill {
    fn kill(&self) {
        end(self.0, self.1);
    }

    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(unix)]
mod sys {
    unsafe extern "C" {
        fn kill(pid: i32, sig: i32) -> i32;
    }

    const SIGKILL: i32 = 9;
    const SIGTERM: i32 = 15;

    pub(super) fn stop_waiter(pid: i32) {
        if pid > 1 {
            // SAFETY: kill(2) takes plain integers and touches no memory of ours.
            unsafe {
                kill(pid, SIGTERM);
            }
        }
    }

    pub(super) fn group_exists(pgid: i32) -> bool {
        // SAFETY: kill(2) with signal 0 only checks; plain integers.
        pgid > 1 && unsafe { kill(-pgid, 0) } == 0
    }

    pub(super) fn terminate_group(pgid: i32) {
        if pgid > 1 {
            // SAFETY: kill(2) takes plain integers and touches no memory of ours.
            unsafe {
                kill(-pgid, SIGTERM);
            }
        }
    }

    pub(super) fn kill_group(pgid: i32) {
        // Never 0 or 1 (our own group, or every process): only a group we created.
        if pgid > 1 {
            // SAFETY: kill(2) takes plain integers and touches no memory of ours.
            unsafe {
                kill(-pgid, SIGKILL);
            }
        }
    }
}

#[cfg(not(unix))]
mod sys {
    pub(super) fn kill_group(_pgid: i32) {}
    pub(super) fn terminate_group(_pgid: i32) {}
    pub(super) fn group_exists(_pgid: i32) -> bool {
        false
    }
    pub(super) fn stop_waiter(_pid: i32) {}
}

/// Ends a child [`spawn`] started (`pid`: its id, the group's) and everything it started: its process group
/// killed, or with `through_waiter` its waiter asked (`SIGTERM`), which ends its whole Landlock domain.
pub(crate) fn end(pid: Option<i32>, through_waiter: bool) {
    match (pid, through_waiter) {
        (Some(pid), true) => sys::stop_waiter(pid),
        (Some(pgid), false) => sys::kill_group(pgid),
        (None, _) => {}
    }
}

/// Asks a child [`spawn`] started without a waiter, and everything in its process group, to end (`SIGTERM`): a
/// graceful stop, which [`end`] follows after a grace.
pub(crate) fn terminate_group(pgid: Option<i32>) {
    if let Some(pgid) = pgid {
        sys::terminate_group(pgid);
    }
}

/// Whether a process of group `pgid` still runs (a zombie, dead and waiting to be reaped, does not count: a
/// grandchild whose parent died waits for its new parent to reap it). Read from `/proc`, where there is one; else
/// whether the group can still be signalled.
pub(crate) fn group_running(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return sys::group_exists(pgid);
    };
    dir.flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))).any(|e| {
        // `pid (comm) state ppid pgrp ...`: the command name may hold spaces and parentheses, the fields follow
        // its last `)`
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { return false };
        let Some((_, rest)) = stat.rsplit_once(')') else { return false };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|f| f.parse::<i32>().ok());
        pgrp == Some(pgid) && state != Some("Z")
    })
}

/// Keeps the first and last bytes of a stream, counting what was dropped between them.
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_max: usize,
    tail_max: usize,
    dropped: u64,
}

impl Capture {
    fn new(max: usize) -> Capture {
        let head_max = max / 4 * 3;
        Capture { head: Vec::new(), tail: VecDeque::new(), head_max, tail_max: max - head_max, dropped: 0 }
    }

    fn push(&mut self, mut data: &[u8]) {
        if self.head.len() < self.head_max {
            let n = (self.head_max - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        if data.is_empty() {
            return;
        }
        self.tail.extend(data);
        if self.tail.len() > self.tail_max {
            let excess = self.tail.len() - self.tail_max;
            self.tail.drain(..excess);
            self.dropped += excess as u64;
        }
    }

    fn is_empty(&self) -> bool {
        self.head.is_empty()
    }

    fn text(mut self) -> String {
        let mut s = String::from_utf8_lossy(&self.head).into_owned();
        if self.dropped > 0 {
            s.push_str(&format!("\n[… {} bytes cut here …]\n", self.dropped));
        }
        s.push_str(&String::from_utf8_lossy(self.tail.make_contiguous()));
        if !s.ends_with('\n') {
            s.push('\n');
        }
        s
    }
}

async fn pump(mut r: impl AsyncRead + Unpin, into: &mut Capture, tap: Option<&Tap>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                into.push(&buf[..n]);
                if let Some(tap) = tap {
                    tap(&buf[..n]);
                }
            }
        }
    }
}

/// A command's confinement: the plan its child applies before `exec`, its private `$TMPDIR`, and the
/// allowlist proxy it reaches the network through, if any.
pub(crate) struct Sandboxed {
    pub plan: crate::sandbox::Plan,
    pub temp: std::path::PathBuf,
    pub proxy: Option<ProxySource>,
}

/// The allowlist proxy of one command (`crate::sandbox::proxy`).
pub(crate) struct ProxySource {
    pub allow: Vec<String>,
    /// The port the command reaches it on, at 127.0.0.1.
    pub port: u16,
    /// Bound by the core (Landlock alone), or handed over by the child from its network namespace.
    pub listener: Option<std::net::TcpListener>,
}

/// The proxy of a command that started, and with Landlock alone its `connect` guard (`guard`: where the child
/// handed the guard's listener over, and the proxy's port).
fn start_proxy(
    source: ProxySource,
    receiver: Option<std::os::unix::net::UnixStream>,
    guard: Option<(std::os::unix::net::UnixStream, u16)>,
) -> Result<crate::sandbox::proxy::Running, String> {
    let listener = match (source.listener, receiver) {
        (Some(l), _) => l,
        (None, Some(r)) => crate::sandbox::receive_listener(&r).map_err(|e| e.to_string())?,
        (None, None) => return Err("no listening socket".to_string()),
    };
    let mut running = crate::sandbox::proxy::serve(listener, source.allow).map_err(|e| e.to_string())?;
    if let Some((from, port)) = guard {
        let fd = crate::sandbox::receive_fd(&from).map_err(|e| format!("no connect guard: {e}"))?;
        running.keep(crate::sandbox::guard::start(fd, port).map_err(|e| format!("no connect guard: {e}"))?);
    }
    Ok(running)
}

/// Runs the command; `cap` bounds the captured output (half for stdout, half for stderr); `env`: the
/// secrets scrubbed from its environment (`crate::sandbox::env`), in the sandbox or not. `sandboxed`:
/// confined (see `crate::sandbox`), with `$TMPDIR` (and `TMP`, `TEMP`) its private folder.
/// `tap` gets the output as it comes. Also returns the hosts the command asked the allowlist proxy for, and how it
/// ended (none: it did not start, or was lost track of).
pub(crate) async fn run(
    dir: &Path,
    command: &str,
    timeout: Duration,
    cap: usize,
    env: &crate::sandbox::env::EnvPlan,
    sandboxed: Option<Sandboxed>,
    tap: Option<Tap>,
) -> (ToolOutput, Vec<crate::sandbox::proxy::Contact>, Option<Exit>) {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // No pager waits for a key, no git prompt for a password: there is no one at stdin.
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0");
    env.apply(&mut cmd);
    #[cfg(unix)]
    cmd.process_group(0);
    let started = match spawn(cmd, sandboxed, false) {
        Ok(s) => s,
        Err(Unstarted::Spawn(e)) => {
            let out = ToolOutput::error(format!("cannot start the command (sh -c, or its sandbox): {e}"));
            return (out, Vec::new(), None);
        }
        Err(Unstarted::Proxy(e)) => {
            let out = ToolOutput::error(format!("the sandbox's network proxy could not be started: {e}"));
            return (out, Vec::new(), None);
        }
    };
    let (out, exit) = supervise(started.process, timeout, cap, started.through_waiter, tap).await;
    (out, started.proxy.map(|p| p.finish()).unwrap_or_default(), exit)
}

/// Why a child did not start.
pub(crate) enum Unstarted {
    Spawn(std::io::Error),
    Proxy(String),
}

/// A child [`spawn`] started.
pub(crate) struct Started {
    pub process: Process,
    /// The allowlist proxy it reaches the network through, serving while this is kept.
    pub proxy: Option<crate::sandbox::proxy::Running>,
    /// Stop it by asking its waiter (`SIGTERM` to it), never by a `SIGKILL` of its group.
    pub through_waiter: bool,
}

/// Starts `cmd` (its standard streams already chosen; stdin a pipe only with `piped_stdin`), confined by
/// `sandboxed` when given: its `$TMPDIR` (and `TMP`, `TEMP`) the private folder, its network through the
/// allowlist proxy, started here. Shared by `run_command` and a sandboxed ACP agent (`crate::acp`).
pub(crate) fn spawn(
    mut cmd: tokio::process::Command,
    sandboxed: Option<Sandboxed>,
    piped_stdin: bool,
) -> Result<Started, Unstarted> {
    let mut through_waiter = false;
    let (mut proxy_source, mut receiver, mut guard_receiver) = (None, None, None);
    let mut own_spawn = None;
    if let Some(mut s) = sandboxed {
        cmd.env("TMPDIR", &s.temp).env("TMP", &s.temp).env("TEMP", &s.temp);
        if let Some(p) = &s.proxy {
            let url = format!("http://127.0.0.1:{}", p.port);
            for var in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
                cmd.env(var, &url);
            }
            // Everything goes through the proxy, the loopback too (it is the only way out).
            cmd.env_remove("NO_PROXY").env_remove("no_proxy");
        }
        proxy_source = s.proxy.take();
        receiver = s.plan.take_proxy_receiver();
        guard_receiver = s.plan.take_guard_receiver();
        through_waiter = s.plan.stop_through_waiter();
        // A dropped child would get a SIGKILL: the waiter must get its SIGTERM instead.
        cmd.kill_on_drop(!through_waiter);
        if s.plan.spawns_itself() {
            own_spawn = Some(s.plan);
        } else {
            s.plan.install(cmd.as_std_mut());
        }
    }
    let process = match own_spawn {
        Some(plan) => plan.spawn(cmd.as_std(), piped_stdin).and_then(Process::confined),
        None => cmd.spawn().map(Process::Plain),
    }
    .map_err(Unstarted::Spawn)?;
    drop(cmd); // the child's end of the proxy's socket pair, among others
    match proxy_source.map(|p| start_proxy(p, receiver, guard_receiver)).transpose() {
        Ok(proxy) => Ok(Started { process, proxy, through_waiter }),
        Err(e) => {
            GroupKill(process.id().and_then(|id| i32::try_from(id).ok()), through_waiter).kill();
            Err(Unstarted::Proxy(e))
        }
    }
}

/// A started command: by tokio, or by the sandbox in its namespaces (`crate::sandbox::Plan::spawn`).
pub(crate) enum Process {
    Plain(tokio::process::Child),
    Confined(Confined),
}

/// A command the sandbox started: waited for through its pidfd; killed (and reaped) when dropped unwaited.
pub(crate) struct Confined {
    pid: i32,
    pidfd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
    stdin: Option<tokio::net::unix::pipe::Sender>,
    stdout: Option<tokio::net::unix::pipe::Receiver>,
    stderr: Option<tokio::net::unix::pipe::Receiver>,
    status: Option<std::process::ExitStatus>,
}

type Output = Box<dyn AsyncRead + Unpin + Send>;

impl Process {
    fn confined(s: crate::sandbox::Spawned) -> std::io::Result<Process> {
        use tokio::net::unix::pipe::{Receiver, Sender};
        let pid = s.pid;
        let made = (move || {
            Ok(Confined {
                pid: s.pid,
                // SAFETY: the AsyncFd owns the pidfd: it is neither closed nor replaced while registered.
                pidfd: unsafe { tokio::io::unix::AsyncFd::register(s.pidfd) }.map_err(|e| e.into_parts().1)?,
                stdin: s.stdin.map(Sender::from_owned_fd).transpose()?,
                stdout: Some(Receiver::from_owned_fd(s.stdout)?),
                stderr: Some(Receiver::from_owned_fd(s.stderr)?),
                status: None,
            })
        })();
        made.map(Process::Confined).inspect_err(|_| {
            // SAFETY: our own unreaped child, ended and reaped here (it has not run long: it just started).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        })
    }

    pub(crate) fn id(&self) -> Option<u32> {
        match self {
            Process::Plain(c) => c.id(),
            Process::Confined(c) => u32::try_from(c.pid).ok(),
        }
    }

    /// Its stdin's write end, when it was started with one.
    pub(crate) fn take_stdin(&mut self) -> Option<Box<dyn AsyncWrite + Unpin + Send>> {
        match self {
            Process::Plain(c) => Some(Box::new(c.stdin.take()?)),
            Process::Confined(c) => Some(Box::new(c.stdin.take()?)),
        }
    }

    pub(crate) fn take_output(&mut self) -> Option<(Output, Output)> {
        match self {
            Process::Plain(c) => Some((Box::new(c.stdout.take()?), Box::new(c.stderr.take()?))),
            Process::Confined(c) => Some((Box::new(c.stdout.take()?), Box::new(c.stderr.take()?))),
        }
    }

    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Process::Plain(c) => c.wait().await,
            Process::Confined(c) => c.wait().await,
        }
    }

    /// Its exit status if it has exited (then reaped), without waiting.
    pub(crate) fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        match self {
            Process::Plain(c) => c.try_wait(),
            Process::Confined(c) => c.try_wait(),
        }
    }
}

impl Confined {
    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        loop {
            let mut ready = self.pidfd.readable().await?;
            if let Some(status) = reap(self.pid, &mut self.status)? {
                return Ok(status);
            }
            ready.clear_ready();
        }
    }

    fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        reap(self.pid, &mut self.status)
    }
}

/// `pid`'s exit status, reaped once into `status`, if it has exited.
fn reap(pid: i32, status: &mut Option<std::process::ExitStatus>) -> std::io::Result<Option<std::process::ExitStatus>> {
    use std::os::unix::process::ExitStatusExt;
    if status.is_some() {
        return Ok(*status);
    }
    let mut st = 0;
    // SAFETY: our own child, unreaped until now (the pidfd holds its pid).
    let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
    if r == pid {
        *status = Some(std::process::ExitStatus::from_raw(st));
    } else if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(*status)
}

impl Drop for Confined {
    /// Unwaited (a cancelled turn): killed, as tokio's `kill_on_drop`, and reaped off this thread. pid 1 of
    /// its namespace, it takes every process it started along.
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let pid = self.pid;
        // SAFETY: our own unreaped child: its pid cannot have been reused.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        std::thread::spawn(move || {
            let mut st = 0;
            // SAFETY: reaps our own child.
            unsafe { libc::waitpid(pid, &mut st, 0) };
        });
    }
}

/// Waits for the command within `timeout`, capturing its output; kills it on timeout or when dropped.
async fn supervise(
    mut child: Process,
    timeout: Duration,
    cap: usize,
    through_waiter: bool,
    tap: Option<Tap>,
) -> (ToolOutput, Option<Exit>) {
    // Declared after `child`, so dropped before it: the group dies while `sh` is still unreaped and
    // its pid (the group id) cannot have been reused.
    let mut group = GroupKill(child.id().and_then(|id| i32::try_from(id).ok()), through_waiter);
    let Some((stdout, stderr)) = child.take_output() else {
        return (ToolOutput::error("cannot capture the command's output".to_string()), None);
    };
    let mut out = Capture::new(cap / 2);
    let mut err = Capture::new(cap / 2);
    let finished = tokio::time::timeout(timeout, async {
        let (_, _, status) =
            tokio::join!(pump(stdout, &mut out, tap.as_ref()), pump(stderr, &mut err, tap.as_ref()), child.wait());
        status
    })
    .await;

    let (head, exit) = match finished {
        Ok(Ok(status)) => {
            // Done, and the output pipes closed: whatever it left running in the background with
            // its output redirected was meant to stay.
            group.disarm();
            let exit = Exit { code: status.code(), signal: exit_signal(&status) };
            let head = match (status.code(), exit_signal(&status)) {
                (Some(code), _) => format!("exit code: {code}\n"),
                (None, Some(sig)) => format!("killed by signal {sig}\n"),
                (None, None) => format!("exit status: {status}\n"),
            };
            (head, exit)
        }
        Ok(Err(e)) => {
            group.kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
            group.disarm();
            return (ToolOutput::error(format!("lost track of the command: {e}")), None);
        }
        Err(_) => {
            group.kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
            group.disarm();
            let body = sections(out, err);
            let out = ToolOutput::error(format!(
                "timed out after {} s: killed the command and its process group (a background process \
                 keeping stdout/stderr open also counts as running)\n{body}",
                timeout.as_secs()
            ));
            return (out, Some(Exit { code: None, signal: Some(9) }));
        }
    };
    (ToolOutput::ok(format!("{head}{}", sections(out, err))), Some(exit))
}

fn sections(out: Capture, err: Capture) -> String {
    let mut s = String::new();
    if out.is_empty() && err.is_empty() {
        return "(no output)\n".to_string();
    }
    if !out.is_empty() {
        s.push_str("[stdout]\n");
        s.push_str(&out.text());
    }
    if !err.is_empty() {
        s.push_str("[stderr]\n");
        s.push_str(&err.text());
    }
    s
}

#[cfg(unix)]
fn exit_signal(status: &std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(status)
}

#[cfg(not(unix))]
fn exit_signal(_status: &std::process::ExitStatus) -> Option<i32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_head_and_tail() {
        let mut c = Capture::new(8);
        c.push(b"abcdefghij");
        c.push(b"klmnop");
        assert_eq!(c.text(), "abcdef\n[… 8 bytes cut here …]\nop\n");
        let mut c = Capture::new(100);
        c.push(b"hi");
        assert_eq!(c.text(), "hi\n");
    }
}
