//! Publish/subscribe: the registry of subscribed connections (channels and glob patterns)
//! and delivery. PUBLISH hands each subscriber its message through the subscriber's queue;
//! the subscriber's connection writes its queue out whenever it waits for its socket
//! (`server::connection`), so a publisher never waits for a slow subscriber. A subscriber
//! whose queue passes its connection's output limit is disconnected, as Redis's
//! `client-output-buffer-limit pubsub` does.
//!
//! Owns the registry and the queues; the commands are `commands::pubsub`'s.

use crate::client::ClientInfo;
use crate::glob::Glob;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use tokio::sync::mpsc;

/// A message on its way to a subscriber.
#[derive(Debug)]
pub(crate) enum Push {
    Message {
        channel: Bytes,
        payload: Bytes,
    },
    /// A message on a shard channel (SPUBLISH).
    SMessage {
        channel: Bytes,
        payload: Bytes,
    },
    /// A command line for a MONITOR connection.
    Monitor(Bytes),
    PMessage {
        pattern: Bytes,
        channel: Bytes,
        payload: Bytes,
    },
}

impl Push {
    fn bytes(&self) -> usize {
        match self {
            Push::Message { channel, payload } | Push::SMessage { channel, payload } => {
                channel.len() + payload.len() + 32
            }
            Push::Monitor(line) => line.len() + 8,
            Push::PMessage {
                pattern,
                channel,
                payload,
            } => pattern.len() + channel.len() + payload.len() + 48,
        }
    }
}

/// A subscribed connection's end of its queue, as the registry holds it.
#[derive(Clone)]
pub(crate) struct Subscriber {
    tx: mpsc::UnboundedSender<Push>,
    /// Bytes queued and not yet written.
    queued: Arc<AtomicUsize>,
    limit: usize,
    info: Arc<ClientInfo>,
}

impl Subscriber {
    fn send(&self, p: Push) -> bool {
        let n = p.bytes();
        if self.queued.fetch_add(n, Relaxed) + n > self.limit {
            tracing::warn!(
                "client {} ({}): pub/sub messages pass the output limit of {} bytes: \
                 closing the connection",
                self.info.id,
                self.info.addr,
                self.limit
            );
            self.info.control.kill();
            return false;
        }
        self.tx.send(p).is_ok()
    }
}

/// A connection's subscriptions and its queue's receiving end.
pub(crate) struct Subscriptions {
    pub channels: std::collections::BTreeSet<Bytes>,
    pub patterns: std::collections::BTreeSet<Bytes>,
    /// Shard channels (SSUBSCRIBE): a namespace of their own, counted apart.
    pub shard_channels: std::collections::BTreeSet<Bytes>,
    /// The connection ran MONITOR: every client's commands come to its queue.
    pub monitor: bool,
    pub rx: mpsc::UnboundedReceiver<Push>,
    queued: Arc<AtomicUsize>,
    me: Subscriber,
    /// The registry its subscriptions are in (left when the connection's state goes).
    registry: Arc<PubSub>,
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        self.registry.forget(self);
    }
}

impl Subscriptions {
    /// Subscriptions of the connection `info` in `registry`, whose queue may hold `limit`
    /// bytes.
    pub fn new(registry: Arc<PubSub>, info: Arc<ClientInfo>, limit: usize) -> Subscriptions {
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        Subscriptions {
            channels: Default::default(),
            patterns: Default::default(),
            shard_channels: Default::default(),
            monitor: false,
            rx,
            queued: queued.clone(),
            me: Subscriber {
                tx,
                queued,
                limit,
                info,
            },
            registry,
        }
    }

    /// Channels and patterns, together (what (UN)SUBSCRIBE replies count).
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Any subscription at all (shard channels and MONITOR included).
    pub fn any(&self) -> bool {
        self.monitor || self.count() + self.shard_channels.len() > 0
    }

    /// Marks `p` as written (its bytes leave the queue's count).
    pub fn written(&self, p: &Push) {
        self.queued.fetch_sub(p.bytes(), Relaxed);
    }
}

/// A channel's or pattern's subscribers, by connection id.
type Subscribers = HashMap<u64, Subscriber>;

/// Every subscription of every connection.
#[derive(Default)]
pub(crate) struct PubSub {
    channels: Mutex<HashMap<Bytes, HashMap<u64, Subscriber>>>,
    shard: Mutex<HashMap<Bytes, HashMap<u64, Subscriber>>>,
    monitors: Mutex<Subscribers>,
    /// Connections in MONITOR (lets every command skip the lock when there are none).
    monitoring: AtomicUsize,
    patterns: Mutex<HashMap<Bytes, (Glob, Subscribers)>>,
}

