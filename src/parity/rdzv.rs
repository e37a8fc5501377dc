//! Parity cases of the rendezvous core: `rdzv_op`, `rdzv_apply`, `rdzv_sanitize`.
