//! The conversation regrouped into alternating user/assistant turns in which every tool call is
//! answered, whatever the log holds (a crash between a call and its result must not make every later
//! request invalid). Both HTTP providers send these turns, each in its own wire format. Which result
//! answers which call is [`crate::pairing`]'s rule, the one the loader's fold applies too.

use std::borrow::Cow;

use crate::message::{Message, Role, Thinking, ToolCall};
use crate::pairing::Exchange;

/// Answers a tool call the log holds no result for (the session stopped before it had one).
pub(crate) const MISSING_RESULT: &str =
    "No result was recorded for this tool call (the session was interrupted before it finished).";
/// Opens a conversation whose first kept message is the assistant's.
pub(crate) const CONTINUED: &str = "(continued)";
/// Follows the text of an answer that stopped mid-stream ([`Message::interrupted`]), as text of
/// the same assistant turn: both APIs accept it, and the model knows its answer was cut short.
pub(crate) const INTERRUPTED_ANSWER: &str =
    "[This answer was interrupted here: the editor stopped before it was complete.]";

pub(crate) enum Turn<'a> {
    /// Tool results (answering the previous assistant turn's calls, in their order), then text.
    User { results: Vec<Answer<'a>>, texts: Vec<Cow<'a, str>> },
    Assistant {
        /// The thinking blocks of the turn's messages, in order: they open the turn on the wire.
        thinking: Vec<&'a Thinking>,
        texts: Vec<&'a str>,
        calls: Vec<&'a ToolCall>,
    },
}

pub(crate) struct Answer<'a> {
    pub id: &'a str,
    pub content: &'a str,
    pub is_error: bool,
}

/// Consecutive messages of one side merge; the first turn is the user's; each assistant turn
/// with calls is followed by a user turn answering each call exactly once (results the log lacks
/// are stood in for by [`MISSING_RESULT`]); results answering no call of the turn before become
/// text; blank texts and empty messages are dropped.
pub(crate) fn turns(messages: &[Message]) -> Vec<Turn<'_>> {
    let mut grouped: Vec<Turn<'_>> = Vec::new();
    for m in messages {
        let text = Some(m.content.as_str()).filter(|t| !t.trim().is_empty());
        if let Some(r) = &m.tool_result {
            let (results, texts) = user(&mut grouped);
            results.push(Answer { id: &r.tool_call_id, content: &r.content, is_error: r.is_error });
            texts.extend(text.map(Cow::Borrowed));
        } else if m.role == Role::Assistant {
            if text.is_none() && m.tool_calls.is_empty() {
                continue;
            }
            if !matches!(grouped.last(), Some(Turn::Assistant { .. })) {
                grouped.push(Turn::Assistant { thinking: Vec::new(), texts: Vec::new(), calls: Vec::new() });
            }
            if let Some(Turn::Assistant { thinking, texts, calls }) = grouped.last_mut() {
                thinking.extend(&m.thinking);
                texts.extend(text);
                if m.interrupted {
                    texts.push(INTERRUPTED_ANSWER);
                }
                for call in &m.tool_calls {
                    if !calls.iter().any(|c| c.id == call.id) {
                        calls.push(call);
                    }
                }
            }
        } else if let Some(text) = text {
            user(&mut grouped).1.push(Cow::Borrowed(text));
        }
    }

    let mut out = Vec::with_capacity(grouped.len() + 2);
    if matches!(grouped.first(), Some(Turn::Assistant { .. })) {
        out.push(Turn::User { results: Vec::new(), texts: vec![Cow::Borrowed(CONTINUED)] });
    }
    // The calls of the assistant turn just pushed; the next turn (a user one, since grouped turns
    // alternate) answers them.
    let mut pending: Vec<&ToolCall> = Vec::new();
    let mut grouped = grouped.into_iter().peekable();
    while let Some(turn) = grouped.next() {
        match turn {
            Turn::Assistant { thinking, texts, calls } => {
                pending.clone_from(&calls);
                out.push(Turn::Assistant { thinking, texts, calls });
                if grouped.peek().is_none() && !pending.is_empty() {
                    let results = answer(&pending, Vec::new()).0;
                    out.push(Turn::User { results, texts: Vec::new() });
                }
            }
            Turn::User { results, texts } => {
                let (results, orphans) = answer(&pending, results);
                pending.clear();
                out.push(Turn::User { results, texts: orphans.into_iter().chain(texts).collect() });
            }
        }
    }
    out
}

/// The user turn at the end of `grouped`, opened if needed.
fn user<'t, 'a>(grouped: &'t mut Vec<Turn<'a>>) -> (&'t mut Vec<Answer<'a>>, &'t mut Vec<Cow<'a, str>>) {
    if !matches!(grouped.last(), Some(Turn::User { .. })) {
        grouped.push(Turn::User { results: Vec::new(), texts: Vec::new() });
    }
    match grouped.last_mut() {
        Some(Turn::User { results, texts }) => (results, texts),
        _ => unreachable!("a user turn was just ensured"),
    }
}

