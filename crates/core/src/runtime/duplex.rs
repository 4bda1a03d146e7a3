//! One stream, read and written from two tasks: a fabric connection's writer and its watcher.
//!
//! A gloo pair is one full-duplex socket per pair of ranks, so a rank notices its peer's death
//! on the connection it opened itself. The fabric sends on its outgoing connection and watches
//! the same connection for the peer's close (peers never write on it). Everything runs on one
//! thread (a LocalSet), and each poll borrows the stream only while it runs, so the two halves
//! never hold it at once; tokio's and turmoil's streams keep separate wakers per direction.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A handle on a shared stream; clones are handles on the same stream.
pub struct Duplex<S>(Rc<RefCell<S>>);

impl<S> Duplex<S> {
    pub fn new(s: S) -> Self {
        Duplex(Rc::new(RefCell::new(s)))
    }

    /// Another handle on the same stream.
    pub fn handle(&self) -> Self {
        Duplex(self.0.clone())
    }

    /// Runs `f` on the stream (no poll is running: one thread).
    pub fn with<T>(&self, f: impl FnOnce(&mut S) -> T) -> T {
        f(&mut self.0.borrow_mut())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Duplex<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Duplex<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_shutdown(cx)
    }
}
