//! Session state: the cookie, and what makes re-login single-flight.
//!
//! Every call takes a [`Snapshot`] (cookie and generation) before it is
//! sent. When the server says `NotAuthenticated`, the caller asks for a
//! re-login *of the generation it saw*: the first caller to get the login
//! lock logs in and bumps the generation; the ones queued behind it find the
//! generation already moved on and simply retry with the new cookie. So N
//! concurrent calls on an expired session cause one login, not N.

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind};
use crate::redact::Secret;

/// User name and password for `SessionManager.Login`.
#[derive(Clone)]
pub(crate) struct Credentials {
    pub username: String,
    pub password: Secret,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password)
            .finish()
    }
}

/// What a call saw of the session when it was sent.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    pub cookie: Option<Secret>,
    pub generation: u64,
    pub logins_finished: u64,
}

#[derive(Debug)]
struct State {
    cookie: Option<Secret>,
    /// Bumped each time the session changes (login, new cookie).
    generation: u64,
    /// Bumped when a login ends, successful or not. Counting *finished*
    /// logins matters: a call that started while a login was in flight
    /// must see that login's outcome as news.
    logins_finished: u64,
    /// The last login failure, shown to callers that queued behind it.
    last_login_error: Option<String>,
    /// Set by `Client::close`: no more keepalive, no more re-login.
    closed: bool,
    last_activity: Instant,
}

#[derive(Debug)]
pub(crate) struct Session {
    state: Mutex<State>,
    /// Held for the whole of a login, so only one runs at a time.
    login_lock: tokio::sync::Mutex<()>,
}

/// What a caller queued for the login lock should do once it holds it.
pub(crate) enum LoginTurn {
    /// Log in: nobody did since the caller's call failed.
    LogIn { generation_before: u64 },
    /// Someone else logged in meanwhile: just retry.
    AlreadyDone,
}

impl Session {
    pub(crate) fn new() -> Self {
        Session {
            state: Mutex::new(State {
                cookie: None,
                generation: 0,
                logins_finished: 0,
                last_login_error: None,
                closed: false,
                last_activity: Instant::now(),
            }),
            login_lock: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the state half
        // written (every update is a plain assignment): keep going.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let state = self.lock();
        Snapshot {
            cookie: state.cookie.clone(),
            generation: state.generation,
            logins_finished: state.logins_finished,
        }
    }

    pub(crate) fn cookie(&self) -> Option<Secret> {
        self.lock().cookie.clone()
    }

    /// Takes a cookie the server set. A new value is a new session.
    pub(crate) fn adopt_cookie(&self, cookie: Secret) {
        let mut state = self.lock();
        if state.cookie.as_ref() != Some(&cookie) {
            state.cookie = Some(cookie);
            state.generation += 1;
        }
    }

    pub(crate) fn clear_cookie(&self) -> Option<Secret> {
        let mut state = self.lock();
        state.generation += 1;
        state.cookie.take()
    }

    pub(crate) fn touch(&self) {
        self.lock().last_activity = Instant::now();
    }

    pub(crate) fn idle_for(&self) -> Duration {
        self.lock().last_activity.elapsed()
    }

    pub(crate) fn close(&self) {
        self.lock().closed = true;
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Waits for the login lock and says whether this caller must log in.
    /// The returned guard must be held until the login is over.
    pub(crate) async fn login_turn(
        &self,
        seen: &Snapshot,
    ) -> Result<(tokio::sync::MutexGuard<'_, ()>, LoginTurn), Error> {
        let guard = self.login_lock.lock().await;
        let state = self.lock();
        if state.closed {
            return Err(Error::new(
                ErrorKind::NotAuthenticated,
                "the session is closed (the client logged out)",
            ));
        }
        if state.generation != seen.generation {
            return Ok((guard, LoginTurn::AlreadyDone));
        }
        if state.logins_finished != seen.logins_finished {
            if let Some(why) = &state.last_login_error {
                // A login for this same expired session was tried and
                // failed while we waited: do not hammer the server.
                return Err(Error::new(
                    ErrorKind::NotAuthenticated,
                    format!("the session expired and logging in again failed: {why}"),
                ));
            }
        }
        Ok((
            guard,
            LoginTurn::LogIn {
                generation_before: state.generation,
            },
        ))
    }

    /// Records the outcome of a login started by [`Session::login_turn`].
    pub(crate) fn login_finished(&self, generation_before: u64, result: Result<(), &Error>) {
        let mut state = self.lock();
        state.logins_finished += 1;
        match result {
            Ok(()) => {
                state.last_login_error = None;
                // The server may have kept the cookie (it only authenticated
                // the session): the session changed all the same.
                if state.generation == generation_before {
                    state.generation += 1;
                }
                state.last_activity = Instant::now();
            }
            Err(err) => state.last_login_error = Some(err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_the_first_waiter_logs_in() {
        let session = Session::new();
        session.adopt_cookie(Secret::new("old"));
        let seen = session.snapshot();
        let (guard, turn) = session.login_turn(&seen).await.unwrap();
        let LoginTurn::LogIn { generation_before } = turn else {
            panic!("first caller must log in")
        };
        session.adopt_cookie(Secret::new("new"));
        session.login_finished(generation_before, Ok(()));
        drop(guard);
        let (_guard, turn) = session.login_turn(&seen).await.unwrap();
        assert!(matches!(turn, LoginTurn::AlreadyDone));
        assert_eq!(session.cookie().unwrap().expose(), "new");
    }

    #[tokio::test]
    async fn waiters_behind_a_failed_login_do_not_retry_it() {
        let session = Session::new();
        let seen = session.snapshot();
        let (guard, turn) = session.login_turn(&seen).await.unwrap();
        let LoginTurn::LogIn { generation_before } = turn else {
            panic!()
        };
        let failure = Error::new(ErrorKind::Fault, "InvalidLogin");
        session.login_finished(generation_before, Err(&failure));
        drop(guard);
        let err = session.login_turn(&seen).await.err().unwrap();
        assert_eq!(err.kind(), ErrorKind::NotAuthenticated);
        assert!(err.to_string().contains("InvalidLogin"));
    }

    #[test]
    fn debug_hides_cookie_and_password() {
        let session = Session::new();
        session.adopt_cookie(Secret::new("cookie-value-123"));
        let creds = Credentials {
            username: "u".into(),
            password: Secret::new("pw-value-456"),
        };
        let out = format!("{session:?} {creds:?}");
        assert!(
            !out.contains("cookie-value-123") && !out.contains("pw-value-456"),
            "{out}"
        );
    }
}
