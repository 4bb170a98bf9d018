//! The child's side of the sandbox: a [`Plan`] built in the parent (everything that allocates or may fail
//! for reasons worth a message), then carried out in the child, where only raw system calls run.
//!
//! With namespaces the plan starts the command itself ([`Plan::spawn`]): one `clone` with `CLONE_VM |
//! CLONE_VFORK` and the namespace flags, as `posix_spawn` starts an unsandboxed one, so the child shares the
//! editor's memory until it executes (no copy of the editor's page tables, whatever its size) and is born in
//! its namespaces, pid 1 of its own PID namespace: no `unshare`, no second `fork`, no waiter process. The
//! `fork` + `unshare` + `fork` it replaces cost 2-4 times an unsandboxed start in a 20 MB process, and tens
//! of milliseconds in a 200 MB one (two copies of the page tables). In the Landlock-only fallback the plan
//! is installed as the command's `pre_exec` (its waiter must be a forked process of the command's domain).
//!
//! Why the `landlock` crate: it knows which access rights each ABI has and drops the ones an older kernel
//! lacks (best effort), and it builds the ruleset with checked path descriptors; it hands the ruleset's
//! descriptor over (`Option<OwnedFd>`), so the child only calls `landlock_restrict_self`. The ABI version
//! is asked of the kernel directly (the crate keeps its probe private), for `:checkhealth`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};

use super::seccomp::{self, Verdict};
use super::waiter::{self, Reap};
use super::{Limits, Mechanism, Network, PROTECTED};

/// The kernel's Landlock ABI version (0: none).
pub fn landlock_abi() -> i32 {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attribute only returns the version.
    let v = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32 /* _VERSION */)
    };
    if v < 0 { 0 } else { v as i32 }
}

/// The namespace part of a plan.
#[derive(Debug)]
struct Namespaces {
    flags: libc::c_int,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// Bound over themselves before the read-only ones, so they stay writable beneath them.
    writable_binds: Vec<CString>,
    /// Each bound over itself read-only, with the flags its mount has locked.
    readonly_binds: Vec<(CString, libc::c_ulong)>,
    /// Folders that read as empty: an empty read-only tmpfs over each.
    hidden_dirs: Vec<CString>,
    /// Files that read as empty: `/dev/null` bound over each.
    hidden_files: Vec<CString>,
}

/// Everything the child does, prepared.
#[derive(Debug)]
pub struct Plan {
    namespaces: Option<Namespaces>,
    ruleset: OwnedFd,
    seccomp: Option<Vec<libc::sock_filter>>,
    reap: Reap,
    /// With namespaces and an allowlist: the child's end of the pair the proxy's listener is handed over.
    proxy_listener: Option<ProxyListener>,
    /// The core's end of it, until [`Plan::take_proxy_receiver`].
    proxy_receiver: Option<std::os::unix::net::UnixStream>,
    /// Landlock alone with an allowlist: the `connect` filter the child installs and the child's end of the pair
    /// its listener is handed over on ([`super::guard`]).
    connect_guard: Option<(Vec<libc::sock_filter>, OwnedFd)>,
    /// The core's end of it and the proxy's port, until [`Plan::take_guard_receiver`].
    guard_receiver: Option<(std::os::unix::net::UnixStream, u16)>,
}

/// The listening socket the child makes in its network namespace for the proxy (see `proxy.rs`).
#[derive(Debug)]
struct ProxyListener {
    send: OwnedFd,
    port: u16,
}

fn cstring(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| format!("{} holds a NUL byte", p.display()))
}

