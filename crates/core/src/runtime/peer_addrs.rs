//! Peer addresses as a rank learns them from the store, parsed once per simulator thread.
//!
//! A rank learns the `host:port` of every member of every group it joins: in a W-rank world
//! W^2 addresses, each formerly decoded as text, split, parsed and its host looked up in the
//! rank's own table of host names (which every rank filled with every node: W × nodes names).
//! At 4096 ranks that was a tenth of a start-up (docs/scale.md, issue 31). The ranks of one
//! simulator thread now share one table of host names and one of the addresses seen, so a
//! learned address costs one lookup of its bytes. Which index a host gets depends on the order
//! the thread met it, and never reaches anything a run prints: only the name it stands for does.

use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::rc::Rc;

/// Where a peer listens: its host (an index into this thread's host names) and port. 8 bytes
/// with the `Option` around it: a rank learns W of them in a W-rank world.
pub type PeerAddr = (u32, u16);

/// Addresses remembered per thread; past it the cache starts over (host names are kept: an
/// endpoint alive names its peers' hosts by index).
const MAX_ADDRS: usize = 1 << 16;

#[derive(Default)]
struct Table {
    /// Host names by index, each once.
    names: Vec<Rc<str>>,
    index: FxHashMap<Rc<str>, u32>,
    /// Addresses as the store gave them, parsed.
    addrs: FxHashMap<Box<[u8]>, PeerAddr>,
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table::default());
}

/// `address` (`host:port`, as the store holds it) parsed; `None` where it has no `:` or no
/// valid port (the bytes are read as UTF-8, invalid sequences replaced).
pub fn parse(address: &[u8]) -> Option<PeerAddr> {
    TABLE.with_borrow_mut(|t| {
        if let Some(a) = t.addrs.get(address) {
            return Some(*a);
        }
        let text = String::from_utf8_lossy(address);
        let (h, p) = text.rsplit_once(':')?;
        let port = p.parse::<u16>().ok()?;
        let addr = (t.host_index(h), port);
        if t.addrs.len() >= MAX_ADDRS {
            t.addrs.clear();
        }
        t.addrs.insert(address.into(), addr);
        Some(addr)
    })
}

/// The name of host `i` (an index [`parse`] gave on this thread).
pub fn host_name(i: u32) -> Rc<str> {
    TABLE.with_borrow(|t| t.names[i as usize].clone())
}

impl Table {
    fn host_index(&mut self, h: &str) -> u32 {
        if let Some(i) = self.index.get(h) {
            return *i;
        }
        let i = self.names.len() as u32;
        let name: Rc<str> = Rc::from(h);
        self.names.push(name.clone());
        self.index.insert(name, i);
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_parses_to_its_host_and_port_and_a_bad_one_to_nothing() {
        let a = parse(b"node3:29501").unwrap();
        assert_eq!((&*host_name(a.0), a.1), ("node3", 29501));
        assert_eq!(parse(b"node3:29501"), Some(a));
        let b = parse(b"node3:40000").unwrap();
        assert_eq!(b.0, a.0);
        assert_eq!(
            parse(b"[::1]:7").map(|(h, p)| (host_name(h), p)),
            Some(("[::1]".into(), 7))
        );
        assert_eq!(parse(b"node3"), None);
        assert_eq!(parse(b"node3:99999"), None);
        assert_eq!(parse(b"node3:"), None);
    }
}
