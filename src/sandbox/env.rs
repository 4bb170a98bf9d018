//! Which of the editor's environment variables a command gets: every one but those whose names look like
//! a secret (KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, AUTH, in any case) and the provider's key
//! variable, whatever its name; `sandbox.env.keep` passes some on purpose and `sandbox.env.set` sets some.
//!
//! It applies to every command, in the sandbox or outside it after the user's yes: what a command prints
//! goes to the model and into the session log, and leaving the sandbox is about the file system and the
//! network, not about handing over the editor's secrets. Matching by substring, as Codex's default
//! `*KEY*`/`*SECRET*`/`*TOKEN*` filter does, errs on the side of removing; a few ordinary names that only
//! contain such a word are kept ([`ORDINARY_NAMES`], [`ORDINARY_WORDS`]): git's author, keyboard layouts,
//! the ssh agent's socket path (which holds no secret, and which a sandboxed command cannot connect to
//! anyway: Unix sockets are refused). `keep` passes any other on purpose.

use std::ffi::OsString;

use super::Settings;

/// The words that make a variable's name look secret (compared in upper case).
pub const SECRET_WORDS: [&str; 7] = ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH"];

/// Names kept whole although they contain a secret word: their values are paths, not secrets.
pub const ORDINARY_NAMES: [&str; 1] = ["SSH_AUTH_SOCK"];

/// `_`-separated words of a name that are not secret although they contain a secret word
/// (`GIT_AUTHOR_NAME`, `KEYBOARD_LAYOUT`, `XKB_KEYMAP`): the rest of the name is still looked at, so
/// `KEYBOARD_TOKEN` goes, and so does `HTTP_AUTHORIZATION` (`AUTHORIZATION` is not one of them).
pub const ORDINARY_WORDS: [&str; 3] = ["AUTHOR", "KEYBOARD", "KEYMAP"];

/// What to do to a command's inherited environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPlan {
    /// Removed (sorted).
    pub remove: Vec<String>,
    /// Set, after the removal.
    pub set: Vec<(String, String)>,
}

/// Whether a variable's name looks like it holds a secret.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if ORDINARY_NAMES.contains(&upper.as_str()) {
        return false;
    }
    upper
        .split('_')
        .filter(|word| !ORDINARY_WORDS.contains(word))
        .any(|word| SECRET_WORDS.iter().any(|w| word.contains(w)))
}

/// The plan for an environment of `names` (the editor's, [`EnvPlan::current`]).
pub fn plan(names: impl IntoIterator<Item = OsString>, settings: &Settings) -> EnvPlan {
    let provider = settings.provider_key_env.as_deref().filter(|n| !n.is_empty());
    let mut remove: Vec<String> = names
        .into_iter()
        .filter_map(|n| n.into_string().ok())
        .filter(|n| looks_secret(n) || Some(n.as_str()) == provider)
        .filter(|n| !settings.env.keep.iter().any(|k| k == n))
        .collect();
    remove.sort();
    remove.dedup();
    let set = settings.env.set.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    EnvPlan { remove, set }
}

impl EnvPlan {
    /// The plan for this process's environment.
    pub fn current(settings: &Settings) -> EnvPlan {
        plan(std::env::vars_os().map(|(k, _)| k), settings)
    }

    /// Applies it to a command about to be spawned.
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        for name in &self.remove {
            cmd.env_remove(name);
        }
        for (k, v) in &self.set {
            cmd.env(k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names_and_the_provider_key_are_removed_unless_kept() {
        let mut s = Settings { provider_key_env: Some("LLM_PASS".into()), ..Settings::default() };
        s.env.keep = vec!["NPM_TOKEN".into()];
        s.env.set.insert("CI".into(), "1".into());
        let names = ["PATH", "GITHUB_TOKEN", "aws_secret_access_key", "NPM_TOKEN", "LLM_PASS", "Db_Password", "HOME"];
        let p = plan(names.iter().map(OsString::from), &s);
        assert_eq!(p.remove, ["Db_Password", "GITHUB_TOKEN", "LLM_PASS", "aws_secret_access_key"]);
        assert_eq!(p.set, [("CI".to_string(), "1".to_string())]);
        assert!(looks_secret("x_credentials") && looks_secret("APIKEY") && !looks_secret("EDITOR"));
    }

    #[test]
    fn ordinary_names_that_only_contain_a_secret_word_stay() {
        for kept in ["SSH_AUTH_SOCK", "GIT_AUTHOR_NAME", "git_author_email", "KEYBOARD_LAYOUT", "XKB_KEYMAP"] {
            assert!(!looks_secret(kept), "{kept}");
        }
        for gone in ["KEYBOARD_TOKEN", "HTTP_AUTHORIZATION", "SSH_AUTH_SOCK_KEY", "AUTHOR_KEY", "MY_SSH_AUTH_SOCK"] {
            assert!(looks_secret(gone), "{gone}");
        }
    }
}
