//! agent ranks
