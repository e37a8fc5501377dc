//! Unit tests of the reader model's parts: file sequences, the worker's reading, the
//! collector's round-robin, and the checks on hand-made logs.
