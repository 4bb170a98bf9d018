//! Reading a sandboxed command's output for what the sandbox refused, so the model is told in plain words
//! ("blocked by the sandbox: write to /home/u/x") and can ask the user instead of guessing.
//!
//! A refused write shows as `EACCES` ("Permission denied"), `EROFS` ("Read-only file system", the
//! read-only binds) or `EPERM` ("Operation not permitted"); the path is whatever the program quoted on
//! that line. A path the sandbox allows is not reported: its error has another cause. A refused
//! connection shows as "Network is unreachable" (no interface in the namespace), a name that does not
//! resolve, or `EACCES`/`EAFNOSUPPORT` on a socket.

use std::path::{Path, PathBuf};

use super::{Limits, Mechanism};

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

/// The lines to add to the command's result, one per refused path (at most 5) and one for the network.
pub fn blocked_report(output: &str, limits: &Limits, mechanism: Mechanism, cwd: &Path) -> Vec<String> {
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut network = false;
    for line in output.lines() {
        if !limits.network && NETWORK_ERRORS.iter().any(|e| line.contains(e)) {
            network = true;
        }
        if !WRITE_ERRORS.iter().any(|e| line.contains(e)) {
            continue;
        }
        let found = candidates(line);
        // Landlock refuses a TCP connect or bind with EACCES, which names no path.
        if found.is_empty() && !limits.network && line.contains("Permission denied") {
            network = true;
        }
        for candidate in found {
            let p = absolute(cwd, &candidate);
            if !limits.allows_write(&p, mechanism) && !paths.contains(&p) && paths.len() < 5 {
                paths.push(p);
            }
        }
    }
    let mut out: Vec<String> =
        paths.iter().map(|p| format!("blocked by the sandbox: write to {}", p.display())).collect();
    if network {
        out.push("blocked by the sandbox: network (connections, binds and name lookups fail inside it)".to_string());
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
        Limits { workspace: "/w".into(), temp: "/w/.PseudoClaude/s/tmp".into(), writable: vec![], network: false }
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
        let open = Limits { network: true, ..limits() };
        assert!(blocked_report(out, &open, Mechanism::Namespaces, Path::new("/w")).is_empty());
    }
}
