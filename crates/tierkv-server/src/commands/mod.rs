//! The command table and dispatcher: name lookup, arity and authentication checks, and the
//! pipeline runner that executes a connection's parsed commands in order.
//!
//! Handlers live in submodules by concern: `strings` (values and counters), `hashes`,
//! `sets`, `zsets`, `lists` (with the blocking pops), `multi` (transactions), `inline`
//! (what runs on the event loop),
//! `expiry` (EXPIRE, TTL, PERSIST ...), `keys` (existence, deletion, TYPE, SCAN, DBSIZE),
//! `keyspace` (KEYS, RENAME, COPY, RANDOMKEY, OBJECT, FLUSHDB), `conn` (PING, HELLO, AUTH,
//! CLIENT ...), `clients` (CLIENT KILL, UNBLOCK, PAUSE), `monitor` (SLOWLOG, LATENCY)
//! and `admin` (INFO, CONFIG, COMMAND, ROLE, SHUTDOWN). Values are stored in the
//! server keyspace format of `crate::keyspace`.

mod admin;
mod bitmaps;
mod blocking;
mod clients;
mod conn;
pub(crate) mod expiry;
mod geo;
mod hashes;
mod hyperloglog;
mod inline;
mod keys;
mod keyspace;
mod lists;
mod monitor;
mod multi;
pub(crate) mod pubsub;
mod replication;
mod saves;
mod sets;
mod sort;
mod strings;
mod zset_index;
mod zsets;

pub(crate) use crate::error::CmdError;
use crate::resp::{Args, ReplyWriter};
pub(crate) use crate::state::Resume;
use crate::state::{ConnState, Replies, ServerStats, Shared};
use bytes::Bytes;
pub(crate) use inline::run_inline;
use std::collections::VecDeque;
pub(crate) use zset_index::set_chunk as set_zset_index_chunk;

/// What the connection does after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Go on reading commands.
    Continue,
    /// Send the pending replies, then close this connection (QUIT).
    Close,
    /// Send the pending replies, close this connection and shut the server down
    /// (SHUTDOWN).
    Shutdown,
    /// The replies passed the connection's hard output limit and were dropped: close the
    /// connection without sending anything more.
    Overflow,
    /// The connection is a replica's (PSYNC): it becomes the replication stream.
    Replicate,
}

pub(crate) type CmdResult = Result<Flow, CmdError>;

pub(crate) const SYNTAX: &str = "syntax error";
pub(crate) const NOT_INT: &str = "value is not an integer or out of range";

/// Everything a handler may touch.
pub(crate) struct Ctx<'a> {
    pub shared: &'a Shared,
    pub conn: &'a mut ConnState,
    pub out: &'a mut ReplyWriter,
}

impl Ctx<'_> {
    pub fn wopts(&self) -> tierkv::WriteOptions {
        tierkv::WriteOptions {
            sync: self.shared.config.load().sync,
        }
    }
}

type Handler = fn(&mut Ctx<'_>, &[Bytes]) -> CmdResult;

/// One command's metadata (what COMMAND reports) and its handler.
pub(crate) struct CommandSpec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: N exactly N arguments (name included), -N at least N.
    pub arity: i32,
    /// Redis command flags (`write`, `readonly`, `fast`, ...).
    pub flags: &'static [&'static str],
    /// First key, last key, step (COMMAND's key positions; 0 0 0 when no keys).
    pub keys: (i32, i32, i32),
    /// Documentation group (COMMAND DOCS).
    pub group: &'static str,
    /// One-line summary (COMMAND DOCS).
    pub summary: &'static str,
    /// Touches the store: must run on a blocking thread, never on the reactor.
    pub io: bool,
    handler: Handler,
}

impl CommandSpec {
    /// Allowed before AUTH.
    pub fn no_auth(&self) -> bool {
        self.flags.contains(&"no_auth")
    }
}

macro_rules! spec {
    ($name:literal, $arity:expr, [$($flag:literal),*], $keys:expr, $group:literal,
     $io:expr, $handler:path, $summary:literal) => {
        CommandSpec {
            name: $name,
            arity: $arity,
            flags: &[$($flag),*],
            keys: $keys,
            group: $group,
            summary: $summary,
            io: $io,
            handler: $handler,
        }
    };
}

const NK: (i32, i32, i32) = (0, 0, 0);
const K1: (i32, i32, i32) = (1, 1, 1);
const KALL: (i32, i32, i32) = (1, -1, 1);

