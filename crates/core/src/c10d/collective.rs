//! The table of PyTorch collectives the model serves (R34): names as scenario files and
//! `torch.distributed` spell them, the `OpType` c10d records, and what each takes.
//!
//! One row per op, so the scenario loader, the rank interpreter and the reports agree on what an
//! op is; adding an op starts here.

/// A collective call other than barrier and point-to-point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CollOp {
    AllReduce,
    AllReduceCoalesced,
    Reduce,
    Broadcast,
    AllGather,
    AllGatherIntoTensor,
    AllGatherCoalesced,
    AllGatherIntoTensorCoalesced,
    Gather,
    Scatter,
    ReduceScatter,
    ReduceScatterTensor,
    ReduceScatterTensorCoalesced,
    AllToAllSingle,
    AllToAll,
}

/// How a call's output is laid out, which decides the variables an `expect` formula gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One tensor: `i`, `n`.
    Flat,
    /// `count` tensors of equal size: `k` (tensor), `i` (element in it), `n` (its size).
    Tensors,
    /// One chunk per group member, concatenated: `chunk`, `j` (element in chunk), `i`, `n`.
    Chunks,
    /// Per input tensor `k`, one chunk per member: `k`, `chunk`, `j`, `i`, `n`.
    TensorChunks,
}

impl CollOp {
    pub const ALL: [CollOp; 15] = [
        CollOp::AllReduce,
        CollOp::AllReduceCoalesced,
        CollOp::Reduce,
        CollOp::Broadcast,
        CollOp::AllGather,
        CollOp::AllGatherIntoTensor,
        CollOp::AllGatherCoalesced,
        CollOp::AllGatherIntoTensorCoalesced,
        CollOp::Gather,
        CollOp::Scatter,
        CollOp::ReduceScatter,
        CollOp::ReduceScatterTensor,
        CollOp::ReduceScatterTensorCoalesced,
        CollOp::AllToAllSingle,
        CollOp::AllToAll,
    ];

    /// The `torch.distributed` function name (and the scenario `op`).
    pub fn name(self) -> &'static str {
        match self {
            CollOp::AllReduce => "all_reduce",
            CollOp::AllReduceCoalesced => "all_reduce_coalesced",
            CollOp::Reduce => "reduce",
            CollOp::Broadcast => "broadcast",
            CollOp::AllGather => "all_gather",
            CollOp::AllGatherIntoTensor => "all_gather_into_tensor",
            CollOp::AllGatherCoalesced => "all_gather_coalesced",
            CollOp::AllGatherIntoTensorCoalesced => "all_gather_into_tensor_coalesced",
            CollOp::Gather => "gather",
            CollOp::Scatter => "scatter",
            CollOp::ReduceScatter => "reduce_scatter",
            CollOp::ReduceScatterTensor => "reduce_scatter_tensor",
            CollOp::ReduceScatterTensorCoalesced => "reduce_scatter_tensor_coalesced",
            CollOp::AllToAllSingle => "all_to_all_single",
            CollOp::AllToAll => "all_to_all",
        }
    }

    pub fn parse(s: &str) -> Option<CollOp> {
        CollOp::ALL.into_iter().find(|o| o.name() == s)
    }

    /// c10d's `OpType` name (flight recorder, watchdog, fingerprints).
    pub fn torch_op(self) -> &'static str {
        match self {
            CollOp::AllReduce => "ALLREDUCE",
            CollOp::AllReduceCoalesced => "ALLREDUCE_COALESCED",
            CollOp::Reduce => "REDUCE",
            CollOp::Broadcast => "BROADCAST",
            CollOp::AllGather => "ALLGATHER",
            CollOp::AllGatherIntoTensor => "_ALLGATHER_BASE",
            CollOp::AllGatherCoalesced => "ALLGATHER_COALESCED",
            CollOp::Gather => "GATHER",
            CollOp::Scatter => "SCATTER",
            CollOp::ReduceScatter => "REDUCE_SCATTER",
            CollOp::ReduceScatterTensor => "_REDUCE_SCATTER_BASE",
            CollOp::AllGatherIntoTensorCoalesced | CollOp::ReduceScatterTensorCoalesced => {
                "COALESCED"
            }
            CollOp::AllToAllSingle => "ALLTOALL_BASE",
            CollOp::AllToAll => "ALLTOALL",
        }
    }

    /// Takes a `reduce_op` (R36).
    pub fn reduces(self) -> bool {
        matches!(
            self,
            CollOp::AllReduce
                | CollOp::AllReduceCoalesced
                | CollOp::Reduce
                | CollOp::ReduceScatter
                | CollOp::ReduceScatterTensor
                | CollOp::ReduceScatterTensorCoalesced
        )
    }

    /// The root argument's name, for rooted ops.
    pub fn root_field(self) -> Option<&'static str> {
        match self {
            CollOp::Broadcast | CollOp::Scatter => Some("src"),
            CollOp::Reduce | CollOp::Gather => Some("dst"),
            _ => None,
        }
    }

    /// Works on a list of `count` tensors.
    pub fn coalesced(self) -> bool {
        matches!(
            self,
            CollOp::AllReduceCoalesced
                | CollOp::AllGatherCoalesced
                | CollOp::AllGatherIntoTensorCoalesced
                | CollOp::ReduceScatterTensorCoalesced
        )
    }

    /// Takes `input_split_sizes` / `output_split_sizes`.
    pub fn splits(self) -> bool {
        matches!(self, CollOp::AllToAllSingle | CollOp::AllToAll)
    }

    pub fn layout(self) -> Layout {
        match self {
            CollOp::AllReduce
            | CollOp::Reduce
            | CollOp::Broadcast
            | CollOp::Scatter
            | CollOp::ReduceScatter
            | CollOp::ReduceScatterTensor => Layout::Flat,
            CollOp::AllReduceCoalesced | CollOp::ReduceScatterTensorCoalesced => Layout::Tensors,
            CollOp::AllGather
            | CollOp::AllGatherIntoTensor
            | CollOp::Gather
            | CollOp::AllToAllSingle
            | CollOp::AllToAll => Layout::Chunks,
            CollOp::AllGatherCoalesced | CollOp::AllGatherIntoTensorCoalesced => {
                Layout::TensorChunks
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for op in CollOp::ALL {
            assert_eq!(CollOp::parse(op.name()), Some(op));
        }
        assert_eq!(CollOp::parse("allreduce"), None);
    }
}
