//! Length-prefixed frames and a tiny field codec for the store and rank-to-rank protocols.
//!
//! Frames come from peers on the network, so decoding never trusts them: sizes are bounded
//! and every read is checked, yielding a [`WireError`] that names what was wrong.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest frame accepted from a peer (1 GiB).
pub const MAX_FRAME_BYTES: usize = 1 << 30;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WireError {
    /// The peer closed the connection.
    #[error("{}", crate::c10d::error::CONNECTION_CLOSED)]
    Closed,
    /// Reading or writing the socket failed.
    #[error("{0}")]
    Io(String),
    /// The peer sent something that is not a valid frame.
    #[error("malformed message from peer: {0}")]
    Malformed(String),
    /// The peer refused this connection; the text says who and why.
    #[error("{0}")]
    Refused(String),
    /// A write after the peer's host reset the connection (a request after one that met the
    /// peer gone: c10d/store.rs).
    #[error("Broken pipe")]
    BrokenPipe,
}

impl From<std::io::Error> for WireError {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe => WireError::Closed,
            _ => WireError::Io(e.to_string()),
        }
    }
}

pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, body: &[u8]) -> Result<(), WireError> {
    let mut buf = frame_buf(body.len());
    buf.extend_from_slice(body);
    write_built_frame(w, &buf).await
}

/// A frame under construction: the length prefix of a `body_len`-byte body, with room for the
/// body (append exactly `body_len` bytes, then [`write_built_frame`]). Saves a copy where the
/// body is assembled from parts.
pub fn frame_buf(body_len: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(body_len + 4);
    buf.extend_from_slice(&(body_len as u32).to_le_bytes());
    buf
}

/// Writes a frame made with [`frame_buf`].
pub async fn write_built_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    frame: &[u8],
) -> Result<(), WireError> {
    debug_assert_eq!(
        u32::from_le_bytes(frame[..4].try_into().expect("a length prefix")) as usize,
        frame.len() - 4
    );
    w.write_all(frame).await?;
    w.flush().await?;
    Ok(())
}

pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Vec<u8>, WireError> {
    read_frame_max(r, MAX_FRAME_BYTES).await
}

/// Reads a frame of at most `max_bytes`; a longer one is refused before its body is read.
pub async fn read_frame_max<R: AsyncRead + Unpin>(
    r: &mut R,
    max_bytes: usize,
) -> Result<Vec<u8>, WireError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await?;
    let n = u32::from_le_bytes(len) as usize;
    if n > max_bytes {
        return Err(WireError::Malformed(format!(
            "frame of {n} bytes exceeds the limit"
        )));
    }
    let mut body = vec![0u8; n];
    r.read_exact(&mut body).await?;
    Ok(body)
}

/// Appends fields to a frame body.
#[derive(Default)]
pub struct Enc(pub Vec<u8>);

impl Enc {
    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn i64(self, v: i64) -> Self {
        self.u64(v as u64)
    }
    pub fn bytes(mut self, v: &[u8]) -> Self {
        self.0.extend_from_slice(&(v.len() as u32).to_le_bytes());
        self.0.extend_from_slice(v);
        self
    }
    pub fn str(self, v: &str) -> Self {
        self.bytes(v.as_bytes())
    }
    pub fn done(self) -> Vec<u8> {
        self.0
    }
}

/// Reads fields back, checking every length.
pub struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Dec { buf, pos: 0 }
    }
    /// How many bytes have been read.
    pub fn pos(&self) -> usize {
        self.pos
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len());
        let end = end.ok_or_else(|| WireError::Malformed("truncated field".into()))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    pub fn u64(&mut self) -> Result<u64, WireError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    pub fn i64(&mut self) -> Result<i64, WireError> {
        Ok(self.u64()? as i64)
    }
    pub fn bytes(&mut self) -> Result<Vec<u8>, WireError> {
        Ok(self.bytes_ref()?.to_vec())
    }
    /// [`Dec::bytes`] without a copy.
    pub fn bytes_ref(&mut self) -> Result<&'a [u8], WireError> {
        let b = self.take(4)?;
        let n = u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize;
        self.take(n)
    }
    /// [`Dec::str`] without a copy.
    pub fn str_ref(&mut self) -> Result<&'a str, WireError> {
        std::str::from_utf8(self.bytes_ref()?)
            .map_err(|_| WireError::Malformed("invalid UTF-8".into()))
    }
    pub fn str(&mut self) -> Result<String, WireError> {
        String::from_utf8(self.bytes()?).map_err(|_| WireError::Malformed("invalid UTF-8".into()))
    }
}
