//! niri IPC client (in progress).
