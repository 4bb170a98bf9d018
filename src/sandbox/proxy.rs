//! The network allowlist: an HTTP proxy the core runs for one command (`sandbox.network = { allow = … }`).
//! It takes `CONNECT host:port` (HTTPS and any TLS) and absolute-form requests (`GET http://host/…`),
//! matches the host name and port against the allowlist, and either relays the bytes or answers `403` with
//! a body naming the host and the setting that allows it. It never sees inside TLS: matching is by the name
//! the client asked for, as Claude Code's sandbox-runtime does.
//!
//! How the command reaches it: with namespaces the command has a network namespace of its own with only
//! `lo` up, and the child creates the listening socket there (`127.0.0.1:`[`NAMESPACE_PORT`]) before
//! `exec` and hands its descriptor to the core over a socket pair: a socket keeps the namespace it was made
//! in, so the core accepts the command's connections on it and opens its own connections from the editor's
//! namespace. No forwarder process, no route out of the namespace. In the Landlock-only fallback the proxy
//! listens on the host's loopback and Landlock allows TCP connections to that port only.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Each direction's relay buffer, allocated once per connection. Copies through it cost less CPU in all
/// than a zero-copy `splice(2)` relay did here (`cargo bench --bench sandbox`, load 8 on 2 cores: a 100 MB
/// download took 1.66-1.70x the direct download's CPU time through copies, 1.85-2.00x through splice,
/// the command's own reads of the spliced pages being the dearer part).
const RELAY_BUF: usize = 256 * 1024;

/// The proxy's port inside a command's own network namespace (nothing else listens there).
pub const NAMESPACE_PORT: u16 = 3128;

/// The most a request's head may take.
const MAX_HEAD: usize = 64 * 1024;

/// One destination a command asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contact {
    /// `host:port`.
    pub host: String,
    pub allowed: bool,
}

/// Whether `host:port` is on the allowlist: an entry is a name (`crates.io`), a suffix (`*.npmjs.org`:
/// the names beneath it, not itself), or an IP address, each with an optional `:port` (any port without).
pub fn allowed(allow: &[String], host: &str, port: u16) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    allow.iter().any(|entry| {
        let entry = entry.trim().to_ascii_lowercase();
        let (name, want_port) = split_port(&entry);
        if want_port.is_some_and(|p| p != port) {
            return false;
        }
        let name = name.trim_start_matches('[').trim_end_matches(']');
        match name.strip_prefix("*.") {
            Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
            None => host == name,
        }
    })
}

/// `host:port` (or `[v6]:port`) apart; no port when there is none.
fn split_port(s: &str) -> (&str, Option<u16>) {
    if let Some(rest) = s.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((h, tail)) => (h, tail.strip_prefix(':').and_then(|p| p.parse().ok())),
            None => (s, None),
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => match p.parse() {
            Ok(port) => (h, Some(port)),
            Err(_) => (s, None),
        },
        _ => (s, None),
    }
}

/// A proxy serving one command; [`Running::finish`] stops it and tells what was contacted.
pub struct Running {
    task: tokio::task::JoinHandle<()>,
    contacts: Arc<Mutex<Vec<Contact>>>,
    /// Landlock alone: the `connect` guard that keeps the command's connections to this proxy, serving as long.
    guard: Option<super::guard::Guard>,
}

impl Running {
    /// Keeps `guard` (the command's `connect` guard) answering while this proxy serves.
    pub fn keep(&mut self, guard: super::guard::Guard) {
        self.guard = Some(guard);
    }

    /// Stops accepting and drops every relayed connection (the command is over); what was contacted, each
    /// destination once, in order.
    pub fn finish(self) -> Vec<Contact> {
        self.task.abort();
        let all = self.contacts.lock().map(|c| c.clone()).unwrap_or_default();
        let mut out: Vec<Contact> = Vec::new();
        for c in all {
            if !out.contains(&c) {
                out.push(c);
            }
        }
        out
    }
}

impl Drop for Running {
    /// A cancelled command's proxy stops with it.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `listener` (made by the command's child or by the core) with `allow`; must be called inside a
/// tokio runtime.
pub fn serve(listener: std::net::TcpListener, allow: Vec<String>) -> std::io::Result<Running> {
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let contacts = Arc::new(Mutex::new(Vec::new()));
    let log = contacts.clone();
    let allow = Arc::new(allow);
    let task = tokio::spawn(async move {
        // Dropped with the task: every connection still relayed ends with the command.
        let mut conns = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((conn, _)) = accepted else { continue };
                    conns.spawn(relay(conn, allow.clone(), log.clone()));
                }
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    });
    Ok(Running { task, contacts, guard: None })
}

/// What a request's head asks for.
struct Target {
    host: String,
    port: u16,
    connect: bool,
    /// For a plain HTTP request: the head to send on, in origin form, with `Connection: close`.
    head: Vec<u8>,
}

