//! Reads a pickled flight-recorder dump into JSON values, with pickle's own memo semantics: a
//! memoized object referenced again (`BINGET`) is the same value wherever it appears.
//!
//! Why not serde-pickle (which scen uses to *write* dumps, `export`): its value decoder
//! reference-counts memo entries by their references in the stream, so a memoized object inside
//! another memoized object that is referenced twice is used up early and the decode fails with
//! "recursive structure found" (upstream pull request #24, open since 2023; the maintainer
//! notes a fix needs an `Rc`-based API). Every real dump with the default stack traces hits it:
//! torch's pickler memoizes each frame dict and each string, and entries share frames. Its only
//! option, `replace_recursive_structures`, turns such references into `None`, silently (a dict
//! key `name` shared by frames and `pg_config` goes missing). The fork `pickled` declares itself
//! unmaintained. So this reads the opcodes torch's C++ pickler and Python's pickle write for
//! plain data (dicts, lists, tuples, str, bytes, int, float, bool, None; protocols 2-5) and
//! names any other opcode with its offset.

use serde_json::Value as J;
use std::collections::BTreeMap;

/// Why a pickle cannot be read: the opcode's offset and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum PickleError {
    #[error("offset {0}: unexpected end of the data")]
    Truncated(usize),
    #[error("offset {0}: opcode 0x{1:02x} is not plain data (scen reads dicts, lists, tuples, strings, numbers)")]
    Opcode(usize, u8),
    #[error("offset {0}: {1}")]
    Bad(usize, &'static str),
}

/// A stack item: a value, or a memoized object (mutated in the memo while it is filled).
enum Item {
    Val(J),
    Memo(u32),
    Mark,
}

struct Machine<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Where the current opcode starts (for errors).
    at: usize,
    stack: Vec<Item>,
    memo: BTreeMap<u32, J>,
}

/// Decodes one pickle (to its `STOP`).
pub fn decode(bytes: &[u8]) -> Result<J, PickleError> {
    let mut m = Machine {
        bytes,
        pos: 0,
        at: 0,
        stack: Vec::new(),
        memo: BTreeMap::new(),
    };
    loop {
        m.at = m.pos;
        let op = m.byte()?;
        if op == b'.' {
            let top = m
                .stack
                .pop()
                .ok_or(PickleError::Bad(m.at, "STOP on an empty stack"))?;
            return m.value(top);
        }
        m.step(op)?;
    }
}

