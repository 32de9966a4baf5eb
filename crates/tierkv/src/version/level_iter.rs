//! An iterator over one sorted, disjoint level: it walks the level's files in key order and
//! opens each table only when the cursor reaches it.

use super::{FileMeta, TableCache, Version};
use crate::env::IoCause;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::sst::TableIterator;
use std::sync::Arc;

/// Concatenates the tables of one level (L1 and deeper, or a single L0 file).
pub struct LevelIterator {
    files: Vec<Arc<FileMeta>>,
    tables: Arc<TableCache>,
    cause: IoCause,
    fill_cache: bool,
    index: usize,
    current: Option<TableIterator>,
    /// Entries of this level a forward scan from a seek is expected to read
    /// ([`TableIterator::expect_scan`]).
    scan_entries: Option<f64>,
}

impl LevelIterator {
    /// `files` must be sorted by key and disjoint.
    pub fn new(
        files: Vec<Arc<FileMeta>>,
        tables: Arc<TableCache>,
        cause: IoCause,
        fill_cache: bool,
    ) -> Self {
        LevelIterator {
            index: files.len(),
            files,
            tables,
            cause,
            fill_cache,
            current: None,
            scan_entries: None,
        }
    }

    /// Each table's iterator expects forward scans to read about `entries` entries
    /// ([`TableIterator::expect_scan`]; `None`: no expectation).
    pub fn expect_scan(mut self, entries: Option<f64>) -> Self {
        self.scan_entries = entries;
        self
    }

    fn open(&mut self, index: usize) -> Result<()> {
        self.index = index;
        // No earlier table's cursor survives a failed open.
        self.current = None;
        self.current = match self.files.get(index) {
            Some(f) => {
                let it = self
                    .tables
                    .get(f, self.cause)?
                    .iter(self.cause, self.fill_cache);
                Some(it.expect_scan(self.scan_entries))
            }
            None => None,
        };
        Ok(())
    }

    /// Moves forward past exhausted tables.
    fn skip_forward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.index + 1 >= self.files.len() {
                self.current = None;
                self.index = self.files.len();
                return Ok(());
            }
            self.open(self.index + 1)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// Moves backward past exhausted tables.
    fn skip_backward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.index == 0 {
                self.current = None;
                self.index = self.files.len();
                return Ok(());
            }
            self.open(self.index - 1)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_last()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.open(0)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_first()?;
        }
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        if self.files.is_empty() {
            self.current = None;
            return Ok(());
        }
        self.open(self.files.len() - 1)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_last()?;
        }
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let i = Version::find_file(&self.files, target);
        // The table a `plan_seek` opened keeps its cursor, and the reads planned for it.
        if self.current.is_none() || self.index != i {
            self.open(i)?;
        }
        if let Some(c) = self.current.as_mut() {
            c.seek(target)?;
        }
        self.skip_forward()
    }

    fn plan_seek(&mut self, target: &[u8], reads: &mut Vec<crate::env::RoundRead>) {
        let i = Version::find_file(&self.files, target);
        if (self.current.is_none() || self.index != i) && self.open(i).is_err() {
            // The seek opens it again and reports the error.
            return;
        }
        if let Some(c) = self.current.as_mut() {
            c.plan_seek(target, reads);
        }
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.next()?;
        }
        self.skip_forward()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.prev()?;
        }
        self.skip_backward()
    }

    #[allow(
        clippy::expect_used,
        reason = "InternalIterator::key is called only while valid()"
    )]
    fn key(&self) -> &[u8] {
        self.current.as_ref().expect("valid").key()
    }

    #[allow(
        clippy::expect_used,
        reason = "InternalIterator::value is called only while valid()"
    )]
    fn value(&self) -> &[u8] {
        self.current.as_ref().expect("valid").value()
    }
}