async fn relay(mut conn: TcpStream, allow: Arc<Vec<String>>, log: Arc<Mutex<Vec<Contact>>>) {
    let Ok(Ok((head_len, buf))) = tokio::time::timeout(Duration::from_secs(30), read_head(&mut conn)).await else {
        return;
    };
    let target = match parse(&buf[..head_len]) {
        Ok(t) => t,
        Err(e) => {
            let _ = answer(&mut conn, "400 Bad Request", &format!("{e}\n")).await;
            return;
        }
    };
    let hostport = format!("{}:{}", target.host, target.port);
    let ok = allowed(&allow, &target.host, target.port);
    if let Ok(mut l) = log.lock() {
        l.push(Contact { host: hostport.clone(), allowed: ok });
    }
    if !ok {
        let body = format!(
            "blocked by the sandbox: {hostport} is not in sandbox.network's allow list (setup({{ sandbox = {{ \
             network = {{ allow = {{ \"{}\" }} }} }} }}) allows it)\n",
            target.host
        );
        let _ = answer(&mut conn, "403 Forbidden", &body).await;
        return;
    }
    let dial = tokio::time::timeout(Duration::from_secs(15), TcpStream::connect((target.host.as_str(), target.port)));
    let mut upstream = match dial.await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let _ = answer(&mut conn, "502 Bad Gateway", &format!("cannot connect to {hostport}: {e}\n")).await;
            return;
        }
        Err(_) => {
            let _ = answer(&mut conn, "504 Gateway Timeout", &format!("{hostport} did not answer\n")).await;
            return;
        }
    };
    // Small writes (a TLS handshake, an interactive protocol) go out at once on both hops, as they would
    // on the one hop of a direct connection.
    let _ = upstream.set_nodelay(true);
    let _ = conn.set_nodelay(true);
    let rest = &buf[head_len..];
    let sent = if target.connect {
        conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await
    } else {
        upstream.write_all(&target.head).await
    };
    if sent.is_err() || upstream.write_all(rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional_with_sizes(&mut conn, &mut upstream, RELAY_BUF, RELAY_BUF).await;
}

/// Reads until the end of the head; returns its length and everything read (the body's start after it).
async fn read_head(conn: &mut TcpStream) -> std::io::Result<(usize, Vec<u8>)> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok((from + i + 4, buf));
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too long"));
        }
    }
}

fn parse(head: &[u8]) -> Result<Target, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8".to_string())?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(uri), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("not an HTTP request: {first:?}"));
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_port(uri);
        let port = port.ok_or_else(|| format!("CONNECT {uri}: no port"))?;
        return Ok(Target { host: host.to_string(), port, connect: true, head: Vec::new() });
    }
    let rest = uri.strip_prefix("http://").ok_or_else(|| {
        format!("{method} {uri}: this proxy takes CONNECT host:port, or http:// URLs in absolute form")
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = split_port(authority);
    let mut out = format!("{method} {path} {version}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
        if !matches!(name.as_str(), "proxy-connection" | "proxy-authorization" | "connection" | "keep-alive") {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    // One request per connection: a second one on it could name another host.
    out.push_str("Connection: close\r\n\r\n");
    Ok(Target { host: host.to_string(), port: port.unwrap_or(80), connect: false, head: out.into_bytes() })
}

async fn answer(conn: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let msg = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(msg.as_bytes()).await?;
    conn.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_by_name_suffix_and_port() {
        let allow: Vec<String> =
            ["crates.io", "*.npmjs.org", "127.0.0.1:8080", "[::1]:9"].iter().map(|s| s.to_string()).collect();
        assert!(allowed(&allow, "crates.io", 443) && allowed(&allow, "CRATES.IO", 80));
        assert!(allowed(&allow, "registry.npmjs.org", 443) && !allowed(&allow, "npmjs.org", 443));
        assert!(!allowed(&allow, "evilnpmjs.org", 443) && !allowed(&allow, "crates.io.evil.com", 443));
        assert!(allowed(&allow, "127.0.0.1", 8080) && !allowed(&allow, "127.0.0.1", 8081));
        assert!(allowed(&allow, "[::1]", 9) && allowed(&allow, "::1", 9));
    }

    #[test]
    fn requests_are_parsed_and_rewritten_to_origin_form() {
        let t = parse(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n").unwrap();
        assert!(t.connect && t.host == "example.com" && t.port == 443);
        let t = parse(b"GET http://h:81/a?b HTTP/1.1\r\nHost: h:81\r\nProxy-Connection: keep-alive\r\n\r\n").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("h", 81));
        assert_eq!(String::from_utf8(t.head).unwrap(), "GET /a?b HTTP/1.1\r\nHost: h:81\r\nConnection: close\r\n\r\n");
        assert!(parse(b"GET /x HTTP/1.1\r\n\r\n").is_err());
    }
}
