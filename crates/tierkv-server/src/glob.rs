//! Redis-style glob patterns (`SCAN ... MATCH`, `CONFIG GET`): `*`, `?`, `[abc]`, `[^a-z]`,
//! and `\` escapes, over bytes.
//!
//! Matching uses the classic single-backtrack-point algorithm rather than Redis's recursive
//! `stringmatchlen`, so a hostile pattern such as `*a*a*a*a*b` costs O(pattern x key), never
//! exponential time or deep recursion.

/// One pattern element.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    /// `*`: any run of bytes.
    Star,
    /// `?`: any one byte.
    Any,
    /// A literal byte.
    Byte(u8),
    /// `[...]`: one byte in (or, negated, not in) the set.
    Class {
        negated: bool,
        items: Vec<ClassItem>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ClassItem {
    Byte(u8),
    Range(u8, u8),
}

/// A compiled glob pattern.
#[derive(Clone, Debug)]
pub struct Glob {
    tokens: Vec<Token>,
    nocase: bool,
}

impl Glob {
    /// Compiles `pattern`. Never fails: malformed classes are read the way Redis reads them
    /// (an unterminated `[` runs to the end of the pattern, a trailing `\` is literal).
    pub fn new(pattern: &[u8]) -> Glob {
        Self::with_case(pattern, false)
    }

    /// Compiles a case-insensitive (ASCII) pattern.
    pub fn new_nocase(pattern: &[u8]) -> Glob {
        Self::with_case(pattern, true)
    }

    fn with_case(p: &[u8], nocase: bool) -> Glob {
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < p.len() {
            match p[i] {
                b'*' => {
                    // Consecutive stars are one star.
                    if tokens.last() != Some(&Token::Star) {
                        tokens.push(Token::Star);
                    }
                    i += 1;
                }
                b'?' => {
                    tokens.push(Token::Any);
                    i += 1;
                }
                b'\\' if i + 1 < p.len() => {
                    tokens.push(Token::Byte(p[i + 1]));
                    i += 2;
                }
                b'[' => {
                    i += 1;
                    let negated = p.get(i) == Some(&b'^');
                    if negated {
                        i += 1;
                    }
                    let mut items = Vec::new();
                    while i < p.len() && p[i] != b']' {
                        if p[i] == b'\\' && i + 1 < p.len() {
                            items.push(ClassItem::Byte(p[i + 1]));
                            i += 2;
                        } else if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
                            let (a, b) = (p[i], p[i + 2]);
                            items.push(ClassItem::Range(a.min(b), a.max(b)));
                            i += 3;
                        } else {
                            items.push(ClassItem::Byte(p[i]));
                            i += 1;
                        }
                    }
                    i += 1; // the closing ']' (or past the end)
                    tokens.push(Token::Class { negated, items });
                }
                c => {
                    tokens.push(Token::Byte(c));
                    i += 1;
                }
            }
        }
        Glob { tokens, nocase }
    }

    /// True when the pattern matches every key (`*`), so matching can be skipped.
    pub fn matches_all(&self) -> bool {
        self.tokens == [Token::Star]
    }

    /// The literal bytes every match must start with: lets an ordered store seek straight
    /// to the keys that can match instead of filtering all of them.
    pub fn literal_prefix(&self) -> Vec<u8> {
        if self.nocase {
            return Vec::new();
        }
        self.tokens
            .iter()
            .map_while(|t| match t {
                Token::Byte(b) => Some(*b),
                _ => None,
            })
            .collect()
    }

    fn eq(&self, a: u8, b: u8) -> bool {
        if self.nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    }

    fn one(&self, t: &Token, c: u8) -> bool {
        match t {
            Token::Star => true,
            Token::Any => true,
            Token::Byte(b) => self.eq(*b, c),
            Token::Class { negated, items } => {
                let c = if self.nocase {
                    c.to_ascii_lowercase()
                } else {
                    c
                };
                let hit = items.iter().any(|it| match *it {
                    ClassItem::Byte(b) => {
                        let b = if self.nocase {
                            b.to_ascii_lowercase()
                        } else {
                            b
                        };
                        b == c
                    }
                    ClassItem::Range(lo, hi) => {
                        if self.nocase {
                            (lo.to_ascii_lowercase()..=hi.to_ascii_lowercase()).contains(&c)
                                || (lo..=hi).contains(&c.to_ascii_uppercase())
                        } else {
                            (lo..=hi).contains(&c)
                        }
                    }
                });
                hit != *negated
            }
        }
    }

    /// True when `s` matches the whole pattern.
    pub fn matches(&self, s: &[u8]) -> bool {
        self.matches_counting(s).0
    }

    /// [`Glob::matches`], with the steps its loop took: at most
    /// (tokens + 1) x (key length + 1), because a backtrack moves the last star's start one
    /// byte on (and a later star starts no earlier), so there are at most `s.len()`
    /// backtracks, and between two of them at most `tokens` forward steps. Tests check the
    /// bound on the count, which does not depend on how fast the machine is.
    fn matches_counting(&self, s: &[u8]) -> (bool, u64) {
        let t = &self.tokens;
        let (mut ti, mut si) = (0, 0);
        // Where to resume after the last star: (token after it, string position).
        let mut star: Option<(usize, usize)> = None;
        let mut steps = 0u64;
        while si < s.len() {
            steps += 1;
            if ti < t.len() && t[ti] == Token::Star {
                star = Some((ti + 1, si));
                ti += 1;
            } else if ti < t.len() && self.one(&t[ti], s[si]) {
                ti += 1;
                si += 1;
            } else if let Some((st, ss)) = star {
                // Let the last star swallow one more byte and retry.
                ti = st;
                si = ss + 1;
                star = Some((st, ss + 1));
            } else {
                return (false, steps);
            }
        }
        (t[ti..].iter().all(|t| *t == Token::Star), steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(p: &str, s: &str) -> bool {
        Glob::new(p.as_bytes()).matches(s.as_bytes())
    }

    #[test]
    fn basics() {
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[b-a]llo", "hallo"));
        assert!(!m("h[a-b]llo", "hcllo"));
        assert!(m("key:\\*", "key:*"));
        assert!(!m("key:\\*", "key:a"));
        assert!(m("user:*:name", "user:42:name"));
        assert!(!m("user:*:name", "user:42:age"));
        assert!(m("a*b*c", "aXbYc"));
        assert!(!m("a*b*c", "aXbY"));
        assert!(m("[abc", "b"), "unterminated class runs to the end");
        assert!(m("ab\\", "ab\\"), "trailing backslash is literal");
    }

    #[test]
    fn nocase() {
        assert!(Glob::new_nocase(b"MaxMemory*").matches(b"maxmemory-policy"));
        assert!(Glob::new_nocase(b"[A-C]x").matches(b"bX"));
    }

    #[test]
    fn prefix() {
        assert_eq!(Glob::new(b"user:1*").literal_prefix(), b"user:1");
        assert_eq!(Glob::new(b"a\\*b*").literal_prefix(), b"a*b");
        assert_eq!(Glob::new(b"*x").literal_prefix(), b"");
        assert!(Glob::new(b"**").matches_all());
    }

    /// The work bound of `matches_counting`: (tokens + 1) x (key length + 1) steps.
    fn step_bound(g: &Glob, s: &[u8]) -> u64 {
        (g.tokens.len() as u64 + 1) * (s.len() as u64 + 1)
    }

    /// No exponential blowup: a hostile pattern (`*a` 200 times, then `b`, which Redis's
    /// recursive matcher takes exponential time over) against 10,000 `a`s is refused in at
    /// most (pattern x key) steps, counted rather than timed. A pattern with one star and a
    /// long literal tail shows the bound is the right order: each of its backtracks re-reads
    /// the tail, and the count still stays within it.
    #[test]
    fn hostile_pattern_takes_at_most_pattern_times_key_steps() {
        let p = "*a".repeat(200) + "b";
        let s = "a".repeat(10_000);
        let g = Glob::new(p.as_bytes());
        let (matched, steps) = g.matches_counting(s.as_bytes());
        assert!(!matched);
        let bound = step_bound(&g, s.as_bytes());
        assert!(steps <= bound, "{steps} steps, bound {bound}");
        let p = "*".to_string() + &"a".repeat(200) + "b";
        let g = Glob::new(p.as_bytes());
        let (matched, steps) = g.matches_counting(s.as_bytes());
        assert!(!matched);
        let bound = step_bound(&g, s.as_bytes());
        assert!(steps <= bound, "{steps} steps, bound {bound}");
        assert!(
            steps * 2 > bound,
            "{steps} steps, far under the bound {bound}"
        );
    }

    /// Reference: naive recursive matcher (exponential, fine for short inputs).
    fn naive(t: &[Token], s: &[u8], g: &Glob) -> bool {
        match t.first() {
            None => s.is_empty(),
            Some(Token::Star) => (0..=s.len()).any(|k| naive(&t[1..], &s[k..], g)),
            Some(tok) => !s.is_empty() && g.one(tok, s[0]) && naive(&t[1..], &s[1..], g),
        }
    }

    proptest! {
        #[test]
        fn agrees_with_naive(p in "[ab*?\\[\\]^\\\\-]{0,8}", s in "[ab\\-]{0,8}") {
            let g = Glob::new(p.as_bytes());
            let (matched, steps) = g.matches_counting(s.as_bytes());
            prop_assert_eq!(matched, naive(&g.tokens, s.as_bytes(), &g));
            prop_assert!(steps <= step_bound(&g, s.as_bytes()));
        }

        #[test]
        fn garbage_never_panics(p in proptest::collection::vec(any::<u8>(), 0..64),
                                s in proptest::collection::vec(any::<u8>(), 0..64)) {
            let g = Glob::new(&p);
            let _ = g.matches(&s);
            let _ = g.literal_prefix();
        }
    }
}
