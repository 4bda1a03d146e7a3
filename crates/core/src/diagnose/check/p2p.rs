//! Send/recv pairing (the p2p half of check.rs): a group's sends meet its receives by
//! (src, dst, tag, n-th), and what an unmatched or mis-sized pair does on its backend.

use super::*;

/// What a send or recv whose peer never posted the other half does. `gone`: the peer failed
/// before the call ended, its process ended (gloo's pair reads the close: the call raises, at
/// once when it was posted after that, user-path 7/1073).
fn unmatched_effect(one: &CallRecord, gone: bool) -> (Consequence, String) {
    let send = one.kind == CallKind::Send;
    let gloo = one.backend == "gloo";
    if gone && gloo {
        return (
            Consequence::Errors,
            "its peer's process ended without posting it: gloo's pair reads the close and the \
             call raises its peer-loss error, closed or reset (R29)"
                .into(),
        );
    }
    let consequence = if send && !gloo {
        Consequence::LostOrHangs
    } else {
        Consequence::Hangs
    };
    let why = if send && gloo {
        "a gloo send waits until its receiver posts the matching recv (gloo's unbound buffers \
         rendezvous), so it times out (R29) and so does a peer that waits for it later; DETAIL \
         does not check send/recv (R32)"
    } else if send {
        "a send completes once buffered (gloo, eager device protocols), so the data is silently \
         dropped; large device sends block until a recv is posted (docs/rules/oneccl.md §4). \
         DETAIL does not check send/recv (R32)"
    } else {
        "the recv waits for data that never comes: gloo until its timeout (R29), xccl forever \
         (R29), nccl until the watchdog (R31)"
    };
    (consequence, why.into())
}

