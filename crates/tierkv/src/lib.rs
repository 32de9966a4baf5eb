//! tierkv: an embeddable, persistent, ordered key-value store for tiered storage.
//!
//! A leveled LSM-tree whose upper levels live on a fast disk and whose lower levels live on
//! a slow disk. See `docs/ARCHITECTURE.md` for the map of modules and the data flow.

#![warn(missing_docs)]

pub mod coding;
pub mod env;
mod error;
pub mod iter;
pub mod key;

pub use error::{Error, Result};
