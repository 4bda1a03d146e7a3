//! scen's TCPStore and real PyTorch's, both ways (`c10d::store::torch_wire`): a real
//! `torch.distributed.TCPStore` server and scen's client; scen's server and a real PyTorch
//! client; and `torchrun --no-python` starting `scen run --hw`, whose ranks use the agent's
//! PyTorch store. Without the venv (or oneCCL, for torchrun) each test prints a `skip:` line,
//! unless SCEN_TORCH_REQUIRED=1 (SCEN_HW_REQUIRED=1 for oneCCL) makes that a failure.

use scen_core::c10d::store::{self, KeySeq, StoreClient, StoreError};
use scen_core::net::Net;
use scen_hw::net::{TokioNet, WallClock};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The venv's python, or `None` after a skip line.
fn python(test: &str) -> Option<PathBuf> {
    let required = std::env::var("SCEN_TORCH_REQUIRED").as_deref() == Ok("1");
    let why = match scen_torch::python::find(None) {
        Ok((p, _)) if p.exists() => return Some(p),
        Ok((p, _)) => format!("{} does not exist", p.display()),
        Err(e) => e.to_string(),
    };
    assert!(!required, "SCEN_TORCH_REQUIRED=1 but {why}");
    println!("skip: {test}: {why}; run scripts/install-torch-cpu.sh");
    None
}

fn net(token: Option<&str>, allow_torch: bool) -> TokioNet {
    TokioNet {
        host: "127.0.0.1".into(),
        bind_ip: "127.0.0.1".into(),
        job_token: token.map(Into::into),
        allow_torch_clients: allow_torch,
        agent_store_is_pytorch: false,
    }
}

const CLOCK: WallClock = WallClock { epoch_unix_ms: 0 };

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    tokio::task::LocalSet::new().block_on(&rt, f)
}

fn spawn_python(py: &PathBuf, script: &str, args: &[String], stderr: Stdio) -> Child {
    Command::new(py)
        .arg("-c")
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("python starts")
}

/// The PyTorch server's side: sets keys, serves, reports what scen set.
const TORCH_SERVER: &str = r#"
import sys, datetime, torch.distributed as dist
s = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=30), wait_for_workers=False)
s.set("from_torch", b"hello")
s.add("cnt", 2)
print(s.port, flush=True)
print(s.get("from_scen").decode(), flush=True)
print(s.add("cnt", 0), flush=True)
sys.stdin.read()
"#;

