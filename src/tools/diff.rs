//! Line diffs: the unified text for the approval prompt and the edit's answer, and the change blocks
//! (hunks without context) that the review accepts or rejects one by one.
//!
//! The alignment is the `similar` crate's Myers diff (O((n+m)·D), bounded by a deadline on
//! pathological input). It replaced a hand-written longest-common-subsequence table, which cost
//! O(n·m) time and memory and so had to give up (all removed, then all added) past a million cells:
//! a 2,000-line file with changes at both ends already passed that. Common leading and trailing
//! lines are skipped first; hunks carry [`CONTEXT`] lines of context, as `diff -u` does.

use std::ops::Range;
use std::time::{Duration, Instant};

use similar::{Algorithm, DiffTag, capture_diff_slices_deadline};

/// Lines of context around each change.
pub(crate) const CONTEXT: usize = 3;

/// How long the alignment may take before `similar` settles for a coarser (still correct) diff.
const DEADLINE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Same line: index in old, index in new.
    Equal(usize, usize),
    Delete(usize),
    Insert(usize),
}

/// One change block: the old file's lines `old` (0-based, end exclusive) become the new file's `new`.
/// Either range may be empty (a pure insertion or deletion), never both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hunk {
    pub old: Range<usize>,
    pub new: Range<usize>,
}

fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// `--- old_name` / `+++ new_name` headers and the hunks; empty when the texts are equal.
pub(crate) fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    let (a, b) = (lines(old), lines(new));
    let mut pre = 0;
    while pre < a.len() && pre < b.len() && a[pre] == b[pre] {
        pre += 1;
    }
    let mut suf = 0;
    while suf < a.len() - pre && suf < b.len() - pre && a[a.len() - 1 - suf] == b[b.len() - 1 - suf] {
        suf += 1;
    }
    if pre == a.len() && pre == b.len() {
        return String::new();
    }
    let (a_mid, b_mid) = (pre..a.len() - suf, pre..b.len() - suf);

    // Only the changed middle and the context that can touch it become ops.
    let mut ops = Vec::new();
    let lead = pre.saturating_sub(CONTEXT);
    for i in lead..pre {
        ops.push(Op::Equal(i, i));
    }
    align(&a, &b, a_mid.clone(), b_mid.clone(), &mut ops);
    for k in 0..suf.min(CONTEXT) {
        ops.push(Op::Equal(a_mid.end + k, b_mid.end + k));
    }

    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    for (start, end) in hunks(&ops) {
        render_hunk(&ops[start..end], &a, &b, &mut out);
    }
    out
}

/// The change blocks that turn `old` into `new`, in order.
pub(crate) fn change_blocks(old: &str, new: &str) -> Vec<Hunk> {
    let (a, b) = (lines(old), lines(new));
    let mut ops = Vec::new();
    align(&a, &b, 0..a.len(), 0..b.len(), &mut ops);
    let mut out: Vec<Hunk> = Vec::new();
    let (mut i, mut j) = (0, 0);
    let mut open: Option<Hunk> = None;
    for op in ops {
        match op {
            Op::Equal(..) => {
                out.extend(open.take());
                i += 1;
                j += 1;
            }
            Op::Delete(_) => {
                open.get_or_insert(Hunk { old: i..i, new: j..j }).old.end = i + 1;
                i += 1;
            }
            Op::Insert(_) => {
                open.get_or_insert(Hunk { old: i..i, new: j..j }).new.end = j + 1;
                j += 1;
            }
        }
    }
    out.extend(open);
    out
}

/// `old` with the blocks marked `true` in `accepted` taken from `new` and the others left as they
/// were. `blocks` must be [`change_blocks`]`(old, new)`.
pub(crate) fn apply(old: &str, new: &str, blocks: &[Hunk], accepted: &[bool]) -> String {
    let (a, b) = (lines(old), lines(new));
    let mut out = String::with_capacity(old.len().max(new.len()));
    let mut at = 0;
    for (k, h) in blocks.iter().enumerate() {
        a[at..h.old.start].iter().for_each(|l| out.push_str(l));
        let side = if accepted.get(k).copied().unwrap_or(false) { &b[h.new.clone()] } else { &a[h.old.clone()] };
        side.iter().for_each(|l| out.push_str(l));
        at = h.old.end;
    }
    a[at..].iter().for_each(|l| out.push_str(l));
    out
}

/// Appends the ops that turn `a[ra]` into `b[rb]`.
fn align(a: &[&str], b: &[&str], ra: Range<usize>, rb: Range<usize>, ops: &mut Vec<Op>) {
    let deadline = Instant::now().checked_add(DEADLINE);
    let diff = capture_diff_slices_deadline(Algorithm::Myers, &a[ra.clone()], &b[rb.clone()], deadline);
    for d in diff {
        let (tag, old, new) = d.as_tag_tuple();
        let (old, new) = (old.start + ra.start..old.end + ra.start, new.start + rb.start..new.end + rb.start);
        match tag {
            DiffTag::Equal => ops.extend(old.zip(new).map(|(i, j)| Op::Equal(i, j))),
            DiffTag::Delete => ops.extend(old.map(Op::Delete)),
            DiffTag::Insert => ops.extend(new.map(Op::Insert)),
            DiffTag::Replace => {
                ops.extend(old.map(Op::Delete));
                ops.extend(new.map(Op::Insert));
            }
        }
    }
}

