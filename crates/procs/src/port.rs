//! Free local TCP ports for what the launchers hand their ranks (MASTER_PORT, a scenario's
//! store ports), picked by binding below the ephemeral range, where no other process's
//! `bind(0)` or outgoing connection lands between the pick and the rank's own bind.

use crate::ProcsError;
use std::net::TcpListener;

/// Where [`below_ephemeral`] looks: 20000..32000, under Linux's ephemeral range (32768+).
pub const BELOW_EPHEMERAL: std::ops::Range<u16> = 20_000..32_000;

/// A listener on a free port of [`BELOW_EPHEMERAL`]: between picking it and a rank binding it,
/// no process's `bind(0)` (gloo's pairs, other runs) can be handed the same port. Hold it until
/// every port of a run is picked, so they differ. Falls back to the OS's pick after 200 tries.
pub fn below_ephemeral() -> Result<TcpListener, ProcsError> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0)
        ^ ((std::process::id() as u64) << 16);
    let mut x = seed | 1;
    let span = (BELOW_EPHEMERAL.end - BELOW_EPHEMERAL.start) as u64;
    for _ in 0..200 {
        // xorshift: a different candidate each try.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let port = BELOW_EPHEMERAL.start + (x % span) as u16;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
            return Ok(l);
        }
    }
    Ok(TcpListener::bind("127.0.0.1:0")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_listeners_below_the_ephemeral_range_differ() {
        let a = below_ephemeral().expect("a listener");
        let b = below_ephemeral().expect("a listener");
        let (pa, pb) = (
            a.local_addr().expect("addr").port(),
            b.local_addr().expect("addr").port(),
        );
        assert_ne!(pa, pb);
        for p in [pa, pb] {
            assert!(BELOW_EPHEMERAL.contains(&p), "port {p}");
        }
        drop(a);
        TcpListener::bind(("127.0.0.1", pa)).expect("a released port is bindable");
    }
}
