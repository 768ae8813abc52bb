//! The live cluster.
