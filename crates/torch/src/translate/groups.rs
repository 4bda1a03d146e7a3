//! The group-making steps as Python: init_process_group (its init_method, store and
//! timeouts), new_group and split_group, each with the handle later steps name, and
//! destroy_process_group.

use super::*;

/// The Python of a group-making step.
pub(super) fn group_step(s: &Scenario, step: &Step, ep: &Endpoints) -> String {
    match &step.kind {
        StepKind::InitProcessGroup { .. } => init_process_group(s, step, ep),
        StepKind::NewGroup { .. } => new_group(s, step, ep),
        StepKind::DestroyProcessGroup { group: None } => "dist.destroy_process_group()".into(),
        StepKind::DestroyProcessGroup { group: g } => {
            format!("dist.destroy_process_group({})", group(g))
        }
        StepKind::ShrinkGroup {
            group: g,
            ranks_to_exclude,
            shrink_flags,
            handle,
        } => {
            let call = format!(
                "dist.shrink_group({ranks_to_exclude:?}, group={}, shrink_flags={shrink_flags})",
                group(g)
            );
            assigned(handle, call)
        }
        _ => split_group(s, step),
    }
}

/// `dist.init_process_group(...)` with the step's arguments (scaled default timeout).
fn init_process_group(s: &Scenario, step: &Step, ep: &Endpoints) -> String {
    let StepKind::InitProcessGroup {
        backend,
        init_method,
        device_id,
        timeout_ms,
        rank,
        world_size,
        store,
    } = &step.kind
    else {
        return not_translatable(step);
    };
    let mut args = Vec::new();
    if let Some(x) = backend {
        args.push(format!("backend={}", template(x, ep)));
    }
    if let Some(x) = init_method {
        let url = template(x, ep);
        if x.starts_with("file://") {
            // A path of this run's own (prelude's file_url).
            args.push(format!("init_method=file_url({url})"));
        } else {
            args.push(format!("init_method={url}"));
        }
    }
    if let Some(x) = device_id {
        args.push(format!("device_id=torch.device({})", template(x, ep)));
    }
    match timeout_ms {
        Some(t) => args.push(format!("timeout=ms({t})")),
        None => args.extend(ms_default(s, backend.as_deref()).map(|t| format!("timeout={t}"))),
    }
    if let Some(r) = rank {
        args.push(format!("rank={}", int_arg(r)));
    }
    if let Some(w) = world_size {
        args.push(format!("world_size={}", int_arg(w)));
    }
    if let Some(name) = store {
        args.push(format!("store=STORES[{}]", py::str_lit(name)));
    }
    format!("dist.init_process_group({})", args.join(", "))
}

/// `dist.new_group(...)`, kept under its handle when the step names one.
fn new_group(s: &Scenario, step: &Step, ep: &Endpoints) -> String {
    let StepKind::NewGroup {
        ranks,
        backend,
        use_local_synchronization,
        sort_ranks,
        device_id,
        timeout_ms,
        handle,
    } = &step.kind
    else {
        return not_translatable(step);
    };
    let mut args = Vec::new();
    if let Some(r) = ranks {
        args.push(format!("ranks={r:?}"));
    }
    if let Some(x) = backend {
        args.push(format!("backend={}", template(x, ep)));
    }
    match timeout_ms {
        Some(t) => args.push(format!("timeout=ms({t})")),
        None => {
            let be = backend.clone().or_else(|| init_backend(s));
            args.extend(ms_default(s, be.as_deref()).map(|t| format!("timeout={t}")))
        }
    }
    if *use_local_synchronization {
        args.push("use_local_synchronization=True".into());
    }
    if !*sort_ranks {
        args.push("sort_ranks=False".into());
    }
    if let Some(x) = device_id {
        args.push(format!("device_id=torch.device({})", template(x, ep)));
    }
    let call = format!("dist.new_group({})", args.join(", "));
    assigned(handle, call)
}

/// `dist.split_group(...)` of the parent the step names, its lists as given.
fn split_group(s: &Scenario, step: &Step) -> String {
    let StepKind::SplitGroup {
        parent,
        split_ranks,
        timeout_ms,
        handle,
    } = &step.kind
    else {
        return not_translatable(step);
    };
    let lists = split_ranks
        .as_ref()
        .map_or("None".to_string(), |l| format!("{l:?}"));
    let mut args = vec![
        format!("parent_pg={}", group(parent)),
        format!("split_ranks={lists}"),
    ];
    match timeout_ms {
        Some(t) => args.push(format!("timeout=ms({t})")),
        None => {
            args.extend(ms_default(s, init_backend(s).as_deref()).map(|t| format!("timeout={t}")))
        }
    }
    let call = format!("dist.split_group({})", args.join(", "));
    assigned(handle, call)
}

/// `call`, its group kept under the step's handle when it has one.
fn assigned(handle: &Option<String>, call: String) -> String {
    match handle {
        Some(h) => format!("groups[{}] = {call}", py::str_lit(h)),
        None => call,
    }
}