impl Plan {
    /// Prepares a command's confinement. `limits.temp` must exist.
    pub fn new(limits: &Limits, mechanism: Mechanism) -> Result<Plan, String> {
        let namespaces = match mechanism {
            Mechanism::Unavailable => return Err("no sandbox on this system".to_string()),
            Mechanism::Landlock => None,
            Mechanism::Namespaces => Some(namespaces(limits)?),
        };
        // Without Landlock's TCP rules the proxy's port could not be the only one reachable: fail closed.
        if mechanism == Mechanism::Landlock && limits.proxy_port.is_some() && landlock_abi() < 4 {
            return Err("the network allowlist needs Landlock's TCP rules (ABI 4) on a system without user \
                        namespaces"
                .to_string());
        }
        let ruleset = ruleset(limits, mechanism)?;
        let seccomp = socket_filter(limits, mechanism);
        let reap = match mechanism {
            // The command is pid 1 of its own PID namespace (see `Plan::spawn`): no waiter.
            Mechanism::Namespaces => Reap::Namespace,
            _ if landlock_abi() >= 6 => Reap::Domain,
            _ => Reap::Group,
        };
        let (mut proxy_listener, mut proxy_receiver) = (None, None);
        if let (Some(ns), Some(port)) = (&namespaces, limits.proxy_port)
            && ns.flags & libc::CLONE_NEWNET != 0
        {
            let (core, child) = std::os::unix::net::UnixStream::pair()
                .map_err(|e| format!("cannot make the socket pair for the network proxy: {e}"))?;
            proxy_listener = Some(ProxyListener { send: child.into(), port });
            proxy_receiver = Some(core);
        }
        let (mut connect_guard, mut guard_receiver) = (None, None);
        if let (Mechanism::Landlock, Some(port)) = (mechanism, limits.proxy_port) {
            let (core, child) = std::os::unix::net::UnixStream::pair()
                .map_err(|e| format!("cannot make the socket pair for the connect guard: {e}"))?;
            connect_guard = Some((seccomp::connect_filter(), child.into()));
            guard_receiver = Some((core, port));
        }
        Ok(Plan { namespaces, ruleset, seccomp, reap, proxy_listener, proxy_receiver, connect_guard, guard_receiver })
    }

    /// Landlock alone with an allowlist: the core's end of the pair the child hands its `connect` filter's listener
    /// over, and the proxy's port; [`receive_fd`] takes the listener once the command runs, for
    /// [`super::guard::start`].
    pub fn take_guard_receiver(&mut self) -> Option<(std::os::unix::net::UnixStream, u16)> {
        self.guard_receiver.take()
    }

    /// The core's end of the pair the child hands the proxy's listening socket over (namespaces with an
    /// allowlist); [`receive_listener`] takes the socket once the command runs.
    pub fn take_proxy_receiver(&mut self) -> Option<std::os::unix::net::UnixStream> {
        self.proxy_receiver.take()
    }

    /// Whether the core must stop a running command by asking its waiter (`SIGTERM`), which then ends
    /// every process of its domain, rather than by killing the process group (which would kill the
    /// waiter before it could, and leave the orphans a `setsid` made).
    pub fn stop_through_waiter(&self) -> bool {
        self.reap == Reap::Domain
    }

    /// Whether the plan starts the command itself ([`Plan::spawn`], namespaces) rather than being installed
    /// into a `Command` ([`Plan::install`], Landlock alone).
    pub fn spawns_itself(&self) -> bool {
        self.namespaces.is_some()
    }

