//! The seccomp filter on `socket()`: which address families a sandboxed command may open a socket of.
//!
//! - `AF_UNIX` is refused unless `sandbox.unix_sockets`: a command that can `connect()` a Unix socket on
//!   the file system can drive the editor through its own server (`v:servername`), an ssh agent, the
//!   Docker daemon. Refusing `socket(AF_UNIX)` (as Claude Code's sandbox-runtime does) is the closed
//!   answer: a filter on `connect()` cannot read the path it is given, and Landlock (ABI 7 here) has no
//!   right for connecting to a path. `socketpair()` is another system call and stays open, as do pipes.
//! - Without a network namespace (the Landlock-only fallback), every other family is refused too when the
//!   network is off (UDP, raw, netlink; Landlock's own rules cover TCP connect and bind), and only TCP
//!   (`SOCK_STREAM` of `AF_INET`/`AF_INET6`) is left when the allowlist proxy is the way out (Landlock
//!   then allows connecting to the proxy's port only).
//!
//! - With TCP allowed for the proxy (Landlock alone), a `sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN` is
//!   refused: TCP Fast Open connects from inside the send, where Landlock's `connect` rule never looks
//!   (landlock-lsm/linux#41), so it would reach any host on any port. `TCP_FASTOPEN_CONNECT` goes through `connect`
//!   and stays allowed.
//!
//! `io_uring_setup` is refused whenever a filter is installed (its operations, socket creation among
//! them, are out of a filter's sight). A foreign-architecture system call (a 32-bit program's
//! `socketcall`) is refused too: its numbers mean other things.

use libc::sock_filter;

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
const BPF_ALU_AND_K: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;

// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0: u32 = 16;
const ARG1: u32 = 24;
const ARG2: u32 = 32;
const ARG3: u32 = 40;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter { code, jt: 0, jf: 0, k }
}

fn jeq(k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code: BPF_JEQ_K, jt, jf, k }
}

/// What a family gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Allow,
    Deny,
    /// Only `SOCK_STREAM` sockets (TCP).
    StreamOnly,
}

/// The program: `families` first (each once), then `default` for every other family; `no_fast_open`: the sends that
/// would open a TCP Fast Open connection refused.
pub(super) fn socket_filter(families: &[(i32, Verdict)], default: Verdict, no_fast_open: bool) -> Vec<sock_filter> {
    let eperm = RET_ERRNO | libc::EPERM as u32;
    let refuse = RET_ERRNO | libc::EAFNOSUPPORT as u32;
    let mut p = vec![
        stmt(BPF_LD_W_ABS, ARCH),
        jeq(AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, eperm),
        stmt(BPF_LD_W_ABS, NR),
        jeq(libc::SYS_io_uring_setup as u32, 0, 1),
        stmt(BPF_RET_K, eperm),
    ];
    if no_fast_open {
        // The flags argument of each send: its low word (both architectures are little-endian).
        for (nr, flags) in [(libc::SYS_sendto, ARG3), (libc::SYS_sendmsg, ARG2), (libc::SYS_sendmmsg, ARG3)] {
            let fast_open = libc::MSG_FASTOPEN as u32;
            p.extend([
                jeq(nr as u32, 0, 5),
                stmt(BPF_LD_W_ABS, flags),
                stmt(BPF_ALU_AND_K, fast_open),
                jeq(fast_open, 0, 1),
                stmt(BPF_RET_K, eperm),
                stmt(BPF_RET_K, RET_ALLOW),
            ]);
        }
    }
    p.extend([jeq(libc::SYS_socket as u32, 1, 0), stmt(BPF_RET_K, RET_ALLOW), stmt(BPF_LD_W_ABS, ARG0)]);
    let body = |v: Verdict| -> Vec<sock_filter> {
        match v {
            Verdict::Allow => vec![stmt(BPF_RET_K, RET_ALLOW)],
            Verdict::Deny => vec![stmt(BPF_RET_K, refuse)],
            // The type argument carries SOCK_NONBLOCK and SOCK_CLOEXEC in its high bits.
            Verdict::StreamOnly => vec![
                stmt(BPF_LD_W_ABS, ARG1),
                stmt(BPF_ALU_AND_K, 0xf),
                jeq(libc::SOCK_STREAM as u32, 0, 1),
                stmt(BPF_RET_K, RET_ALLOW),
                stmt(BPF_RET_K, refuse),
            ],
        }
    };
    for &(family, verdict) in families {
        let b = body(verdict);
        p.push(jeq(family as u32, 0, b.len() as u8));
        p.extend(b);
    }
    p.extend(body(default));
    p
}

/// The `connect` guard's program ([`super::guard`]): every `connect` handed to the listener, the rest allowed (a
/// foreign architecture is refused by the socket filter already).
pub(super) fn connect_filter() -> Vec<sock_filter> {
    vec![
        stmt(BPF_LD_W_ABS, NR),
        jeq(libc::SYS_connect as u32, 0, 1),
        stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF),
        stmt(BPF_RET_K, RET_ALLOW),
    ]
}
