//! Server-sent events: [`Parser`], an incremental parser after the WHATWG rules. Feed it byte chunks
//! cut anywhere (inside a multi-byte character, between `\r` and `\n`) and complete events come out.
//! The HTTP transport that feeds it is [`super::http`]; the turns the providers send, [`super::turns`].

/// The most bytes one event (its pending line plus its data) may hold: a stream that never ends a
/// line must not eat the memory.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 32 << 20;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field; `message` when the event had none.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Why a byte stream is not an event stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line is not UTF-8. (The WHATWG decoder would substitute U+FFFD; a replaced byte inside tool
    /// arguments would silently corrupt an edit, so this parser refuses instead.)
    #[error("line {line} of the event stream is not valid UTF-8")]
    InvalidUtf8 { line: u64 },
    /// An event grew beyond the limit without being dispatched.
    #[error("an event of the stream exceeds {limit} bytes")]
    TooLong { limit: usize },
}

/// Incremental SSE parser.
///
/// Lines end with `\n`, `\r\n` or `\r`; a leading byte-order mark is skipped; lines starting with `:`
/// are comments; `event:` names the event, `data:` lines accumulate (joined with `\n`), `id:`,
/// `retry:` and unknown fields are ignored; a blank line dispatches the event (an event without any
/// `data:` line is not dispatched). An unterminated event at the end of the stream is never
/// dispatched: see [`Parser::pending`].
#[derive(Debug)]
pub struct Parser {
    /// The bytes of the current, unterminated line.
    line: Vec<u8>,
    /// The previous byte was a `\r`: a `\n` right after it is part of the same line ending.
    after_cr: bool,
    lines: u64,
    event: String,
    data: String,
    limit: usize,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

impl Parser {
    pub fn new() -> Self {
        Parser::with_limit(DEFAULT_MAX_EVENT_BYTES)
    }

    pub fn with_limit(limit: usize) -> Self {
        Parser { line: Vec::new(), after_cr: false, lines: 0, event: String::new(), data: String::new(), limit }
    }

