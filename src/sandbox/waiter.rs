//! Nothing outlives its command.
//!
//! - With namespaces the command is pid 1 of its own PID namespace (`Plan::spawn` starts it there): when it
//!   exits the kernel kills every other process in it (a `setsid`, a `nohup`, a double fork cannot leave a
//!   namespace), and it dies with the core's thread that started it (`PR_SET_PDEATHSIG`), taking the
//!   namespace along. No waiter is needed.
//! - In the Landlock-only fallback the process `std` spawns forks once more before `exec`; the child goes
//!   on to become the command, and this process (the waiter) stays behind, a child subreaper inside the
//!   command's Landlock domain: it waits for the command, orphans are reparented to it, and
//!   `kill(-1, SIGKILL)` then reaches exactly the processes of its domain (Landlock's signal scope, ABI 6,
//!   refuses the rest); it exits as the command did. The core stops such a command with `SIGTERM` to the
//!   waiter, which then does the same; a `SIGKILL` would leave it no chance. It also ends everything when
//!   the editor dies (`PR_SET_PDEATHSIG` with `SIGTERM`). Runs between `fork` and `exec`: raw system calls
//!   only, no allocation.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// How the process `std` spawns (the waiter) ends what the command started, once it is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reap {
    /// The command is pid 1 of a PID namespace: when it ends the kernel ends the rest (no waiter).
    Namespace,
    /// The waiter is a child subreaper inside the command's Landlock domain, whose signal scope limits
    /// `kill(-1)` to the domain: every process the command started, orphans included.
    Domain,
    /// Neither (Landlock without signal scoping, ABI < 6): only the process group is killed.
    Group,
}

/// Set by the waiter's `SIGTERM` handler.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Forks; returns in the child (the command to be), never in the waiter.
pub(super) fn fork(reap: Reap) -> io::Result<()> {
    // SAFETY: fork in a single-threaded child (between fork and exec); the waiter branch only makes
    // system calls and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: plain integer arguments.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
        return Ok(());
    }
    // SAFETY: see `wait_then_exit`.
    unsafe { wait_then_exit(pid, reap) }
}

/// The waiter's life. SAFETY: only system calls on its own stack's data.
unsafe fn wait_then_exit(child: libc::pid_t, reap: Reap) -> ! {
    unsafe {
        // Holding no descriptor but stdio: above all not the pipe `std` reads until `exec` closes it,
        // or spawning would wait for the whole command.
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
            for fd in 3..1024 {
                libc::close(fd);
            }
        }
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_term as extern "C" fn(libc::c_int) as usize;
        // No SA_RESTART: the wait returns EINTR and the loop sees the flag.
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(libc::SIGTERM, &act, std::ptr::null_mut());
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
        let mut status: libc::c_int = 0;
        let mut ended = false;
        while !ended {
            if STOP.load(Ordering::SeqCst) {
                // Killed by the core: reported as a SIGKILL, as a process group kill would be.
                status = libc::SIGKILL;
                break;
            }
            let mut st: libc::c_int = 0;
            let r = libc::waitpid(-1, &mut st, 0);
            if r == child {
                status = st;
                ended = true;
            } else if r < 0 && *libc::__errno_location() == libc::ECHILD {
                break;
            }
            // Another pid: an orphan reparented to this subreaper, reaped.
        }
        end_all(reap);
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        let sig = if libc::WIFSIGNALED(status) { libc::WTERMSIG(status) } else { libc::SIGKILL };
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig)
    }
}

/// Kills what is left (in a namespace the kernel did when its pid 1 ended) and reaps it. SAFETY: system
/// calls only.
unsafe fn end_all(reap: Reap) {
    unsafe {
        if reap == Reap::Domain {
            // Scoped by Landlock to this domain (never `kill(-1)` without that scope: see `Plan::new`).
            libc::kill(-1, libc::SIGKILL);
        }
        let mut st: libc::c_int = 0;
        while libc::waitpid(-1, &mut st, 0) > 0 || *libc::__errno_location() == libc::EINTR {}
    }
}