impl Machine<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], PickleError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or(PickleError::Truncated(self.at))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn le(&mut self, n: usize) -> Result<u64, PickleError> {
        let b = self.take(n)?;
        Ok(b.iter().rev().fold(0u64, |a, x| (a << 8) | u64::from(*x)))
    }

    fn text(&mut self, n: usize) -> Result<J, PickleError> {
        let at = self.at;
        let s =
            std::str::from_utf8(self.take(n)?).map_err(|_| PickleError::Bad(at, "bad UTF-8"))?;
        Ok(J::String(s.to_string()))
    }

    fn push(&mut self, v: J) {
        self.stack.push(Item::Val(v));
    }

    /// The value of an item (a memoized object's current contents).
    fn value(&self, i: Item) -> Result<J, PickleError> {
        match i {
            Item::Val(v) => Ok(v),
            Item::Memo(id) => self
                .memo
                .get(&id)
                .cloned()
                .ok_or(PickleError::Bad(self.at, "memo reference to nothing")),
            Item::Mark => Err(PickleError::Bad(self.at, "a MARK where a value belongs")),
        }
    }

    fn pop(&mut self) -> Result<J, PickleError> {
        let i = self
            .stack
            .pop()
            .ok_or(PickleError::Bad(self.at, "stack underflow"))?;
        self.value(i)
    }

    /// The values above the topmost MARK, which is removed.
    fn pop_mark(&mut self) -> Result<Vec<J>, PickleError> {
        let mark = self.stack.iter().rposition(|i| matches!(i, Item::Mark));
        let mark = mark.ok_or(PickleError::Bad(self.at, "no MARK"))?;
        let items: Vec<Item> = self.stack.drain(mark..).skip(1).collect();
        items.into_iter().map(|i| self.value(i)).collect()
    }

    /// The container on top of the stack, in the memo if it is memoized.
    fn top(&mut self) -> Result<&mut J, PickleError> {
        let at = self.at;
        match self.stack.last_mut() {
            Some(Item::Val(v)) => Ok(v),
            Some(Item::Memo(id)) => self
                .memo
                .get_mut(id)
                .ok_or(PickleError::Bad(at, "memo reference to nothing")),
            _ => Err(PickleError::Bad(at, "no container on the stack")),
        }
    }

    fn memoize(&mut self, id: u32) -> Result<(), PickleError> {
        let v = self.pop()?;
        self.memo.insert(id, v);
        self.stack.push(Item::Memo(id));
        Ok(())
    }

    fn get(&mut self, id: u32) -> Result<(), PickleError> {
        if !self.memo.contains_key(&id) {
            return Err(PickleError::Bad(self.at, "memo reference to nothing"));
        }
        // The memo entry itself: a container still being filled stays shared.
        self.stack.push(Item::Memo(id));
        Ok(())
    }

    fn append(&mut self, items: Vec<J>) -> Result<(), PickleError> {
        let at = self.at;
        match self.top()? {
            J::Array(a) => {
                a.extend(items);
                Ok(())
            }
            _ => Err(PickleError::Bad(at, "APPEND to a non-list")),
        }
    }

    fn set_items(&mut self, kv: Vec<J>) -> Result<(), PickleError> {
        let at = self.at;
        if !kv.len().is_multiple_of(2) {
            return Err(PickleError::Bad(at, "odd number of dict items"));
        }
        let J::Object(d) = self.top()? else {
            return Err(PickleError::Bad(at, "SETITEM on a non-dict"));
        };
        let mut it = kv.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            let key = match k {
                J::String(s) => s,
                other => other.to_string(),
            };
            d.insert(key, v);
        }
        Ok(())
    }

    fn step(&mut self, op: u8) -> Result<(), PickleError> {
        match op {
            0x80 => {
                self.byte()?; // PROTO n
            }
            0x95 => {
                self.take(8)?; // FRAME size
            }
            b'(' => self.stack.push(Item::Mark),
            b'N' => self.push(J::Null),
            0x88 => self.push(J::Bool(true)),
            0x89 => self.push(J::Bool(false)),
            b'J' => {
                let v = self.le(4)? as u32 as i32;
                self.push(J::from(v));
            }
            b'K' => {
                let v = self.byte()?;
                self.push(J::from(v));
            }
            b'M' => {
                let v = self.le(2)?;
                self.push(J::from(v));
            }
            0x8a => {
                let n = usize::from(self.byte()?);
                let v = self.long(n)?;
                self.push(v);
            }
            0x8b => {
                let n = self.le(4)? as usize;
                let v = self.long(n)?;
                self.push(v);
            }
            b'G' => {
                let b = self.take(8)?;
                let v = f64::from_be_bytes(b.try_into().expect("8 bytes"));
                self.push(serde_json::Number::from_f64(v).map_or(J::Null, J::Number));
            }
            b'X' | b'B' => {
                let n = self.le(4)? as usize;
                let v = self.text_or_bytes(n)?;
                self.push(v);
            }
            0x8c | b'C' => {
                let n = usize::from(self.byte()?);
                let v = self.text_or_bytes(n)?;
                self.push(v);
            }
            0x8d | 0x8e => {
                let n = self.le(8)? as usize;
                let v = self.text_or_bytes(n)?;
                self.push(v);
            }
            b']' => self.push(J::Array(vec![])),
            b')' => self.push(J::Array(vec![])),
            b'}' => self.push(J::Object(Default::default())),
            b'l' | b't' => {
                let items = self.pop_mark()?;
                self.push(J::Array(items));
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                let mut items = (0..n).map(|_| self.pop()).collect::<Result<Vec<_>, _>>()?;
                items.reverse();
                self.push(J::Array(items));
            }
            b'a' => {
                let v = self.pop()?;
                self.append(vec![v])?;
            }
            b'e' => {
                let items = self.pop_mark()?;
                self.append(items)?;
            }
            b's' => {
                let v = self.pop()?;
                let k = self.pop()?;
                self.set_items(vec![k, v])?;
            }
            b'u' => {
                let kv = self.pop_mark()?;
                self.set_items(kv)?;
            }
            b'q' => {
                let id = self.byte()?;
                self.memoize(u32::from(id))?;
            }
            b'r' => {
                let id = self.le(4)? as u32;
                self.memoize(id)?;
            }
            0x94 => {
                let id = self.memo.len() as u32;
                self.memoize(id)?;
            }
            b'h' => {
                let id = self.byte()?;
                self.get(u32::from(id))?;
            }
            b'j' => {
                let id = self.le(4)? as u32;
                self.get(id)?;
            }
            other => return Err(PickleError::Opcode(self.at, other)),
        }
        Ok(())
    }

    /// `X`/`\x8c`/`\x8d` are text; `B`/`C`/`\x8e` bytes, read as (lossy) text.
    fn text_or_bytes(&mut self, n: usize) -> Result<J, PickleError> {
        match self.bytes[self.at] {
            b'X' | 0x8c | 0x8d => self.text(n),
            _ => Ok(J::String(
                String::from_utf8_lossy(self.take(n)?).into_owned(),
            )),
        }
    }

    /// A little-endian two's-complement int of `n` bytes; beyond i64 it is kept as text.
    fn long(&mut self, n: usize) -> Result<J, PickleError> {
        let b = self.take(n)?.to_vec();
        if n == 0 {
            return Ok(J::from(0));
        }
        if n <= 8 {
            let neg = b[n - 1] & 0x80 != 0;
            let mut buf = [if neg { 0xff } else { 0 }; 8];
            buf[..n].copy_from_slice(&b);
            return Ok(J::from(i64::from_le_bytes(buf)));
        }
        Ok(J::String(format!("0x{}", hex_le(&b))))
    }
}

