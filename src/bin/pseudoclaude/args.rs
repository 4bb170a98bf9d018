//! The command line, declared with clap's derive: every verb is one variant of [`Verb`], its options
//! its fields, its `--help` their doc comments. The messages of the checks clap cannot phrase for us
//! (a number, `on|off`, an export format, the text of a search) name the option and the value given,
//! as the hand-written parser of the first CLI did: scripts and users grep for them.

use std::ffi::OsStr;
use std::path::PathBuf;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, Command, CommandFactory, Parser, Subcommand, ValueEnum};
use clap_complete::engine::ArgValueCandidates;

use crate::candidates;

/// Inspect, search and script a workspace's pseudoclaude.nvim sessions without the editor.
#[derive(Debug, Parser)]
#[command(
    name = "pseudoclaude",
    version,
    subcommand_required = true,
    arg_required_else_help = true,
    max_term_width = 100,
    after_help = "Examples:\n  pseudoclaude sessions list | head -5\n  pseudoclaude -C ~/src/app sessions search \
                  'retry budget'\n  pseudoclaude sessions open last\n\nEach verb has its own help: `pseudoclaude \
                  sessions show --help`. The --json shapes: doc/cli.md."
)]
pub struct Cli {
    /// The workspace whose sessions to use (default: the current directory)
    #[arg(short = 'C', long = "workspace", value_name = "DIR", global = true, value_hint = clap::ValueHint::DirPath)]
    pub workspace: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Top,
}

#[derive(Debug, Subcommand)]
pub enum Top {
    /// List, read, search, open, name, fork, export and import the workspace's sessions
    #[command(subcommand_required = true, arg_required_else_help = true)]
    Sessions(Sessions),
    /// Print a shell completion script: session ids complete from the workspace, newest first
    #[command(after_help = "Examples (in the shell's startup file):\n  bash: source <(pseudoclaude completions \
                            bash)\n  zsh:  source <(pseudoclaude completions zsh)\n  fish: pseudoclaude \
                            completions fish | source")]
    Completions {
        /// The shell the script is for
        shell: Shell,
    },
}

/// The shells `completions` writes a script for.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, clap::Args)]
pub struct Sessions {
    /// `sessions --pricing FILE list` (the option before its verb, as the first CLI took it).
    #[arg(long, value_name = "FILE", hide = true)]
    pub pricing: Option<String>,
    #[command(subcommand)]
    pub verb: Verb,
}