/// Every supported command.
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!(
        "get",
        2,
        ["readonly", "fast"],
        K1,
        "string",
        true,
        strings::get,
        "Returns the string value of a key."
    ),
    spec!(
        "set",
        -3,
        ["write", "denyoom"],
        K1,
        "string",
        true,
        strings::set,
        "Sets the string value of a key (NX, XX, GET, EX, PX, EXAT, PXAT, KEEPTTL)."
    ),
    spec!(
        "setnx",
        3,
        ["write", "denyoom", "fast"],
        K1,
        "string",
        true,
        strings::setnx,
        "Sets the string value of a key only when the key doesn't exist."
    ),
    spec!(
        "setex",
        4,
        ["write", "denyoom"],
        K1,
        "string",
        true,
        strings::setex,
        "Sets the string value and expiration time (seconds) of a key."
    ),
    spec!(
        "psetex",
        4,
        ["write", "denyoom"],
        K1,
        "string",
        true,
        strings::setex,
        "Sets the string value and expiration time (milliseconds) of a key."
    ),
    spec!(
        "getdel",
        2,
        ["write", "fast"],
        K1,
        "string",
        true,
        strings::getdel,
        "Returns the string value of a key after deleting the key."
    ),
    spec!(
        "getex",
        -2,
        ["write", "fast"],
        K1,
        "string",
        true,
        strings::getex,
        "Returns the string value of a key after setting its expiration time."
    ),
    spec!(
        "substr",
        4,
        ["readonly"],
        K1,
        "string",
        true,
        strings::getrange,
        "Returns a substring of a string value (GETRANGE's old name)."
    ),
    spec!(
        "lcs",
        -3,
        ["readonly"],
        (1, 2, 1),
        "string",
        true,
        strings::lcs,
        "The longest common subsequence of two strings (LEN, IDX, MINMATCHLEN, WITHMATCHLEN)."
    ),
    spec!(
        "getrange",
        4,
        ["readonly"],
        K1,
        "string",
        true,
        strings::getrange,
        "Returns a substring of the string stored at a key."
    ),
    spec!(
        "setrange",
        4,
        ["write", "denyoom"],
        K1,
        "string",
        true,
        strings::setrange,
        "Overwrites a part of a string value with another by an offset."
    ),
    spec!(
        "incrbyfloat",
        3,
        ["write", "denyoom", "fast"],
        K1,
        "string",
        true,
        strings::incrbyfloat,
        "Increments the floating point value of a key by a number."
    ),
    spec!(
        "msetnx",
        -3,
        ["write", "denyoom"],
        (1, -1, 2),
        "string",
        true,
        strings::msetnx,
        "Atomically sets the values of one or more keys only when none of them exists."
    ),
    spec!(
        "getset",
        3,
        ["write", "denyoom", "fast"],
        K1,
        "string",
        true,
        strings::getset,
        "Returns the previous string value of a key after setting it to a new value."
    ),
    spec!(
        "mget",
        -2,
        ["readonly", "fast"],
        KALL,
        "string",
        true,
        strings::mget,
        "Atomically returns the string values of one or more keys (one snapshot)."
    ),
    spec!(
        "mset",
        -3,
        ["write", "denyoom"],
        (1, -1, 2),
        "string",
        true,
        strings::mset,
        "Atomically creates or modifies the string values of one or more keys."
    ),
    spec!(
        "incr",
        2,
        ["write", "denyoom", "fast"],
        K1,
        "string",
        true,
        strings::counter,
        "Increments the integer value of a key by one."
    ),
    spec!(
        "incrby",
        3,
        ["write", "denyoom", "fast"],
        K1,
        "string",
        true,
        strings::counter,
        "Increments the integer value of a key by a number."
    ),
    spec!(
        "decr",
        2,
        ["write", "denyoom", "fast"],
        K1,
        "string",
        true,
        strings::counter,
        "Decrements the integer value of a key by one."
    ),
    spec!(
        "decrby",
        3,
        ["write", "denyoom", "fast"],
        K1,
        "string",
        true,
        strings::counter,
        "Decrements a number from the integer value of a key."
    ),
    spec!(
        "append",
        3,
        ["write", "denyoom", "fast"],
        K1,
        "string",
        true,
        strings::append,
        "Appends a string to the value of a key. Creates the key if it doesn't exist."
    ),
    spec!(
        "strlen",
        2,
        ["readonly", "fast"],
        K1,
        "string",
        true,
        strings::strlen,
        "Returns the length of a string value."
    ),
    spec!(
        "del",
        -2,
        ["write"],
        KALL,
        "generic",
        true,
        keys::del,
        "Deletes one or more keys."
    ),
    spec!(
        "unlink",
        -2,
        ["write", "fast"],
        KALL,
        "generic",
        true,
        keys::del,
        "Deletes one or more keys (same as DEL)."
    ),
    spec!(
        "exists",
        -2,
        ["readonly", "fast"],
        KALL,
        "generic",
        true,
        keys::exists,
        "Determines whether one or more keys exist."
    ),
    spec!(
        "type",
        2,
        ["readonly", "fast"],
        K1,
        "generic",
        true,
        keys::type_,
        "Determines the type of value stored at a key (string, hash or none)."
    ),
    spec!(
        "keys",
        2,
        ["readonly"],
        NK,
        "generic",
        true,
        keyspace::keys,
        "Returns all key names that match a pattern (O(keys): scans the key range)."
    ),
    spec!(
        "sort",
        -2,
        ["write", "denyoom", "movablekeys"],
        K1,
        "generic",
        true,
        sort::sort,
        "Sorts a list, set or sorted set (BY, LIMIT, GET, ASC/DESC, ALPHA, STORE)."
    ),
    spec!(
        "sort_ro",
        -2,
        ["readonly", "movablekeys"],
        K1,
        "generic",
        true,
        sort::sort,
        "SORT without STORE."
    ),
    spec!(
        "rename",
        3,
        ["write"],
        (1, 2, 1),
        "generic",
        true,
        keyspace::rename,
        "Renames a key and overwrites the destination."
    ),
    spec!(
        "renamenx",
        3,
        ["write", "fast"],
        (1, 2, 1),
        "generic",
        true,
        keyspace::rename,
        "Renames a key only when the target key name doesn't exist."
    ),
    spec!(
        "copy",
        -3,
        ["write", "denyoom"],
        (1, 2, 1),
        "generic",
        true,
        keyspace::copy,
        "Copies the value of a key to a new key (DB 0 only; REPLACE)."
    ),
    spec!(
        "randomkey",
        1,
        ["readonly"],
        NK,
        "generic",
        true,
        keyspace::randomkey,
        "Returns a random key name from the database."
    ),
    spec!(
        "object",
        -2,
        ["readonly"],
        (2, 2, 1),
        "generic",
        true,
        keyspace::object,
        "OBJECT ENCODING (Redis's encoding rules), REFCOUNT, HELP."
    ),
    spec!(
        "flushdb",
        -1,
        ["write"],
        NK,
        "server",
        true,
        keyspace::flushdb,
        "Removes all keys from the database (ASYNC and SYNC both run synchronously)."
    ),
    spec!(
        "flushall",
        -1,
        ["write"],
        NK,
        "server",
        true,
        keyspace::flushdb,
        "Removes all keys from all databases (there is one)."
    ),
    spec!(
        "expire",
        -3,
        ["write", "fast"],
        K1,
        "generic",
        true,
        expiry::expire,
        "Sets the expiration time of a key in seconds (NX, XX, GT, LT)."
    ),
    spec!(
        "pexpire",
        -3,
        ["write", "fast"],
        K1,
        "generic",
        true,
        expiry::expire,
        "Sets the expiration time of a key in milliseconds (NX, XX, GT, LT)."
    ),
    spec!(
        "expireat",
        -3,
        ["write", "fast"],
        K1,
        "generic",
        true,
        expiry::expire,
        "Sets the expiration time of a key to a Unix timestamp (NX, XX, GT, LT)."
    ),
    spec!(
        "pexpireat",
        -3,
        ["write", "fast"],
        K1,
        "generic",
        true,
        expiry::expire,
        "Sets the expiration time of a key to a Unix milliseconds timestamp (NX, XX, GT, LT)."
    ),
    spec!(
        "ttl",
        2,
        ["readonly", "fast"],
        K1,
        "generic",
        true,
        expiry::ttl,
        "Returns the expiration time in seconds of a key."
    ),
    spec!(
        "pttl",
        2,
        ["readonly", "fast"],
        K1,
        "generic",
        true,
        expiry::ttl,
        "Returns the expiration time in milliseconds of a key."
    ),
    spec!(
        "expiretime",
        2,
        ["readonly", "fast"],
        K1,
        "generic",
        true,
        expiry::ttl,
        "Returns the expiration time of a key as a Unix timestamp."
    ),
    spec!(
        "pexpiretime",
        2,
        ["readonly", "fast"],
        K1,
        "generic",
        true,
        expiry::ttl,
        "Returns the expiration time of a key as a Unix milliseconds timestamp."
    ),
    spec!(
        "persist",
        2,
        ["write", "fast"],
        K1,
        "generic",
        true,
        expiry::persist,
        "Removes the expiration time of a key."
    ),
    spec!(
        "setbit",
        4,
        ["write", "denyoom"],
        K1,
        "bitmap",
        true,
        bitmaps::setbit,
        "Sets a bit of a string (the old bit)."
    ),
    spec!(
        "getbit",
        3,
        ["readonly", "fast"],
        K1,
        "bitmap",
        true,
        bitmaps::getbit,
        "Returns a bit of a string."
    ),
    spec!(
        "bitcount",
        -2,
        ["readonly"],
        K1,
        "bitmap",
        true,
        bitmaps::bitcount,
        "Counts the set bits of a string (a BYTE or BIT range)."
    ),
    spec!(
        "bitpos",
        -3,
        ["readonly"],
        K1,
        "bitmap",
        true,
        bitmaps::bitpos,
        "Returns the first 0 or 1 bit of a string (a BYTE or BIT range)."
    ),
    spec!(
        "bitop",
        -4,
        ["write", "denyoom"],
        (2, -1, 1),
        "bitmap",
        true,
        bitmaps::bitop,
        "AND, OR, XOR or NOT of strings, stored in a key."
    ),
    spec!(
        "bitfield",
        -2,
        ["write", "denyoom"],
        K1,
        "bitmap",
        true,
        bitmaps::bitfield,
        "GET, SET, INCRBY integer fields of a string (OVERFLOW WRAP, SAT, FAIL)."
    ),
    spec!(
        "bitfield_ro",
        -2,
        ["readonly", "fast"],
        K1,
        "bitmap",
        true,
        bitmaps::bitfield,
        "BITFIELD's GET."
    ),
    spec!(
        "pfadd",
        -2,
        ["write", "denyoom", "fast"],
        K1,
        "hyperloglog",
        true,
        hyperloglog::pfadd,
        "Adds elements to a HyperLogLog (1 when it changed)."
    ),
    spec!(
        "pfcount",
        -2,
        ["readonly"],
        KALL,
        "hyperloglog",
        true,
        hyperloglog::pfcount,
        "The estimated number of distinct elements of HyperLogLogs' union."
    ),
    spec!(
        "pfmerge",
        -2,
        ["write", "denyoom"],
        KALL,
        "hyperloglog",
        true,
        hyperloglog::pfmerge,
        "Merges HyperLogLogs into the first key."
    ),
    spec!(
        "geoadd",
        -5,
        ["write", "denyoom"],
        K1,
        "geo",
        true,
        geo::geoadd,
        "Adds positions to a sorted set of members (NX, XX, CH)."
    ),
    spec!(
        "geopos",
        -2,
        ["readonly"],
        K1,
        "geo",
        true,
        geo::geopos,
        "Returns members' longitude and latitude."
    ),
    spec!(
        "geodist",
        -4,
        ["readonly"],
        K1,
        "geo",
        true,
        geo::geodist,
        "Returns the distance between two members (m, km, mi, ft)."
    ),
    spec!(
        "geohash",
        -2,
        ["readonly"],
        K1,
        "geo",
        true,
        geo::geohash,
        "Returns members' standard geohash strings."
    ),
    spec!(
        "geosearch",
        -7,
        ["readonly"],
        K1,
        "geo",
        true,
        geo::geosearch,
        "Returns members inside a radius or a box around a member or a point."
    ),
    spec!(
        "geosearchstore",
        -8,
        ["write", "denyoom"],
        (1, 2, 1),
        "geo",
        true,
        geo::geosearch,
        "GEOSEARCH, stored in a sorted set (STOREDIST)."
    ),
    spec!(
        "georadius",
        -6,
        ["write", "denyoom", "movablekeys"],
        K1,
        "geo",
        true,
        geo::georadius,
        "Returns members within a radius of a point (STORE, STOREDIST)."
    ),
    spec!(
        "georadius_ro",
        -6,
        ["readonly"],
        K1,
        "geo",
        true,
        geo::georadius,
        "GEORADIUS without STORE."
    ),
    spec!(
        "georadiusbymember",
        -5,
        ["write", "denyoom", "movablekeys"],
        K1,
        "geo",
        true,
        geo::georadius,
        "Returns members within a radius of a member (STORE, STOREDIST)."
    ),
    spec!(
        "georadiusbymember_ro",
        -5,
        ["readonly"],
        K1,
        "geo",
        true,
        geo::georadius,
        "GEORADIUSBYMEMBER without STORE."
    ),
    spec!(
        "hset",
        -4,
        ["write", "denyoom", "fast"],
        K1,
        "hash",
        true,
        hashes::hset,
        "Creates or modifies the value of a field in a hash."
    ),
    spec!(
        "hmset",
        -4,
        ["write", "denyoom", "fast"],
        K1,
        "hash",
        true,
        hashes::hset,
        "Sets the values of multiple fields."
    ),
    spec!(
        "hsetnx",
        4,
        ["write", "denyoom", "fast"],
        K1,
        "hash",
        true,
        hashes::hsetnx,
        "Sets the value of a field in a hash only when the field doesn't exist."
    ),
    spec!(
        "hget",
        3,
        ["readonly", "fast"],
        K1,
        "hash",
        true,
        hashes::hget,
        "Returns the value of a field in a hash."
    ),
    spec!(
        "hmget",
        -3,
        ["readonly", "fast"],
        K1,
        "hash",
        true,
        hashes::hmget,
        "Returns the values of all fields in a hash."
    ),
    spec!(
        "hgetall",
        2,
        ["readonly"],
        K1,
        "hash",
        true,
        hashes::hgetall,
        "Returns all fields and values in a hash (produced incrementally)."
    ),
    spec!(
        "hkeys",
        2,
        ["readonly"],
        K1,
        "hash",
        true,
        hashes::hgetall,
        "Returns all fields in a hash."
    ),
    spec!(
        "hvals",
        2,
        ["readonly"],
        K1,
        "hash",
        true,
        hashes::hgetall,
        "Returns all values in a hash."
    ),
    spec!(
        "hdel",
        -3,
        ["write", "fast"],
        K1,
        "hash",
        true,
        hashes::hdel,
        "Deletes one or more fields and their values from a hash."
    ),
    spec!(
        "hlen",
        2,
        ["readonly", "fast"],
        K1,
        "hash",
        true,
        hashes::hlen,
        "Returns the number of fields in a hash."
    ),
    spec!(
        "hexists",
        3,
        ["readonly", "fast"],
        K1,
        "hash",
        true,
        hashes::hexists,
        "Determines whether a field exists in a hash."
    ),
    spec!(
        "hstrlen",
        3,
        ["readonly", "fast"],
        K1,
        "hash",
        true,
        hashes::hstrlen,
        "Returns the length of the value of a field."
    ),
    spec!(
        "hincrby",
        4,
        ["write", "denyoom", "fast"],
        K1,
        "hash",
        true,
        hashes::hincrby,
        "Increments the integer value of a field in a hash by a number."
    ),
    spec!(
        "hincrbyfloat",
        4,
        ["write", "denyoom", "fast"],
        K1,
        "hash",
        true,
        hashes::hincrbyfloat,
        "Increments the floating point value of a field by a number."
    ),
    spec!(
        "hrandfield",
        -2,
        ["readonly"],
        K1,
        "hash",
        true,
        hashes::hrandfield,
        "Returns random fields of a hash (count, WITHVALUES)."
    ),
    spec!(
        "hscan",
        -3,
        ["readonly"],
        K1,
        "hash",
        true,
        hashes::hscan,
        "Iterates over fields and values of a hash (MATCH, COUNT, NOVALUES)."
    ),
    spec!(
        "lpush",
        -3,
        ["write", "denyoom", "fast"],
        K1,
        "list",
        true,
        lists::push,
        "Prepends elements to a list (its new length)."
    ),
    spec!(
        "rpush",
        -3,
        ["write", "denyoom", "fast"],
        K1,
        "list",
        true,
        lists::push,
        "Appends elements to a list (its new length)."
    ),
    spec!(
        "lpushx",
        -3,
        ["write", "denyoom", "fast"],
        K1,
        "list",
        true,
        lists::push,
        "Prepends elements to an existing list."
    ),
    spec!(
        "rpushx",
        -3,
        ["write", "denyoom", "fast"],
        K1,
        "list",
        true,
        lists::push,
        "Appends elements to an existing list."
    ),
    spec!(
        "lpop",
        -2,
        ["write", "fast"],
        K1,
        "list",
        true,
        lists::pop,
        "Removes and returns the first elements of a list (count)."
    ),
    spec!(
        "rpop",
        -2,
        ["write", "fast"],
        K1,
        "list",
        true,
        lists::pop,
        "Removes and returns the last elements of a list (count)."
    ),
    spec!(
        "llen",
        2,
        ["readonly", "fast"],
        K1,
        "list",
        true,
        lists::llen,
        "Returns the length of a list."
    ),
    spec!(
        "lrange",
        4,
        ["readonly"],
        K1,
        "list",
        true,
        lists::lrange,
        "Returns a range of elements of a list."
    ),
    spec!(
        "lindex",
        3,
        ["readonly"],
        K1,
        "list",
        true,
        lists::lindex,
        "Returns an element of a list by its index."
    ),
    spec!(
        "lset",
        4,
        ["write", "denyoom"],
        K1,
        "list",
        true,
        lists::lset,
        "Sets the element of a list at an index."
    ),
    spec!(
        "lrem",
        4,
        ["write"],
        K1,
        "list",
        true,
        lists::lrem,
        "Removes occurrences of an element from a list."
    ),
    spec!(
        "ltrim",
        4,
        ["write"],
        K1,
        "list",
        true,
        lists::ltrim,
        "Keeps only a range of a list."
    ),
    spec!(
        "linsert",
        5,
        ["write", "denyoom"],
        K1,
        "list",
        true,
        lists::linsert,
        "Inserts an element before or after another."
    ),
    spec!(
        "lpos",
        -3,
        ["readonly"],
        K1,
        "list",
        true,
        lists::lpos,
        "Returns the indexes of matching elements (RANK, COUNT, MAXLEN)."
    ),
    spec!(
        "lmove",
        5,
        ["write", "denyoom"],
        (1, 2, 1),
        "list",
        true,
        lists::lmove,
        "Moves an element from one end of a list to an end of another."
    ),
    spec!(
        "rpoplpush",
        3,
        ["write", "denyoom"],
        (1, 2, 1),
        "list",
        true,
        lists::lmove,
        "Moves the last element of a list to the head of another."
    ),
    spec!(
        "lmpop",
        -4,
        ["write", "movablekeys"],
        NK,
        "list",
        true,
        lists::lmpop,
        "Pops elements from the first non-empty list (COUNT)."
    ),
    spec!(
        "blpop",
        -3,
        ["write", "blocking"],
        (1, -2, 1),
        "list",
        true,
        lists::bpop,
        "Pops the first element of the first non-empty list, blocking until one is."
    ),
    spec!(
        "brpop",
        -3,
        ["write", "blocking"],
        (1, -2, 1),
        "list",
        true,
        lists::bpop,
        "Pops the last element of the first non-empty list, blocking until one is."
    ),
    spec!(
        "blmove",
        6,
        ["write", "denyoom", "blocking"],
        (1, 2, 1),
        "list",
        true,
        lists::blmove,
        "LMOVE, blocking until the source has an element."
    ),
    spec!(
        "brpoplpush",
        4,
        ["write", "denyoom", "blocking"],
        (1, 2, 1),
        "list",
        true,
        lists::blmove,
        "RPOPLPUSH, blocking until the source has an element."
    ),
    spec!(
        "blmpop",
        -5,
        ["write", "blocking", "movablekeys"],
        NK,
        "list",
        true,
        lists::blmpop,
        "LMPOP, blocking until a list has an element."
    ),
    spec!(
        "sadd",
        -3,
        ["write", "denyoom", "fast"],
        K1,
        "set",
        true,
        sets::sadd,
        "Adds members to a set (the number added)."
    ),
    spec!(
        "srem",
        -3,
        ["write", "fast"],
        K1,
        "set",
        true,
        sets::srem,
        "Removes members from a set (the number removed)."
    ),
    spec!(
        "scard",
        2,
        ["readonly", "fast"],
        K1,
        "set",
        true,
        sets::scard,
        "Returns the number of members of a set."
    ),
    spec!(
        "sismember",
        3,
        ["readonly", "fast"],
        K1,
        "set",
        true,
        sets::sismember,
        "Tells whether a member belongs to a set."
    ),
    spec!(
        "smismember",
        -3,
        ["readonly", "fast"],
        K1,
        "set",
        true,
        sets::sismember,
        "Tells whether each of several members belongs to a set."
    ),
    spec!(
        "smembers",
        2,
        ["readonly"],
        K1,
        "set",
        true,
        sets::smembers,
        "Returns every member of a set."
    ),
    spec!(
        "srandmember",
        -2,
        ["readonly"],
        K1,
        "set",
        true,
        sets::srandmember,
        "Returns random members of a set (a negative count may repeat them)."
    ),
    spec!(
        "spop",
        -2,
        ["write", "fast"],
        K1,
        "set",
        true,
        sets::spop,
        "Removes and returns random members of a set."
    ),
    spec!(
        "smove",
        4,
        ["write", "fast"],
        (1, 2, 1),
        "set",
        true,
        sets::smove,
        "Moves a member from one set to another atomically."
    ),
    spec!(
        "sinter",
        -2,
        ["readonly"],
        KALL,
        "set",
        true,
        sets::algebra,
        "Returns the intersection of sets."
    ),
    spec!(
        "sunion",
        -2,
        ["readonly"],
        KALL,
        "set",
        true,
        sets::algebra,
        "Returns the union of sets."
    ),
    spec!(
        "sdiff",
        -2,
        ["readonly"],
        KALL,
        "set",
        true,
        sets::algebra,
        "Returns the members of the first set not in the others."
    ),
    spec!(
        "sinterstore",
        -3,
        ["write", "denyoom"],
        KALL,
        "set",
        true,
        sets::algebra_store,
        "Stores the intersection of sets in a key (its size)."
    ),
    spec!(
        "sunionstore",
        -3,
        ["write", "denyoom"],
        KALL,
        "set",
        true,
        sets::algebra_store,
        "Stores the union of sets in a key (its size)."
    ),
    spec!(
        "sdiffstore",
        -3,
        ["write", "denyoom"],
        KALL,
        "set",
        true,
        sets::algebra_store,
        "Stores the difference of sets in a key (its size)."
    ),
    spec!(
        "sintercard",
        -3,
        ["readonly", "movablekeys"],
        NK,
        "set",
        true,
        sets::sintercard,
        "Returns the size of the intersection of sets (LIMIT)."
    ),
    spec!(
        "sscan",
        -3,
        ["readonly"],
        K1,
        "set",
        true,
        sets::sscan,
        "Iterates over the members of a set (MATCH, COUNT)."
    ),
    spec!(
        "zadd",
        -4,
        ["write", "denyoom", "fast"],
        K1,
        "sorted-set",
        true,
        zsets::zadd,
        "Adds members to a sorted set or updates their scores (NX, XX, GT, LT, CH, INCR)."
    ),
    spec!(
        "zincrby",
        4,
        ["write", "denyoom", "fast"],
        K1,
        "sorted-set",
        true,
        zsets::zincrby,
        "Increments the score of a member in a sorted set (the new score)."
    ),
    spec!(
        "zrem",
        -3,
        ["write", "fast"],
        K1,
        "sorted-set",
        true,
        zsets::zrem,
        "Removes members from a sorted set (the number removed)."
    ),
    spec!(
        "zcard",
        2,
        ["readonly", "fast"],
        K1,
        "sorted-set",
        true,
        zsets::zcard,
        "Returns the number of members of a sorted set."
    ),
    spec!(
        "zscore",
        3,
        ["readonly", "fast"],
        K1,
        "sorted-set",
        true,
        zsets::zscore,
        "Returns the score of a member in a sorted set."
    ),
    spec!(
        "zmscore",
        -3,
        ["readonly", "fast"],
        K1,
        "sorted-set",
        true,
        zsets::zmscore,
        "Returns the scores of members in a sorted set."
    ),
    spec!(
        "zrank",
        3,
        ["readonly", "fast"],
        K1,
        "sorted-set",
        true,
        zsets::zrank,
        "Returns the rank of a member, by ascending score (O(rank))."
    ),
    spec!(
        "zrevrank",
        3,
        ["readonly", "fast"],
        K1,
        "sorted-set",
        true,
        zsets::zrank,
        "Returns the rank of a member, by descending score (O(rank))."
    ),
    spec!(
        "zrange",
        -4,
        ["readonly"],
        K1,
        "sorted-set",
        true,
        zsets::zrange,
        "Returns members in a range of ranks, scores or members (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES)."
    ),
    spec!(
        "zrangestore",
        -5,
        ["write", "denyoom"],
        (1, 2, 1),
        "sorted-set",
        true,
        zsets::zrangestore,
        "Stores a range of members of a sorted set in a key (its size)."
    ),
    spec!(
        "zrevrange",
        -4,
        ["readonly"],
        K1,
        "sorted-set",
        true,
        zsets::zrange,
        "Returns members in a range of ranks, by descending score."
    ),
    spec!(
        "zrangebyscore",
        -4,
        ["readonly"],
        K1,
        "sorted-set",
        true,
        zsets::zrange,
        "Returns members in a range of scores (LIMIT, WITHSCORES)."
    ),
    spec!(
        "zrevrangebyscore",
        -4,
        ["readonly"],
        K1,
        "sorted-set",
        true,
        zsets::zrange,
        "Returns members in a range of scores, by descending score."
    ),
    spec!(
        "zrangebylex",
        -4,
        ["readonly"],
        K1,
        "sorted-set",
        true,
        zsets::zrange,
        "Returns members in a lexicographical range (LIMIT)."
    ),
    spec!(
        "zrevrangebylex",
        -4,
        ["readonly"],
        K1,
        "sorted-set",
        true,
        zsets::zrange,
        "Returns members in a lexicographical range, in reverse order."
    ),
    spec!(
        "zcount",
        4,
        ["readonly", "fast"],
        K1,
        "sorted-set",
        true,
        zsets::zcount,
        "Returns the number of members in a range of scores."
    ),
    spec!(
        "zlexcount",
        4,
        ["readonly", "fast"],
        K1,
        "sorted-set",
        true,
        zsets::zcount,
        "Returns the number of members in a lexicographical range."
    ),
    spec!(
        "zpopmin",
        -2,
        ["write", "fast"],
        K1,
        "sorted-set",
        true,
        zsets::zpop,
        "Removes and returns the members with the lowest scores."
    ),
    spec!(
        "zpopmax",
        -2,
        ["write", "fast"],
        K1,
        "sorted-set",
        true,
        zsets::zpop,
        "Removes and returns the members with the highest scores."
    ),
    spec!(
        "zremrangebyrank",
        4,
        ["write"],
        K1,
        "sorted-set",
        true,
        zsets::zremrange,
        "Removes the members in a range of ranks (the number removed)."
    ),
    spec!(
        "zremrangebyscore",
        4,
        ["write"],
        K1,
        "sorted-set",
        true,
        zsets::zremrange,
        "Removes the members in a range of scores (the number removed)."
    ),
    spec!(
        "zremrangebylex",
        4,
        ["write"],
        K1,
        "sorted-set",
        true,
        zsets::zremrange,
        "Removes the members in a lexicographical range (the number removed)."
    ),
    spec!(
        "zunion",
        -3,
        ["readonly", "movablekeys"],
        NK,
        "sorted-set",
        true,
        zsets::zalgebra,
        "Returns the union of sorted sets or sets (WEIGHTS, AGGREGATE, WITHSCORES)."
    ),
    spec!(
        "zinter",
        -3,
        ["readonly", "movablekeys"],
        NK,
        "sorted-set",
        true,
        zsets::zalgebra,
        "Returns the intersection of sorted sets or sets (WEIGHTS, AGGREGATE, WITHSCORES)."
    ),
    spec!(
        "zdiff",
        -3,
        ["readonly", "movablekeys"],
        NK,
        "sorted-set",
        true,
        zsets::zalgebra,
        "Returns the members of the first sorted set not in the others (WITHSCORES)."
    ),
    spec!(
        "zunionstore",
        -4,
        ["write", "denyoom", "movablekeys"],
        K1,
        "sorted-set",
        true,
        zsets::zalgebra_store,
        "Stores the union of sorted sets or sets in a key (its size)."
    ),
    spec!(
        "zinterstore",
        -4,
        ["write", "denyoom", "movablekeys"],
        K1,
        "sorted-set",
        true,
        zsets::zalgebra_store,
        "Stores the intersection of sorted sets or sets in a key (its size)."
    ),
    spec!(
        "zdiffstore",
        -4,
        ["write", "denyoom", "movablekeys"],
        K1,
        "sorted-set",
        true,
        zsets::zalgebra_store,
        "Stores the difference of sorted sets in a key (its size)."
    ),
    spec!(
        "zscan",
        -3,
        ["readonly"],
        K1,
        "sorted-set",
        true,
        zsets::zscan,
        "Iterates over the members and scores of a sorted set (MATCH, COUNT)."
    ),
    spec!(
        "zintercard",
        -3,
        ["readonly", "movablekeys"],
        NK,
        "sorted-set",
        true,
        zsets::zintercard,
        "Returns the size of the intersection of sorted sets or sets (LIMIT)."
    ),
    spec!(
        "zrandmember",
        -2,
        ["readonly"],
        K1,
        "sorted-set",
        true,
        zsets::zrandmember,
        "Returns random members of a sorted set (a negative count may repeat them; WITHSCORES)."
    ),
    spec!(
        "bzpopmin",
        -3,
        ["write", "blocking"],
        (1, -2, 1),
        "sorted-set",
        true,
        zsets::bzpop,
        "ZPOPMIN of the first non-empty sorted set, blocking until one is."
    ),
    spec!(
        "bzpopmax",
        -3,
        ["write", "blocking"],
        (1, -2, 1),
        "sorted-set",
        true,
        zsets::bzpop,
        "ZPOPMAX of the first non-empty sorted set, blocking until one is."
    ),
    spec!(
        "bzmpop",
        -5,
        ["write", "blocking", "movablekeys"],
        NK,
        "sorted-set",
        true,
        zsets::bzmpop,
        "ZMPOP, blocking until a sorted set has members."
    ),
    spec!(
        "zmpop",
        -4,
        ["write", "movablekeys"],
        NK,
        "sorted-set",
        true,
        zsets::zmpop,
        "Removes and returns members of the first non-empty sorted set (MIN, MAX, COUNT)."
    ),
    spec!(
        "scan",
        -2,
        ["readonly"],
        NK,
        "generic",
        true,
        keys::scan,
        "Iterates over the key names in the database, in key order."
    ),
    spec!(
        "dbsize",
        1,
        ["readonly", "fast"],
        NK,
        "server",
        true,
        keys::dbsize,
        "Returns the number of keys in the database (approximate: a cached full count)."
    ),
    spec!(
        "ping",
        -1,
        ["fast"],
        NK,
        "connection",
        false,
        conn::ping,
        "Returns the server's liveliness response."
    ),
    spec!(
        "echo",
        2,
        ["fast"],
        NK,
        "connection",
        false,
        conn::echo,
        "Returns the given string."
    ),
    spec!(
        "hello",
        -1,
        ["noscript", "loading", "stale", "fast", "no_auth"],
        NK,
        "connection",
        false,
        conn::hello,
        "Handshakes with the server (RESP2 or RESP3)."
    ),
    spec!(
        "auth",
        -2,
        ["noscript", "loading", "stale", "fast", "no_auth"],
        NK,
        "connection",
        false,
        conn::auth,
        "Authenticates the connection."
    ),
    spec!(
        "select",
        2,
        ["loading", "stale", "fast"],
        NK,
        "connection",
        false,
        conn::select,
        "Changes the selected database (only database 0 exists)."
    ),
    spec!(
        "client",
        -2,
        ["noscript", "loading", "stale"],
        NK,
        "connection",
        false,
        conn::client,
        "CLIENT ID, GETNAME, SETNAME, INFO, LIST, SETINFO."
    ),
    spec!(
        "multi",
        1,
        ["noscript", "loading", "stale", "fast"],
        NK,
        "transactions",
        false,
        multi::multi,
        "Starts a transaction: the following commands are queued until EXEC."
    ),
    spec!(
        "exec",
        1,
        ["noscript", "loading", "stale"],
        NK,
        "transactions",
        true,
        multi::exec,
        "Runs the queued commands with no other client's command between them."
    ),
    spec!(
        "discard",
        1,
        ["noscript", "loading", "stale", "fast"],
        NK,
        "transactions",
        false,
        multi::discard,
        "Drops the queued commands and the watched keys."
    ),
    spec!(
        "watch",
        -2,
        ["noscript", "loading", "stale", "fast"],
        KALL,
        "transactions",
        true,
        multi::watch,
        "Makes the next EXEC abort if one of these keys changes meanwhile."
    ),
    spec!(
        "unwatch",
        1,
        ["noscript", "loading", "stale", "fast"],
        NK,
        "transactions",
        false,
        multi::unwatch,
        "Forgets the watched keys."
    ),
    spec!(
        "reset",
        1,
        ["noscript", "loading", "stale", "fast", "no_auth"],
        NK,
        "connection",
        false,
        conn::reset,
        "Resets the connection (transaction, watches, protocol, name, authentication)."
    ),
    spec!(
        "quit",
        -1,
        ["noscript", "loading", "stale", "fast", "no_auth"],
        NK,
        "connection",
        false,
        conn::quit,
        "Closes the connection."
    ),
    spec!(
        "info",
        -1,
        ["loading", "stale"],
        NK,
        "server",
        true,
        admin::info,
        "Returns information and statistics about the server and the store."
    ),
    spec!(
        "config",
        -2,
        ["loading", "stale"],
        NK,
        "server",
        false,
        admin::config,
        "CONFIG GET, SET, RESETSTAT, REWRITE."
    ),
    spec!(
        "command",
        -1,
        ["loading", "stale"],
        NK,
        "server",
        false,
        admin::command,
        "Returns detailed information about commands (COUNT, DOCS, INFO, LIST)."
    ),
    spec!(
        "subscribe",
        -2,
        ["pubsub", "noscript", "loading", "stale"],
        NK,
        "pubsub",
        false,
        pubsub::subscribe,
        "Listens for messages published to channels."
    ),
    spec!(
        "unsubscribe",
        -1,
        ["pubsub", "noscript", "loading", "stale"],
        NK,
        "pubsub",
        false,
        pubsub::unsubscribe,
        "Stops listening to channels (all when none is named)."
    ),
    spec!(
        "psubscribe",
        -2,
        ["pubsub", "noscript", "loading", "stale"],
        NK,
        "pubsub",
        false,
        pubsub::subscribe,
        "Listens for messages published to channels matching patterns."
    ),
    spec!(
        "punsubscribe",
        -1,
        ["pubsub", "noscript", "loading", "stale"],
        NK,
        "pubsub",
        false,
        pubsub::unsubscribe,
        "Stops listening to patterns (all when none is named)."
    ),
    spec!(
        "monitor",
        1,
        ["admin", "noscript", "loading", "stale"],
        NK,
        "server",
        false,
        pubsub::monitor,
        "Reports every command the server runs, as it runs it."
    ),
    spec!(
        "publish",
        3,
        ["pubsub", "loading", "stale", "fast"],
        NK,
        "pubsub",
        false,
        pubsub::publish,
        "Posts a message to a channel (the number of receivers)."
    ),
    spec!(
        "ssubscribe",
        -2,
        ["pubsub", "noscript", "loading", "stale"],
        NK,
        "pubsub",
        false,
        pubsub::subscribe,
        "Listens for messages published to shard channels."
    ),
    spec!(
        "sunsubscribe",
        -1,
        ["pubsub", "noscript", "loading", "stale"],
        NK,
        "pubsub",
        false,
        pubsub::unsubscribe,
        "Stops listening to shard channels (all when none is named)."
    ),
    spec!(
        "spublish",
        3,
        ["pubsub", "loading", "stale", "fast"],
        NK,
        "pubsub",
        false,
        pubsub::publish,
        "Posts a message to a shard channel (the number of receivers)."
    ),
    spec!(
        "pubsub",
        -2,
        ["pubsub", "loading", "stale"],
        NK,
        "pubsub",
        false,
        pubsub::pubsub,
        "PUBSUB CHANNELS, NUMSUB, NUMPAT."
    ),
    spec!(
        "slowlog",
        -2,
        ["admin", "loading", "stale"],
        NK,
        "server",
        false,
        monitor::slowlog,
        "SLOWLOG GET, LEN, RESET: the commands that took long."
    ),
    spec!(
        "latency",
        -2,
        ["admin", "noscript", "loading", "stale"],
        NK,
        "server",
        false,
        monitor::latency,
        "LATENCY LATEST, HISTORY, RESET: the latency monitor's samples."
    ),
    spec!(
        "bgsave",
        -1,
        ["admin", "noscript", "no_async_loading"],
        NK,
        "server",
        true,
        saves::bgsave,
        "Starts a checkpoint of the store in the background (SCHEDULE)."
    ),
    spec!(
        "save",
        1,
        ["admin", "noscript", "no_async_loading", "no_multi"],
        NK,
        "server",
        true,
        saves::save,
        "Makes a checkpoint of the store and answers when it is complete."
    ),
    spec!(
        "lastsave",
        1,
        ["fast", "loading", "stale"],
        NK,
        "server",
        false,
        saves::lastsave,
        "Returns the unix time of the last successful checkpoint."
    ),
    spec!(
        "role",
        1,
        ["noscript", "loading", "stale", "fast"],
        NK,
        "server",
        false,
        replication::role,
        "Returns the replication role, offset and replicas or primary."
    ),
    spec!(
        "replicaof",
        3,
        ["admin", "noscript", "stale", "no_async_loading"],
        NK,
        "server",
        true,
        replication::replicaof,
        "Makes the server a replica of another (host port), or a primary (NO ONE)."
    ),
    spec!(
        "slaveof",
        3,
        ["admin", "noscript", "stale", "no_async_loading"],
        NK,
        "server",
        true,
        replication::replicaof,
        "Makes the server a replica of another, or a primary (REPLICAOF's old name)."
    ),
    spec!(
        "replconf",
        -1,
        ["admin", "noscript", "loading", "stale", "allow_busy"],
        NK,
        "server",
        false,
        replication::replconf,
        "A replica's settings, told to its primary before PSYNC."
    ),
    spec!(
        "psync",
        -3,
        ["admin", "noscript", "no_async_loading", "no_multi"],
        NK,
        "server",
        false,
        replication::psync,
        "Starts a replica's replication stream."
    ),
    spec!(
        "sync",
        1,
        ["admin", "noscript", "no_async_loading", "no_multi"],
        NK,
        "server",
        false,
        replication::sync,
        "Redis's replication before PSYNC (refused)."
    ),
    spec!(
        "wait",
        3,
        ["noscript"],
        NK,
        "generic",
        false,
        replication::wait,
        "Waits until replicas acknowledged the writes made before it."
    ),
    spec!(
        "time",
        1,
        ["loading", "stale", "fast"],
        NK,
        "server",
        false,
        admin::time,
        "Returns the server time."
    ),
    spec!(
        "shutdown",
        -1,
        ["admin", "noscript", "loading", "stale"],
        NK,
        "server",
        false,
        admin::shutdown,
        "Flushes the store and stops the server."
    ),
];

