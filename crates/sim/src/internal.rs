//! A panic anywhere in a simulation — a rank task, a store task, turmoil itself — is a defect of
//! scen (or a limit of the simulator), never a verdict about the scenario. tokio catches panics
//! in spawned tasks and the run would carry on with that rank silently gone, so a process-wide
//! panic hook records every panic on a thread that is running a simulation; the driver checks
//! after each step and ends the run as an internal error.

use std::cell::{Cell, RefCell};
use std::sync::Once;

thread_local! {
    /// True while this thread runs a simulation.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// The first panic seen on this thread during the simulation.
    static CAUGHT: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Installs the recording hook once; panics outside a simulation go to the previous hook.
fn install() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if ACTIVE.with(|a| a.get()) {
                let msg = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(a panic without a message)".into());
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
                    .unwrap_or_default();
                CAUGHT.with(|c| {
                    c.borrow_mut().get_or_insert(format!("panic{at}: {msg}"));
                });
            } else {
                previous(info);
            }
        }));
    });
}

/// Marks this thread as simulating until dropped.
pub struct Watch(());

impl Watch {
    pub fn start() -> Watch {
        install();
        CAUGHT.with(|c| c.borrow_mut().take());
        ACTIVE.with(|a| a.set(true));
        Watch(())
    }

    /// The first panic seen since `start`, if any.
    pub fn caught(&self) -> Option<String> {
        CAUGHT.with(|c| c.borrow().clone())
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.set(false));
        CAUGHT.with(|c| c.borrow_mut().take());
    }
}
