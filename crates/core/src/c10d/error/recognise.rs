//! PyTorch's texts recognised in a failure: the one place outside real-output parsing where a
//! decision reads an error's text. A failure's text is all a real run gives (torch mode takes it
//! from PyTorch's own output), so a diagnosis that depends on which error a rank raised asks
//! here, and each check compares with the function that builds the same text for the model:
//! the text is written once.

use crate::outcome::Failure;

/// R4: the failure is [`super::no_backend_for_device`] for `device` (the model's, or real
/// PyTorch's with its location lines around it).
pub fn is_no_backend_for_device(f: &Failure, device: &str) -> bool {
    f.text()
        .contains(&super::no_backend_for_device(device).message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_backend_is_recognised_for_its_device_only() {
        let f: Failure = super::super::no_backend_for_device("xpu").into();
        assert!(is_no_backend_for_device(&f, "xpu"));
        assert!(!is_no_backend_for_device(&f, "cuda"));
        let other: Failure = super::super::not_initialized().into();
        assert!(!is_no_backend_for_device(&other, "xpu"));
    }
}