/// The verbs of `pseudoclaude sessions`. A new verb is a variant here (its options as fields, its
/// help as doc comments) and a function in `verbs.rs` that `main.rs`'s `run` calls.
#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Sessions of the workspace, pinned first, then newest first
    ///
    /// One line each: id, messages, size, model, title, then its marks: [pinned], [fork of ID at
    /// message N], [git: BRANCH COMMIT], the tokens reported ([12.3k in (80% cached), 1.2k out]) and
    /// their cost when prices are given, [open: ...] for a session open in an editor, [damaged: ...].
    /// With --external: the workspace's sessions of the other agents (Claude Code, Codex, Gemini CLI, Qwen
    /// Code, opencode, Pi; each store where the agent itself looks: doc/import.md), AGENT ID MESSAGES MODEL
    /// TITLE PATH, what a row's reader left out on standard error; those files are only read.
    #[command(after_help = "Examples:\n  pseudoclaude sessions list --limit 10\n  pseudoclaude sessions list --json \
                            | jq -r '.[0].id'\n  pseudoclaude sessions list --pricing prices.json\n  pseudoclaude \
                            sessions list --external")]
    List {
        /// Print a JSON array instead (its fields: doc/cli.md)
        #[arg(long)]
        json: bool,
        /// Include the sessions with no message
        #[arg(long, conflicts_with = "external")]
        all: bool,
        /// At most N sessions (the newest; pinned ones still first)
        #[arg(long, value_name = "N", value_parser = Number::<usize>::new("--limit"), conflicts_with = "external")]
        limit: Option<usize>,
        /// Prices, as JSON: {"MODEL": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}
        /// in dollars per million tokens (cache prices default to input); default: the file
        /// $PSEUDOCLAUDE_PRICING names. The total and the models without a price go to standard error
        #[arg(long, value_name = "FILE", conflicts_with = "external", value_hint = clap::ValueHint::FilePath)]
        pricing: Option<String>,
        /// List the workspace's sessions of the other agents instead (see `import`)
        #[arg(long)]
        external: bool,
        /// With --external: the list as the last one left it in .PseudoClaude/sessions/, looking at no store (a
        /// session added, changed or deleted since then shown as it was); without that cache, a list as usual
        #[arg(long, requires = "external")]
        no_refresh: bool,
    },
    /// The history a resume would restore, a message a line (tool calls indented)
    #[command(after_help = "Examples:\n  pseudoclaude sessions show 20261205-101500-a1b2\n  pseudoclaude sessions \
                            show 20261205-101500-a1b2 --json | jq '.messages | length'")]
    Show {
        /// A session id (as `list` prints it; <Tab> completes it)
        #[arg(value_name = "ID", add = ArgValueCandidates::new(candidates::session_ids))]
        id: String,
        /// Print the loaded session as JSON (its fields: doc/cli.md)
        #[arg(long)]
        json: bool,
    },
    /// Report damage in a session's log; exit status 1 when there is any
    #[command(after_help = "Example:\n  pseudoclaude sessions check 20261205-101500-a1b2 || echo damaged")]
    Check {
        /// A session id (as `list` prints it; <Tab> completes it)
        #[arg(value_name = "ID", add = ArgValueCandidates::new(candidates::session_ids))]
        id: String,
        /// Print the report as JSON (its fields: doc/cli.md)
        #[arg(long)]
        json: bool,
    },
    /// The messages holding TEXT, newest sessions first; exit status 1 when nothing matched
    ///
    /// One line each, ID:INDEX:ROLE: snippet (INDEX counts from 1 as `show` does; ROLE is user,
    /// assistant, tool_call or tool_result). TEXT is literal, its words joined by one space;
    /// case-insensitive unless it has an upper-case letter.
    #[command(after_help = "Examples:\n  pseudoclaude sessions search retry budget\n  pseudoclaude sessions search \
                            --limit 20 -- --force\n  pseudoclaude sessions open \"$(pseudoclaude sessions search \
                            Tokenizer | head -1 | cut -d: -f1)\"")]
    Search {
        /// The text to look for
        #[arg(value_name = "TEXT", required = true)]
        text: Vec<String>,
        /// Print the hits as a JSON array (their fields: doc/cli.md)
        #[arg(long)]
        json: bool,
        /// Stop after N hits
        #[arg(long, value_name = "N", value_parser = Number::<usize>::new("--limit"))]
        limit: Option<usize>,
        /// Search the other agents' sessions of the workspace instead (those `list --external` shows); ID is then
        /// the id `open` and the editor's resume take
        #[arg(long)]
        external: bool,
        /// With --external: search the sessions the last list found, looking at no store for changes (a session
        /// added since then is not searched; one changed is searched as it is now only where the words index
        /// names it)
        #[arg(long, requires = "external")]
        no_refresh: bool,
    },
    /// Start Neovim ($PSEUDOCLAUDE_NVIM, else nvim) in the workspace with a session resumed
    ///
    /// ID is a session id, or `last` for the newest session; without it the picker opens.
    #[command(after_help = "Examples:\n  pseudoclaude sessions open last\n  pseudoclaude -C ~/src/app sessions open \
                            20261205-101500-a1b2")]
    Open {
        /// A session id, or `last`
        #[arg(value_name = "ID|last", add = ArgValueCandidates::new(candidates::open_targets))]
        id: Option<String>,
    },
    /// Name a session (an empty TITLE, "", gives it back its automatic title)
    #[command(after_help = "Examples:\n  pseudoclaude sessions rename 20261205-101500-a1b2 Parser rewrite\n  \
                            pseudoclaude sessions rename 20261205-101500-a1b2 \"\"")]
    Rename {
        /// A session id (as `list` prints it; <Tab> completes it)
        #[arg(value_name = "ID", add = ArgValueCandidates::new(candidates::session_ids))]
        id: String,
        /// The name, its words joined by one space
        #[arg(value_name = "TITLE", required = true)]
        title: Vec<String>,
    },
    /// Pin a session (on, the default) or unpin it (off): pinned sessions are listed first
    #[command(after_help = "Examples:\n  pseudoclaude sessions pin 20261205-101500-a1b2\n  pseudoclaude sessions pin \
                            20261205-101500-a1b2 off")]
    Pin {
        /// A session id (as `list` prints it; <Tab> completes it)
        #[arg(value_name = "ID", add = ArgValueCandidates::new(candidates::session_ids))]
        id: String,
        /// on: pin it (the default); off: unpin it
        #[arg(value_name = "on|off", value_parser = OnOff)]
        state: Option<bool>,
    },
    /// A new session holding messages 1..INDEX of ID (whole tool exchanges); prints its id
    #[command(after_help = "Example:\n  pseudoclaude sessions fork 20261205-101500-a1b2 12")]
    Fork {
        /// A session id (as `list` prints it; <Tab> completes it)
        #[arg(value_name = "ID", add = ArgValueCandidates::new(candidates::session_ids))]
        id: String,
        /// The last message to keep, numbered from 1 as `show` does
        #[arg(value_name = "INDEX", value_parser = Index)]
        index: usize,
    },
    /// The files the agent changed in each turn, oldest first
    ///
    /// One line a file: INDEX STATUS PATH +ADDED -REMOVED, INDEX the turn's message (numbered from 1 as
    /// `show` does), STATUS added, modified or deleted ([not restorable] when its earlier state was over
    /// the size limit).
    #[command(after_help = "Examples:\n  pseudoclaude sessions changes 20261205-101500-a1b2\n  pseudoclaude sessions \
                            changes 20261205-101500-a1b2 --json | jq '.[-1].files'")]
    Changes {
        /// A session id (as `list` prints it; <Tab> completes it)
        #[arg(value_name = "ID", add = ArgValueCandidates::new(candidates::session_ids))]
        id: String,
        /// Print a JSON array instead (its fields: doc/cli.md)
        #[arg(long)]
        json: bool,
    },
    /// Put the files and the history back to just before message INDEX (a message you sent)
    ///
    /// Only what the agent's turns changed is put back; a file changed after the agent did is left as it
    /// is and named (exit status 1). Refused while the session is open in an editor.
    #[command(
        after_help = "Examples:\n  pseudoclaude sessions rewind 20261205-101500-a1b2 5\n  pseudoclaude sessions \
                            rewind 20261205-101500-a1b2 5 --code-only"
    )]
    Rewind {
        /// A session id (as `list` prints it; <Tab> completes it)
        #[arg(value_name = "ID", add = ArgValueCandidates::new(candidates::session_ids))]
        id: String,
        /// The message to rewind to, numbered from 1 as `show` does
        #[arg(value_name = "INDEX", value_parser = Index)]
        index: usize,
        /// Put back the files only; the history stays
        #[arg(long, conflicts_with = "conversation_only")]
        code_only: bool,
        /// Cut the history only; the files stay
        #[arg(long)]
        conversation_only: bool,
    },
    /// The session as Markdown (default) or JSON, on standard output
    #[command(after_help = "Example:\n  pseudoclaude sessions export 20261205-101500-a1b2 > session.md")]
    Export {
        /// A session id (as `list` prints it; <Tab> completes it)
        #[arg(value_name = "ID", add = ArgValueCandidates::new(candidates::session_ids))]
        id: String,
        /// markdown (or md) or json
        #[arg(long, value_name = "FORMAT", default_value = "markdown", value_parser = ExportFormat, hide_possible_values = true)]
        format: String,
    },
    /// Another agent's session as a new session; prints its id
    ///
    /// PATH is a session file of Claude Code, Codex, Gemini CLI, Qwen Code or Pi, or an id as `list
    /// --external` shows it (AGENT:ID, the only way to name an opencode session). Importing a session again
    /// that has not changed since prints the session it went into before. The file is only read.
    #[command(
        after_help = "Examples:\n  pseudoclaude sessions import ~/.claude/projects/-src-app/5f1c.jsonl\n  pseudoclaude sessions import opencode:ses_4c1f"
    )]
    Import {
        /// The session's file, or its id as `list --external` shows it
        #[arg(value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
        path: PathBuf,
    },
    /// Remove the sessions idle for more than N days
    #[command(after_help = "Example:\n  pseudoclaude sessions cleanup --days 90")]
    Cleanup {
        /// Idle days
        #[arg(long, value_name = "N", default_value_t = pseudoclaude::session::retention::DEFAULT_DAYS, value_parser = Number::<u32>::new("--days"))]
        days: u32,
    },
}