/// Finds a command by name, ignoring case.
pub(crate) fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    COMMANDS
        .iter()
        .find(|c| c.name.len() == name.len() && c.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Key positions of a command by name, for the parser's key-length check at the header.
pub(crate) fn key_positions(name: &[u8]) -> Option<(i32, i32, i32)> {
    lookup(name).map(|spec| spec.keys).filter(|k| k.0 > 0)
}

/// True when a CLIENT PAUSE holds `args`: every command but CLIENT's under ALL, the
/// writes (and EXEC, which may write) under WRITE.
pub(crate) fn held_by_pause(args: &[Bytes], all: bool) -> bool {
    let Some(spec) = args.first().and_then(|n| lookup(n)) else {
        return all;
    };
    if spec.name == "client" {
        return false;
    }
    all || spec.flags.contains(&"write") || spec.name == "exec"
}

/// True when running `args` needs the store (and so a blocking thread).
pub(crate) fn needs_io(args: &[Bytes]) -> bool {
    args.first()
        .and_then(|n| lookup(n))
        .is_some_and(|spec| spec.io)
}

/// Quotes up to 128 bytes of a client-supplied string for an error message, the way Redis
/// does in "unknown command" errors.
pub(crate) fn quote_arg(a: &[u8]) -> String {
    let s = String::from_utf8_lossy(&a[..a.len().min(128)]).into_owned();
    s.replace(['\r', '\n'], " ")
}

/// Executes one command and writes its reply.
pub(crate) fn execute(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Flow {
    ServerStats::bump(&ctx.shared.stats.commands, 1);
    let Some(name) = args.first() else {
        return Flow::Continue;
    };
    let Some(spec) = lookup(name) else {
        multi::refuse(ctx);
        let mut msg = format!(
            "ERR unknown command '{}', with args beginning with: ",
            quote_arg(name)
        );
        for a in args.iter().skip(1).take(16) {
            msg.push_str(&format!("'{}' ", quote_arg(a)));
        }
        ctx.out.error(&msg);
        return Flow::Continue;
    };
    let n = args.len() as i32;
    if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
        multi::refuse(ctx);
        ctx.out.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            spec.name
        ));
        return Flow::Continue;
    }
    if !ctx.conn.authed && !spec.no_auth() {
        multi::refuse(ctx);
        ctx.out.error("NOAUTH Authentication required.");
        return Flow::Continue;
    }
    if ctx.conn.multi.is_some() && !multi::runs_inside_multi(spec.name) {
        return multi::queue(ctx, args);
    }
    if ctx.conn.subscribed_mode() && !pubsub::allowed_when_subscribed(spec.name) {
        ctx.out.error(&format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / \
             RESET are allowed in this context",
            spec.name
        ));
        return Flow::Continue;
    }
    let replica = ctx.shared.replication.is_replica();
    if replica && spec.flags.contains(&"write") {
        multi::refuse(ctx);
        ctx.out
            .error("READONLY You can't write against a read only replica.");
        return Flow::Continue;
    }
    // A read that would index an unindexed sorted set writes: not on a replica.
    zsets::allow_index_builds(!replica);
    *ctx.conn.info.last_cmd.lock() = spec.name;
    if ctx.shared.pubsub.monitoring() && !matches!(spec.name, "auth" | "hello" | "monitor") {
        let line = pubsub::monitor_line(
            std::time::SystemTime::now(),
            &ctx.conn.info.addr.to_string(),
            args,
        );
        ctx.shared.pubsub.report(line);
    }
    let started = std::time::Instant::now();
    let flow = match (spec.handler)(ctx, args) {
        Ok(flow) => flow,
        Err(e) => {
            ctx.out.error(&e.0);
            Flow::Continue
        }
    };
    let config = ctx.shared.config.load();
    ctx.shared
        .monitor
        .record(&config, &ctx.conn.info, args, started.elapsed());
    flow
}

