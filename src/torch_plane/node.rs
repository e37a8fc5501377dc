//! One node's torchrun process on the torch control plane.
