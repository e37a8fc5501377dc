//! rendezvous state