#[test]
fn scens_client_uses_a_real_pytorch_tcpstore() {
    let Some(py) = python("PyTorch TCPStore server, scen client") else {
        return;
    };
    let mut child = spawn_python(&py, TORCH_SERVER, &[], Stdio::inherit());
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("the port");
    let port: u16 = line.trim().parse().expect("a port number");
    let addr = format!("127.0.0.1:{port}");
    block_on(async {
        let n = net(None, false);
        let s = n.connect("127.0.0.1", port).await.expect("connects");
        let c = StoreClient::<TokioNet>::open_torch(s, addr.clone(), CLOCK)
            .await
            .expect("validates and pings");
        assert_eq!(c.get("from_torch", 5_000).await.unwrap(), b"hello");
        assert_eq!(c.add("cnt", 3).await.unwrap(), 5);
        assert!(c.check("from_torch").await.unwrap());
        assert!(!c.check("nope").await.unwrap());
        assert_eq!(c.wait_ge("cnt", 5, 1_000).await.unwrap(), 5);
        match c.wait_ge("cnt", 6, 200).await {
            Err(StoreError::Timeout { value: 5, .. }) => {}
            other => panic!("{other:?}"),
        }
        // A get that times out: WAIT, CANCEL_WAIT, WAIT_CANCELED; the connection stays usable.
        match c.get("absent", 300).await {
            Err(StoreError::Timeout {
                key,
                timeout_ms: 300,
                ..
            }) => assert_eq!(key, "absent"),
            other => panic!("{other:?}"),
        }
        for i in 0..2 {
            c.set(&format!("seq/{i}"), &[b'a' + i as u8]).await.unwrap();
        }
        let keys = KeySeq {
            prefix: "seq/".into(),
            start: 0,
            end: 3,
            skip: None,
        };
        assert_eq!(
            c.check_seq(&keys, 0).await.unwrap(),
            vec![true, true, false]
        );
        assert_eq!(
            c.get_seq(&keys, 0)
                .await
                .unwrap()
                .iter()
                .map(<[u8]>::to_vec)
                .collect::<Vec<_>>(),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
        // GETNUMKEYS in PyTorch's own words (the keys above and the server's own).
        assert!(c.num_keys().await.unwrap() >= 4);
        // compare_set and delete_key are not spoken over PyTorch's protocol: a named limit,
        // and nothing sent (the connection stays usable).
        for e in [
            c.compare_set("cnt", b"", b"x").await.map(|_| ()),
            c.delete_key("cnt").await.map(|_| ()),
        ] {
            match e {
                Err(StoreError::Unsupported(why)) => {
                    assert!(why.contains("PyTorch's own TCPStore"), "{why}")
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(c.check("from_torch").await.unwrap());
        c.set("from_scen", b"world").await.unwrap();
    });
    let mut rest = String::new();
    for _ in 0..2 {
        out.read_line(&mut rest).expect("python's report");
    }
    drop(child.stdin.take());
    let _ = child.wait();
    assert_eq!(rest, "world\n5\n", "what the PyTorch server saw");
}

/// The PyTorch client's side (is_master=False; its waitForWorkers adds to `init/`).
const TORCH_CLIENT: &str = r#"
import sys, datetime, torch.distributed as dist
port = int(sys.argv[1])
s = dist.TCPStore("127.0.0.1", port, 2, False, timeout=datetime.timedelta(seconds=5))
print(s.get("from_scen").decode(), flush=True)
s.set("from_torch", b"hi")
print(s.add("cnt", 4), flush=True)
print(s.check(["from_scen"]), s.check(["from_scen", "nope"]), flush=True)
try:
    s.wait(["absent"], datetime.timedelta(milliseconds=300))
    print("no timeout", flush=True)
except Exception as e:
    print("timeout:", type(e).__name__, e, flush=True)
print(s.multi_get(["from_scen", "from_torch"]), flush=True)
"#;

/// Serves scen's store for `net` on a thread; returns its port.
fn start_scen_store(n: TokioNet) -> u16 {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        block_on(async move {
            let l = n.bind(0).await.expect("binds");
            tx.send(n.local_port(&l)).expect("sends the port");
            store::serve(n, CLOCK, l).await;
        })
    });
    rx.recv().expect("the store's port")
}

fn run_torch_client(py: &PathBuf, port: u16) -> (bool, String) {
    let child = spawn_python(py, TORCH_CLIENT, &[port.to_string()], Stdio::piped());
    let out = child.wait_with_output().expect("python runs");
    (
        out.status.success(),
        format!(
            "{}\n(stderr: {})",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn a_real_pytorch_client_uses_scens_store() {
    let Some(py) = python("scen TCPStore server, PyTorch client") else {
        return;
    };
    let n = net(None, false);
    let port = start_scen_store(n.clone());
    let scen = |n: TokioNet| async move {
        let s = n.connect("127.0.0.1", port).await.expect("connects");
        StoreClient::open(&n, s, format!("127.0.0.1:{port}"))
            .await
            .expect("opens")
    };
    block_on(async {
        let c = scen(n.clone()).await;
        c.set("from_scen", b"v1").await.unwrap();
        assert_eq!(c.add("cnt", 1).await.unwrap(), 1);
    });
    let (ok, text) = run_torch_client(&py, port);
    assert!(ok, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[..3], ["v1", "5", "True False"], "{text}");
    assert!(
        lines[3].starts_with("timeout: DistStoreError wait timeout after 300ms"),
        "{text}"
    );
    assert_eq!(lines[4], "[b'v1', b'hi']", "{text}");
    block_on(async {
        let c = scen(n.clone()).await;
        assert_eq!(c.get("from_torch", 1_000).await.unwrap(), b"hi");
        assert_eq!(c.add("cnt", 0).await.unwrap(), 5);
        // PyTorch's waitForWorkers counted itself in the raw `init/` key scen's ranks use.
        assert_eq!(c.add("init/", 0).await.unwrap(), 1);
    });
}

/// With a job token, PyTorch clients (which have none) are let in only when allowed; a scen
/// client of another job is refused either way.
#[test]
fn a_tokened_store_lets_pytorch_clients_in_only_when_allowed() {
    let Some(py) = python("PyTorch clients of a tokened store") else {
        return;
    };
    let refused = start_scen_store(net(Some("job-a"), false));
    let (ok, text) = run_torch_client(&py, refused);
    assert!(!ok, "a PyTorch client got into a tokened store: {text}");
    let allowed = start_scen_store(net(Some("job-a"), true));
    block_on(async {
        let n = net(Some("job-a"), true);
        let s = n.connect("127.0.0.1", allowed).await.expect("connects");
        let c = StoreClient::open(&n, s, "store".into())
            .await
            .expect("opens");
        c.set("from_scen", b"v1").await.unwrap();
        let stale = net(Some("job-b"), true);
        let s = stale.connect("127.0.0.1", allowed).await.expect("connects");
        match StoreClient::open(&stale, s, "store".into()).await {
            Err(e) => assert!(
                e.to_string().contains("another job or an earlier run"),
                "{e}"
            ),
            Ok(_) => panic!("a scen process of another job got in"),
        }
    });
    let (ok, text) = run_torch_client(&py, allowed);
    assert!(ok, "{text}");
    assert!(text.starts_with("v1\n"), "{text}");
}

/// `torchrun --no-python --nproc-per-node 2 scen run --hw ...`: torchrun's agent hosts a PyTorch
/// TCPStore at MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True); both ranks use it and complete.
#[test]
fn torchrun_starts_scen_ranks_that_use_the_agents_store() {
    let rel = "scenarios/five_ops_xccl_w2.toml";
    let Some(py) = python("torchrun with scen ranks") else {
        return;
    };
    let torchrun = py.with_file_name("torchrun");
    let scenario = scen_core::scenario::load_file(&super::path(rel)).expect("loads");
    if let Err(scen_hw::HwError::Unavailable(why)) =
        scen_hw::launcher::check_eligible(&scenario, &super::options(), false)
    {
        assert!(
            std::env::var("SCEN_HW_REQUIRED").as_deref() != Ok("1"),
            "{why}"
        );
        println!("skip: torchrun with scen ranks: {why}");
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let out = Command::new(&torchrun)
        .args(["--no-python", "--nproc-per-node", "2", "--master-port"])
        .arg(port.to_string())
        .arg(env!("CARGO_BIN_EXE_scen"))
        .args(["run", "--hw", rel, "--max-wall-s", "60"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("TORCHELASTIC_USE_AGENT_STORE")
        .output()
        .expect("torchrun runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{err}");
    for r in 0..2 {
        assert!(
            text.contains(&format!(
                "started by torchrun: this process ran rank {r} only"
            )),
            "{text}"
        );
    }
    assert_eq!(text.matches("expectations: 1/1 hold").count(), 2, "{text}");
    // The report names the launcher the ranks had (the file says processes), and speaks of
    // torchrun's processes, not of nodes.
    assert_eq!(
        text.matches("(hw mode, launcher torchrun,").count(),
        2,
        "{text}"
    );
    assert_eq!(
        text.matches("the other ranks' verdicts are in their own processes' reports")
            .count(),
        2,
        "{text}"
    );
    assert!(!text.contains("nodes' reports"), "{text}");
    assert_eq!(
        text.matches("TORCHELASTIC_USE_AGENT_STORE=True: the TCPStore is torchrun's agent's")
            .count(),
        2,
        "{text}"
    );
}
