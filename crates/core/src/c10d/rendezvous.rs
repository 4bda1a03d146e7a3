//! init_method URLs and what each rendezvous handler reads (docs/rules/c10d.md#r14, #r15).
//!
//! `env://` reads MASTER_ADDR/MASTER_PORT (and RANK/WORLD_SIZE unless given); `tcp://host:port`
//! takes host and port from the URL only, ignoring MASTER_PORT — the root of the hard-coded
//! `tcp://localhost:29500` bug; `file://` names a FileStore.

use super::error::{self, C10dError};
use std::collections::BTreeMap;

/// A parsed init_method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub scheme: String,
    pub host: String,
    /// The port text as written (validated at rendezvous, like PyTorch).
    pub port: Option<String>,
    pub path: String,
    pub query: BTreeMap<String, String>,
}

/// Syntax problems caught before running (scenario load) and at init.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("`{0}` is not a URL (expected scheme://...)")]
    NoScheme(String),
    #[error("{}", error::no_rendezvous_handler(.0).message)]
    UnknownScheme(String),
    #[error("port `{0}` is not a number in 0..65535")]
    BadPort(String),
}

impl Url {
    pub fn parse(s: &str) -> Result<Url, UrlError> {
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| UrlError::NoScheme(s.into()))?;
        if !["env", "tcp", "file"].contains(&scheme) {
            return Err(UrlError::UnknownScheme(scheme.into()));
        }
        let (loc, query_s) = rest.split_once('?').unwrap_or((rest, ""));
        let mut query = BTreeMap::new();
        for kv in query_s.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            query.insert(k.to_string(), v.to_string());
        }
        let (host, port, path) = if scheme == "file" {
            // urlparse: the netloc runs to the first `/`, the path is the rest, so
            // `file:///tmp/s` names /tmp/s, `file://h/tmp/s` /tmp/s too, and `file://s`
            // has no path at all (real torch 2.15: "path missing").
            let path = loc.find('/').map_or("", |i| &loc[i..]);
            (String::new(), None, path.to_string())
        } else {
            let (h, p) = match loc.rsplit_once(':') {
                Some((h, p)) => (h, Some(p.to_string())),
                None => (loc, None),
            };
            if let Some(p) = &p {
                if p.parse::<u32>().map(|v| v > 65535).unwrap_or(true) {
                    return Err(UrlError::BadPort(p.clone()));
                }
            }
            (h.to_string(), p, String::new())
        };
        Ok(Url {
            scheme: scheme.into(),
            host,
            port,
            path,
            query,
        })
    }
}

/// Where a rank rendezvouses: the store endpoint and its own rank/world size (R15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendezvous {
    pub host: String,
    pub port: u16,
    pub rank: usize,
    pub world_size: usize,
    pub file: Option<String>,
}

fn parse_port(p: &str) -> Result<u16, C10dError> {
    let v: i64 = p.trim().parse().map_err(|_| error::not_an_int(p))?;
    if !(0..=65535).contains(&v) {
        return Err(error::bad_port(p));
    }
    Ok(v as u16)
}

fn parse_int(what: &str, v: &str) -> Result<usize, C10dError> {
    v.trim()
        .parse::<usize>()
        .map_err(|_| error::query_not_an_int(what, v))
}

/// R14/R15: resolves an init_method for one rank given explicit rank/world_size and its env.
pub fn resolve(
    init_method: &str,
    rank: Option<usize>,
    world_size: Option<usize>,
    env: &BTreeMap<String, String>,
) -> Result<Rendezvous, C10dError> {
    let url = Url::parse(init_method).map_err(|e| match e {
        UrlError::UnknownScheme(s) => error::no_rendezvous_handler(&s),
        UrlError::NoScheme(s) => error::not_a_url(&s),
        UrlError::BadPort(p) => error::bad_port(&p),
    })?;
    if (rank.is_some() || world_size.is_some())
        && (url.query.contains_key("rank") || url.query.contains_key("world_size"))
    {
        return Err(error::url_has_node_args(init_method));
    }
    let q_rank = url
        .query
        .get("rank")
        .map(|v| parse_int("rank", v))
        .transpose()?;
    let q_ws = url
        .query
        .get("world_size")
        .map(|v| parse_int("world_size", v))
        .transpose()?;
    let rank = rank.or(q_rank);
    let world_size = world_size.or(q_ws);
    match url.scheme.as_str() {
        "env" => resolve_env(rank, world_size, env),
        "tcp" => {
            let port = url
                .port
                .as_deref()
                .ok_or_else(|| error::url_missing("tcp", "port number"))?;
            let rank = rank.ok_or_else(|| error::url_missing("tcp", "rank parameter"))?;
            let world_size =
                world_size.ok_or_else(|| error::url_missing("tcp", "world size parameter"))?;
            Ok(Rendezvous {
                host: url.host.clone(),
                port: parse_port(port)?,
                rank,
                world_size,
                file: None,
            })
        }
        _ => {
            if url.path.is_empty() {
                return Err(error::url_missing("file", "path"));
            }
            let rank = rank.ok_or_else(|| error::url_missing("file", "rank parameter"))?;
            let world_size =
                world_size.ok_or_else(|| error::url_missing("file", "world size parameter"))?;
            Ok(Rendezvous {
                host: String::new(),
                port: 0,
                rank,
                world_size,
                file: Some(url.path.clone()),
            })
        }
    }
}

