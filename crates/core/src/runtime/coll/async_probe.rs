//! The probe an `async_op` call's task reports through, so that its blocked receives become
//! the rank's wait only once the program reaches the call's `wait` step.

use crate::probe::Probe;
use crate::trace::{Event, Wait};
use std::cell::RefCell;
use std::rc::Rc;

/// The probe an `async_op` call's task reports through: while the program runs on, the call's
/// blocked receives are not the rank's wait (the rank is busy elsewhere); once the program
/// reaches the `wait` step, they are, attributed to that step.
#[derive(Clone)]
pub(crate) struct AsyncProbe<P: Probe> {
    pub inner: P,
    pub state: Rc<RefCell<AsyncWait>>,
}

#[derive(Default)]
pub(crate) struct AsyncWait {
    /// The `wait` step the program is blocked in, if it is.
    pub waiting_step: Option<usize>,
    /// The call's latest wait record.
    pub last: Option<Wait>,
}

impl<P: Probe> AsyncProbe<P> {
    /// The program reached `wait` at `step`: the call's current wait becomes the rank's.
    pub fn start_waiting(&self, rank: usize, step: usize) {
        let mut s = self.state.borrow_mut();
        s.waiting_step = Some(step);
        let w = s.last.clone().map(|mut w| {
            w.step = step;
            w
        });
        drop(s);
        self.inner.set_wait(rank, w);
    }
}

impl<P: Probe> Probe for AsyncProbe<P> {
    fn event(&self, e: Event) {
        self.inner.event(e);
    }

    fn set_wait(&self, rank: usize, w: Option<Wait>) {
        let mut s = self.state.borrow_mut();
        s.last = w.clone();
        let Some(step) = s.waiting_step else { return };
        drop(s);
        self.inner.set_wait(
            rank,
            w.map(|mut w| {
                w.step = step;
                w
            }),
        );
    }

    fn call(&self, rec: &crate::diagnose::CallRecord) {
        self.inner.call(rec);
    }

    fn group(&self, rec: &crate::diagnose::GroupRecord) {
        self.inner.group(rec);
    }
}
