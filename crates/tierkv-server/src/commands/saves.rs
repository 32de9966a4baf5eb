//! BGSAVE, SAVE and LASTSAVE: checkpoints of the running store (`crate::backup`), where
//! Redis writes an RDB file. One checkpoint runs at a time.

use super::{CmdError, CmdResult, Ctx, Flow, SYNTAX};
use crate::backup::{checkpoint, record};
use bytes::Bytes;
use std::sync::atomic::Ordering::Relaxed;

/// BGSAVE [SCHEDULE]: starts a checkpoint and answers at once.
pub(super) fn bgsave(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let schedule = match args.get(1) {
        None => false,
        Some(a) if a.eq_ignore_ascii_case(b"schedule") && args.len() == 2 => true,
        Some(_) => return Err(CmdError::err(SYNTAX)),
    };
    let saves = ctx.shared.saves.clone();
    if !saves.start() {
        if schedule {
            saves.schedule();
            ctx.out.simple("Background saving scheduled");
            return Ok(Flow::Continue);
        }
        return Err(CmdError::err("Background save already in progress"));
    }
    let db = ctx.shared.db().clone();
    let config = ctx.shared.config.load_full();
    let spawned = std::thread::Builder::new()
        .name("tierkv-bgsave".into())
        .spawn(move || loop {
            let r = checkpoint(&db, &config);
            record(&saves, &r);
            if !saves.take_scheduled() {
                saves.finish();
                return;
            }
        });
    if let Err(e) = spawned {
        ctx.shared.saves.finish();
        return Err(CmdError::err(format!("cannot start the checkpoint: {e}")));
    }
    ctx.out.simple("Background saving started");
    Ok(Flow::Continue)
}

/// SAVE: a checkpoint, answered when it is complete.
pub(super) fn save(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    let saves = &ctx.shared.saves;
    if !saves.start() {
        return Err(CmdError::err("Background save already in progress"));
    }
    let r = checkpoint(&ctx.shared.db(), &ctx.shared.config.load());
    record(saves, &r);
    saves.finish();
    r.map_err(|e| CmdError::err(format!("checkpoint failed: {e}")))?;
    ctx.out.ok();
    Ok(Flow::Continue)
}

/// LASTSAVE: unix seconds of the last successful checkpoint (the server's start before
/// any).
pub(super) fn lastsave(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> CmdResult {
    ctx.out.int(ctx.shared.saves.last_ok.load(Relaxed) as i64);
    Ok(Flow::Continue)
}