fn hex_le(b: &[u8]) -> String {
    b.iter().rev().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Python 3.11: `pickle.dumps(obj, 2)` where a frame dict is shared by two entries and
    /// its key strings are memoized inside it; serde-pickle fails on exactly this sharing.
    #[test]
    fn shared_memoized_containers_decode_everywhere_they_are_used() {
        // f = {"name": "all_reduce", "line": 3}; pickle.dumps({"a": [f], "b": [f], "name": "x"}, 2)
        let bytes = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02}q\x03(X\x04\x00\x00\x00nameq\x04X\n\x00\x00\x00all_reduceq\x05X\x04\x00\x00\x00lineq\x06K\x03uaX\x01\x00\x00\x00bq\x07]q\x08h\x03ah\x04X\x01\x00\x00\x00xq\tu.";
        let v = decode(bytes).expect("decodes");
        let f = serde_json::json!({"name": "all_reduce", "line": 3});
        assert_eq!(
            v,
            serde_json::json!({"a": [f.clone()], "b": [f], "name": "x"})
        );
    }

    #[test]
    fn ints_tuples_and_none_decode_as_python_reads_them() {
        // pickle.dumps((-1, 300, 2**40, None, True, 1.5, ()), 2)
        let bytes = b"\x80\x02(J\xff\xff\xff\xffM,\x01\x8a\x06\x00\x00\x00\x00\x00\x01N\x88G?\xf8\x00\x00\x00\x00\x00\x00)tq\x00.";
        let v = decode(bytes).expect("decodes");
        assert_eq!(
            v,
            serde_json::json!([-1, 300, 1u64 << 40, null, true, 1.5, []])
        );
    }

    #[test]
    fn other_opcodes_and_truncation_are_named() {
        let e = decode(b"\x80\x02cos\nsystem\n.").unwrap_err();
        assert_eq!(
            e.to_string(),
            "offset 2: opcode 0x63 is not plain data (scen reads dicts, lists, tuples, strings, numbers)"
        );
        let e = decode(b"\x80\x02X\x09\x00\x00\x00abc").unwrap_err();
        assert_eq!(e.to_string(), "offset 2: unexpected end of the data");
    }
}
