//! rendezvous settings
