//! REPLICAOF (SLAVEOF), REPLCONF, PSYNC, SYNC, WAIT and ROLE: the commands of
//! replication (`crate::replication` runs it).

use super::{int_arg, CmdError, CmdResult, Ctx, Flow, SYNTAX};
use crate::replication::primary::Psync;
use crate::replication::Role;
use crate::state::WaitFor;
use bytes::Bytes;
use std::sync::Arc;

fn text(a: &[u8]) -> String {
    String::from_utf8_lossy(a).into_owned()
}

/// REPLICAOF host port | NO ONE.
pub(super) fn replicaof(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let spec = format!("{} {}", text(&args[1]), text(&args[2]));
    let target = crate::params::parse_replicaof(&spec).map_err(CmdError::err)?;
    let shared = ctx.shared;
    let rep = &shared.replication;
    match &target {
        None => {
            let db = shared.db();
            if rep.stop_following(db.latest_sequence()) {
                // Hash versions continue above every one the primary handed out.
                let versions = crate::keyspace::open(&db).map_err(CmdError::err)?;
                shared.versions.adopt(versions);
                tracing::warn!(
                    "replication: now a primary (REPLICAOF NO ONE) at sequence {}",
                    db.latest_sequence()
                );
            }
        }
        Some((host, port)) => {
            if rep.primary().as_ref() == Some(&(host.clone(), *port)) {
                ctx.out.simple("OK Already connected to specified master");
                return Ok(Flow::Continue);
            }
            let me = shared
                .host()
                .ok_or_else(|| CmdError::err("server is shutting down"))?;
            rep.start_following(me, host.clone(), *port);
            tracing::warn!("replication: following {host}:{port} (REPLICAOF)");
        }
    }
    let mut next = (**shared.config.load()).clone();
    next.replicaof = target;
    shared.config.store(Arc::new(next));
    ctx.out.ok();
    Ok(Flow::Continue)
}

/// REPLCONF option value ...: what a replica tells its primary before PSYNC.
pub(super) fn replconf(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::err(SYNTAX));
    }
    for pair in args[1..].chunks_exact(2) {
        if pair[0].eq_ignore_ascii_case(b"listening-port") {
            ctx.conn.repl_port = text(&pair[1])
                .parse()
                .map_err(|_| CmdError::err("invalid listening-port"))?;
        }
        // capa, ip-address, ack, getack: nothing to keep (acknowledgements come as
        // frames of the stream, docs/FORMAT.md).
    }
    ctx.out.ok();
    Ok(Flow::Continue)
}

/// PSYNC replid offset: the connection becomes the replica's stream.
pub(super) fn psync(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let offset = int_arg(&args[2])?;
    ctx.conn.psync = Some(Psync {
        replid: text(&args[1]),
        offset: u64::try_from(offset).ok(),
        listening_port: ctx.conn.repl_port,
    });
    Ok(Flow::Replicate)
}

/// SYNC: Redis's replication before PSYNC, which tierkv does not speak.
pub(super) fn sync(_ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::err(
        "tierkv replicates with PSYNC from a tierkv replica only (REPLICAOF on the replica)",
    ))
}

/// WAIT numreplicas timeout: answers once that many replicas acknowledged every write
/// made before it (or at the timeout in milliseconds, 0: none), with how many did.
pub(super) fn wait(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let rep = &ctx.shared.replication;
    if rep.is_replica() {
        return Err(CmdError::err("WAIT cannot be used with replica instances."));
    }
    let wanted = int_arg(&args[1])?;
    let timeout = int_arg(&args[2])?;
    if timeout < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    let offset = ctx.shared.db().latest_sequence();
    let have = rep.replicas_at(offset);
    let wanted = usize::try_from(wanted).unwrap_or(0);
    if have >= wanted || ctx.conn.in_exec {
        ctx.out.int(have as i64);
        return Ok(Flow::Continue);
    }
    let deadline = (timeout > 0)
        .then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout as u64));
    ctx.conn.wait = Some(WaitFor {
        offset,
        replicas: wanted,
        deadline,
    });
    Ok(Flow::Continue)
}

/// ROLE.
pub(super) fn role(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    let latest = ctx.shared.db().latest_sequence();
    let out = &mut *ctx.out;
    match ctx.shared.replication.role(latest) {
        Role::Primary { offset, replicas } => {
            out.array(3);
            out.bulk(b"master");
            out.int(offset as i64);
            out.array(replicas.len());
            for (ip, port, ack) in replicas {
                out.array(3);
                out.bulk(ip.as_bytes());
                out.bulk(port.to_string().as_bytes());
                out.bulk(ack.to_string().as_bytes());
            }
        }
        Role::Replica {
            host,
            port,
            state,
            offset,
        } => {
            out.array(5);
            out.bulk(b"slave");
            out.bulk(host.as_bytes());
            out.int(i64::from(port));
            out.bulk(state.as_bytes());
            out.int(offset as i64);
        }
    }
    Ok(Flow::Continue)
}
