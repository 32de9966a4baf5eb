//! HotRAP's hot-record machinery: the promotion cache (records read from the slow tier
//! awaiting promotion) and the hotness tracker deciding what is hot: RALT (the on-disk
//! access tracker) or HyperDB's bloom-filter cascade, behind one interface (`tracker`).

pub(crate) mod access_feed;
pub(crate) mod cascade;
pub(crate) mod policy;
pub(crate) mod promotion;
pub mod ralt;
pub(crate) mod tracker;

pub(crate) use access_feed::AccessFeed;
pub use tracker::TrackerKind;
pub(crate) use tracker::{HotKeys, HotTracker};