/// Records commands run together outside [`execute`] (a GET or a run of SETs answered on
/// the event loop, a run of SETs written as one batch) in SLOWLOG and the latency monitor,
/// as `execute` records one: each with an equal share of the time they took together.
fn record_run<'a>(
    shared: &Shared,
    conn: &ConnState,
    run: impl ExactSizeIterator<Item = &'a Args>,
    took: std::time::Duration,
) {
    let share = took / run.len().max(1) as u32;
    let config = shared.config.load();
    for args in run {
        shared.monitor.record(&config, &conn.info, args, share);
    }
}

/// True for `CLIENT REPLY ON`, whose reply is sent even while replies are off.
fn turns_replies_on(args: &[Bytes]) -> bool {
    args.len() == 3
        && args[0].eq_ignore_ascii_case(b"client")
        && args[1].eq_ignore_ascii_case(b"reply")
        && args[2].eq_ignore_ascii_case(b"on")
}

/// Runs one command whose reply is not sent (CLIENT REPLY OFF or SKIP): produced whole
/// into a writer that is dropped.
fn execute_silently(shared: &Shared, conn: &mut ConnState, args: &[Bytes]) -> Flow {
    let skip = conn.replies == Replies::Skip;
    let mut scratch = ReplyWriter::with_limit(conn.proto, shared.config.load().output_limit);
    let flow = execute(
        &mut Ctx {
            shared,
            conn,
            out: &mut scratch,
        },
        args,
    );
    while let Some(rest) = conn.resume.take() {
        if scratch.overflowed() {
            break;
        }
        conn.resume = rest.resume(shared, &mut scratch, usize::MAX);
    }
    if skip && conn.replies == Replies::Skip {
        conn.replies = Replies::On;
    }
    flow
}

