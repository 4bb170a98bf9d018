//! Reading a sandboxed command's output for what the sandbox refused, so the model is told in plain words
//! ("blocked by the sandbox: write to /home/u/x") and can ask the user instead of guessing.
//!
//! A refused write shows as `EACCES` ("Permission denied"), `EROFS` ("Read-only file system", the
//! read-only binds) or `EPERM` ("Operation not permitted"); the path is whatever the program quoted on
//! that line. A path the sandbox allows is not reported: its error has another cause. A refused
//! connection shows as "Network is unreachable" (no interface in the namespace), a name that does not
//! resolve, or `EACCES`/`EAFNOSUPPORT` on a socket.

use std::path::{Path, PathBuf};

use super::{Limits, Mechanism, Network};

const WRITE_ERRORS: [&str; 3] = ["Permission denied", "Read-only file system", "Operation not permitted"];
const NETWORK_ERRORS: [&str; 7] = [
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Could not resolve host",
    "Name or service not known",
    "Address family not supported",
    "No address associated with hostname",
    "Cannot assign requested address",
];

/// What reading a hidden path says: an empty folder has no such file; Landlock refuses.
const READ_ERRORS: [&str; 2] = ["No such file or directory", "Permission denied"];

/// What a refused `socket(AF_UNIX)` says (the seccomp filter's `EAFNOSUPPORT`).
const SOCKET_REFUSED: &str = "Address family not supported";

/// The lines to add to the command's result, one per refused path (at most 5), one for the network and
/// one for Unix sockets.
pub fn blocked_report(output: &str, limits: &Limits, mechanism: Mechanism, cwd: &Path) -> Vec<String> {
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut reads: Vec<PathBuf> = Vec::new();
    let closed = !limits.network.is_open();
    let mut network = false;
    let mut unix = false;
    for line in output.lines() {
        // With a network namespace, sockets of the network's families open (their connections fail): a
        // refused socket is a Unix one.
        let refused_socket = line.contains(SOCKET_REFUSED);
        if closed
            && NETWORK_ERRORS.iter().any(|e| line.contains(e))
            && !(refused_socket && mechanism == Mechanism::Namespaces)
        {
            network = true;
        }
        if !limits.unix_sockets && refused_socket {
            unix = true;
        }
        if READ_ERRORS.iter().any(|e| line.contains(e)) {
            for candidate in candidates(line) {
                let p = absolute(cwd, &candidate);
                if limits.hidden.iter().any(|h| p.starts_with(h)) && !reads.contains(&p) && reads.len() < 5 {
                    reads.push(p);
                }
            }
        }
        if !WRITE_ERRORS.iter().any(|e| line.contains(e)) {
            continue;
        }
        let found = candidates(line);
        // Landlock refuses a TCP connect or bind with EACCES, which names no path.
        if found.is_empty() && closed && line.contains("Permission denied") {
            network = true;
        }
        for candidate in found {
            let p = absolute(cwd, &candidate);
            if reads.contains(&p) {
                continue;
            }
            if !limits.allows_write(&p, mechanism) && !paths.contains(&p) && paths.len() < 5 {
                paths.push(p);
            }
        }
    }
    let mut out: Vec<String> =
        paths.iter().map(|p| format!("blocked by the sandbox: write to {}", p.display())).collect();
    out.extend(reads.iter().map(|p| {
        format!("blocked by the sandbox: read of {} (a secret store: it reads as empty in the sandbox)", p.display())
    }));
    if network {
        out.push(match &limits.network {
            Network::Allow(hosts) => format!(
                "blocked by the sandbox: network (only {} are reachable, through the proxy in $HTTPS_PROXY; \
                 sandbox.network's allow list adds hosts)",
                hosts.join(", ")
            ),
            _ => "blocked by the sandbox: network (connections, binds and name lookups fail inside it)".to_string(),
        });
    }
    if unix {
        out.push(
            "blocked by the sandbox: Unix sockets (no socket(AF_UNIX): the editor's server, an ssh agent, the Docker \
             daemon are out of reach; socketpair and pipes work; sandbox.unix_sockets = true lifts it)"
                .to_string(),
        );
    }
    out
}

/// The path-like words of an error line: quoted ones ('x', "x", `x', ‘x’), and bare ones that start with
/// `/`, `./`, `../` or `~`.
fn candidates(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let close = match chars[i] {
            '\'' => Some('\''),
            '"' => Some('"'),
            '`' => Some('\''),
            '‘' => Some('’'),
            '“' => Some('”'),
            _ => None,
        };
        if let Some(close) = close
            && let Some(len) = chars[i + 1..].iter().position(|&c| c == close)
        {
            let s: String = chars[i + 1..i + 1 + len].iter().collect();
            if looks_like_path(&s) {
                out.push(s);
            }
            i += len + 2;
            continue;
        }
        i += 1;
    }
    if out.is_empty() {
        for word in line.split(|c: char| c.is_whitespace() || c == ',' || c == ';') {
            let w = word.trim_end_matches(':').trim_matches(|c| c == '(' || c == ')');
            if w.starts_with('/') || w.starts_with("./") || w.starts_with("../") {
                out.push(w.to_string());
            }
        }
    }
    out
}

fn looks_like_path(s: &str) -> bool {
    !s.is_empty() && !s.contains('\n') && (s.contains('/') || s.starts_with('.')) && !s.contains("://")
}

fn absolute(cwd: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    let joined = if p.is_absolute() { p.to_path_buf() } else { cwd.join(p) };
    // Lexically: `..` and `.` folded, links not followed (the path may not exist).
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            workspace: "/w".into(),
            temp: "/w/.PseudoClaude/s/tmp".into(),
            writable: vec![],
            network: Network::Off,
            unix_sockets: false,
            hidden: vec![],
            proxy_port: None,
        }
    }

    #[test]
    fn refused_writes_are_named_with_their_paths() {
        let out = "touch: cannot touch '/root/x': Permission denied\n\
                   sh: 1: cannot create /etc/y: Permission denied\n\
                   rm: cannot remove '.git/HEAD': Read-only file system\n\
                   PermissionError: [Errno 13] Permission denied: '/home/u/z'\n\
                   touch: cannot touch 'ok/file': No such file or directory\n";
        assert_eq!(
            blocked_report(out, &limits(), Mechanism::Namespaces, Path::new("/w")),
            [
                "blocked by the sandbox: write to /root/x",
                "blocked by the sandbox: write to /etc/y",
                "blocked by the sandbox: write to /w/.git/HEAD",
                "blocked by the sandbox: write to /home/u/z",
            ]
        );
    }

    #[test]
    fn allowed_paths_and_other_errors_are_not_blamed_on_the_sandbox() {
        let out = "cp: cannot create regular file 'src/a': Permission denied\ncurl: (6) Could not resolve host: x\n";
        assert_eq!(
            blocked_report(out, &limits(), Mechanism::Namespaces, Path::new("/w")),
            ["blocked by the sandbox: network (connections, binds and name lookups fail inside it)"]
        );
        let open = Limits { network: Network::On, ..limits() };
        assert!(blocked_report(out, &open, Mechanism::Namespaces, Path::new("/w")).is_empty());
    }
}