/// Ranges of `ops` forming hunks: changes closer than twice the context share one hunk.
fn hunks(ops: &[Op]) -> Vec<(usize, usize)> {
    let changes: Vec<usize> =
        ops.iter().enumerate().filter(|(_, op)| !matches!(op, Op::Equal(..))).map(|(k, _)| k).collect();
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &k in &changes {
        let start = k.saturating_sub(CONTEXT);
        let end = (k + 1 + CONTEXT).min(ops.len());
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = end,
            _ => out.push((start, end)),
        }
    }
    out
}

fn render_hunk(ops: &[Op], a: &[&str], b: &[&str], out: &mut String) {
    // First line (0-based) and count on each side.
    let (mut a_start, mut b_start) = (None, None);
    let (mut a_len, mut b_len) = (0, 0);
    for op in ops {
        match *op {
            Op::Equal(i, j) => {
                a_start.get_or_insert(i);
                b_start.get_or_insert(j);
                a_len += 1;
                b_len += 1;
            }
            Op::Delete(i) => {
                a_start.get_or_insert(i);
                a_len += 1;
            }
            Op::Insert(j) => {
                b_start.get_or_insert(j);
                b_len += 1;
            }
        }
    }
    // With context around every change, a side is empty in a hunk only when that whole file is
    // empty: `0,0`, as unified diffs write it. A single line is written without its count.
    let side = |start: Option<usize>, len: usize| match (start, len) {
        (Some(s), 1) => format!("{}", s + 1),
        (Some(s), len) if len > 0 => format!("{},{}", s + 1, len),
        _ => "0,0".to_string(),
    };
    out.push_str(&format!("@@ -{} +{} @@\n", side(a_start, a_len), side(b_start, b_len)));
    for op in ops {
        let (mark, line) = match *op {
            Op::Equal(i, _) => (' ', a[i]),
            Op::Delete(i) => ('-', a[i]),
            Op::Insert(j) => ('+', b[j]),
        };
        out.push(mark);
        match line.strip_suffix('\n') {
            Some(l) => {
                out.push_str(l);
                out.push('\n');
            }
            None => {
                out.push_str(line);
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_give_nothing() {
        assert_eq!(unified("a\nb\n", "a\nb\n", "a/x", "b/x"), "");
    }

    #[test]
    fn one_changed_line_with_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            unified(old, new, "a/x", "b/x"),
            "--- a/x\n+++ b/x\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn new_file_and_no_newline() {
        assert_eq!(
            unified("", "a\nb", "/dev/null", "b/x"),
            "--- /dev/null\n+++ b/x\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n"
        );
    }

    #[test]
    fn lcs_keeps_shared_middle_lines() {
        let d = unified("a\nb\nc\n", "A\nb\nC\n", "a/x", "b/x");
        assert_eq!(d, "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n+A\n b\n-c\n+C\n");
    }

    #[test]
    fn far_apart_changes_make_two_hunks() {
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new: String = (1..=20)
            .map(|i| match i {
                2 => "two\n".to_string(),
                19 => "nineteen\n".to_string(),
                i => format!("{i}\n"),
            })
            .collect();
        let d = unified(&old, &new, "a/x", "b/x");
        assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        assert!(d.contains("@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n"), "{d}");
    }

    #[test]
    fn a_long_file_changed_at_both_ends_is_still_aligned() {
        // 3,000 lines changed at both ends: the old LCS table (9 million cells) gave up and showed
        // every line removed and added again.
        let old: String = (0..3000).map(|i| format!("{i}\n")).collect();
        let new = format!("first\n{}last\n", &old[2..old.len() - 5]);
        let d = unified(&old, &new, "a/x", "b/x");
        assert_eq!(d.matches("\n-").count(), 2, "{}", &d[..d.len().min(400)]);
        assert_eq!(d.matches("\n+").count(), 3, "{}", &d[..d.len().min(400)]); // `+++` and two lines
    }

    #[test]
    fn change_blocks_and_partial_apply() {
        let old = "a\nb\nc\nd\ne\n";
        let new = "A\nb\nc\nd\nE\nF\n";
        let blocks = change_blocks(old, new);
        assert_eq!(blocks, vec![Hunk { old: 0..1, new: 0..1 }, Hunk { old: 4..5, new: 4..6 }]);
        assert_eq!(apply(old, new, &blocks, &[true, true]), new);
        assert_eq!(apply(old, new, &blocks, &[false, false]), old);
        assert_eq!(apply(old, new, &blocks, &[true, false]), "A\nb\nc\nd\ne\n");
        assert_eq!(apply(old, new, &blocks, &[false, true]), "a\nb\nc\nd\nE\nF\n");
        // insertions, deletions, a missing final newline
        let blocks = change_blocks("x\ny", "w\nx\n");
        assert_eq!(apply("x\ny", "w\nx\n", &blocks, &[true, false]), "w\nx\ny");
        assert!(change_blocks("same\n", "same\n").is_empty());
        assert_eq!(change_blocks("", "new\n"), vec![Hunk { old: 0..0, new: 0..1 }]);
    }

    #[test]
    fn pure_insertion_header() {
        let d = unified("a\nb\n", "a\nx\nb\n", "a/x", "b/x");
        assert_eq!(d, "--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n a\n+x\n b\n");
        let d = unified("a\n", "", "a/x", "b/x");
        assert_eq!(d, "--- a/x\n+++ b/x\n@@ -1 +0,0 @@\n-a\n");
    }
}