/// Most commands merged into one write batch (bounds the batch's memory and the time a
/// merged group holds the write path).
const MAX_MERGED: usize = 512;
/// Most key+value bytes merged into one write batch.
const MAX_MERGED_BYTES: usize = 8 * 1024 * 1024;

/// True when `a` and `b` are both counter commands (INCR, INCRBY, DECR, DECRBY) on the
/// same key.
fn same_key_counters(a: &[Bytes], b: Option<&Args>) -> bool {
    match (
        strings::counter_delta(a),
        b.and_then(|b| strings::counter_delta(b)),
    ) {
        (Some((ka, _)), Some((kb, _))) => ka == kb,
        _ => false,
    }
}

/// The one write batch of a run of [`mergeable`] commands.
fn set_batch<'a>(run: impl IntoIterator<Item = &'a Args>) -> tierkv::WriteBatch {
    let mut batch = tierkv::WriteBatch::new();
    for cmd in run {
        for kv in cmd[1..].chunks_exact(2) {
            batch.put(
                crate::keyspace::meta_key(&kv[0]),
                crate::keyspace::str_value(&kv[1]),
            );
        }
    }
    batch
}

/// A plain `SET key value` or a well-formed MSET: the commands a pipeline may merge.
fn mergeable(args: &[Bytes]) -> bool {
    let Some(name) = args.first() else {
        return false;
    };
    (args.len() == 3 && name.eq_ignore_ascii_case(b"set"))
        || (args.len() >= 3 && args.len() % 2 == 1 && name.eq_ignore_ascii_case(b"mset"))
}

