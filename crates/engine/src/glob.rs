//! Redis-style glob matching for KEYS, SCAN MATCH and friends.
//!
//! The syntax is Redis's: `*` any run of bytes, `?` one byte, `[abc]`,
//! `[a-z]`, `[^x]` classes, and `\` to take the next byte literally. Matching
//! is on bytes, case-sensitive.
//!
//! Redis's own matcher is recursive; a pattern such as `*a*a*a*a*b` against a
//! long run of `a` makes naive recursion exponential. This one keeps only the
//! most recent `*` as its backtracking point (the classic wildcard algorithm),
//! which gives the same answers in O(pattern × subject) time and constant
//! stack, so no pattern a client sends can hang the server.

/// Does `subject` match the glob `pattern`?
pub fn glob_match(pattern: &[u8], subject: &[u8]) -> bool {
    let (mut p, mut s) = (0usize, 0usize);
    // Where to resume after a mismatch: the pattern index just past the last
    // `*`, and the subject index that star is currently made to swallow up to.
    let mut backtrack: Option<(usize, usize)> = None;
    while s < subject.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    // Runs of stars are one star.
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    backtrack = Some((p, s));
                    continue;
                }
                b'?' => {
                    p += 1;
                    s += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next_p)) = match_class(pattern, p, subject[s]) {
                        if matched {
                            p = next_p;
                            s += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == subject[s] {
                        p += 2;
                        s += 1;
                        continue;
                    }
                }
                c => {
                    if c == subject[s] {
                        p += 1;
                        s += 1;
                        continue;
                    }
                }
            }
        }
        // Mismatch: let the last star swallow one more byte, or fail.
        match backtrack {
            Some((star_p, star_s)) => {
                backtrack = Some((star_p, star_s + 1));
                p = star_p;
                s = star_s + 1;
            }
            None => return false,
        }
    }
    // The subject is used up: what is left of the pattern must be all stars.
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches the class starting at `pattern[start] == b'['` against `byte`.
/// Returns whether it matched and the pattern index after the class. As in
/// Redis, a class left open at the end of the pattern ends there.
fn match_class(pattern: &[u8], start: usize, byte: u8) -> Option<(bool, usize)> {
    let mut p = start + 1;
    let negate = p < pattern.len() && pattern[p] == b'^';
    if negate {
        p += 1;
    }
    let mut matched = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            p += 1;
            if pattern[p] == byte {
                matched = true;
            }
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' {
            let (mut lo, mut hi) = (pattern[p], pattern[p + 2]);
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            if byte >= lo && byte <= hi {
                matched = true;
            }
            p += 2;
        } else if pattern[p] == byte {
            matched = true;
        }
        p += 1;
    }
    // Step past the closing bracket if there is one.
    let next = if p < pattern.len() { p + 1 } else { p };
    Some((matched != negate, next))
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn redis_glob_cases() {
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b"*", b"anything"));
        assert!(glob_match(b"h?llo", b"hello"));
        assert!(!glob_match(b"h?llo", b"hllo"));
        assert!(glob_match(b"h*llo", b"heeeello"));
        assert!(glob_match(b"h[ae]llo", b"hallo"));
        assert!(!glob_match(b"h[ae]llo", b"hillo"));
        assert!(glob_match(b"h[^e]llo", b"hallo"));
        assert!(!glob_match(b"h[^e]llo", b"hello"));
        assert!(glob_match(b"h[a-b]llo", b"hbllo"));
        assert!(glob_match(b"h[b-a]llo", b"hallo"));
        assert!(glob_match(b"h\\*llo", b"h*llo"));
        assert!(!glob_match(b"h\\*llo", b"hello"));
        assert!(glob_match(b"user:*:name", b"user:42:name"));
        assert!(!glob_match(b"user:*:name", b"user:42:age"));
        assert!(glob_match(b"a*b*c", b"aXXbYYc"));
        assert!(!glob_match(b"a*b*c", b"aXXbYY"));
        assert!(glob_match(b"[abc", b"a"));
    }

    #[test]
    fn pathological_pattern_is_fast() {
        let subject = vec![b'a'; 20_000];
        let pattern = b"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        // A guard against exponential blow-up, not a timing test: a naive
        // recursive matcher would not return from this in any human time.
        assert!(!glob_match(pattern, &subject));
        assert!(glob_match(pattern, b"aaaaaaaaaaaaaaaaaaab"));
    }
}