impl PubSub {
    fn map(&self, shard: bool) -> &Mutex<HashMap<Bytes, HashMap<u64, Subscriber>>> {
        if shard {
            &self.shard
        } else {
            &self.channels
        }
    }

    /// Subscribes `s` to `channel` (a shard channel when `shard`).
    pub fn subscribe(&self, s: &Subscriptions, channel: &Bytes, shard: bool) {
        self.map(shard)
            .lock()
            .entry(channel.clone())
            .or_default()
            .insert(s.me.info.id, s.me.clone());
    }

    pub fn unsubscribe(&self, id: u64, channel: &[u8], shard: bool) {
        let mut ch = self.map(shard).lock();
        if let Some(subs) = ch.get_mut(channel) {
            subs.remove(&id);
            if subs.is_empty() {
                ch.remove(channel);
            }
        }
    }

    pub fn psubscribe(&self, s: &Subscriptions, pattern: &Bytes) {
        self.patterns
            .lock()
            .entry(pattern.clone())
            .or_insert_with(|| (Glob::new(pattern), HashMap::new()))
            .1
            .insert(s.me.info.id, s.me.clone());
    }

    pub fn punsubscribe(&self, id: u64, pattern: &[u8]) {
        let mut pats = self.patterns.lock();
        if let Some((_, subs)) = pats.get_mut(pattern) {
            subs.remove(&id);
            if subs.is_empty() {
                pats.remove(pattern);
            }
        }
    }

    /// Removes every subscription of connection `id` (it closed).
    pub fn forget(&self, s: &Subscriptions) {
        let id = s.me.info.id;
        for c in &s.channels {
            self.unsubscribe(id, c, false);
        }
        for c in &s.shard_channels {
            self.unsubscribe(id, c, true);
        }
        if s.monitor {
            let mut m = self.monitors.lock();
            m.remove(&id);
            self.monitoring.store(m.len(), Relaxed);
        }
        for p in &s.patterns {
            self.punsubscribe(id, p);
        }
    }

    /// Makes `s`'s connection a monitor.
    pub fn add_monitor(&self, s: &mut Subscriptions) {
        s.monitor = true;
        let mut m = self.monitors.lock();
        m.insert(s.me.info.id, s.me.clone());
        self.monitoring.store(m.len(), Relaxed);
    }

    /// True when a connection is in MONITOR: commands are then reported to it, and take
    /// the dispatcher's path (none skips it on the event loop or merged into a batch).
    pub fn monitoring(&self) -> bool {
        self.monitoring.load(Relaxed) > 0
    }

    /// Reports a command line to every monitor.
    pub fn report(&self, line: Bytes) {
        for s in self.monitors.lock().values() {
            s.send(Push::Monitor(line.clone()));
        }
    }

    /// Delivers `payload` to the subscribers of shard channel `channel`; returns how many
    /// received it.
    pub fn spublish(&self, channel: &Bytes, payload: &Bytes) -> usize {
        let mut n = 0;
        if let Some(subs) = self.shard.lock().get(channel) {
            for s in subs.values() {
                n += s.send(Push::SMessage {
                    channel: channel.clone(),
                    payload: payload.clone(),
                }) as usize;
            }
        }
        n
    }

    /// Delivers `payload` to the subscribers of `channel` and of the patterns it matches;
    /// returns how many received it.
    pub fn publish(&self, channel: &Bytes, payload: &Bytes) -> usize {
        let mut n = 0;
        if let Some(subs) = self.channels.lock().get(channel) {
            for s in subs.values() {
                n += s.send(Push::Message {
                    channel: channel.clone(),
                    payload: payload.clone(),
                }) as usize;
            }
        }
        for (pattern, (glob, subs)) in self.patterns.lock().iter() {
            if glob.matches(channel) {
                for s in subs.values() {
                    n += s.send(Push::PMessage {
                        pattern: pattern.clone(),
                        channel: channel.clone(),
                        payload: payload.clone(),
                    }) as usize;
                }
            }
        }
        n
    }

    /// Channels (shard channels when `shard`) with at least one subscriber, matching
    /// `pattern` (all for None).
    pub fn channels(&self, pattern: Option<&[u8]>, shard: bool) -> Vec<Bytes> {
        let glob = pattern.map(Glob::new);
        let mut v: Vec<Bytes> = self
            .map(shard)
            .lock()
            .keys()
            .filter(|c| glob.as_ref().is_none_or(|g| g.matches(c)))
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// Subscribers of `channel` (patterns not counted, as in Redis).
    pub fn numsub(&self, channel: &[u8], shard: bool) -> usize {
        self.map(shard).lock().get(channel).map_or(0, |s| s.len())
    }

    /// Patterns with at least one subscriber.
    pub fn numpat(&self) -> usize {
        self.patterns.lock().len()
    }
}