/// Runs pipelined commands in order until they are done, the connection must close, or
/// `reply_chunk` bytes of replies are pending (the rest stays in `pending` for the next
/// call, after the caller has written these replies out). A multi-element reply stops at
/// the same bound between elements and leaves its rest in `conn.resume`, which runs first
/// at the next call: a connection never holds much more than `reply_chunk` of replies
/// (one element, a value, may pass it), and never more than the writer's hard limit.
///
/// A run of consecutive plain GETs is answered by one batched read holding at most the
/// room left under `reply_chunk` plus one value (`strings::get_run`); the GETs it leaves
/// run next.
///
/// A run of consecutive plain SETs and MSETs is applied as one atomic write batch: one WAL
/// record, and with `--sync` one fsync, instead of one per command. That is a valid order
/// of events: none of their replies is sent before all of them are applied, so no client
/// can tell they were not applied one by one at the same instant.
pub(crate) fn run_pipeline(
    shared: &Shared,
    conn: &mut ConnState,
    out: &mut ReplyWriter,
    pending: &mut VecDeque<Args>,
    reply_chunk: usize,
) -> Flow {
    let flow = run_commands(shared, conn, out, pending, reply_chunk);
    if out.overflowed() {
        Flow::Overflow
    } else {
        flow
    }
}