    /// Feeds the next bytes; the events they complete are appended to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        while !chunk.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if chunk[0] == b'\n' {
                    chunk = &chunk[1..];
                    continue;
                }
            }
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    self.take(&chunk[..i])?;
                    self.after_cr = chunk[i] == b'\r';
                    chunk = &chunk[i + 1..];
                    self.end_line(out)?;
                }
                None => {
                    self.take(chunk)?;
                    break;
                }
            }
        }
        Ok(())
    }

    /// Whether bytes of an undispatched event are waiting (at the end of a stream they are dropped).
    pub fn pending(&self) -> bool {
        !self.line.is_empty() || !self.data.is_empty()
    }

    fn take(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + self.data.len() + bytes.len() > self.limit {
            return Err(SseError::TooLong { limit: self.limit });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<Event>) -> Result<(), SseError> {
        let buf = std::mem::take(&mut self.line);
        let mut bytes = &buf[..];
        if self.lines == 0 {
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        self.lines += 1;
        let line = std::str::from_utf8(bytes).map_err(|_| SseError::InvalidUtf8 { line: self.lines })?;
        if line.is_empty() {
            self.dispatch(out);
        } else if !line.starts_with(':') {
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line, ""),
            };
            match field {
                "event" => value.clone_into(&mut self.event),
                "data" => {
                    self.data.push_str(value);
                    self.data.push('\n');
                }
                _ => {}
            }
        }
        self.line = buf;
        self.line.clear();
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        let event = std::mem::take(&mut self.event);
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the `\n` after the last data line
        out.push(Event { event: if event.is_empty() { "message".into() } else { event }, data });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Result<Vec<Event>, SseError> {
        let mut p = Parser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out)?;
        }
        Ok(out)
    }

    fn ev(event: &str, data: &str) -> Event {
        Event { event: event.into(), data: data.into() }
    }

    /// Every line ending, comments, BOM, multi-line data, multi-byte characters, ignored fields.
    const CORPUS: &[u8] = "\u{FEFF}: a comment\r\n\
        event: message_start\r\n\
        data: {\"t\":\"h\u{e9}llo \u{2713} \u{1F600}\"}\r\n\
        \r\n\
        data: one\n\
        data:two\n\
        data\n\
        id: 7\n\
        retry: 100\n\
        unknown: x\n\
        \n\
        event: ping\r\
        data: p\u{e9}\r\
        \r\
        event: no-data\n\
        \n\
        data: \u{1F600}\r\n\
        data: b\r\n\
        \r\n\
        :tail\n\
        data: incomplete"
        .as_bytes();

    fn corpus_events() -> Vec<Event> {
        vec![
            ev("message_start", "{\"t\":\"h\u{e9}llo \u{2713} \u{1F600}\"}"),
            ev("message", "one\ntwo\n"),
            ev("ping", "p\u{e9}"),
            ev("message", "\u{1F600}\nb"),
        ]
    }

    #[test]
    fn whole_corpus_parses_per_spec() {
        assert_eq!(parse_all(&[CORPUS]).unwrap(), corpus_events());
        let mut p = Parser::new();
        p.feed(CORPUS, &mut Vec::new()).unwrap();
        assert!(p.pending(), "the unterminated event waits, never dispatched");
    }

    #[test]
    fn one_byte_at_a_time() {
        let chunks: Vec<&[u8]> = CORPUS.chunks(1).collect();
        assert_eq!(parse_all(&chunks).unwrap(), corpus_events());
    }

    #[test]
    fn every_single_boundary() {
        for i in 0..=CORPUS.len() {
            let (a, b) = CORPUS.split_at(i);
            assert_eq!(parse_all(&[a, b]).unwrap(), corpus_events(), "split at byte {i}");
        }
    }

    #[test]
    fn every_pair_of_boundaries() {
        for i in 0..=CORPUS.len() {
            for j in i..=CORPUS.len() {
                let chunks = [&CORPUS[..i], &CORPUS[i..j], &CORPUS[j..]];
                assert_eq!(parse_all(&chunks).unwrap(), corpus_events(), "splits at {i} and {j}");
            }
        }
    }

    #[test]
    fn cr_then_lf_in_the_next_chunk_is_one_line_ending() {
        let events = parse_all(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]).unwrap();
        assert_eq!(events, vec![ev("message", "a\nb")]);
        let events = parse_all(&[b"data: a\r", b"\r"]).unwrap();
        assert_eq!(events, vec![ev("message", "a")], "two CRs are two line endings");
    }

    #[test]
    fn field_without_space_and_with_two_spaces() {
        let events = parse_all(&[b"data:x\n\ndata:  y\n\nevent:\ndata: z\n\n"]).unwrap();
        assert_eq!(events, vec![ev("message", "x"), ev("message", " y"), ev("message", "z")]);
    }

    #[test]
    fn empty_data_line_dispatches_an_empty_event() {
        assert_eq!(parse_all(&[b"data\n\ndata:\n\n"]).unwrap(), vec![ev("message", ""), ev("message", "")]);
    }

    #[test]
    fn event_type_resets_after_dispatch_and_blank_events() {
        let events = parse_all(&[b"event: a\n\ndata: 1\n\nevent: b\ndata: 2\n\ndata: 3\n\n"]).unwrap();
        assert_eq!(events, vec![ev("message", "1"), ev("b", "2"), ev("message", "3")]);
    }

    #[test]
    fn bom_only_at_the_very_start() {
        let events = parse_all(&[b"\xEF\xBB", b"\xBFdata: a\n\n"]).unwrap();
        assert_eq!(events, vec![ev("message", "a")]);
        // A BOM later is part of a field name, so the line is an unknown field.
        let events = parse_all(&[b"data: a\n\n\xEF\xBB\xBFdata: b\n\n"]).unwrap();
        assert_eq!(events, vec![ev("message", "a")]);
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        assert_eq!(parse_all(&[b"data: ok\n\ndata: \xFF\n\n"]), Err(SseError::InvalidUtf8 { line: 3 }));
    }

    #[test]
    fn an_endless_line_hits_the_limit() {
        let mut p = Parser::with_limit(100);
        let mut out = Vec::new();
        p.feed(&[b'a'; 60], &mut out).unwrap();
        assert_eq!(p.feed(&[b'a'; 60], &mut out), Err(SseError::TooLong { limit: 100 }));
        // Data accumulated over many lines counts too.
        let mut p = Parser::with_limit(100);
        let line = b"data: 0123456789012345678901234567890123456789\n";
        p.feed(line, &mut out).unwrap();
        p.feed(line, &mut out).unwrap();
        assert!(p.feed(line, &mut out).is_err());
    }
}