    /// Makes `cmd` enter the sandbox before it executes (Landlock alone). A plan with namespaces must be
    /// [`Plan::spawn`]ed: installed, it makes the command fail to start (closed, never unconfined).
    pub fn install(self, cmd: &mut std::process::Command) {
        // SAFETY: `enter` only makes system calls on data prepared here (no allocation, no lock), which
        // is what may run between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if self.namespaces.is_some() {
                    return Err(io::Error::from_raw_os_error(libc::EINVAL));
                }
                self.enter()
            });
        }
    }

    /// Starts `cmd` (its program, arguments, environment changes and folder; stdin from `/dev/null`, or a
    /// pipe with `piped_stdin` (an ACP agent's requests), stdout and stderr into pipes) in the plan's
    /// namespaces. Returns once the command executes, or with why it could not.
    pub fn spawn(self, cmd: &std::process::Command, piped_stdin: bool) -> io::Result<Spawned> {
        let Some(ns) = &self.namespaces else {
            return Err(io::Error::other("a plan without namespaces is installed, not spawned"));
        };
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{what} holds a NUL byte"));
        let mut env: std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString> = std::env::vars_os().collect();
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => env.insert(k.to_owned(), v.to_owned()),
                None => env.remove(k),
            };
        }
        let path = find_program(cmd.get_program(), env.get(std::ffi::OsStr::new("PATH")).map(|p| p.as_os_str()))?;
        let path = CString::new(path.into_os_string().into_vec()).map_err(|_| invalid("the program's path"))?;
        let mut argv = vec![CString::new(cmd.get_program().as_bytes()).map_err(|_| invalid("the program"))?];
        for a in cmd.get_args() {
            argv.push(CString::new(a.as_bytes()).map_err(|_| invalid("an argument"))?);
        }
        let mut envp = Vec::with_capacity(env.len());
        for (k, v) in &env {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            envp.push(CString::new(kv).map_err(|_| invalid("an environment variable"))?);
        }
        let cwd = cmd.get_current_dir().map(cstring_io).transpose()?;
        let argv_ptrs: Vec<*const libc::c_char> =
            argv.iter().map(|a| a.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
        let envp_ptrs: Vec<*const libc::c_char> =
            envp.iter().map(|a| a.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
        let (stdin, stdin_write) = match piped_stdin {
            true => pipe().map(|(r, w)| (r, Some(w)))?,
            false => (open_dev_null()?, None),
        };
        let (out_read, out_write) = pipe()?;
        let (err_read, err_write) = pipe()?;
        let child = Child {
            plan: &self,
            namespaces: ns,
            path: &path,
            argv: argv_ptrs.as_ptr(),
            envp: envp_ptrs.as_ptr(),
            cwd: cwd.as_deref(),
            stdio: [stdin.as_raw_fd(), out_write.as_raw_fd(), err_write.as_raw_fd()],
            error: std::sync::atomic::AtomicI32::new(0),
        };
        // The child's stack, while it shares the editor's memory (it runs the calls below, then executes).
        let mut stack = vec![0u8; CHILD_STACK];
        // SAFETY: the stack's top, aligned down to 16 bytes as the ABI wants.
        let top = unsafe { stack.as_mut_ptr().add(CHILD_STACK) } as usize & !15;
        let mut pidfd: libc::c_int = -1;
        let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | ns.flags | libc::SIGCHLD;
        // SAFETY: every signal is blocked around the clone so that no handler of the editor's runs in the
        // child on the memory it shares (the child resets them before unblocking); `child_main` only makes
        // system calls on `child`, which outlives it: with CLONE_VFORK this thread is suspended until the
        // child executes or exits.
        let pid = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            let pid = libc::clone(
                child_main,
                top as *mut libc::c_void,
                flags,
                (&child as *const Child<'_>).cast_mut().cast(),
                &mut pidfd as *mut libc::c_int,
            );
            let e = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            if pid < 0 {
                return Err(e);
            }
            pid
        };
        drop(stack);
        // SAFETY: CLONE_PIDFD stored a descriptor we now own.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        let failed = child.error.load(std::sync::atomic::Ordering::SeqCst);
        if failed != 0 {
            // It exited before executing: reap it and say why.
            let mut st = 0;
            // SAFETY: our own child, not yet reaped.
            unsafe { libc::waitpid(pid, &mut st, 0) };
            return Err(io::Error::from_raw_os_error(failed));
        }
        Ok(Spawned { pid, pidfd, stdin: stdin_write, stdout: out_read, stderr: err_read })
    }

    fn enter(&self) -> io::Result<()> {
        self.restrict()?;
        if let Some((program, send)) = &self.connect_guard {
            // before the waiter's fork: it has the filter too, and never connects
            let listener = super::guard::install(program)?;
            let sent = send_fd(send.as_raw_fd(), listener);
            // SAFETY: the listener this child was just given; the core has its own copy once it is sent.
            unsafe { libc::close(listener) };
            sent?;
        }
        if self.reap == Reap::Domain {
            // SAFETY: plain integer arguments.
            check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })?;
            waiter::fork(Reap::Domain)?;
        }
        Ok(())
    }

    /// No new privileges, the Landlock domain, the seccomp filter: the last steps before `exec`.
    fn restrict(&self) -> io::Result<()> {
        // SAFETY: plain integer arguments.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
        // SAFETY: the ruleset descriptor is open (owned by self) and flags are 0.
        let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, self.ruleset.as_raw_fd(), 0u32) };
        check(r as libc::c_int)?;
        if let Some(filter) = &self.seccomp {
            let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut libc::sock_filter };
            // SAFETY: `prog` points into `filter`, alive for the call.
            check(unsafe { libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const _, 0, 0) })?;
        }
        Ok(())
    }
}

