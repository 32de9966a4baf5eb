//! How a test that cannot run here says so: the one skip mechanism of the workspace's tests
//! (docs/TESTING.md, "Skips"), for the engine's tests, its integration tests and the
//! server's. Not a stable API; hidden from the docs like `fuzz_hooks`.
//!
//! - [`require`] (and [`require_io_uring`]): for a capability CI's machine has (io_uring on
//!   Linux, root to mount a tmpfs). Where it is missing the test fails, naming it, so a
//!   broken setup on CI cannot pass as a quiet skip; with `TIERKV_ALLOW_SKIP=1` (a machine
//!   known to lack it) the test reports a skip instead.
//! - [`skip`]: for an optional tool the suite does without (redis-py, which `.ci/run`
//!   installs when it can): the test reports the skip and passes.
//!
//! - [`assert_golden`]: compares a renderer's output with its golden file (the bench's
//!   report, INFO, `tierkv stats`).
//!
//! A skip is reported as one line, `SKIPPED <test>: <reason>`, written straight to the
//! process's stderr. libtest holds back a passing test's output only as far as it goes
//! through `print!`/`eprint!` (its output capture), so this line shows in the log whether
//! the test passes or not, and `.ci/run` lists every such line after the tests.

use std::io::Write;

/// The environment variable that lets [`require`] skip instead of fail (any value but
/// empty or `0`).
pub const ALLOW_SKIP_ENV: &str = "TIERKV_ALLOW_SKIP";

/// Reports that `test` (a test's name, or a test's name and the part skipped) does not run
/// here, and why: `SKIPPED <test>: <reason>` on stderr, past libtest's capture.
pub fn skip(test: &str, reason: &str) {
    report(&skip_line(test, reason));
}

/// The report of a skip: the line `.ci/run` looks for (a reason of several lines, such as
/// a command's error output, joined into it).
fn skip_line(test: &str, reason: &str) -> String {
    let reason: Vec<&str> = reason.lines().map(str::trim).collect();
    format!("SKIPPED {test}: {}\n", reason.join(" "))
}

/// Writes `line` to stderr itself, not through `eprint!`, which libtest captures.
fn report(line: &str) {
    // One write of the whole line, so lines of tests running in parallel stay whole; a
    // failed write of a diagnostic is not the test's failure.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// True when `TIERKV_ALLOW_SKIP` is set to allow skips.
pub fn skips_allowed() -> bool {
    std::env::var_os(ALLOW_SKIP_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// For a capability CI's machine has: `true` when `capability` is `Ok`. When it is
/// `Err(reason)`, reports the skip and returns `false` if skips are allowed
/// ([`skips_allowed`]); the caller then returns (or leaves out the part that needs it).
///
/// # Panics
///
/// When the capability is missing and skips are not allowed: the test fails, naming the
/// capability and the variable that would skip it.
#[track_caller]
pub fn require(test: &str, capability: Result<(), String>) -> bool {
    require_or_skip(test, capability, skips_allowed(), &mut report)
}

/// [`require`], given whether skips are allowed and where a skip's line goes (its tests
/// set no variable and keep the line).
#[track_caller]
fn require_or_skip(
    test: &str,
    capability: Result<(), String>,
    allowed: bool,
    report: &mut dyn FnMut(&str),
) -> bool {
    let Err(reason) = capability else {
        return true;
    };
    if allowed {
        report(&skip_line(test, &reason));
        return false;
    }
    panic!(
        "{test} cannot run here: {reason}. CI's machine has this, so the test fails rather \
         than pass untested; set {ALLOW_SKIP_ENV}=1 to skip it (reported as SKIPPED)"
    );
}

/// [`require`] for io_uring on this thread. On Linux CI's kernel allows io_uring, so
/// without it (a seccomp filter, an old kernel, the memlock limit) the test fails unless
/// skips are allowed; elsewhere the engine never uses io_uring, and the test is skipped
/// (reported).
#[track_caller]
pub fn require_io_uring(test: &str) -> bool {
    if !cfg!(target_os = "linux") {
        skip(test, "io_uring exists only on Linux");
        return false;
    }
    let capability = if crate::env::uring_available() {
        Ok(())
    } else {
        Err(
            "io_uring is unavailable (the ring's setup was refused: a seccomp filter, \
             an old kernel or the memlock limit)"
                .to_string(),
        )
    };
    require(test, capability)
}

/// Compares `got` with the golden file `<dir>/<name>` (written by the code a renderer
/// replaced, so a refactoring that changes one byte fails here), panicking with the first
/// line that differs; with `TIERKV_BLESS` set it rewrites the file instead, for a deliberate
/// change of the output.
pub fn assert_golden(dir: &std::path::Path, name: &str, got: &str) {
    let path = dir.join(name);
    if std::env::var_os("TIERKV_BLESS").is_some() {
        if let Err(e) = std::fs::write(&path, got) {
            panic!("{}: {e}", path.display());
        }
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(g, w)| g != w)
            .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
        panic!(
            "{name} differs from line {}:\n got: {:?}\nwant: {:?}\n\nwhole output:\n{got}",
            line + 1,
            got.lines().nth(line),
            want.lines().nth(line)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `require` with skips allowed or not, keeping what it would report.
    fn run(capability: Result<(), String>, allowed: bool) -> (bool, Vec<String>) {
        let mut lines = Vec::new();
        let ran = require_or_skip("some_test", capability, allowed, &mut |l| {
            lines.push(l.to_string())
        });
        (ran, lines)
    }

    /// A capability that is there lets the test run, reporting nothing, whether or not
    /// skips are allowed.
    #[test]
    fn a_present_capability_runs_the_test() {
        assert_eq!(run(Ok(()), false), (true, vec![]));
        assert_eq!(run(Ok(()), true), (true, vec![]));
    }

    /// A missing capability fails the test, naming it, the reason and the variable that
    /// would skip it: a broken setup never passes as a quiet skip.
    #[test]
    #[should_panic(expected = "some_test cannot run here: no ring. CI's machine has this")]
    fn a_missing_capability_fails_the_test() {
        run(Err("no ring".into()), false);
    }

    /// With skips allowed, a missing capability is reported as the one line `.ci/run`
    /// lists (a reason of several lines joined), and the test is told to skip.
    #[test]
    fn an_allowed_skip_is_reported_and_skips() {
        assert_eq!(
            run(Err("no ring\n  (seccomp)".into()), true),
            (
                false,
                vec!["SKIPPED some_test: no ring (seccomp)\n".to_string()]
            )
        );
    }
}