/// One answer per call, in the calls' order, paired by [`crate::pairing`]: a call without its result
/// gets the stand-in [`MISSING_RESULT`], and results answering no call (orphans, duplicates) come
/// back as text, where the loader would drop them (the module's doc says why the two differ).
fn answer<'a>(calls: &[&'a ToolCall], results: Vec<Answer<'a>>) -> (Vec<Answer<'a>>, Vec<Cow<'a, str>>) {
    let mut exchange = Exchange::open(calls.iter().map(|c| c.id.as_str()));
    let mut slots: Vec<Option<Answer<'a>>> = calls.iter().map(|_| None).collect();
    let mut orphans = Vec::new();
    for r in results {
        match exchange.answer(r.id) {
            Some(i) => slots[i] = Some(r),
            None => orphans.push(Cow::Owned(format!(
                "[Result of tool call {} (the call is no longer in the conversation){}]\n{}",
                r.id,
                if r.is_error { ", an error" } else { "" },
                r.content
            ))),
        }
    }
    let answers = slots
        .into_iter()
        .zip(calls)
        .map(|(found, call)| found.unwrap_or(Answer { id: &call.id, content: MISSING_RESULT, is_error: true }))
        .collect();
    (answers, orphans)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{CONTINUED, INTERRUPTED_ANSWER, MISSING_RESULT, Turn, turns};
    use crate::message::{Message, ToolCall};

    fn shape(ts: &[Turn<'_>]) -> Vec<String> {
        ts.iter()
            .map(|t| match t {
                Turn::User { results, texts } => format!(
                    "user[{}|{}]",
                    results.iter().map(|r| format!("{}={}", r.id, r.content)).collect::<Vec<_>>().join(","),
                    texts.join(",")
                ),
                Turn::Assistant { texts, calls, .. } => format!(
                    "assistant[{}|{}]",
                    texts.join(","),
                    calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(",")
                ),
            })
            .collect()
    }

    fn call(id: &str) -> ToolCall {
        ToolCall::new(id, "t", json!({}))
    }

    #[test]
    fn results_and_following_text_merge_into_one_user_turn() {
        let msgs = vec![
            Message::user("hi"),
            Message::assistant_tool_calls("looking", vec![call("a"), call("b")]),
            Message::tool_result("b", "B", false),
            Message::tool_result("a", "A", false),
            Message::user("and also"),
            Message::user("this"),
            Message::assistant("done"),
        ];
        assert_eq!(
            shape(&turns(&msgs)),
            ["user[|hi]", "assistant[looking|a,b]", "user[a=A,b=B|and also,this]", "assistant[done|]"]
        );
    }

    #[test]
    fn an_interrupted_answer_is_followed_by_a_note_in_its_own_turn() {
        let msgs = vec![Message::user("hi"), Message::assistant_interrupted("Hello wor", 1), Message::user("go on")];
        assert_eq!(
            shape(&turns(&msgs)),
            ["user[|hi]".to_string(), format!("assistant[Hello wor,{INTERRUPTED_ANSWER}|]"), "user[|go on]".into()]
        );
    }

    #[test]
    fn a_duplicate_result_becomes_text_and_results_follow_the_calls_order() {
        let msgs = vec![
            Message::user("hi"),
            Message::assistant_tool_calls("", vec![call("a"), call("b")]),
            Message::tool_result("b", "B", false),
            Message::tool_result("b", "again", false),
            Message::tool_result("a", "A", false),
        ];
        let got = shape(&turns(&msgs));
        assert_eq!(got.len(), 3);
        assert!(got[2].starts_with("user[a=A,b=B|[Result of tool call b"), "{}", got[2]);
        assert!(got[2].ends_with("\nagain]"), "{}", got[2]);
    }

    #[test]
    fn interrupted_calls_get_a_stand_in_result_and_orphans_become_text() {
        let msgs = vec![
            Message::assistant("earlier"),
            Message::assistant_tool_calls("", vec![call("a")]),
            Message::user("what happened?"),
            Message::tool_result("zz", "late", true),
            Message::assistant("   "),
            Message::assistant_tool_calls("", vec![call("c")]),
        ];
        let got = shape(&turns(&msgs));
        assert_eq!(got[0], format!("user[|{CONTINUED}]"));
        assert_eq!(got[1], "assistant[earlier|a]");
        assert!(got[2].starts_with(&format!("user[a={MISSING_RESULT}|[Result of tool call zz")), "{}", got[2]);
        assert!(got[2].ends_with("late,what happened?]"), "{}", got[2]);
        assert_eq!(got[3], "assistant[|c]");
        assert_eq!(got[4], format!("user[c={MISSING_RESULT}|]"));
        assert_eq!(got.len(), 5);
    }
}
