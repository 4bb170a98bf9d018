//! A worktree chat's whole change against its base, file by file, committed or not: what `:PseudoWorktree` reviews.

use std::fs;
use std::path::Path;

use serde::Serialize;

use super::git::{self, Repo};
use super::{Error, Result};

/// The largest file whose text is given for review; a larger or binary one is named only.
pub const MAX_TEXT: usize = 1 << 20;

/// One changed file.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FileChange {
    /// From the top of the repository.
    pub path: String,
    /// `added`, `modified` or `deleted`.
    pub status: &'static str,
    /// Its text at the base (absent when added, binary or too large).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// Its text in the worktree now (absent when deleted, binary or too large).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Binary or larger than [`MAX_TEXT`]: named, not shown.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
}

/// The change of worktree `name` against its base, sorted by path.
pub fn change(workspace: &Path, name: &str) -> Result<Vec<FileChange>> {
    let wt = super::get(workspace, name)?;
    if wt.missing {
        return Err(Error::Missing { name: wt.id, path: wt.path, branch: wt.branch });
    }
    let diff = git::run(git::git(&wt.path).args(["diff", "--name-status", "-z", "--no-renames", &wt.base]))?;
    let mut entries: Vec<(String, &'static str)> = Vec::new();
    let mut fields = git::nul_fields(&diff.stdout);
    while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
        let status = match status.as_str() {
            "A" => "added",
            "D" => "deleted",
            _ => "modified",
        };
        entries.push((path, status));
    }
    let untracked = git::run(git::git(&wt.path).args(["ls-files", "-z", "--others", "--exclude-standard"]))?;
    entries.extend(git::nul_fields(&untracked.stdout).map(|p| (p, "added")));
    entries.sort();
    entries.dedup_by(|a, b| a.0 == b.0);

    let befores = blobs(
        &Repo::open(workspace)?,
        &wt.base,
        entries.iter().filter(|(_, s)| *s != "added").map(|(p, _)| p.as_str()),
    )?;
    let mut befores = befores.into_iter();
    let mut out = Vec::with_capacity(entries.len());
    for (path, status) in entries {
        let before = if status == "added" { None } else { befores.next().flatten() };
        let after = if status == "deleted" { None } else { read_text(&wt.path.join(&path)) };
        let binary = (status != "added" && before.is_none()) || (status != "deleted" && after.is_none());
        out.push(FileChange { path, status, before, after, binary });
    }
    Ok(out)
}

/// The texts of `paths` at `commit`, in order, through one `git cat-file --batch` (`None`: binary, too large, absent).
fn blobs<'a>(repo: &Repo, commit: &str, paths: impl Iterator<Item = &'a str>) -> Result<Vec<Option<String>>> {
    let mut input = Vec::new();
    let mut n = 0;
    for p in paths {
        input.extend_from_slice(format!("{commit}:{p}\n").as_bytes());
        n += 1;
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    let out = git::run_with_input(git::git(&repo.top).args(["cat-file", "--batch"]), &input)?;
    let mut rest: &[u8] = &out.stdout;
    let mut texts = Vec::with_capacity(n);
    for _ in 0..n {
        let Some(nl) = rest.iter().position(|b| *b == b'\n') else { break };
        let header = String::from_utf8_lossy(&rest[..nl]).into_owned();
        rest = &rest[nl + 1..];
        // `<oid> blob <size>`, or `<name> missing`.
        let size = header.rsplit(' ').next().and_then(|s| s.parse::<usize>().ok());
        match size {
            Some(size) if header.contains(" blob ") && rest.len() > size => {
                texts.push(text_of(&rest[..size]));
                rest = &rest[size + 1..];
            }
            _ => texts.push(None),
        }
    }
    texts.resize(n, None);
    Ok(texts)
}

fn read_text(path: &Path) -> Option<String> {
    let meta = fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        return fs::read_link(path).ok().map(|t| t.to_string_lossy().into_owned());
    }
    if meta.len() as usize > MAX_TEXT {
        return None;
    }
    text_of(&fs::read(path).ok()?)
}

fn text_of(bytes: &[u8]) -> Option<String> {
    if bytes.len() > MAX_TEXT || bytes[..bytes.len().min(8000)].contains(&0) {
        return None;
    }
    String::from_utf8(bytes.to_vec()).ok()
}
