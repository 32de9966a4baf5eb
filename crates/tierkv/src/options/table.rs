//! How tables are written ([`TableOptions`], [`Compression`]). Defined here, below the table
//! code, so that `Options` names them without importing `crate::sst`, which applies them.

/// Block compression.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Compression {
    /// Blocks are stored as they are.
    #[default]
    None,
    /// LZ4 (a block is stored compressed only when that saves at least an eighth).
    Lz4,
}

/// How tables are written.
#[derive(Clone, Copy, Debug)]
pub struct TableOptions {
    /// Target uncompressed size of a data block (with `block_records`: the most a block
    /// grows to).
    pub block_size: usize,
    /// Cut a data block once it holds this many entries and at least
    /// [`MIN_RECORD_BLOCK`] bytes (`None`: cut by `block_size` only). See
    /// [`crate::Options::block_records`].
    pub block_records: Option<usize>,
    /// Keys between restart points in a data block.
    pub restart_interval: usize,
    /// Bloom filter bits per key (0: no filter).
    pub bloom_bits_per_key: usize,
    /// Block compression.
    pub compression: Compression,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 16 * 1024,
            block_records: None,
            restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::None,
        }
    }
}
