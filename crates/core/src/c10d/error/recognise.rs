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

/// R29: the failure is gloo's own send or recv timeout ([`super::gloo_recv_timeout`],
/// [`super::gloo_send_timeout`]), whatever its milliseconds.
pub fn is_gloo_timeout(f: &Failure) -> bool {
    let text = f.text();
    [super::gloo_recv_timeout(0), super::gloo_send_timeout(0)]
        .iter()
        .any(|e| {
            let (head, tail) = e.message.split_once("0ms").expect("the ms in the text");
            text.find(head)
                .is_some_and(|i| text[i + head.len()..].contains(&format!("ms{tail}")))
        })
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

    #[test]
    fn a_gloo_timeout_is_recognised_at_any_milliseconds() {
        let f: Failure = super::super::gloo_recv_timeout(3000).into();
        assert!(is_gloo_timeout(&f));
        let f: Failure = super::super::gloo_send_timeout(80).into();
        assert!(is_gloo_timeout(&f));
        let other: Failure = super::super::gloo_pairs_closed().into();
        assert!(!is_gloo_timeout(&other));
    }
}
