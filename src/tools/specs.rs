//! The tools as the model is told of them: each one's name, description and JSON Schema of its arguments.

use serde_json::json;

use crate::provider::ToolSpec;

pub(super) fn specs() -> Vec<ToolSpec> {
    let spec = |name: &str, description: &str, input_schema: serde_json::Value| ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        input_schema,
    };
    vec![
        spec(
            "read_file",
            "Read a text file of the workspace. Lines come numbered from 1, as `cat -n` shows them \
             (the number, a tab, the line); the numbers are not part of the file. Shows up to 2000 lines \
             from `offset`; when the file goes on, the answer ends with a note saying which offset to \
             read on from. Very long lines are cut. Binary files are refused. Paths are relative to the \
             workspace root (absolute paths must lie inside the workspace).",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace root."},
                    "offset": {"type": "integer", "minimum": 1, "description": "The first line to show (1-based). Default 1."},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many lines to show. Default 2000."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        ),
        spec(
            "list_files",
            "List the files under a directory of the workspace, recursively, sorted, one path per line \
             relative to the workspace root (directories are not listed on their own lines). Like \
             ripgrep, it skips hidden files and directories and whatever .gitignore, .ignore and \
             .git/info/exclude exclude. Shows at most 1000 paths and says how many more there are.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The directory to list, relative to the workspace root. Default: the whole workspace."}
                },
                "additionalProperties": false
            }),
        ),
        spec(
            "grep",
            "Search file contents with a regular expression (Rust `regex` syntax, like ripgrep's: \
             `(?i)` for case-insensitive, `\\b` word boundaries; no look-around or backreferences). Matches \
             line by line in the files list_files would show (binary files skipped) and answers \
             `path:line: text` per matching line, paths relative to the workspace root. Long lines are \
             cut around the match. Stops after 200 matching lines.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "The regular expression."},
                    "path": {"type": "string", "description": "A directory or file to search, relative to the workspace root. Default: the whole workspace."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        spec(
            "write_file",
            "Create a file, or replace a file's whole content, in the workspace. Missing parent \
             directories are created. The user is asked to approve the change first (shown as a diff). \
             To change part of an existing file, prefer edit_file.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace root."},
                    "content": {"type": "string", "description": "The complete new content of the file."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        ),
        spec(
            "edit_file",
            "Replace one exact piece of text in an existing file. `old` must occur exactly once in the \
             file, matching it character for character, whitespace and indentation included (read the \
             file first, and do not copy read_file's line-number prefixes); include enough surrounding \
             lines to make it unique. The user is asked to approve the change first (shown as a diff). \
             Answers with the diff of the change.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace root."},
                    "old": {"type": "string", "description": "The exact text to replace; must occur exactly once."},
                    "new": {"type": "string", "description": "The text to put in its place."}
                },
                "required": ["path", "old", "new"],
                "additionalProperties": false
            }),
        ),
        spec(
            "run_command",
            "Run a shell command (`sh -c`) in the workspace root directory, without input (stdin is \
             empty; interactive programs will not wait for you). The user is asked to approve it first. \
             Answers with the exit code, then the standard output and the standard error. The command \
             is killed with all its child processes when the timeout passes; background processes that \
             keep the output open count as still running. It runs in a sandbox: it may write only in \
             the workspace (not in .git/ or .PseudoClaude/) and in $TMPDIR (use it for temporary files, not \
             /tmp), and has no network. A result saying \"blocked by the sandbox\" names what was refused: then, \
             and only if the task needs it, run it again with `sandbox: false` and a `reason`, or with \
             `network: true`; the user is asked each time and may say no.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command line."},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Seconds before the command is killed. Default 120, at most 600."},
                    "sandbox": {"type": "boolean", "description": "false: ask the user to run this command outside the sandbox (needs `reason`). Default true."},
                    "reason": {"type": "string", "description": "With `sandbox: false`: one sentence for the user on why the command cannot run in the sandbox."},
                    "network": {"type": "boolean", "description": "true: ask the user to let this command use the network. Default false."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        ),
    ]
}