/// A count (`--limit N`, `--days N`): "--limit needs a number, not "many"".
#[derive(Clone)]
struct Number<T>(&'static str, std::marker::PhantomData<T>);

impl<T> Number<T> {
    fn new(option: &'static str) -> Self {
        Number(option, std::marker::PhantomData)
    }
}

impl<T: std::str::FromStr + Clone + Send + Sync + 'static> TypedValueParser for Number<T> {
    type Value = T;
    fn parse_ref(&self, cmd: &Command, _: Option<&Arg>, value: &OsStr) -> Result<T, clap::Error> {
        let v = value.to_string_lossy();
        v.parse().map_err(|_| invalid(cmd, format!("{} needs a number, not {v:?}", self.0)))
    }
}

/// A message number of `fork`. (0 parses: `fork` itself says it is out of range, and of what.)
#[derive(Clone)]
struct Index;

impl TypedValueParser for Index {
    type Value = usize;
    fn parse_ref(&self, cmd: &Command, _: Option<&Arg>, value: &OsStr) -> Result<usize, clap::Error> {
        let v = value.to_string_lossy();
        v.parse().map_err(|_| invalid(cmd, format!("INDEX must be a message number (1 or more), not {v:?}")))
    }
}

/// `pin`'s `on|off`.
#[derive(Clone)]
struct OnOff;

