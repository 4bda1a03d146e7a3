//! The FileStore: the store `init_method="file://PATH"` rendezvouses through (R15). It exists
//! apart from the TCPStore because it is a file, not a service: no rank serves it, no network
//! reaches it, and it lives on its node's disk past any rank that used it (rank 0 leaving takes
//! nothing with it, where rank 0 leaving a tcp:// or env:// job takes the TCPStore).
//!
//! What real PyTorch 2.15 does, and so the model (`torch/csrc/distributed/c10d/FileStore.cpp`;
//! measured by `scripts/torch-checks/filestore.sh`, docs/rules/c10d.md#r15):
//! - The file is per node: ranks of one node opening one path share its keys; a rank of
//!   another node opening the same path opens another file (a shared filesystem is not
//!   modelled), and its init waits for keys that never come.
//! - Constructing the store counts a reference (`refcount/` += 1); freeing it (its group
//!   destroyed, or its init raised) counts a finished worker (`cleanup/` += 1) and drops the
//!   reference, and the last one (references 0, finished workers >= its world size) removes the
//!   file. A process that exits with its group still up frees nothing: the file stays.
//! - A blocking read polls the file and gives up once the elapsed *whole seconds* exceed the
//!   timeout, so a 3 s timeout raises after 4 s: `wait` (what gloo's connectFullMesh does)
//!   raises `RuntimeError: Wait timeout`, `get` `RuntimeError: Timeout waiting for key: K after
//!   T ms`.
//! - There is no waitForWorkers: a rank's init returns once its gloo peers' keys are there.
//!
//! Reads cost no virtual time (real ones take microseconds, and their 10 ms polls are not
//! modelled). A key a rank reads is stale when the store that wrote it was freed since (a
//! destroyed group's, a failed init's) or belongs to another init of its process than the
//! reader's (an init again on the same path: the file still holds the first group's keys until
//! every rank freed its store). Real ranks then dial an old gloo address and fail in ways that
//! vary with timing (measured: `Connection refused` at once, `Connect timeout` after 15 s,
//! `Connection closed by peer` in the next collective), which scen does not model
//! ([`StoreError::Stale`]).

use super::{torch_client::TorchClock, KeySeq};
use super::{wait_for, StoreError, StoreState, Values, NO_TIMEOUT};
use crate::net::Clock;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// One node's store files, by path: shared by the node's ranks, outliving each of them.
#[derive(Default)]
pub struct Files {
    files: RefCell<BTreeMap<String, Rc<File>>>,
    /// Stores opened so far on this node: per id, which of its process's inits on its path
    /// opened it (0 the first, 1 after a destroy, ...).
    opened: RefCell<Vec<u32>>,
    /// Per process and path, the stores it opened there so far.
    inits: RefCell<BTreeMap<(usize, String), u32>>,
    /// Ids of the stores freed since.
    freed: RefCell<BTreeSet<u64>>,
}

/// One store file: its keys, who wrote each, and the two counters its destructor keeps.
#[derive(Default)]
struct File {
    state: StoreState,
    /// Per key, the id of the store that last wrote it (looked up only: no order reaches output).
    writer: RefCell<BTreeMap<String, u64>>,
    refcount: Cell<i64>,
    cleanup: Cell<i64>,
}

impl Files {
    /// The file at `path`, created if absent (`open(O_RDWR | O_CREAT)`).
    fn open(&self, path: &str) -> Rc<File> {
        self.files
            .borrow_mut()
            .entry(path.to_string())
            .or_default()
            .clone()
    }

    /// Whether a store file exists at `path`.
    pub fn exists(&self, path: &str) -> bool {
        self.files.borrow().contains_key(path)
    }

    /// The keys of the file at `path`, in order (tests, diagnostics).
    pub fn keys(&self, path: &str) -> Vec<String> {
        let files = self.files.borrow();
        let Some(f) = files.get(path) else {
            return vec![];
        };
        let keys: Vec<String> = f.writer.borrow().keys().cloned().collect();
        keys
    }
}

/// One rank's `FileStore(path, world_size)`.
pub struct FileClient {
    files: Rc<Files>,
    path: String,
    world_size: i64,
    id: u64,
    /// Which init of its process on this path opened it.
    init: u32,
    clock: TorchClock,
    freed: Cell<bool>,
}

/// When a blocking read that started at `now_ms` gives up: once the whole seconds elapsed
/// exceed `timeout_ms` (FileStore compares `duration_cast<seconds>(elapsed) > timeout`).
pub fn give_up_at_ms(now_ms: u64, timeout_ms: u64) -> Option<u64> {
    (timeout_ms != NO_TIMEOUT).then(|| now_ms.saturating_add((timeout_ms / 1000 + 1) * 1000))
}

