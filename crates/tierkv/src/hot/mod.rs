//! HotRAP's hot-record machinery: the promotion cache (records read from the slow tier
//! awaiting promotion) and RALT (the on-disk access tracker deciding what is hot).

pub mod promotion;
pub mod ralt;
