//! Placeholder until its issue lands: see the workspace README.
