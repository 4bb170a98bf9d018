//! The allowlist's `connect` guard in the Landlock-only fallback: every `connect()` of the command is checked by
//! the core against the one destination the allowlist leaves open, the proxy at `127.0.0.1:PORT`.
//!
//! Why: without a network namespace the proxy listens on the host's loopback, and Landlock's TCP rules name ports,
//! not addresses: allowing `connect` to the proxy's port allows it to that port of every host, a way around the
//! allowlist (issue 48). A seccomp filter cannot read `connect`'s address (a pointer), so the filter hands each
//! `connect` to the core instead (`SECCOMP_RET_USER_NOTIF`, Linux 5.5), and the core decides.
//!
//! The decision is made on the core's own copy of the address, never on the command's memory after the check: an
//! allowed `connect` is carried out by the core itself on the command's socket (taken with `pidfd_getfd`, Linux
//! 5.6: the same open socket), so a second thread of the command rewriting the address between the check and the
//! call has nothing to race (`SECCOMP_USER_NOTIF_FLAG_CONTINUE` would let the kernel read it again). Only sockets
//! that cannot reach a TCP host (Unix ones, as `sandbox.unix_sockets` allows) are let through unread. A refused
//! `connect` fails with `EACCES`, as Landlock's refusals do. Fails closed: a notification the core cannot look into
//! is refused, and once the core stops listening (the command's end) every `connect` fails with `ENOSYS`.
//!
//! The child installs the filter and hands the listening descriptor over before `exec` (raw system calls only:
//! `install`, then `spawn.rs`'s `send_fd`); the core answers on a thread of its own for the command's life (`Guard`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How long the core's thread waits for a notification before it looks whether the command is over.
const POLL_MS: libc::c_int = 200;
/// `pidfd_open`'s flag for a thread's pidfd (Linux 6.9; `O_EXCL`): the notification names a thread.
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// In the child: installs `program` (the `connect` filter, [`super::seccomp::connect_filter`]) and returns its
/// listener, which the child sends to the core and closes. After `PR_SET_NO_NEW_PRIVS`; raw system calls only.
pub(super) fn install(program: &[libc::sock_filter]) -> io::Result<RawFd> {
    let prog = libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr() as *mut libc::sock_filter };
    // SAFETY: `prog` points into `program`, alive for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if fd < 0 { Err(io::Error::last_os_error()) } else { Ok(fd as RawFd) }
}

/// The core's side: answers the command's `connect` calls while kept; dropped, it stops within [`POLL_MS`].
#[derive(Debug)]
pub struct Guard {
    stop: Arc<AtomicBool>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Starts answering on `listener` (the child's, [`install`]) for a command whose proxy listens on `127.0.0.1:port`.
pub fn start(listener: OwnedFd, port: u16) -> io::Result<Guard> {
    let stop = Arc::new(AtomicBool::new(false));
    let seen = stop.clone();
    std::thread::Builder::new().name("pc-connect-guard".into()).spawn(move || serve(&listener, port, &seen))?;
    Ok(Guard { stop })
}

fn serve(listener: &OwnedFd, port: u16, stop: &AtomicBool) {
    let fd = listener.as_raw_fd();
    while !stop.load(Ordering::SeqCst) {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd on the stack.
        let n = unsafe { libc::poll(&mut p, 1, POLL_MS) };
        if n == 0 || (n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted) {
            continue;
        }
        if n < 0 {
            return;
        }
        if p.revents & libc::POLLIN != 0 {
            answer_one(fd, port);
        } else if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return; // no process of the command is left
        }
    }
}

/// Receives one notification and answers it.
fn answer_one(listener: RawFd, port: u16) {
    // SAFETY: the kernel fills `req` (zeroed first, as it requires); `resp` is plain data.
    unsafe {
        let mut req: libc::seccomp_notif = std::mem::zeroed();
        if libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) != 0 {
            return; // the caller died meanwhile (ENOENT), or a signal
        }
        let (val, error, flags) = match decide(listener, &req, port) {
            Verdict::Done(0) => (0, 0, 0),
            Verdict::Done(errno) | Verdict::Refused(errno) => (-1, -errno, 0),
            Verdict::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        };
        let mut resp = libc::seccomp_notif_resp { id: req.id, val, error, flags };
        // ENOENT when the caller is gone: nothing to answer.
        libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp);
    }
}

enum Verdict {
    /// Carried out by the core: 0 or the errno of its `connect`.
    Done(i32),
    Refused(i32),
    /// A socket that cannot reach a TCP host: the kernel goes on with the call.
    Continue,
}

