//! Where a torch-mode run listens: the scenario's hosts and ports mapped to real ones.
//!
//! Scenarios name hosts (`node0`, `localhost`) and fixed ports (29500); a run on one machine maps
//! every host to 127.0.0.1 and every port the scenario names to a free one, keeping distinct
//! ports distinct (so a rank given the wrong MASTER_PORT still misses the store) and letting
//! runs proceed in parallel. `scen export` uses the identity map.

use scen_core::scenario::Scenario;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    /// Scenario port -> real port (empty: identity).
    pub ports: BTreeMap<u16, u16>,
    /// Map every host to 127.0.0.1.
    pub localhost: bool,
}

impl Endpoints {
    /// Free ports for every port the scenario names, hosts on 127.0.0.1.
    pub fn local(s: &Scenario) -> std::io::Result<Endpoints> {
        let mut ports = BTreeMap::new();
        // Free ports below the ephemeral range (scen-procs' `port`); hold every listener until all
        // are picked, so the ports differ.
        let mut held = Vec::new();
        for p in scenario_ports(s) {
            let l = scen_procs::port::below_ephemeral().map_err(std::io::Error::other)?;
            ports.insert(p, l.local_addr()?.port());
            held.push(l);
        }
        Ok(Endpoints {
            ports,
            localhost: true,
        })
    }

    pub fn port(&self, p: u16) -> u16 {
        self.ports.get(&p).copied().unwrap_or(p)
    }

    /// An environment value as the rank gets it.
    pub fn env_value(&self, key: &str, v: &str) -> String {
        match key {
            "MASTER_PORT" => match v.parse::<u16>() {
                Ok(p) => self.port(p).to_string(),
                Err(_) => v.to_string(),
            },
            "MASTER_ADDR" if self.localhost => "127.0.0.1".into(),
            _ => v.to_string(),
        }
    }

    /// `text` with every real port (as a whole number) replaced by the scenario's.
    pub fn unmap_ports(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()) {
                let mut j = i;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
                let num = &text[i..j];
                let back = num.parse::<u16>().ok().and_then(|n| {
                    self.ports
                        .iter()
                        .find(|(_, real)| **real == n)
                        .map(|(p, _)| *p)
                });
                match back {
                    Some(p) => out.push_str(&p.to_string()),
                    None => out.push_str(num),
                }
                i = j;
            } else {
                let c = text[i..].chars().next().unwrap_or(' ');
                out.push(c);
                i += c.len_utf8();
            }
        }
        out
    }

    /// A host a rank connects to: 127.0.0.1 on one machine, unless it is an environment value
    /// or a loopback address of the program's own choosing.
    pub fn host(&self, host: &str) -> String {
        let loopback = host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback());
        if self.localhost && !host.contains('$') && !loopback {
            "127.0.0.1".into()
        } else {
            host.into()
        }
    }

    /// `tcp://host:port` inside a literal, mapped.
    pub fn url(&self, s: &str) -> String {
        let Some(rest) = s.strip_prefix("tcp://") else {
            return s.to_string();
        };
        let Some((host, port)) = rest.rsplit_once(':') else {
            return s.to_string();
        };
        // A loopback address stays itself: which one a rank names is the program's (every
        // 127.x.y.z reaches a TCPStore on this host).
        let loopback = host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback());
        let host = if self.localhost && !host.contains('$') && !loopback {
            "127.0.0.1"
        } else {
            host
        };
        match port.parse::<u16>() {
            Ok(p) => format!("tcp://{host}:{}", self.port(p)),
            Err(_) => format!("tcp://{host}:{port}"),
        }
    }
}

/// Every port the scenario names: MASTER_PORT values and `tcp://` init methods.
fn scenario_ports(s: &Scenario) -> Vec<u16> {
    let mut out: Vec<u16> = s
        .world
        .ranks
        .iter()
        .filter_map(|r| r.env.get("MASTER_PORT")?.parse().ok())
        .collect();
    for st in &s.steps {
        let url = match &st.kind {
            scen_core::scenario::StepKind::InitProcessGroup { init_method, .. } => init_method,
            scen_core::scenario::StepKind::Store(s) => {
                if let scen_core::scenario::StoreCall::MakeTcp { spec, .. } = &s.call {
                    if let scen_core::scenario::PortArg::Num(p) = spec.port {
                        out.push(p);
                    }
                }
                continue;
            }
            _ => continue,
        };
        if let Some(p) = url
            .as_deref()
            .and_then(|u| u.strip_prefix("tcp://"))
            .and_then(|r| r.rsplit_once(':'))
            .and_then(|(_, p)| p.parse().ok())
        {
            out.push(p);
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_map_both_ways_and_hosts_go_local() {
        let ep = Endpoints {
            ports: [(29500, 23456), (29501, 23457)].into_iter().collect(),
            localhost: true,
        };
        assert_eq!(ep.env_value("MASTER_PORT", "29501"), "23457");
        assert_eq!(ep.env_value("MASTER_ADDR", "node0"), "127.0.0.1");
        assert_eq!(ep.url("tcp://node1:29500"), "tcp://127.0.0.1:23456");
        assert_eq!(
            ep.unmap_ports("connect to (127.0.0.1, 23457) after 123456ms"),
            "connect to (127.0.0.1, 29501) after 123456ms"
        );
    }
}
