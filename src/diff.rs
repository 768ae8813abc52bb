//! A small line-based unified diff (`diff -u` shape, 3 lines of context),
//! enough for the dry run to show what happens to etcd.conf.yml. Configs are
//! tens of lines, so a plain longest-common-subsequence table is plenty.

/// One line of an edit script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Same(usize, usize),
    Del(usize),
    Add(usize),
}

/// Beyond this many lines on either side the table would be large; the
/// diff then shows the whole of both files, which is still correct.
const MAX_LINES: usize = 4000;

fn edit_script(a: &[&str], b: &[&str]) -> Vec<Op> {
    if a.len() > MAX_LINES || b.len() > MAX_LINES {
        let mut ops: Vec<Op> = (0..a.len()).map(Op::Del).collect();
        ops.extend((0..b.len()).map(Op::Add));
        return ops;
    }
    // lcs[i][j]: length of the LCS of a[i..] and b[j..].
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut ops = Vec::new();
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push(Op::Same(i, j));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            ops.push(Op::Add(j));
            j += 1;
        } else {
            ops.push(Op::Del(i));
            i += 1;
        }
    }
    // Deletions before additions within a run of changes, as diff -u does.
    let mut k = 0;
    while k < ops.len() {
        if matches!(ops[k], Op::Same(..)) {
            k += 1;
            continue;
        }
        let end = ops[k..]
            .iter()
            .position(|o| matches!(o, Op::Same(..)))
            .map_or(ops.len(), |p| k + p);
        ops[k..end].sort_by_key(|o| match o {
            Op::Del(i) => (0, *i),
            Op::Add(j) => (1, *j),
            Op::Same(..) => (2, 0),
        });
        k = end;
    }
    ops
}

/// `@@ -start,count` numbers: 1-based start, or the line before when empty.
fn range(start: usize, count: usize) -> String {
    let first = if count == 0 { start } else { start + 1 };
    if count == 1 {
        format!("{first}")
    } else {
        format!("{first},{count}")
    }
}

/// The unified diff of `old` → `new`, labelled; empty when they are equal.
pub fn unified(old: &str, new: &str, old_label: &str, new_label: &str) -> String {
    const CONTEXT: usize = 3;
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = edit_script(&a, &b);
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| !matches!(o, Op::Same(..)))
        .map(|(k, _)| k)
        .collect();
    if changed.is_empty() {
        return String::new();
    }
    // Hunks: runs of changes whose gaps are at most 2 × CONTEXT.
    let mut hunks: Vec<(usize, usize)> = Vec::new();
    for &k in &changed {
        match hunks.last_mut() {
            Some((_, end)) if k <= *end + 2 * CONTEXT + 1 => *end = k,
            _ => hunks.push((k, k)),
        }
    }
    let mut out = format!("--- {old_label}\n+++ {new_label}\n");
    for (first, last) in hunks {
        let lo = first.saturating_sub(CONTEXT);
        let hi = (last + CONTEXT + 1).min(ops.len());
        let slice = &ops[lo..hi];
        // Where this hunk starts in each file: lines consumed before `lo`.
        let (mut a0, mut b0) = (0, 0);
        for o in &ops[..lo] {
            match o {
                Op::Same(..) => {
                    a0 += 1;
                    b0 += 1;
                }
                Op::Del(_) => a0 += 1,
                Op::Add(_) => b0 += 1,
            }
        }
        let a_count = slice.iter().filter(|o| !matches!(o, Op::Add(_))).count();
        let b_count = slice.iter().filter(|o| !matches!(o, Op::Del(_))).count();
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(a0, a_count),
            range(b0, b_count)
        ));
        for o in slice {
            match *o {
                Op::Same(i, _) => out.push_str(&format!(" {}\n", a[i])),
                Op::Del(i) => out.push_str(&format!("-{}\n", a[i])),
                Op::Add(j) => out.push_str(&format!("+{}\n", b[j])),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_have_no_diff() {
        assert_eq!(unified("a\nb\n", "a\nb\n", "x", "y"), "");
    }

    #[test]
    fn one_changed_line_with_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            unified(old, new, "a/f", "b/f"),
            "--- a/f\n+++ b/f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn far_apart_changes_make_two_hunks() {
        let line = |i: usize| match i {
            2 => "two\n".to_string(),
            19 => "nineteen\n".to_string(),
            i => format!("{i}\n"),
        };
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new: String = (1..=20).map(line).collect();
        let d = unified(&old, &new, "a", "b");
        assert_eq!(d.matches("@@").count(), 4, "{d}");
        assert!(d.contains("@@ -1,5 +1,5 @@"), "{d}");
        assert!(d.contains("@@ -16,5 +16,5 @@"), "{d}");
    }

    #[test]
    fn from_and_to_nothing() {
        assert_eq!(
            unified("", "a\nb\n", "a", "b"),
            "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+a\n+b\n"
        );
        assert_eq!(
            unified("a\n", "", "a", "b"),
            "--- a\n+++ b\n@@ -1 +0,0 @@\n-a\n"
        );
    }

    #[test]
    fn deletions_come_before_additions() {
        let d = unified("k: 1\nx\n", "k: 2\nx\n", "a", "b");
        assert_eq!(d, "--- a\n+++ b\n@@ -1,2 +1,2 @@\n-k: 1\n+k: 2\n x\n");
    }
}
