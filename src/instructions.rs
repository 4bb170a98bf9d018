//! The project instructions the model reads in its system prompt, in layers: the user's own file, then the
//! workspace's `AGENTS.md` (read by Codex, opencode and many others), `CLAUDE.md` (Claude Code's) and
//! `PSEUDOCLAUDE.md` (ours), each that exists, in that order.
//!
//! A file may import another with `@path` (Claude Code's syntax: a word starting with `@`, outside code),
//! relative to the importing file (`~/` is the home folder): the imported text follows the line that names it,
//! between two comments. Imports nest up to [`MAX_DEPTH`] levels; a file already included (a cycle, or twice) is
//! not included again; nothing outside the workspace and the home folder is read; a file that cannot be read is
//! named in a comment. What the model reads is a pure function of the files' bytes, so the system prompt is
//! byte-identical from turn to turn and across a resume, and the provider's prompt cache keeps hitting.

use std::path::{Component, Path, PathBuf};

/// The workspace's instruction files, in the order they are read.
pub const WORKSPACE_FILES: [&str; 3] = ["AGENTS.md", "CLAUDE.md", "PSEUDOCLAUDE.md"];
/// How deep imports nest (a file imported by a file imported by ... the top file).
pub const MAX_DEPTH: usize = 5;
/// A file larger than this is cut (a prompt is no place for a log file imported by mistake).
pub const MAX_FILE_BYTES: usize = 256 << 10;

/// Where the instructions are looked for.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub workspace: PathBuf,
    /// The user's own file (`stdpath("config")/pseudoclaude/AGENTS.md`), read first when it exists.
    pub user_file: Option<PathBuf>,
    /// The home folder: imports may reach into it (`~/...`), and nowhere else outside the workspace.
    pub home: Option<PathBuf>,
}

impl Sources {
    pub fn new(workspace: &Path, user_file: Option<PathBuf>) -> Sources {
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        Sources { workspace: workspace.to_path_buf(), user_file, home }
    }
}

/// The instructions found: their text for the system prompt, and every file read (imports included).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instructions {
    /// One section per top file, each `# Instructions from <label>` then its text with its imports expanded.
    pub text: String,
    /// Every file whose text is in `text`, in the order read (top files and imports), as absolute paths.
    pub files: Vec<PathBuf>,
    /// Imports that were not expanded, each `path: why` (not found, outside, too deep).
    pub problems: Vec<String>,
}

/// Reads the layers. Never fails: a file that cannot be read is left out (a top file) or named in a comment (an
/// import).
pub fn load(src: &Sources) -> Instructions {
    let mut out = Instructions::default();
    let mut tops: Vec<(String, PathBuf)> = Vec::new();
    if let Some(user) = &src.user_file {
        // Not its path: the same instructions make the same prompt wherever the config folder is.
        tops.push(("the user (their own AGENTS.md)".to_string(), user.clone()));
    }
    for name in WORKSPACE_FILES {
        tops.push((format!("the workspace ({name})"), src.workspace.join(name)));
    }
    let roots = Roots::new(src);
    for (label, path) in tops {
        let Some(text) = read(&path) else { continue };
        let real = std::fs::canonicalize(&path).unwrap_or(path.clone());
        if out.files.contains(&real) {
            continue;
        }
        out.files.push(real.clone());
        let mut section = String::new();
        expand(&text, &real, &roots, src, 1, &mut vec![real.clone()], &mut out, &mut section);
        if !out.text.is_empty() {
            out.text.push_str("\n\n");
        }
        out.text.push_str(&format!("# Instructions from {label}\n\n{}", section.trim()));
    }
    out
}

/// The folders imports may read from, resolved once.
struct Roots(Vec<PathBuf>);

impl Roots {
    fn new(src: &Sources) -> Roots {
        let mut roots = vec![std::fs::canonicalize(&src.workspace).unwrap_or(src.workspace.clone())];
        if let Some(home) = &src.home {
            roots.push(std::fs::canonicalize(home).unwrap_or(home.clone()));
        }
        if let Some(user) = src.user_file.as_ref().and_then(|u| u.parent()) {
            roots.push(std::fs::canonicalize(user).unwrap_or(user.to_path_buf()));
        }
        Roots(roots)
    }