fn env_var<'a>(env: &'a BTreeMap<String, String>, var: &str) -> Result<&'a str, C10dError> {
    env.get(var)
        .map(|s| s.as_str())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| error::env_var_missing(var))
}

fn resolve_env(
    rank: Option<usize>,
    world_size: Option<usize>,
    env: &BTreeMap<String, String>,
) -> Result<Rendezvous, C10dError> {
    let rank = match rank {
        Some(r) => r,
        None => parse_int("RANK", env_var(env, "RANK")?)?,
    };
    let world_size = match world_size {
        Some(w) => w,
        None => parse_int("WORLD_SIZE", env_var(env, "WORLD_SIZE")?)?,
    };
    let host = env_var(env, "MASTER_ADDR")?.to_string();
    let port = parse_port(env_var(env, "MASTER_PORT")?)?;
    Ok(Rendezvous {
        host,
        port,
        rank,
        world_size,
        file: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::c10d::test_env as env;

    #[test]
    fn r15_tcp_ignores_master_port() {
        let e = env(&[("MASTER_ADDR", "node0"), ("MASTER_PORT", "29501")]);
        let r = resolve("tcp://localhost:29500", Some(1), Some(2), &e).unwrap();
        assert_eq!((r.host.as_str(), r.port), ("localhost", 29500));
    }

    #[test]
    fn r15_env_errors() {
        let e = env(&[("MASTER_ADDR", "node0"), ("RANK", "0"), ("WORLD_SIZE", "2")]);
        let err = resolve("env://", None, None, &e).unwrap_err();
        assert!(err
            .to_string()
            .ends_with("environment variable MASTER_PORT expected, but not set"));
        let e2 = env(&[
            ("MASTER_ADDR", "a"),
            ("MASTER_PORT", "70000"),
            ("RANK", "0"),
            ("WORLD_SIZE", "1"),
        ]);
        assert_eq!(
            resolve("env://", None, None, &e2).unwrap_err().to_string(),
            "ValueError: port must have value from 0 to 65535 but was 70000"
        );
    }

    #[test]
    fn r15_file_path_is_urlparse_path() {
        let e = env(&[]);
        let r = resolve("file:///tmp/x/fstore", Some(1), Some(2), &e).unwrap();
        assert_eq!(r.file.as_deref(), Some("/tmp/x/fstore"));
        let r = resolve("file:///tmp/s?rank=0&world_size=2", None, None, &e).unwrap();
        assert_eq!(
            (r.file.as_deref(), r.rank, r.world_size),
            (Some("/tmp/s"), 0, 2)
        );
        // Measured (scripts/torch-checks/filestore.sh, case `relative`).
        assert_eq!(
            resolve("file://fstore_rel", Some(0), Some(2), &e)
                .unwrap_err()
                .to_string(),
            "ValueError: Error initializing torch.distributed using file:// rendezvous: path missing"
        );
        assert_eq!(
            resolve("file:///tmp/s", None, Some(2), &e)
                .unwrap_err()
                .to_string(),
            "ValueError: Error initializing torch.distributed using file:// rendezvous: rank parameter missing"
        );
    }

    #[test]
    fn r14_query_conflict_and_scheme() {
        let e = env(&[]);
        assert!(resolve("tcp://h:1?rank=0&world_size=2", Some(0), None, &e)
            .unwrap_err()
            .to_string()
            .contains("has node-specific arguments"));
        assert_eq!(
            Url::parse("foo://x").unwrap_err().to_string(),
            "No rendezvous handler for foo://"
        );
        assert!(resolve("tcp://h", Some(0), Some(1), &e)
            .unwrap_err()
            .to_string()
            .contains("port number missing"));
    }
}
