//! The child's side of the sandbox: a [`Plan`] built in the parent (everything that allocates or may fail
//! for reasons worth a message), installed as the command's `pre_exec`, where only raw system calls run.
//!
//! Why the `landlock` crate: it knows which access rights each ABI has and drops the ones an older kernel
//! lacks (best effort), and it builds the ruleset with checked path descriptors; it hands the ruleset's
//! descriptor over (`Option<OwnedFd>`), so the child only calls `landlock_restrict_self`. The ABI version
//! is asked of the kernel directly (the crate keeps its probe private), for `:checkhealth`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};

use super::seccomp;
use super::{Limits, Mechanism, PROTECTED};

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
}

/// Everything the child does, prepared.
#[derive(Debug)]
pub struct Plan {
    namespaces: Option<Namespaces>,
    ruleset: OwnedFd,
    seccomp: Option<Vec<libc::sock_filter>>,
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
        let ruleset = ruleset(limits, mechanism)?;
        let seccomp = (mechanism == Mechanism::Landlock && !limits.network).then(seccomp::deny_inet);
        Ok(Plan { namespaces, ruleset, seccomp })
    }

    /// Makes `cmd` enter the sandbox before it executes.
    pub fn install(self, cmd: &mut std::process::Command) {
        // SAFETY: `enter` only makes system calls on data prepared here (no allocation, no lock), which
        // is what may run between fork and exec.
        unsafe {
            cmd.pre_exec(move || self.enter());
        }
    }

    fn enter(&self) -> io::Result<()> {
        if let Some(ns) = &self.namespaces {
            ns.enter()?;
        }
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

impl Namespaces {
    fn enter(&self) -> io::Result<()> {
        // SAFETY: plain flags.
        check(unsafe { libc::unshare(self.flags) })?;
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", &self.uid_map)?;
        write_file(c"/proc/self/gid_map", &self.gid_map)?;
        // Nothing done here reaches the parent's mounts (a less privileged namespace makes them slaves
        // anyway; private says it).
        mount(None, c"/", libc::MS_REC | libc::MS_PRIVATE)?;
        for p in &self.writable_binds {
            mount(Some(p), p, libc::MS_BIND | libc::MS_REC)?;
        }
        for (p, locked) in &self.readonly_binds {
            mount(Some(p), p, libc::MS_BIND | libc::MS_REC)?;
            mount(None, p, libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | locked)?;
        }
        Ok(())
    }
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn mount(source: Option<&CString>, target: &std::ffi::CStr, flags: libc::c_ulong) -> io::Result<()> {
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
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS;
    if !limits.network {
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
    Ok(Namespaces {
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

/// The rights that change the file system; reading, executing and device ioctls stay open.
fn write_access() -> landlock::BitFlags<AccessFs> {
    AccessFs::from_write(ABI::V3)
}

fn ruleset(limits: &Limits, mechanism: Mechanism) -> Result<OwnedFd, String> {
    let err = |e: landlock::RulesetError| format!("cannot build the Landlock rules: {e}");
    let mut rs = Ruleset::default().handle_access(write_access()).map_err(err)?.scope(Scope::Signal).map_err(err)?;
    if !limits.network {
        rs = rs.scope(Scope::AbstractUnixSocket).map_err(err)?;
        // With a network namespace of its own the command already has no network (and its errors say
        // "Network is unreachable", which the model understands); Landlock's TCP rules are the fallback.
        if mechanism == Mechanism::Landlock {
            rs = rs.handle_access(AccessNet::from_all(ABI::V4)).map_err(err)?;
        }
    }
    let mut created = rs.create().map_err(err)?;
    let dirs = std::iter::once(&limits.workspace).chain(std::iter::once(&limits.temp)).chain(&limits.writable);
    for dir in dirs {
        let fd = PathFd::new(dir).map_err(|e| format!("cannot open {} for the sandbox: {e}", dir.display()))?;
        created = created.add_rule(PathBeneath::new(fd, write_access())).map_err(err)?;
    }
    for dev in ["/dev/null", "/dev/zero", "/dev/full"] {
        if let Ok(fd) = PathFd::new(dev) {
            created = created.add_rule(PathBeneath::new(fd, AccessFs::WriteFile | AccessFs::Truncate)).map_err(err)?;
        }
    }
    Option::<OwnedFd>::from(created).ok_or_else(|| "the kernel has no Landlock".to_string())
}
