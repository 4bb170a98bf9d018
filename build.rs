//! The library's build id: a SHA-256 of the sources it was built from (every file under `src/`, `Cargo.toml`,
//! `Cargo.lock`, by path and content), so that the end-to-end tests can refuse a library built from other sources
//! than the checkout's (`tests/e2e/conftest.py` computes the same hash; a file's time says nothing after a
//! `git checkout` or a copy). The rule both sides follow: the files sorted by their path relative to the root
//! (with `/`), each contributing `path`, a NUL byte, its bytes, a NUL byte. Also the Neovim API the library is
//! compiled against, from the crate feature (`bridge::NVIM_API`).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => files(&p, out),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    files(&root.join("src"), &mut paths);
    paths.extend(["Cargo.toml", "Cargo.lock"].map(|f| root.join(f)).into_iter().filter(|p| p.is_file()));
    let mut named: Vec<(String, PathBuf)> = paths
        .into_iter()
        .map(|p| (p.strip_prefix(&root).expect("under the root").to_string_lossy().replace('\\', "/"), p))
        .collect();
    named.sort();
    let mut hash = Sha256::new();
    for (name, path) in &named {
        hash.update(name.as_bytes());
        hash.update([0]);
        hash.update(std::fs::read(path).unwrap_or_default());
        hash.update([0]);
    }
    let id: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=PSEUDOCLAUDE_BUILD_ID={id}");
    // The Neovim API the library is compiled against: the crate feature `neovim-0-XX` (one per build, Cargo.toml).
    let api = if std::env::var_os("CARGO_FEATURE_NEOVIM_0_11").is_some() { "0.11" } else { "unknown" };
    println!("cargo:rustc-env=PSEUDOCLAUDE_NVIM_API={api}");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-changed=Cargo.lock");
}
