//! An in-process [`Link`] over tokio channels, for running the algorithms on a whole world
//! inside one test (one local task per member).

use super::{Link, LinkError};
use std::future::Future;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::Mutex;

pub struct ChanLink {
    me: usize,
    /// `tx[j]`: this member's channel to member `j`.
    tx: Vec<UnboundedSender<Vec<u8>>>,
    /// `rx[j]`: member `j`'s channel to this member.
    rx: Vec<Mutex<UnboundedReceiver<Vec<u8>>>>,
}

impl Link for ChanLink {
    fn rank(&self) -> usize {
        self.me
    }
    fn size(&self) -> usize {
        self.tx.len()
    }
    async fn send(&self, to: usize, data: Vec<u8>, _bytes: usize) -> Result<(), LinkError> {
        self.tx[to]
            .send(data)
            .map_err(|_| LinkError::Failed(format!("rank {to} is gone")))
    }
    async fn recv(&self, from: usize) -> Result<Vec<u8>, LinkError> {
        self.rx[from]
            .lock()
            .await
            .recv()
            .await
            .ok_or_else(|| LinkError::Failed(format!("rank {from} closed")))
    }
}

/// A channel link that receives as gloo does ([`Link::takes_short_broadcast`]).
pub struct GlooLike(pub ChanLink);

impl Link for GlooLike {
    fn rank(&self) -> usize {
        self.0.rank()
    }
    fn size(&self) -> usize {
        self.0.size()
    }
    async fn send(&self, to: usize, data: Vec<u8>, bytes: usize) -> Result<(), LinkError> {
        self.0.send(to, data, bytes).await
    }
    async fn recv(&self, from: usize) -> Result<Vec<u8>, LinkError> {
        self.0.recv(from).await
    }
    fn takes_short_broadcast(&self) -> bool {
        true
    }
}

/// Runs `body(link)` for every member of an `n`-member world; results in rank order.
pub fn run_world<T, F, Fut>(n: usize, body: F) -> Vec<T>
where
    T: 'static,
    F: Fn(ChanLink) -> Fut,
    Fut: Future<Output = T> + 'static,
{
    let mut txs: Vec<Vec<Option<UnboundedSender<Vec<u8>>>>> = vec![vec![None; n]; n];
    let mut rxs: Vec<Vec<Option<UnboundedReceiver<Vec<u8>>>>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    for (from, row) in txs.iter_mut().enumerate() {
        for (to, slot) in row.iter_mut().enumerate() {
            let (tx, rx) = unbounded_channel();
            *slot = Some(tx);
            rxs[to][from] = Some(rx);
        }
    }
    let links: Vec<ChanLink> = txs
        .into_iter()
        .zip(rxs)
        .enumerate()
        .map(|(me, (tx, rx))| ChanLink {
            me,
            tx: tx.into_iter().map(|t| t.expect("made")).collect(),
            rx: rx
                .into_iter()
                .map(|r| Mutex::new(r.expect("made")))
                .collect(),
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let handles: Vec<_> = links
            .into_iter()
            .map(|l| tokio::task::spawn_local(body(l)))
            .collect();
        let mut out = Vec::with_capacity(n);
        for h in handles {
            out.push(h.await.expect("member task"));
        }
        out
    })
}
