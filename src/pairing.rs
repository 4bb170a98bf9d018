//! Which tool result answers which tool call: the one pairing rule of a history.
//!
//! Both APIs require every tool call of an assistant turn to be answered exactly once, right after
//! it, and refuse a result that answers no call of the turn before. A log can break that: a crash
//! between a call and its result, a result on a lost line, a result written twice. Two places meet
//! such a history, and both ask this module: an [`Exchange`] is the calls of one assistant message
//! (or turn) waiting for their results; [`Exchange::answer`] decides which call a result answers
//! (the first call with its id not answered yet) or that it answers none (an *orphan*: its call is
//! not in the exchange, or it was answered already, a duplicate); [`Exchange::is_complete`] says
//! whether anything is still missing.
//!
//! What is done with an incomplete exchange or an orphan differs between the two, and must:
//! - The loader's fold (`session/replay.rs`) restores what the log holds and never invents
//!   anything: an incomplete exchange is dropped whole (in the middle as soon as any other message
//!   comes, since the log went on without its results; at the end it is trimmed), and an orphan
//!   result is dropped. The history a load returns is then valid with nothing added, and the list,
//!   which runs the same fold, counts what a resume restores.
//! - The providers' regrouping (`provider/turns.rs`) must send a valid request whatever history it
//!   is handed (one built in memory, an import, a log of an older version), and may not drop what
//!   the user or the model said: an unanswered call gets a stand-in result (`MISSING_RESULT`), and
//!   an orphan becomes text of the user turn. It pairs per turn, as the APIs see them (consecutive
//!   user messages merged), so a remark between a call and its result does not close the exchange.
//!
//! Architecture invariant: the loader and the providers pair calls and results through this one rule.

use serde::{Deserialize, Serialize};

/// The calls of one assistant message (or turn), in its order, and which have their result.
///
/// Serialized as the list's `summary.json` saves a fold in progress: `{"ids":[...],"answered":[...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchange {
    pub ids: Vec<String>,
    /// `answered[i]`: call `ids[i]` has its result.
    pub answered: Vec<bool>,
}

impl Exchange {
    /// The exchange of calls with these ids, none answered yet.
    pub fn open<'a>(ids: impl IntoIterator<Item = &'a str>) -> Exchange {
        let ids: Vec<String> = ids.into_iter().map(str::to_owned).collect();
        let answered = vec![false; ids.len()];
        Exchange { ids, answered }
    }

    /// The index of the call a result for `tool_call_id` answers, now marked answered; `None` for
    /// an orphan (no call of this exchange has that id) or a duplicate (every call with it is
    /// answered already).
    pub fn answer(&mut self, tool_call_id: &str) -> Option<usize> {
        let i = self.ids.iter().zip(&self.answered).position(|(id, done)| !done && id == tool_call_id)?;
        self.answered[i] = true;
        Some(i)
    }

    /// Every call has its result.
    pub fn is_complete(&self) -> bool {
        self.answered.iter().all(|a| *a)
    }
}

#[cfg(test)]
mod tests {
    use super::Exchange;

    #[test]
    fn each_call_is_answered_once_by_its_id_in_any_order() {
        let mut x = Exchange::open(["a", "b", "c"]);
        assert_eq!(x.answer("c"), Some(2));
        assert_eq!(x.answer("a"), Some(0));
        assert!(!x.is_complete());
        assert_eq!(x.answered, [true, false, true]);
        assert_eq!(x.answer("b"), Some(1));
        assert!(x.is_complete());
    }

    #[test]
    fn orphans_and_duplicates_answer_nothing() {
        let mut x = Exchange::open(["a"]);
        assert_eq!(x.answer("zz"), None, "an orphan");
        assert_eq!(x.answer("a"), Some(0));
        assert_eq!(x.answer("a"), None, "a duplicate");
        assert!(x.is_complete());
    }

    #[test]
    fn a_repeated_call_id_takes_one_result_per_call() {
        let mut x = Exchange::open(["a", "a"]);
        assert_eq!(x.answer("a"), Some(0));
        assert!(!x.is_complete());
        assert_eq!(x.answer("a"), Some(1));
        assert_eq!(x.answer("a"), None);
    }

    #[test]
    fn an_exchange_without_calls_is_complete_and_serializes_as_the_summary_cache_saves_it() {
        assert!(Exchange::open([]).is_complete());
        let mut x = Exchange::open(["a", "b"]);
        x.answer("b");
        assert_eq!(serde_json::to_string(&x).unwrap(), r#"{"ids":["a","b"],"answered":[false,true]}"#);
    }
}
