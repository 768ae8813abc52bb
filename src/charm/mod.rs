//! The reconcile loop.
