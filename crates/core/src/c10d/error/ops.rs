//! PyTorch's texts for calls: devices (R8), tensors (R37), reduce ops and dtypes per backend
//! (R35, R36, gloo's `postReduce`), splits and async work. Each function is one text, tagged
//! with its rule in docs/rules/c10d.md or the PyTorch source it comes from.

use super::{e, runtime, type_error, value, C10dError};
use crate::dtype::DType;
use crate::reduce::ReduceOp;

/// `torch.device(s)` on a string that names no device.
pub fn invalid_device(text: &str) -> C10dError {
    runtime(format!("Invalid device string: '{text}'"))
}

/// R8: a `device_id` of another accelerator than the build's.
pub fn device_id_wrong_accelerator(device: &str, accel: &str) -> C10dError {
    value(format!(
        "device_id {device} does not match the current compilation's accelerator support ({accel})"
    ))
}

/// R8: a `device_id` without an index.
pub fn device_id_without_index() -> C10dError {
    value("Please use a device_id with index.")
}

/// R8: a `device_id` past the device count.
pub fn device_id_out_of_range(device: &str, count: usize) -> C10dError {
    value(format!(
        "device_id {device} is out of range: device count is {count}"
    ))
}

/// R37: XCCL serves XPU tensors only.
pub fn xccl_needs_xpu() -> C10dError {
    value("Tensors must be XPU and dense")
}

/// `isend`/`send` to oneself (`distributed_c10d.py`, `_check_valid_p2p_op` family).
pub fn send_to_self() -> C10dError {
    value("Invalid destination rank: destination rank should not be the same as the rank of the current process.")
}

/// `all_to_all_single` with split sizes of another length than the group.
pub fn splits_not_group_size() -> C10dError {
    runtime("Number of tensor splits not equal to group size")
}

/// `all_to_all_single` without splits on a tensor whose dim 0 the group does not divide.
pub fn dim0_not_divisible() -> C10dError {
    runtime("Tensor's dim 0 does not divide equally across group size")
}

/// `work.wait()` on the `None` a non-member's `async_op=True` call returned (R21).
pub fn wait_on_none() -> C10dError {
    e(
        "AttributeError",
        "'NoneType' object has no attribute 'wait'",
    )
}

/// R36: XCCL has no bitwise reduce ops.
pub fn xccl_bitwise_op(op: ReduceOp) -> C10dError {
    value(format!("Cannot use ReduceOp.{} with XCCL", op.name()))
}

/// R36: XCCL refuses AVG of booleans.
pub fn avg_of_bool() -> C10dError {
    type_error("Cannot use ReduceOp.AVG with boolean inputs")
}

/// gloo's `toFunction`: a bitwise op on a floating-point tensor.
pub fn gloo_bitwise_on_float(op: ReduceOp) -> C10dError {
    runtime(format!(
        "Cannot use ReduceOp.{} with non-integral dtype",
        op.name()
    ))
}

/// gloo's `postReduce`: AVG divides in place, which an integral tensor cannot hold (real
/// PyTorch 2.15, docs/torch.md).
pub fn gloo_avg_of_integral(dtype: DType) -> C10dError {
    runtime(format!(
        "result type Float can't be cast to the desired output type {}",
        dtype.torch_name()
    ))
}