/// Send/recv pairing on one group: the n-th send from src to dst with a tag meets the n-th
/// recv there with that tag (gloo's matching; untagged calls all have tag 0).
pub(super) fn check_p2p(recs: &[&CallRecord], failed_at: &[Option<u64>]) -> Vec<Mismatch> {
    type Key = (usize, usize, u32, u64);
    let mut sends: BTreeMap<Key, &CallRecord> = BTreeMap::new();
    let mut recvs: BTreeMap<Key, &CallRecord> = BTreeMap::new();
    let mut nth: BTreeMap<(usize, usize, u32, bool), u64> = BTreeMap::new();
    let mut p2p: Vec<&CallRecord> = recs
        .iter()
        .copied()
        .filter(|r| r.endpoints().is_some())
        .collect();
    p2p.sort_by_key(|r| r.seq);
    for r in p2p {
        let Some((s, d)) = r.endpoints() else {
            continue;
        };
        let send = r.kind == CallKind::Send;
        let n = nth.entry((s, d, r.tag, send)).or_insert(0);
        *n += 1;
        let m = if send { &mut sends } else { &mut recvs };
        m.insert((s, d, r.tag, *n), r);
    }
    let keys: BTreeSet<Key> = sends.keys().chain(recvs.keys()).copied().collect();
    let mut out = Vec::new();
    let mut reported: BTreeSet<(usize, usize)> = BTreeSet::new();
    for k in keys {
        if reported.contains(&(k.0, k.1)) {
            continue;
        }
        let m = match (sends.get(&k), recvs.get(&k)) {
            (Some(s), Some(r)) if s.fp.nbytes != r.fp.nbytes || s.fp.dtype != r.fp.dtype => {
                let gloo = s.backend == "gloo";
                Some(Mismatch {
                    kind: MismatchKind::P2pSize,
                    group: s.group.clone(),
                    group_label: s.group_label.clone(),
                    backend: s.backend.clone(),
                    seq: s.seq,
                    a: Side::of(s),
                    b: Some(Side::of(r)),
                    absent: None,
                    // A send and its recv differ in op by nature: compare the rest.
                    aspects: aspects(
                        &s.fp,
                        &Fingerprint {
                            op: s.fp.op.clone(),
                            ..r.fp.clone()
                        },
                    ),
                    consequence: if s.fp.nbytes > r.fp.nbytes && gloo {
                        Consequence::Aborts
                    } else if s.fp.nbytes != r.fp.nbytes && !gloo {
                        Consequence::Hangs
                    } else {
                        Consequence::CorruptsSilently
                    },
                    why: if s.fp.nbytes > r.fp.nbytes && gloo {
                        "gloo's pair enforces op.preamble.length <= op.nbytes: the larger \
                         message aborts the receiving process (gloo::EnforceNotMet, SIGABRT) and \
                         its sender's connection resets (R32 does not check send/recv)"
                            .into()
                    } else if s.fp.nbytes < r.fp.nbytes && gloo {
                        "gloo's pair takes a message shorter than the posted buffer into its \
                         first bytes: the rest of the recv buffer keeps its values and nothing \
                         checks (R32 does not check send/recv)"
                            .into()
                    } else if s.fp.nbytes != r.fp.nbytes {
                        "the device backend does not compare the counts of a send and its recv: \
                         the recv never completes (as for collectives, docs/rules/oneccl.md §4); xccl \
                         forever (R29), nccl until the watchdog (R31)"
                            .into()
                    } else {
                        "same bytes, another dtype: received and read as the wrong type".into()
                    },
                })
            }
            (Some(one), None) | (None, Some(one)) => {
                let other = one.peer.expect("p2p has a peer");
                // The call failed, its peer having failed before: it failed on the peer's end,
                // not on a timeout both reached together (tags crossed).
                let gone = one.state == CallState::Failed
                    && failed_at
                        .get(other)
                        .copied()
                        .flatten()
                        .is_some_and(|t| t < one.t_end_ms.unwrap_or(u64::MAX));
                let (consequence, why) = unmatched_effect(one, gone);
                Some(Mismatch {
                    kind: MismatchKind::P2pUnmatched,
                    group: one.group.clone(),
                    group_label: one.group_label.clone(),
                    backend: one.backend.clone(),
                    seq: one.seq,
                    a: Side::of(one),
                    b: None,
                    absent: Some(other),
                    aspects: vec![],
                    consequence,
                    why,
                })
            }
            _ => None,
        };
        if let Some(m) = m {
            reported.insert((k.0, k.1));
            out.push(m);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::check::tests::rec;

    #[test]
    fn sends_pair_with_recvs_per_src_dst_sequence() {
        let p2p = |rank: usize, kind: CallKind, peer: usize, seq: u64, numel: usize| {
            let mut r = rec(
                rank,
                seq,
                if kind == CallKind::Send {
                    "send"
                } else {
                    "recv"
                },
                "f32",
                numel,
            );
            r.kind = kind;
            r.peer = Some(peer);
            r.fp.reduce_op = None;
            r
        };
        let v = vec![
            p2p(0, CallKind::Send, 1, 1, 4),
            p2p(1, CallKind::Recv, 0, 1, 4),
            p2p(0, CallKind::Send, 1, 2, 4),
            p2p(1, CallKind::Send, 0, 1, 4),
            p2p(0, CallKind::Recv, 1, 1, 2),
        ];
        let m = check(&v, &[true, true], &[]);
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].kind, m[0].seq, m[0].absent),
            (MismatchKind::P2pUnmatched, 2, Some(1))
        );
        assert_eq!(
            (m[1].kind, m[1].a.rank, m[1].consequence),
            (MismatchKind::P2pSize, 1, Consequence::Hangs)
        );
    }

    /// A gloo recv whose sender failed before the recv ended raises on the pair's close; one
    /// whose sender failed with it (both timed out, tags crossed) timed out as a hang does.
    #[test]
    fn an_unmatched_gloo_call_whose_peer_ended_first_errors() {
        let mut r = rec(0, 1, "recv", "f32", 4);
        (r.kind, r.peer, r.backend, r.t_end_ms, r.state) = (
            CallKind::Recv,
            Some(1),
            "gloo".into(),
            Some(2000),
            CallState::Failed,
        );
        let v = vec![r];
        let effect =
            |failed_at: &[Option<u64>]| check(&v, &[false, false], failed_at)[0].consequence;
        assert_eq!(effect(&[Some(2000), Some(1)]), Consequence::Errors);
        assert_eq!(effect(&[Some(2000), Some(2000)]), Consequence::Hangs);
        assert_eq!(effect(&[Some(2000), None]), Consequence::Hangs);
        // Posted and never waited: nothing raised.
        let mut posted = v[0].clone();
        (posted.state, posted.t_end_ms) = (CallState::Started, None);
        let m = check(&[posted], &[true, false], &[None, Some(1)]);
        assert_eq!(m[0].consequence, Consequence::Hangs);
    }
}
