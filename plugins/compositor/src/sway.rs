//! sway IPC client (in progress).
