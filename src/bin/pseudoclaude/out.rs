//! Standard output and standard error for the verbs.
//!
//! Rust ignores SIGPIPE, so a reader that goes away (`pseudoclaude sessions list | head -1`) shows
//! up as an `EPIPE` error on the next write, and `println!` panics on it. Every verb writes through
//! [`Out`] instead: a write error comes back as an [`io::Error`] that [`closed_pipe`] recognises, and
//! `main` ends quietly with status 0 on a closed pipe, as ripgrep and fd do (the reader has what it
//! asked for: that is not a failure, and `set -o pipefail` scripts keep working); any other output
//! error ("No space left on device") is one line on standard error, status 2. Notes go to standard
//! error through [`note!`], which never fails: a closed standard error loses the note, not the run.

use std::io::{self, BufWriter, StdoutLock, Write};

/// Buffered standard output; [`Out::finish`] flushes it (a drop would lose a late error).
pub struct Out {
    w: BufWriter<StdoutLock<'static>>,
}

/// What a failed write to standard output says, kept inside the [`io::Error`] so `main` can tell it
/// from an error reading a session.
#[derive(Debug)]
struct StdoutError(io::Error);

impl std::fmt::Display for StdoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot write to standard output: {}", self.0)
    }
}

impl std::error::Error for StdoutError {}

fn wrap(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), StdoutError(e))
}

impl Out {
    pub fn new() -> Out {
        Out { w: BufWriter::with_capacity(64 * 1024, io::stdout().lock()) }
    }

    /// Flushes what is buffered.
    pub fn finish(mut self) -> io::Result<()> {
        self.w.flush().map_err(wrap)
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.w.write(buf).map_err(wrap)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.w.write_all(buf).map_err(wrap)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.w.flush().map_err(wrap)
    }
}

/// Whether `e`, or an error it was caused by, is a write to a standard output whose reader has gone.
pub fn closed_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<io::Error>()
            && io.kind() == io::ErrorKind::BrokenPipe
            && io.get_ref().is_some_and(|inner| inner.is::<StdoutError>())
        {
            return true;
        }
        cause = e.source();
    }
    false
}

/// `eprintln!` that does not panic when standard error is closed.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use note;
