//! The error reply of a command, shared by the command handlers and the modules below them
//! (the keyspace encoding, state): it lives here so that those modules need not import
//! `commands`.

use std::fmt;

/// A command's error reply, complete with its code (`ERR ...`, `NOAUTH ...`).
#[derive(Debug)]
pub(crate) struct CmdError(pub String);

impl CmdError {
    pub fn err(msg: impl fmt::Display) -> Self {
        CmdError(format!("ERR {msg}"))
    }
}

impl From<tierkv::Error> for CmdError {
    fn from(e: tierkv::Error) -> Self {
        match e {
            tierkv::Error::Closed => CmdError::err("server is shutting down"),
            e => CmdError::err(e),
        }
    }
}
