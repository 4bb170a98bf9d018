//! A small line diff in unified format, for the approval prompt and the edit's answer.
//!
//! Common leading and trailing lines are skipped first; the middle is aligned by a longest common
//! subsequence when it is small enough, else shown as all removed then all added. Hunks carry
//! [`CONTEXT`] lines of context, as `diff -u` does.

/// Lines of context around each change.
pub(crate) const CONTEXT: usize = 3;

/// The middle is aligned line by line only up to this many cells of the LCS table.
const MAX_LCS_CELLS: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Same line: index in old, index in new.
    Equal(usize, usize),
    Delete(usize),
    Insert(usize),
}

/// `--- old_name` / `+++ new_name` headers and the hunks; empty when the texts are equal.
pub(crate) fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    let a: Vec<&str> = old.split_inclusive('\n').collect();
    let b: Vec<&str> = new.split_inclusive('\n').collect();
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

/// Appends the ops that turn `a[ra]` into `b[rb]`.
fn align(a: &[&str], b: &[&str], ra: std::ops::Range<usize>, rb: std::ops::Range<usize>, ops: &mut Vec<Op>) {
    let (n, m) = (ra.len(), rb.len());
    if n == 0 || m == 0 || (n + 1) * (m + 1) > MAX_LCS_CELLS {
        ops.extend(ra.map(Op::Delete));
        ops.extend(rb.map(Op::Insert));
        return;
    }
    // lcs[i][j]: length of the LCS of a[ra.start+i..] and b[rb.start+j..].
    let w = m + 1;
    let mut lcs = vec![0u32; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * w + j] = if a[ra.start + i] == b[rb.start + j] {
                lcs[(i + 1) * w + j + 1] + 1
            } else {
                lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[ra.start + i] == b[rb.start + j] {
            ops.push(Op::Equal(ra.start + i, rb.start + j));
            i += 1;
            j += 1;
        } else if j == m || (i < n && lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) {
            ops.push(Op::Delete(ra.start + i));
            i += 1;
        } else {
            ops.push(Op::Insert(rb.start + j));
            j += 1;
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
    fn pure_insertion_header() {
        let d = unified("a\nb\n", "a\nx\nb\n", "a/x", "b/x");
        assert_eq!(d, "--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n a\n+x\n b\n");
        let d = unified("a\n", "", "a/x", "b/x");
        assert_eq!(d, "--- a/x\n+++ b/x\n@@ -1 +0,0 @@\n-a\n");
    }
}
