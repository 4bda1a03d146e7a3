//! Hardware mode's TCPStore against hostile peers, over real sockets: a process of another job
//! (other token), of another scen build (other protocol version), and raw bytes that are not
//! the protocol at all (garbage, oversized and truncated frames). Each is refused or cut off
//! with no panic, and the store keeps serving its own job.

use scen_core::c10d::store::{self, StoreClient, PROTOCOL_VERSION};
use scen_core::net::Net;
use scen_hw::net::{TokioNet, WallClock};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn net(token: &str) -> TokioNet {
    TokioNet {
        host: "127.0.0.1".into(),
        bind_ip: "127.0.0.1".into(),
        job_token: Some(token.into()),
        allow_torch_clients: false,
        agent_store_is_pytorch: false,
    }
}

/// Starts a store for job `token` on its own thread; returns its port.
fn start_store(token: &str) -> u16 {
    let (tx, rx) = std::sync::mpsc::channel();
    let n = net(token);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let l = n.bind(0).await.expect("binds");
            tx.send(n.local_port(&l)).expect("sends the port");
            store::serve(n, WallClock { epoch_unix_ms: 0 }, l).await;
        });
    });
    rx.recv().expect("the store's port")
}

/// Opens a client of job `token` and sets then reads a key.
fn client_roundtrip(port: u16, token: &str) -> Result<Vec<u8>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let n = net(token);
        let s = n
            .connect("127.0.0.1", port)
            .await
            .map_err(|e| e.to_string())?;
        let c = StoreClient::<TokioNet>::open(&n, s, format!("127.0.0.1:{port}"))
            .await
            .map_err(|e| e.to_string())?;
        c.set("k", b"v").await.map_err(|e| e.to_string())?;
        c.get("k", 5_000).await.map_err(|e| e.to_string())
    })
}

fn raw(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s
}

/// Reads until the server closes; returns what it sent (`Err` if it neither replied nor closed).
fn read_to_close(mut s: TcpStream) -> Result<Vec<u8>, String> {
    let mut got = Vec::new();
    match s.read_to_end(&mut got) {
        Ok(_) => Ok(got),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(got),
        Err(e) => Err(format!("the server neither replied nor closed: {e}")),
    }
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_le_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

#[test]
fn a_client_of_the_same_job_is_served() {
    let port = start_store("job-a");
    assert_eq!(client_roundtrip(port, "job-a"), Ok(b"v".to_vec()));
}

#[test]
fn a_client_of_another_job_is_refused_with_the_store_and_itself_named() {
    let port = start_store("job-a");
    let err = client_roundtrip(port, "job-b").expect_err("refused");
    assert!(
        err.contains(&format!(
            "the TCPStore at 127.0.0.1:{port} refused the connection from 127.0.0.1:"
        )) && err.contains("another job or an earlier run"),
        "{err}"
    );
    assert_eq!(client_roundtrip(port, "job-a"), Ok(b"v".to_vec()));
}

#[test]
fn a_client_of_another_protocol_version_is_refused() {
    let port = start_store("job-a");
    let mut s = raw(port);
    s.write_all(&frame(&store::hello(PROTOCOL_VERSION + 1, "job-a")))
        .expect("writes");
    let reply = read_to_close(s).expect("a reply, then the end");
    let text = String::from_utf8_lossy(&reply);
    assert!(
        text.contains(&format!("store protocol version {}", PROTOCOL_VERSION + 1)),
        "{text}"
    );
}

#[test]
fn garbage_oversized_and_truncated_frames_close_the_connection_and_nothing_else() {
    let port = start_store("job-a");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "an HTTP request",
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        ("a 4 GiB length", u32::MAX.to_le_bytes().to_vec()),
        (
            "a hello just over the limit",
            ((store::MAX_HELLO_BYTES + 1) as u32).to_le_bytes().to_vec(),
        ),
        ("a truncated frame", {
            let mut f = 100u32.to_le_bytes().to_vec();
            f.extend_from_slice(b"short");
            f
        }),
        ("an empty frame", frame(&[])),
        (
            "a store op without a hello",
            frame(&[1, 1, 0, 0, 0, b'k', 0, 0, 0, 0]),
        ),
        ("a hello cut inside its token", {
            let h = store::hello(PROTOCOL_VERSION, "job-a");
            frame(&h[..h.len() - 3])
        }),
    ];
    for (what, bytes) in cases {
        let mut s = raw(port);
        s.write_all(&bytes).expect("writes");
        // The server may have closed (even reset) the connection already, as soon as the
        // bytes it read were enough to refuse them: then there is nothing left to half-close.
        match s.shutdown(std::net::Shutdown::Write) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotConnected => {}
            Err(e) => panic!("{what}: half-close failed: {e}"),
        }
        let got = read_to_close(s).unwrap_or_else(|e| panic!("{what}: {e}"));
        // At most a refusal reply; never a served request.
        assert!(
            got.is_empty() || String::from_utf8_lossy(&got).contains("refused"),
            "{what}: {got:?}"
        );
    }
    assert_eq!(
        client_roundtrip(port, "job-a"),
        Ok(b"v".to_vec()),
        "still serving"
    );
}

#[test]
fn a_malformed_request_after_the_hello_closes_that_connection_only() {
    let port = start_store("job-a");
    let mut s = raw(port);
    s.write_all(&frame(&store::hello(PROTOCOL_VERSION, "job-a")))
        .expect("writes");
    let mut ok = [0u8; 5];
    s.read_exact(&mut ok).expect("the hello's reply");
    assert_eq!(ok, [1, 0, 0, 0, 0], "accepted");
    s.write_all(&frame(&[99, 0, 0, 0, 0])).expect("writes");
    assert_eq!(read_to_close(s), Ok(vec![]), "closed without a reply");
    assert_eq!(client_roundtrip(port, "job-a"), Ok(b"v".to_vec()));
}
