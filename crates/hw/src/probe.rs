//! The side channel from rank processes to the launcher: one TCP connection per rank, one JSON
//! message per line (events, wait records, the rank's end), flushed at once so the launcher
//! knows where a rank was even if it is killed inside a oneCCL call a moment later.

use scen_core::diagnose::record::CallRecord;
use scen_core::diagnose::GroupRecord;
use scen_core::outcome::RankEnd;
use scen_core::probe::{Fact, Probe};
use scen_core::trace::{Event, Wait};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::io::Write;
use std::net::TcpStream;
use std::rc::Rc;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Msg {
    Hello {
        rank: usize,
        pid: u32,
    },
    Event(Event),
    Wait {
        rank: usize,
        wait: Option<Wait>,
    },
    /// `failed`: (step, why); `None` = completed.
    End {
        rank: usize,
        failed: Option<(usize, scen_core::outcome::Failure)>,
        t_ms: u64,
    },
    /// A line for the report's notes (e.g. how device tensors are backed).
    Note {
        rank: usize,
        text: String,
    },
    /// A call record (flight recorder), at its start and again at its end.
    Call(Box<CallRecord>),
    /// A counter-named `new_group` call.
    Group(GroupRecord),
    /// A typed fact about a rank (a TCPStore it serves, an `expect` that does not apply).
    Fact {
        rank: usize,
        fact: Fact,
    },
}

/// The rank side: writes each message to the launcher.
#[derive(Clone)]
pub struct SideProbe {
    conn: Rc<RefCell<Option<TcpStream>>>,
}

impl SideProbe {
    pub fn connect(addr: &str) -> std::io::Result<SideProbe> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        Ok(SideProbe {
            conn: Rc::new(RefCell::new(Some(s))),
        })
    }

    pub fn send(&self, m: &Msg) {
        let mut line = serde_json::to_string(m).unwrap_or_default();
        line.push('\n');
        let mut c = self.conn.borrow_mut();
        // A launcher that went away cannot be told anything more; the rank carries on.
        if let Some(s) = c.as_mut() {
            if s.write_all(line.as_bytes())
                .and_then(|_| s.flush())
                .is_err()
            {
                *c = None;
            }
        }
    }
}

impl Probe for SideProbe {
    fn event(&self, e: Event) {
        self.send(&Msg::Event(e));
    }

    fn set_wait(&self, rank: usize, w: Option<Wait>) {
        self.send(&Msg::Wait { rank, wait: w });
    }

    fn call(&self, rec: &CallRecord) {
        self.send(&Msg::Call(Box::new(rec.clone())));
    }

    fn group(&self, rec: &GroupRecord) {
        self.send(&Msg::Group(rec.clone()));
    }

    fn fact(&self, rank: usize, fact: &Fact) {
        self.send(&Msg::Fact {
            rank,
            fact: fact.clone(),
        });
    }

    /// The verdict at the program's end; the process then lives through its teardown.
    fn ended(&self, rank: usize, end: &RankEnd, t_ms: u64) {
        let failed = match end {
            RankEnd::Completed => None,
            RankEnd::Failed { step, failure } => Some((*step, failure.clone())),
        };
        self.send(&Msg::End { rank, failed, t_ms });
    }
}
