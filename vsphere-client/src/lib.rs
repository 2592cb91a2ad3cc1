//! Async, typed VMware vSphere client.
