//! The log's own words: the text the agent writes into the history on the user's behalf when a turn is cut short or
//! resumed late, and every reader of a log (the export, the CLI) recognizes. They live with the log, below the agent
//! that writes them and the readers that find them, so no reader of a log imports the agent.

/// The result of a tool call the user cancelled while it ran (an error result, so the history stays valid).
pub const CANCELLED_RESULT: &str = "cancelled by the user before this tool finished";

/// The last line of an answer the user cancelled while it streamed.
pub const INTERRUPTED_NOTE: &str = "[interrupted by the user]";

/// How the reminder the model reads after a long pause starts (a user message of its own).
pub const STALE_REMINDER_PREFIX: &str = "[Session resumed]";
