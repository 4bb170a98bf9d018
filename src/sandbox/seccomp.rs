//! The network fallback without a network namespace: a seccomp filter that refuses `socket()` for every
//! family but `AF_UNIX` (UDP, raw, netlink; Landlock's own rules cover TCP connect and bind) and
//! `io_uring_setup` (whose operations a filter cannot see). A foreign-architecture system call (a 32-bit
//! program's `socketcall`) is refused too: its numbers mean other things.

use libc::sock_filter;

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

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

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter { code, jt: 0, jf: 0, k }
}

fn jeq(k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code: BPF_JEQ_K, jt, jf, k }
}

/// The program (see the module's comment).
pub(super) fn deny_inet() -> Vec<sock_filter> {
    let eperm = RET_ERRNO | libc::EPERM as u32;
    let eafnosupport = RET_ERRNO | libc::EAFNOSUPPORT as u32;
    vec![
        stmt(BPF_LD_W_ABS, ARCH),
        jeq(AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, eperm),
        stmt(BPF_LD_W_ABS, NR),
        jeq(libc::SYS_io_uring_setup as u32, 0, 1),
        stmt(BPF_RET_K, eperm),
        jeq(libc::SYS_socket as u32, 0, 3),
        stmt(BPF_LD_W_ABS, ARG0),
        jeq(libc::AF_UNIX as u32, 1, 0),
        stmt(BPF_RET_K, eafnosupport),
        stmt(BPF_RET_K, RET_ALLOW),
    ]
}