    fn allow(&self, real: &Path) -> bool {
        self.0.iter().any(|r| real.starts_with(r))
    }
}

fn read(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let mut text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_FILE_BYTES)]).into_owned();
    if bytes.len() > MAX_FILE_BYTES {
        text.push_str(&format!(
            "\n<!-- cut: the file has {} bytes, the first {MAX_FILE_BYTES} are here -->",
            bytes.len()
        ));
    }
    Some(text)
}

/// `path` as the user wrote it relative to the workspace or `~`, for labels.
fn display(path: &Path, src: &Sources) -> String {
    if let Ok(rel) = path.strip_prefix(&src.workspace) {
        return rel.display().to_string();
    }
    if let Some(home) = &src.home
        && let Ok(rel) = path.strip_prefix(home)
    {
        return format!("~/{}", rel.display());
    }
    path.display().to_string()
}

/// Copies `text` (the file `file`, at import depth `depth`) into `out`, each `@path` line followed by the
/// imported file's own expansion. `stack`: the files being expanded, to cut cycles.
#[allow(clippy::too_many_arguments)]
fn expand(
    text: &str,
    file: &Path,
    roots: &Roots,
    src: &Sources,
    depth: usize,
    stack: &mut Vec<PathBuf>,
    found: &mut Instructions,
    out: &mut String,
) {
    let dir = file.parent().unwrap_or(Path::new("/"));
    let mut fenced = false;
    for line in text.lines() {
        out.push_str(line);
        out.push('\n');
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for name in imports(line) {
            let target = resolve(dir, name, src);
            let real = std::fs::canonicalize(&target);
            let problem = match &real {
                Err(_) => Some("not found".to_string()),
                Ok(real) if !roots.allow(real) => Some("outside the workspace and the home folder: not read".into()),
                Ok(real) if stack.contains(real) => Some("already being included (an import cycle): cut".into()),
                Ok(real) if found.files.contains(real) => Some("already included above".into()),
                Ok(_) if depth >= MAX_DEPTH => Some(format!("more than {MAX_DEPTH} levels of imports: not read")),
                Ok(real) if !real.is_file() => Some("not a file".into()),
                Ok(_) => None,
            };
            if let Some(why) = problem {
                out.push_str(&format!("<!-- @{name}: {why} -->\n"));
                found.problems.push(format!("@{name} (in {}): {why}", display(file, src)));
                continue;
            }
            let real = real.expect("checked above");
            let Some(imported) = read(&real) else {
                out.push_str(&format!("<!-- @{name}: cannot be read -->\n"));
                found.problems.push(format!("@{name} (in {}): cannot be read", display(file, src)));
                continue;
            };
            found.files.push(real.clone());
            out.push_str(&format!("<!-- begin @{name} -->\n"));
            stack.push(real.clone());
            expand(&imported, &real, roots, src, depth + 1, stack, found, out);
            stack.pop();
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!("<!-- end @{name} -->\n"));
        }
    }
}

/// `@path` words of a line outside inline code: a word starting with `@` (at the line's start or after white
/// space) that looks like a path (holds a `/` or a `.`, as `@AGENTS.md`, `@docs/style.md`, `@~/notes.md` do; a
/// handle like `@alice` does not).
fn imports(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut in_code = false;
    let mut prev_space = true;
    let mut i = 0;
    let bytes = line.as_bytes();
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'`' {
            in_code = !in_code;
        } else if c == b'@' && prev_space && !in_code {
            let end = line[i + 1..].find(|ch: char| ch.is_whitespace() || ch == '`').map_or(line.len(), |e| i + 1 + e);
            let word = line[i + 1..end].trim_end_matches([',', ';', ':', ')', '!', '?']);
            let word = word.strip_suffix('.').filter(|w| w.contains(['/', '.'])).unwrap_or(word);
            if !word.is_empty() && (word.contains('/') || word.contains('.')) {
                out.push(word);
            }
            i = end;
            prev_space = false;
            continue;
        }
        prev_space = c.is_ascii_whitespace() || c == b'(';
        i += 1;
    }
    out
}