fn run_commands(
    shared: &Shared,
    conn: &mut ConnState,
    out: &mut ReplyWriter,
    pending: &mut VecDeque<Args>,
    reply_chunk: usize,
) -> Flow {
    if let Some(rest) = conn.resume.take() {
        conn.resume = rest.resume(shared, out, reply_chunk);
        if conn.resume.is_some() || out.len() >= reply_chunk {
            return Flow::Continue;
        }
    }
    // Store commands run holding the transaction lock shared (see `multi`).
    let mut isolation = pending
        .iter()
        .any(|a| needs_io(a))
        .then(|| shared.transactions.read());
    while let Some(args) = pending.pop_front() {
        // Inside MULTI every command goes to the dispatcher, which queues it.
        // Merged runs skip the dispatcher: not while a MONITOR must see every command.
        let merge = conn.authed
            && conn.multi.is_none()
            && conn.replies == Replies::On
            && !shared.pubsub.monitoring()
            && !shared.replication.is_replica();
        if conn.replies != Replies::On && !turns_replies_on(&args) {
            let flow = execute_silently(shared, conn, &args);
            if flow != Flow::Continue {
                return flow;
            }
        } else if merge && same_key_counters(&args, pending.front()) {
            // A run of counter commands on one key (redis-benchmark's INCR test, a client
            // pipelining increments) becomes one rmw instead of one per command: same-key
            // rmws cannot share a group commit, so this is what makes hot counters fast.
            let mut run = vec![args];
            while run.len() < MAX_MERGED && same_key_counters(&run[0], pending.front()) {
                run.extend(pending.pop_front());
            }
            let deltas: Vec<_> = run
                .iter()
                .filter_map(|a| strings::counter_delta(a).map(|(_, d)| d))
                .collect();
            ServerStats::bump(&shared.stats.commands, run.len() as u64);
            *conn.info.last_cmd.lock() = "incr";
            let mut ctx = Ctx { shared, conn, out };
            if let Err(e) = strings::counter_run(&mut ctx, &run[0][1], &deltas) {
                for _ in &run {
                    ctx.out.error(&e.0);
                }
            }
        } else if merge
            && strings::plain_get(&args)
            && pending.front().is_some_and(|a| strings::plain_get(a))
        {
            // A run of plain GETs (a client pipelining reads) is answered by one batched
            // read: their disk reads are in flight together instead of one at a time.
            let mut run = vec![args];
            while run.len() < strings::MAX_KEYS_PER_READ {
                match pending.front() {
                    Some(a) if strings::plain_get(a) => run.extend(pending.pop_front()),
                    _ => break,
                }
            }
            let keys: Vec<Bytes> = run.iter().map(|a| a[1].clone()).collect();
            let room = reply_chunk.saturating_sub(out.len());
            let answered = strings::get_run(shared, out, &keys, room);
            ServerStats::bump(&shared.stats.commands, answered as u64);
            *conn.info.last_cmd.lock() = "get";
            // The GETs past the read's byte bound run next, in order.
            for rest in run.drain(answered..).rev() {
                pending.push_front(rest);
            }
        } else if merge && mergeable(&args) && pending.front().is_some_and(|a| mergeable(a)) {
            let mut run = vec![args];
            let mut bytes = 0usize;
            while run.len() < MAX_MERGED && bytes < MAX_MERGED_BYTES {
                match pending.front() {
                    Some(a) if mergeable(a) => {
                        bytes += a.iter().map(|x| x.len()).sum::<usize>();
                        run.extend(pending.pop_front());
                    }
                    _ => break,
                }
            }
            let batch = set_batch(&run);
            let wopts = tierkv::WriteOptions {
                sync: shared.config.load().sync,
            };
            let started = std::time::Instant::now();
            if shared.db().write_opt(batch, &wopts).is_ok() {
                record_run(shared, conn, run.iter(), started.elapsed());
                ServerStats::bump(&shared.stats.commands, run.len() as u64);
                *conn.info.last_cmd.lock() = "set";
                for _ in &run {
                    out.ok();
                }
                continue;
            }
            // One bad command (e.g. an oversized key) failed the whole batch: apply them
            // one by one so each gets its own reply.
            for cmd in run {
                let flow = execute(&mut Ctx { shared, conn, out }, &cmd);
                if flow != Flow::Continue {
                    return flow;
                }
            }
        } else if conn.multi.is_some() && args[0].eq_ignore_ascii_case(b"exec") {
            // No other client's command between the queued ones: EXEC holds the lock
            // exclusively (this pipeline's shared hold let go first).
            drop(isolation.take());
            let exclusive = shared.transactions.write();
            let flow = execute(&mut Ctx { shared, conn, out }, &args);
            drop(exclusive);
            isolation.replace(shared.transactions.read());
            if flow != Flow::Continue {
                return flow;
            }
        } else {
            let flow = execute(&mut Ctx { shared, conn, out }, &args);
            if flow != Flow::Continue {
                return flow;
            }
        }
        if out.len() >= reply_chunk
            || conn.resume.is_some()
            || conn.blocked.is_some()
            || conn.wait.is_some()
            || out.overflowed()
        {
            break;
        }
    }
    Flow::Continue
}

/// Parses an integer argument (Redis's strict rules) or fails with Redis's error text.
pub(crate) fn int_arg(a: &[u8]) -> Result<i64, CmdError> {
    crate::resp::parse_int(a).ok_or_else(|| CmdError::err(NOT_INT))
}