/// The child's stack size: its calls are a few frames deep.
const CHILD_STACK: usize = 128 * 1024;

/// A command [`Plan::spawn`] started: pid 1 of its own PID namespace (so nothing it starts outlives it)
/// and the leader of its own process group; the read ends of its stdout and stderr.
#[derive(Debug)]
pub struct Spawned {
    pub pid: libc::pid_t,
    /// Readable once it has exited (it is then reaped with `waitpid`).
    pub pidfd: OwnedFd,
    /// The write end of its stdin, when spawned with `piped_stdin`.
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

impl Spawned {
    /// Waits for it here (the probe, off any runtime), its output left unread.
    pub fn wait_blocking(self) -> std::process::ExitStatus {
        use std::os::unix::process::ExitStatusExt;
        let mut st = 0;
        // SAFETY: our own child, unreaped.
        while unsafe { libc::waitpid(self.pid, &mut st, 0) } < 0
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
        std::process::ExitStatus::from_raw(st)
    }
}

/// What the child of [`Plan::spawn`] needs, in the memory it shares with the editor until it executes.
struct Child<'a> {
    plan: &'a Plan,
    namespaces: &'a Namespaces,
    path: &'a std::ffi::CStr,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: Option<&'a std::ffi::CStr>,
    stdio: [libc::c_int; 3],
    /// The error that kept it from executing (0: none), read by the parent once it resumes.
    error: std::sync::atomic::AtomicI32,
}

extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Child` of `Plan::spawn`, alive while the parent is suspended (CLONE_VFORK).
    let child = unsafe { &*(arg as *const Child<'_>) };
    let e = child.run();
    child.error.store(e.raw_os_error().unwrap_or(libc::EINVAL).max(1), std::sync::atomic::Ordering::SeqCst);
    // SAFETY: ends the child only.
    unsafe { libc::_exit(127) }
}

impl Child<'_> {
    /// Enters the sandbox and executes; returns only with why it could not.
    fn run(&self) -> io::Error {
        match self.enter() {
            // SAFETY: NUL-terminated path, arrays ending with a null pointer, all alive (see `Plan::spawn`).
            Ok(()) => unsafe {
                libc::execve(self.path.as_ptr(), self.argv, self.envp);
                io::Error::last_os_error()
            },
            Err(e) => e,
        }
    }

    fn enter(&self) -> io::Result<()> {
        // SAFETY: system calls on plain data. The handlers are set to the default before any signal is
        // unblocked: a handler of the editor's must not run here, in the memory the child shares with it.
        unsafe {
            for sig in 1..=libc::SIGRTMAX() {
                let mut old: libc::sigaction = std::mem::zeroed();
                if sig == libc::SIGKILL || sig == libc::SIGSTOP || libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                {
                    continue;
                }
                // An ignored signal stays ignored across exec, as with std's spawn, but SIGPIPE (Rust
                // ignores it in the editor; a command expects the default).
                if old.sa_sigaction != libc::SIG_DFL && (old.sa_sigaction != libc::SIG_IGN || sig == libc::SIGPIPE) {
                    let mut dfl: libc::sigaction = std::mem::zeroed();
                    dfl.sa_sigaction = libc::SIG_DFL;
                    libc::sigaction(sig, &dfl, std::ptr::null_mut());
                }
            }
            // Dies with the thread that started it (the core's), and with it everything in its namespace.
            check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))?;
        }
        self.namespaces.enter()?;
        if let Some(p) = &self.plan.proxy_listener {
            p.make_and_send()?;
        }
        // Its own /proc, so `ps` shows its processes only; not possible everywhere (a container's masked
        // /proc): then the host's stays, which Landlock's signal scope keeps out of reach.
        let _ = mount_fs(c"proc", c"/proc", c"proc", libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC);
        // SAFETY: system calls on descriptors and strings alive for the call.
        unsafe {
            // Its own group, so the core can end it and its children as one.
            check(libc::setpgid(0, 0))?;
            if let Some(dir) = self.cwd {
                check(libc::chdir(dir.as_ptr()))?;
            }
            for (to, &from) in self.stdio.iter().enumerate() {
                check(libc::dup2(from, to as libc::c_int))?;
            }
        }
        self.plan.restrict()?;
        // SAFETY: an empty set.
        unsafe {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        }
        Ok(())
    }
}

/// `program` as `execvp` would find it along `path`.
fn find_program(program: &std::ffi::OsStr, path: Option<&std::ffi::OsStr>) -> io::Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.as_bytes().contains(&b'/') {
        return Ok(program.into());
    }
    let dirs = path.map(|p| p.to_owned()).unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&dirs)
        .map(|d| d.join(program))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
        .ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("{} not found in PATH", Path::new(program).display()))
        })
}

fn cstring_io(p: &Path) -> io::Result<CString> {
    cstring(p).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills two descriptors on success, owned from here on.
    unsafe {
        check(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC))?;
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

fn open_dev_null() -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path; the descriptor is owned from here on.
    unsafe {
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        check(fd)?;
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

impl Namespaces {
    /// In the child, born in its namespaces: its user ids, then its mounts.
    fn enter(&self) -> io::Result<()> {
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", &self.uid_map)?;
        write_file(c"/proc/self/gid_map", &self.gid_map)?;
        // Nothing done here reaches the parent's mounts (a less privileged namespace makes them slaves
        // anyway; private says it).
        mount(None, c"/", libc::MS_REC | libc::MS_PRIVATE)?;
        for p in &self.writable_binds {
            mount(Some(p.as_c_str()), p, libc::MS_BIND | libc::MS_REC)?;
        }
        for (p, locked) in &self.readonly_binds {
            mount(Some(p.as_c_str()), p, libc::MS_BIND | libc::MS_REC)?;
            mount(None, p, libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | locked)?;
        }
        let empty = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        for p in &self.hidden_dirs {
            mount_fs(c"tmpfs", p, c"tmpfs", empty)?;
        }
        for p in &self.hidden_files {
            mount(Some(c"/dev/null"), p, libc::MS_BIND)?;
        }
        Ok(())
    }
}

fn mount_fs(
    source: &std::ffi::CStr,
    target: &std::ffi::CStr,
    fstype: &std::ffi::CStr,
    flags: libc::c_ulong,
) -> io::Result<()> {
    // SAFETY: NUL-terminated strings alive for the call; no data argument.
    check(unsafe { libc::mount(source.as_ptr(), target.as_ptr(), fstype.as_ptr(), flags, std::ptr::null()) })
}

impl ProxyListener {
    /// In the new network namespace: `lo` up, a socket listening on 127.0.0.1:`port`, sent to the core.
    fn make_and_send(&self) -> io::Result<()> {
        // SAFETY: system calls on stack data, fully initialised before use.
        unsafe {
            let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            check(s)?;
            let mut ifr: libc::ifreq = std::mem::zeroed();
            ifr.ifr_name[0] = b'l' as libc::c_char;
            ifr.ifr_name[1] = b'o' as libc::c_char;
            let up = libc::ioctl(s, libc::SIOCGIFFLAGS, &mut ifr);
            ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            let set = if up == 0 { libc::ioctl(s, libc::SIOCSIFFLAGS, &ifr) } else { up };
            libc::close(s);
            check(set)?;
            let l = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            check(l)?;
            let addr = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: self.port.to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be() },
                sin_zero: [0; 8],
            };
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            check(libc::bind(l, (&addr as *const libc::sockaddr_in).cast(), len))?;
            check(libc::listen(l, 128))?;
            let sent = send_fd(self.send.as_raw_fd(), l);
            libc::close(l);
            sent
        }
    }
}

/// Sends descriptor `fd` over the Unix socket `sock` (one byte and `SCM_RIGHTS`). In the child: raw system calls on
/// stack data only.
pub(super) fn send_fd(sock: libc::c_int, fd: libc::c_int) -> io::Result<()> {
    // SAFETY: system calls on stack data, fully initialised before use.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
        let mut control = [0u64; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), fd);
        if libc::sendmsg(sock, &msg, 0) != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The proxy's listening socket, as the child sent it (it has been sent before `exec`, so before the
/// spawn returned: a short wait only covers a child that failed).
pub fn receive_listener(from: &std::os::unix::net::UnixStream) -> io::Result<std::net::TcpListener> {
    Ok(std::net::TcpListener::from(receive_fd(from)?))
}

/// A descriptor the child sent before `exec` ([`send_fd`]): the proxy's listener, the connect guard's.
pub fn receive_fd(from: &std::os::unix::net::UnixStream) -> io::Result<OwnedFd> {
    from.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut control = [0u64; 4];
    // SAFETY: recvmsg into stack buffers sized for one descriptor; the descriptor read is ours to own.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as _;
        let n = libc::recvmsg(from.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n != 1 {
            return Err(if n < 0 {
                io::Error::last_os_error()
            } else {
                io::Error::other("the child sent no descriptor")
            });
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::other("the child sent no descriptor"));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn mount(source: Option<&std::ffi::CStr>, target: &std::ffi::CStr, flags: libc::c_ulong) -> io::Result<()> {
    let src = source.map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: NUL-terminated strings alive for the call; no data argument.
    check(unsafe { libc::mount(src, target.as_ptr(), std::ptr::null(), flags, std::ptr::null()) })
}

fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: open/write/close on a NUL-terminated path and a live buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        check(fd)?;
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n != data.len() as isize {
            return Err(err);
        }
    }
    Ok(())
}

fn namespaces(limits: &Limits) -> Result<Namespaces, String> {
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID;
    if !limits.network.is_open() {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut readonly_binds = Vec::new();
    let mut writable_binds = Vec::new();
    for name in PROTECTED {
        let p = limits.workspace.join(name);
        // What is not there yet is not protected: `git init` may make a repository.
        let Ok(meta) = std::fs::symlink_metadata(&p) else { continue };
        if meta.file_type().is_symlink() {
            // A link leads outside (or elsewhere inside): Landlock decides about its target.
            continue;
        }
        for w in std::iter::once(&limits.temp).chain(&limits.writable) {
            if w.starts_with(&p) && w.exists() {
                writable_binds.push(cstring(w)?);
            }
        }
        readonly_binds.push((cstring(&p)?, locked_flags(&p)?));
    }
    let (mut hidden_dirs, mut hidden_files) = (Vec::new(), Vec::new());
    for p in &limits.hidden {
        if p.is_dir() {
            hidden_dirs.push(cstring(p)?);
        } else {
            hidden_files.push(cstring(p)?);
        }
    }
    Ok(Namespaces {
        hidden_dirs,
        hidden_files,
        flags,
        uid_map: format!("{uid} {uid} 1").into_bytes(),
        gid_map: format!("{gid} {gid} 1").into_bytes(),
        writable_binds,
        readonly_binds,
    })
}

/// The flags of the mount `path` is on that a less privileged namespace may not drop in a remount.
fn locked_flags(path: &Path) -> Result<libc::c_ulong, String> {
    let c = cstring(path)?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a struct to fill.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(format!("cannot read the mount of {}: {}", path.display(), io::Error::last_os_error()));
    }
    let f = st.f_flag;
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if f & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    Ok(flags)
}

/// The seccomp program for `limits` (see `seccomp.rs`); none when nothing is to be refused.
fn socket_filter(limits: &Limits, mechanism: Mechanism) -> Option<Vec<libc::sock_filter>> {
    let unix = if limits.unix_sockets { Verdict::Allow } else { Verdict::Deny };
    let (families, default) = match (mechanism, &limits.network) {
        (Mechanism::Landlock, Network::Off) => (vec![(libc::AF_UNIX, unix)], Verdict::Deny),
        (Mechanism::Landlock, Network::Allow(_)) => (
            vec![(libc::AF_UNIX, unix), (libc::AF_INET, Verdict::StreamOnly), (libc::AF_INET6, Verdict::StreamOnly)],
            Verdict::Deny,
        ),
        _ if limits.unix_sockets => return None,
        _ => (vec![(libc::AF_UNIX, Verdict::Deny)], Verdict::Allow),
    };
    // TCP is open for the proxy's port only by Landlock's `connect` rule, which TCP Fast Open's sends go around
    let fast_open_closed = mechanism == Mechanism::Landlock && matches!(limits.network, Network::Allow(_));
    Some(seccomp::socket_filter(&families, default, fast_open_closed))
}

/// Reading files and listing folders.
fn read_access() -> landlock::BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

/// The paths that get the right to read beneath them so that everything but `hidden` is readable: every
/// entry of `/`, except the hidden ones and the folders on the way to one, which are walked into the same
/// way. Landlock grants a right to a whole hierarchy and has no exception, so those folders themselves
/// cannot be listed (their entries can still be opened by name), and what is created in them later cannot
/// be read: the fallback's price, said in the note and in `:checkhealth`.
pub(super) fn read_roots(hidden: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, hidden: &[std::path::PathBuf], out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            if hidden.contains(&p) {
                continue;
            }
            let on_the_way = hidden.iter().any(|h| h.starts_with(&p));
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if on_the_way && is_dir {
                walk(&p, hidden, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new("/"), hidden, &mut out);
    out
}

/// The rights that change the file system; reading, executing and device ioctls stay open.
fn write_access() -> landlock::BitFlags<AccessFs> {
    AccessFs::from_write(ABI::V3)
}

fn ruleset(limits: &Limits, mechanism: Mechanism) -> Result<OwnedFd, String> {
    let err = |e: landlock::RulesetError| format!("cannot build the Landlock rules: {e}");
    let mut rs = Ruleset::default().handle_access(write_access()).map_err(err)?.scope(Scope::Signal).map_err(err)?;
    if !limits.unix_sockets {
        rs = rs.scope(Scope::AbstractUnixSocket).map_err(err)?;
    }
    if !limits.network.is_open() {
        // With a network namespace of its own the command already has no network (and its errors say
        // "Network is unreachable", which the model understands); Landlock's TCP rules are the fallback.
        if mechanism == Mechanism::Landlock {
            rs = rs.handle_access(AccessNet::from_all(ABI::V4)).map_err(err)?;
        }
    }
    // The allowlist proxy on the host's loopback (Landlock alone): the one port a command may connect to.
    let proxy_port = if mechanism == Mechanism::Landlock { limits.proxy_port } else { None };
    // Without a mount namespace nothing can be laid over the secret stores: Landlock then handles reading
    // too, and grants it beneath everything but them (see `read_roots`).
    let hide_by_rules = mechanism == Mechanism::Landlock && !limits.hidden.is_empty();
    if hide_by_rules {
        rs = rs.handle_access(read_access()).map_err(err)?;
    }
    let mut created = rs.create().map_err(err)?;
    let dirs = std::iter::once(&limits.workspace).chain(std::iter::once(&limits.temp)).chain(&limits.writable);
    let granted = if hide_by_rules { write_access() | read_access() } else { write_access() };
    for dir in dirs {
        let fd = PathFd::new(dir).map_err(|e| format!("cannot open {} for the sandbox: {e}", dir.display()))?;
        created = created.add_rule(PathBeneath::new(fd, granted)).map_err(err)?;
    }
    if let Some(port) = proxy_port {
        created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp)).map_err(err)?;
    }
    if hide_by_rules {
        for p in read_roots(&limits.hidden) {
            // A path that vanished since it was listed needs no right.
            if let Ok(fd) = PathFd::new(&p) {
                created = created.add_rule(PathBeneath::new(fd, read_access())).map_err(err)?;
            }
        }
    }
    for dev in ["/dev/null", "/dev/zero", "/dev/full"] {
        if let Ok(fd) = PathFd::new(dev) {
            created = created.add_rule(PathBeneath::new(fd, AccessFs::WriteFile | AccessFs::Truncate)).map_err(err)?;
        }
    }
    Option::<OwnedFd>::from(created).ok_or_else(|| "the kernel has no Landlock".to_string())
}