/// What `connect(sockfd, addr, len)` of thread `req.pid` gets.
fn decide(listener: RawFd, req: &libc::seccomp_notif, port: u16) -> Verdict {
    let tid = req.pid as libc::pid_t;
    let [sockfd, addr, len, ..] = req.data.args;
    let Some(pidfd) = pidfd_of(tid) else { return Verdict::Refused(libc::EPERM) };
    // The thread behind the notification is the one the pidfd names (not a reused id).
    // SAFETY: a u64 argument on the stack.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id) } != 0 {
        return Verdict::Refused(libc::EPERM);
    }
    // SAFETY: plain integer arguments; the descriptor returned is owned here.
    let sock = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), sockfd as libc::c_int, 0u32) };
    if sock < 0 {
        return Verdict::Refused(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EBADF));
    }
    // SAFETY: just returned by pidfd_getfd.
    let sock = unsafe { OwnedFd::from_raw_fd(sock as RawFd) };
    let mut domain: libc::c_int = 0;
    let mut size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: an int and its size on the stack.
    let got = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_DOMAIN,
            (&mut domain as *mut libc::c_int).cast(),
            &mut size,
        )
    };
    if got != 0 {
        return Verdict::Refused(libc::ENOTSOCK);
    }
    if domain != libc::AF_INET && domain != libc::AF_INET6 {
        return Verdict::Continue; // its family is the socket's, fixed at its creation: no TCP host
    }
    let mut buf = [0u8; 128];
    let len = (len as usize).min(buf.len());
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: len };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: len };
    // SAFETY: reads `len` bytes of the caller's memory into `buf`.
    if unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) } != len as isize {
        return Verdict::Refused(libc::EFAULT);
    }
    if !to_the_proxy(&buf[..len], port) {
        return Verdict::Refused(libc::EACCES);
    }
    // SAFETY: the copy checked above, its length.
    let r = unsafe { libc::connect(sock.as_raw_fd(), buf.as_ptr().cast(), len as libc::socklen_t) };
    Verdict::Done(if r == 0 { 0 } else { io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) })
}

/// `SO_DOMAIN` (not in the libc crate for every Linux target).
const SO_DOMAIN: libc::c_int = 39;

/// A pidfd of thread `tid`: of the thread itself (Linux 6.9), else of its process when it leads it.
fn pidfd_of(tid: libc::pid_t) -> Option<OwnedFd> {
    for flags in [PIDFD_THREAD, 0] {
        // SAFETY: plain integer arguments; the descriptor returned is owned here.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, flags) };
        if fd >= 0 {
            // SAFETY: just returned by pidfd_open.
            return Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        }
    }
    None
}

/// Whether socket address `addr` (as `connect` takes it) is the proxy's, `127.0.0.1:port` (or the same as an
/// IPv4-mapped IPv6 address), or `AF_UNSPEC`, which reaches no host (it dissolves a connection).
pub(crate) fn to_the_proxy(addr: &[u8], port: u16) -> bool {
    let Some(family) = addr.get(..2).map(|f| u16::from_ne_bytes([f[0], f[1]]) as libc::c_int) else { return false };
    let port_is = |a: &[u8]| a.get(2..4).is_some_and(|p| u16::from_be_bytes([p[0], p[1]]) == port);
    match family {
        libc::AF_UNSPEC => true,
        libc::AF_INET => port_is(addr) && addr.get(4..8) == Some(&[127, 0, 0, 1][..]),
        libc::AF_INET6 => {
            port_is(addr) && addr.get(8..24) == Some(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1][..])
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(ip: [u8; 4], port: u16) -> Vec<u8> {
        let mut a = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        a.extend(port.to_be_bytes());
        a.extend(ip);
        a.extend([0; 8]);
        a
    }

    fn v6(ip: [u8; 16], port: u16) -> Vec<u8> {
        let mut a = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
        a.extend(port.to_be_bytes());
        a.extend([0; 4]);
        a.extend(ip);
        a.extend([0; 4]);
        a
    }

    #[test]
    fn only_the_proxys_address_and_port_are_let_through() {
        assert!(to_the_proxy(&v4([127, 0, 0, 1], 4242), 4242));
        assert!(!to_the_proxy(&v4([127, 0, 0, 2], 4242), 4242), "another host of the loopback, the same port");
        assert!(!to_the_proxy(&v4([93, 184, 216, 34], 4242), 4242), "a host out there, the same port");
        assert!(!to_the_proxy(&v4([127, 0, 0, 1], 4243), 4242), "the proxy's host, another port");
        let mapped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1];
        assert!(to_the_proxy(&v6(mapped, 4242), 4242));
        let mut loopback6 = [0u8; 16];
        loopback6[15] = 1;
        assert!(!to_the_proxy(&v6(loopback6, 4242), 4242), "::1 is not where the proxy listens");
        assert!(to_the_proxy(&(libc::AF_UNSPEC as u16).to_ne_bytes(), 4242), "a disconnect");
        assert!(!to_the_proxy(&v4([127, 0, 0, 1], 4242)[..6], 4242), "cut short");
        assert!(!to_the_proxy(&[], 4242));
    }
}