impl FileClient {
    /// Process `proc`'s store: opens (creates) the file and counts a reference.
    pub fn open<C: Clock>(
        files: &Rc<Files>,
        path: &str,
        world_size: usize,
        proc: usize,
        clock: C,
    ) -> Self {
        let init = {
            let mut inits = files.inits.borrow_mut();
            let n = inits.entry((proc, path.to_string())).or_default();
            *n += 1;
            *n - 1
        };
        let id = {
            let mut opened = files.opened.borrow_mut();
            opened.push(init);
            opened.len() as u64 - 1
        };
        let f = files.open(path);
        f.refcount.set(f.refcount.get() + 1);
        FileClient {
            files: files.clone(),
            path: path.to_string(),
            world_size: world_size as i64,
            id,
            init,
            clock: TorchClock::of(clock),
            freed: Cell::new(false),
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The store's destructor (once): if the file is still there, one more finished worker and
    /// one reference less; the last one removes the file.
    pub fn free(&self) {
        if self.freed.replace(true) {
            return;
        }
        self.files.freed.borrow_mut().insert(self.id);
        let Some(f) = self.files.files.borrow().get(&self.path).cloned() else {
            return;
        };
        f.cleanup.set(f.cleanup.get() + 1);
        f.refcount.set(f.refcount.get() - 1);
        if f.refcount.get() == 0 && self.world_size >= 0 && f.cleanup.get() >= self.world_size {
            self.files.files.borrow_mut().remove(&self.path);
        }
    }

    fn write(&self, f: &File, key: &str) {
        f.writer.borrow_mut().insert(key.to_string(), self.id);
    }

    /// A present value, unless it is stale: written through a store freed since, or opened
    /// by another init of its process than this store.
    fn fresh(&self, f: &File, key: &str, v: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        let writer = f.writer.borrow().get(key).copied();
        let stale = writer.is_some_and(|w| {
            w != self.id
                && (self.files.freed.borrow().contains(&w)
                    || self.files.opened.borrow().get(w as usize) != Some(&self.init))
        });
        if stale {
            return Err(StoreError::Stale {
                key: key.to_string(),
                path: self.path.clone(),
            });
        }
        Ok(v)
    }

    pub fn set(&self, key: &str, value: &[u8]) {
        let f = self.files.open(&self.path);
        f.state.set(key.to_string(), value.to_vec());
        self.write(&f, key);
    }

    pub fn add(&self, key: &str, delta: i64) -> i64 {
        let f = self.files.open(&self.path);
        let v = f.state.add(key, delta);
        self.write(&f, key);
        v
    }

    pub fn check(&self, key: &str) -> bool {
        self.files.open(&self.path).state.contains(key)
    }

    pub fn compare_set(&self, key: &str, expected: &[u8], desired: &[u8]) -> Vec<u8> {
        let f = self.files.open(&self.path);
        let v = f.state.compare_set(key, expected, desired.to_vec());
        self.write(&f, key);
        v
    }

    /// Removes `key`; FileStore says `true` whether or not it was there (real torch 2.15).
    pub fn delete_key(&self, key: &str) -> bool {
        self.files.open(&self.path).state.delete(key);
        true
    }

    pub fn num_keys(&self) -> i64 {
        self.files.open(&self.path).state.len() as i64
    }

    /// Blocks until `key` exists; gives up as FileStore does ([`give_up_at_ms`]).
    pub async fn get(&self, key: &str, timeout_ms: u64) -> Result<Vec<u8>, StoreError> {
        let deadline = give_up_at_ms(self.clock.now_ms(), timeout_ms);
        self.get_until(key, deadline, timeout_ms).await
    }

    /// Blocks until `key` exists, up to exactly `timeout_ms`: a wait of the model's that stands
    /// for another mechanism than FileStore's own (DETAIL's monitoredBarrier, gloo's timing).
    pub async fn get_exact(&self, key: &str, timeout_ms: u64) -> Result<Vec<u8>, StoreError> {
        let deadline =
            (timeout_ms != NO_TIMEOUT).then(|| self.clock.now_ms().saturating_add(timeout_ms));
        self.get_until(key, deadline, timeout_ms).await
    }

    async fn get_until(
        &self,
        key: &str,
        deadline: Option<u64>,
        timeout_ms: u64,
    ) -> Result<Vec<u8>, StoreError> {
        let f = self.files.open(&self.path);
        let clock = self.clock.clone();
        match wait_for(&f.state, key, &clock, deadline, || f.state.get(key)).await {
            Some(v) => self.fresh(&f, key, v),
            None => Err(StoreError::Timeout {
                key: key.to_string(),
                timeout_ms,
                value: 0,
            }),
        }
    }

    /// Blocks until the counter `key` reaches `n`, polling as FileStore's callers do.
    pub async fn wait_ge(&self, key: &str, n: i64, timeout_ms: u64) -> Result<i64, StoreError> {
        let f = self.files.open(&self.path);
        let deadline = give_up_at_ms(self.clock.now_ms(), timeout_ms);
        let ready = || Some(f.state.counter(key)).filter(|v| *v >= n);
        match wait_for(&f.state, key, &self.clock, deadline, ready).await {
            Some(v) => Ok(v),
            None => Err(StoreError::Timeout {
                key: key.to_string(),
                timeout_ms,
                value: f.state.counter(key),
            }),
        }
    }

    pub fn check_seq(&self, keys: &KeySeq) -> Vec<bool> {
        let f = self.files.open(&self.path);
        (0..keys.len())
            .map(|k| f.state.contains(&keys.key(k)))
            .collect()
    }

    /// The values of `keys` in order up to the first absent one (never blocks).
    pub fn get_seq(&self, keys: &KeySeq) -> Result<Values, StoreError> {
        let f = self.files.open(&self.path);
        let mut out = Vec::new();
        for k in 0..keys.len() {
            let key = keys.key(k);
            match f.state.get(&key) {
                Some(v) => out.push(self.fresh(&f, &key, v)?),
                None => break,
            }
        }
        Ok(Values::of(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    /// A clock that never advances (the tests below never block).
    #[derive(Clone)]
    struct Still;
    impl Clock for Still {
        fn now_ms(&self) -> u64 {
            0
        }
        fn sleep_until_ms(&self, _t: u64) -> impl Future<Output = ()> {
            std::future::pending()
        }
    }

    #[test]
    fn last_free_removes_the_file_once_every_worker_finished() {
        let files = Rc::new(Files::default());
        let a = FileClient::open(&files, "/tmp/f", 2, 0, Still);
        let b = FileClient::open(&files, "/tmp/f", 2, 1, Still);
        a.set("k", b"1");
        assert!(b.check("k"));
        a.free();
        a.free();
        assert!(files.exists("/tmp/f"), "one reference is left");
        b.free();
        assert!(!files.exists("/tmp/f"));
    }

    #[test]
    fn a_store_freed_early_keeps_the_file_for_fewer_workers() {
        // Two of three ranks open and free it (their init raised): cleanup 2 < 3, file stays.
        let files = Rc::new(Files::default());
        let a = FileClient::open(&files, "/tmp/f", 3, 0, Still);
        let b = FileClient::open(&files, "/tmp/f", 3, 1, Still);
        a.free();
        b.free();
        assert!(files.exists("/tmp/f"));
    }

    #[test]
    fn keys_of_a_freed_store_are_stale_to_others() {
        let files = Rc::new(Files::default());
        let a = FileClient::open(&files, "/p", 3, 0, Still);
        let b = FileClient::open(&files, "/p", 3, 1, Still);
        a.set("addr/0", b"x");
        assert_eq!(b.get_seq(&seq("addr/", 1)).unwrap().len(), 1);
        a.free();
        assert!(matches!(
            b.get_seq(&seq("addr/", 1)),
            Err(StoreError::Stale { .. })
        ));
    }

    #[test]
    fn keys_of_another_init_of_their_process_are_stale() {
        // Rank 0 destroys and inits again on the path while rank 1 is still in its first
        // group: rank 1's key is the first group's.
        let files = Rc::new(Files::default());
        let a0 = FileClient::open(&files, "/p", 2, 0, Still);
        let b0 = FileClient::open(&files, "/p", 2, 1, Still);
        a0.set("addr/0", b"a");
        b0.set("addr/1", b"b");
        a0.free();
        let a1 = FileClient::open(&files, "/p", 2, 0, Still);
        assert!(files.exists("/p"), "rank 1 still holds it");
        assert!(matches!(
            a1.get_seq(&KeySeq {
                prefix: "addr/".into(),
                start: 1,
                end: 2,
                skip: None
            }),
            Err(StoreError::Stale { .. })
        ));
        // Rank 1's second init then reads rank 0's second key: fresh.
        b0.free();
        let b1 = FileClient::open(&files, "/p", 2, 1, Still);
        a1.set("addr/0", b"a1");
        assert_eq!(b1.get_seq(&seq("addr/", 1)).unwrap().len(), 1);
    }

    #[test]
    fn give_up_after_the_whole_seconds_exceed_the_timeout() {
        assert_eq!(give_up_at_ms(100, 3000), Some(4100));
        assert_eq!(give_up_at_ms(0, 2500), Some(3000));
        assert_eq!(give_up_at_ms(0, 5000), Some(6000));
        assert_eq!(give_up_at_ms(0, NO_TIMEOUT), None);
    }

    fn seq(prefix: &str, n: usize) -> KeySeq {
        KeySeq {
            prefix: prefix.into(),
            start: 0,
            end: n,
            skip: None,
        }
    }
}
