//! What the CLI test files share: running the built `tierkv` binary and reading its output.

use std::process::{Command, Output};

/// Runs `tierkv ARGS` (without `RUST_LOG`, so only the binary's own defaults log).
pub fn tierkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierkv"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run tierkv")
}

/// The process's exit code.
pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally")
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