/// Where `@name` points from a file in `dir`: `~/...` under the home folder, an absolute path as it is, else
/// relative to `dir`; `.` and `..` folded without touching the disk.
fn resolve(dir: &Path, name: &str, src: &Sources) -> PathBuf {
    let joined = match (name.strip_prefix("~/"), &src.home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => dir.join(name),
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// The layers in order (user, AGENTS.md, CLAUDE.md, PSEUDOCLAUDE.md), imports relative to their file, a cycle
    /// cut, a missing file and one outside named in comments, five levels deep and no deeper; the same bytes twice.
    #[test]
    fn layers_and_imports() {
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let w = ws.path();
        write(&home.path().join("cfg/AGENTS.md"), "User rule.\n@~/shared.md\n");
        write(&home.path().join("shared.md"), "Shared from home.\n");
        write(&w.join("AGENTS.md"), "Agents rule.\nSee @docs/style.md please.\n```\n@not/an/import.md\n```\n");
        write(&w.join("docs/style.md"), "Style rule.\n@../AGENTS.md\n@missing.md\n@d1.md\n");
        write(&outside.path().join("secret.md"), "SECRET\n");
        write(&w.join("CLAUDE.md"), &format!("Claude rule. @{}\n", outside.path().join("secret.md").display()));
        write(&w.join("PSEUDOCLAUDE.md"), "Ours.\n");
        for i in 1..=6 {
            write(&w.join(format!("docs/d{i}.md")), &format!("Level {i}.\n@d{}.md\n", i + 1));
        }
        let src = Sources {
            workspace: w.to_path_buf(),
            user_file: Some(home.path().join("cfg/AGENTS.md")),
            home: Some(home.path().to_path_buf()),
        };
        let found = load(&src);
        let t = &found.text;
        let at = |s: &str| t.find(s).unwrap_or_else(|| panic!("{s:?} missing from:\n{t}"));
        assert!(at("User rule.") < at("Shared from home.") && at("Shared from home.") < at("Agents rule."), "{t}");
        assert!(
            at("Agents rule.") < at("Style rule.")
                && at("Style rule.") < at("Claude rule.")
                && at("Claude rule.") < at("Ours.")
        );
        assert!(t.contains("<!-- @../AGENTS.md: already being included (an import cycle): cut -->"), "{t}");
        assert!(t.contains("<!-- @missing.md: not found -->"), "{t}");
        assert!(t.contains("outside the workspace and the home folder: not read") && !t.contains("SECRET"), "{t}");
        assert!(!t.contains("<!-- begin @not/an/import.md"), "{t}");
        // style.md is level 2; d1..d3 are levels 3 to 5; d4 would be the sixth
        assert!(t.contains("Level 3.") && !t.contains("Level 4."), "{t}");
        assert!(t.contains("<!-- @d4.md: more than 5 levels of imports: not read -->"), "{t}");
        assert!(t.starts_with("# Instructions from the user (their own AGENTS.md)\n\nUser rule."), "{t}");
        assert!(t.contains("# Instructions from the workspace (AGENTS.md)\n\nAgents rule."), "{t}");
        assert_eq!(found.files.len(), 9, "{:?}", found.files); // user, shared, AGENTS, style, d1-d3, CLAUDE, PSEUDOCLAUDE
        assert_eq!(found.problems.len(), 4, "{:?}", found.problems);
        assert_eq!(load(&src), found, "the same files give the same bytes");
    }

    #[test]
    fn import_words_look_like_paths_and_skip_code() {
        assert_eq!(imports("See @docs/style.md and @AGENTS.md."), ["docs/style.md", "AGENTS.md"]);
        assert_eq!(imports("ask @alice, mail a@b.com, run `@x/y.md`"), Vec::<&str>::new());
        assert_eq!(imports("@~/notes.md"), ["~/notes.md"]);
        assert_eq!(imports("(see @../up.md)"), ["../up.md"]);
    }
}
