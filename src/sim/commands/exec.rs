//! `exec UNIT -- CMD…`: a command in the unit's hook context, like
//! `juju exec`: the tools and JUJU_* context, no hook; what it staged lands
//! if it exits 0. Its exit status is ours.

use super::Ctx;
use crate::sim::error::Result;
use crate::sim::hookenv::Work;
use crate::sim::invoke;
use crate::sim::runner::{Capture, Spawn};

pub fn exec(ctx: &Ctx, unit: &str, cmd: &[String]) -> Result<u8> {
    let dir = &ctx.dir;
    let opened = dir.update(|m| {
        m.unit(unit)?;
        Ok(invoke::open(m, dir, unit, &Work::Exec, false))
    })?;
    // The tools dir is first on the hook's PATH: resolve the program there.
    let path = opened
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let program = resolve(&cmd[0], &path);
    let outcome = invoke::run_in(
        &opened,
        Spawn {
            program,
            args: cmd[1..].to_vec(),
            cwd: opened.charm_dir.clone(),
            env: opened.env.clone(),
            timeout: ctx.opts.hook_timeout,
            capture: Capture::Inherit,
            still_running: None,
        },
    );
    let ok = outcome.as_ref().is_ok_and(|o| o.ok());
    dir.update(|m| Ok(invoke::close(m, &opened.context, ok)))?;
    let outcome = outcome?;
    // Like `juju exec`, the exit status is the command's; units in error
    // are reported on stderr by the settle, a bound hit fails.
    let settled = ctx.settle()?;
    if outcome.code != 0 {
        return Ok(u8::try_from(outcome.code).unwrap_or(1).max(1));
    }
    Ok(if settled == 3 { 3 } else { 0 })
}

/// A bare command name, looked up on `path` (Command would use our own PATH).
fn resolve(name: &str, path: &str) -> std::path::PathBuf {
    if name.contains('/') {
        return name.into();
    }
    path.split(':')
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| name.into())
}
