//! sd_notify readiness for `Type=notify` (stub; the session service work fills it in).

/// `READY=1`.
pub fn notify_ready() {}

/// `RELOADING=1`.
pub fn notify_reloading() {}

/// `STOPPING=1`.
pub fn notify_stopping() {}