impl TypedValueParser for OnOff {
    type Value = bool;
    fn parse_ref(&self, cmd: &Command, _: Option<&Arg>, value: &OsStr) -> Result<bool, clap::Error> {
        match value.to_str() {
            Some("on") => Ok(true),
            Some("off") => Ok(false),
            _ => Err(invalid(cmd, format!("pin takes on or off, not {:?}", value.to_string_lossy()))),
        }
    }
    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new([PossibleValue::new("on"), PossibleValue::new("off")].into_iter()))
    }
}

/// `export --format`: checked by the exporter's own parser, whose message names the formats.
#[derive(Clone)]
struct ExportFormat;

impl TypedValueParser for ExportFormat {
    type Value = String;
    fn parse_ref(&self, cmd: &Command, _: Option<&Arg>, value: &OsStr) -> Result<String, clap::Error> {
        let v = value.to_string_lossy();
        match pseudoclaude::session::export::Format::parse(&v) {
            Ok(_) => Ok(v.into_owned()),
            Err(e) => Err(invalid(cmd, e)),
        }
    }
    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        let md = PossibleValue::new("markdown").alias("md");
        Some(Box::new([md, PossibleValue::new("md").hide(true), PossibleValue::new("json")].into_iter()))
    }
}

/// An error in `cmd`'s words, with its usage line, exit status 2.
fn invalid(cmd: &Command, why: impl std::fmt::Display) -> clap::Error {
    cmd.clone().error(ErrorKind::ValueValidation, why)
}

/// Parses the command line; on bad input, the error clap prints (on standard error, exit status 2),
/// with the first CLI's wording where it had one.
pub fn parse(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    match Cli::try_parse_from(&args) {
        Ok(cli) => Ok(cli),
        Err(e) => Err(reword(e, &args)),
    }
}

/// The first CLI's messages for a missing search text, a `--pricing` without its file, and
/// `--pricing` given to another verb than `list`, `--external` to another than `list` and `search`.
fn reword(e: clap::Error, args: &[std::ffi::OsString]) -> clap::Error {
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.clone(),
        Some(ContextValue::Strings(v)) => v.join(" "),
        _ => return e,
    };
    let why: String = match e.kind() {
        ErrorKind::MissingRequiredArgument if arg.starts_with("<TEXT>") => "search needs the text to look for".into(),
        ErrorKind::InvalidValue | ErrorKind::NoEquals if arg.starts_with("--pricing") => {
            "--pricing needs a file".into()
        }
        ErrorKind::UnknownArgument if arg.starts_with("--pricing") => {
            "--pricing is an option of `sessions list`".into()
        }
        ErrorKind::UnknownArgument if arg.starts_with("--external") => {
            "--external is an option of `sessions list` and `sessions search`".into()
        }
        _ => return e,
    };
    verb_command(args).error(e.kind(), why)
}

/// The (sub)command the words of `args` name, built, for an error's usage line.
fn verb_command(args: &[std::ffi::OsString]) -> Command {
    let mut cmd = Cli::command();
    cmd.build();
    let mut path = Vec::new();
    let mut at = &cmd;
    for a in args.iter().skip(1) {
        if let Some(sub) = a.to_str().and_then(|a| at.find_subcommand(a)) {
            path.push(sub.get_name().to_string());
            at = sub;
        }
    }
    let mut found = cmd;
    for name in path {
        match found.find_subcommand_mut(&name) {
            Some(sub) => found = sub.clone(),
            None => break,
        }
    }
    found
}
