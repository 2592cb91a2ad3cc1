//! Connection settings read like govc reads them.
//!
//! - `GOVC_URL` (or `-u`): `host`, `https://host`, `https://host/sdk`,
//!   `http://...`, each optionally with `user:password@`.
//! - `GOVC_USERNAME`, `GOVC_PASSWORD`: override the URL's credentials.
//! - `GOVC_INSECURE=1` (or `-k`): accept any certificate.
//! - `GOVC_TLS_CA_CERTS`: PEM file(s) of trusted CAs (`:`-separated).
//! - `GOVC_TLS_KNOWN_HOSTS`: a file of `host thumbprint` lines, as govc
//!   writes it; the thumbprint for the URL's host pins the certificate.
//! - `GOVC_TIMEOUT` (or `-timeout`): the deadline of each vSphere call,
//!   retries included, as a Go duration (`30s`, `5m`, `1m30s`, `500ms`);
//!   default the client's (10 min).

use std::fmt;
use std::time::Duration;

use vsphere_client::{Client, ClientBuilder};

use crate::args::CliError;

#[derive(Default)]
pub struct Config {
    url: Option<String>,
    username: Option<String>,
    password: Option<String>,
    insecure: bool,
    ca_certs: Option<String>,
    known_hosts: Option<String>,
    timeout: Option<Duration>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field(
                "url",
                &self
                    .url
                    .as_deref()
                    .map(|u| split_url(u).without_credentials),
            )
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("insecure", &self.insecure)
            .field("ca_certs", &self.ca_certs)
            .field("known_hosts", &self.known_hosts)
            .field("timeout", &self.timeout)
            .finish()
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Config {
    pub fn from_env_and_flags(
        url_flag: Option<String>,
        insecure_flag: bool,
        timeout_flag: Option<String>,
    ) -> Result<Config, CliError> {
        let timeout = match (timeout_flag, env("GOVC_TIMEOUT")) {
            (Some(flag), _) => Some(
                parse_duration(&flag)
                    .map_err(|why| CliError::Usage(format!("invalid -timeout {flag:?}: {why}")))?,
            ),
            (None, Some(var)) => {
                Some(parse_duration(&var).map_err(|why| {
                    CliError::Usage(format!("invalid GOVC_TIMEOUT={var:?}: {why}"))
                })?)
            }
            (None, None) => None,
        };
        let insecure_env = match env("GOVC_INSECURE").as_deref() {
            None => false,
            Some("1" | "true" | "TRUE" | "True" | "t" | "yes") => true,
            Some("0" | "false" | "FALSE" | "False" | "f" | "no") => false,
            Some(other) => {
                return Err(CliError::Usage(format!(
                    "GOVC_INSECURE={other:?} is not a boolean"
                )));
            }
        };
        Ok(Config {
            url: url_flag.or_else(|| env("GOVC_URL")),
            username: env("GOVC_USERNAME"),
            password: env("GOVC_PASSWORD"),
            insecure: insecure_flag || insecure_env,
            ca_certs: env("GOVC_TLS_CA_CERTS"),
            known_hosts: env("GOVC_TLS_KNOWN_HOSTS"),
            timeout,
        })
    }

    /// The client builder for these settings.
    pub fn builder(&self) -> Result<ClientBuilder, CliError> {
        let url = self
            .url
            .as_deref()
            .ok_or_else(|| CliError::Usage("no vCenter URL: set GOVC_URL or pass -u URL".into()))?;
        let parts = split_url(url);
        let mut builder = Client::builder(&parts.without_credentials);
        if let Some(timeout) = self.timeout {
            builder = builder.call_deadline(Some(timeout));
        }
        let username = self.username.clone().or(parts.username);
        let password = self.password.clone().or(parts.password);
        if let Some(username) = username {
            builder = builder.credentials(username, password.unwrap_or_default());
        }
        if self.insecure {
            return Ok(builder.insecure(true));
        }
        if let Some(file) = &self.known_hosts {
            if let Some(thumbprint) = known_thumbprint(file, &parts.authority)? {
                return Ok(builder.thumbprint(&thumbprint)?);
            }
        }
        if let Some(files) = &self.ca_certs {
            let mut pem = Vec::new();
            for file in files.split(':').filter(|f| !f.is_empty()) {
                let bytes = std::fs::read(file).map_err(|e| {
                    CliError::Other(format!("cannot read GOVC_TLS_CA_CERTS file {file}: {e}"))
                })?;
                pem.extend_from_slice(&bytes);
                pem.push(b'\n');
            }
            builder = builder.ca_bundle_pem(&pem)?;
        }
        Ok(builder)
    }

    pub async fn connect(&self) -> Result<Client, CliError> {
        Ok(self.builder()?.logout_on_drop(true).connect().await?)
    }
}

struct UrlParts {
    without_credentials: String,
    /// `host` or `host:port`, as written.
    authority: String,
    username: Option<String>,
    password: Option<String>,
}

fn split_url(url: &str) -> UrlParts {
    let (scheme, rest) = match url.find("://") {
        Some(i) => (&url[..i + 3], &url[i + 3..]),
        None => ("", url),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let (userinfo, host) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    let (username, password) = match userinfo {
        None => (None, None),
        Some(info) => match info.split_once(':') {
            Some((user, pass)) => (Some(percent_decode(user)), Some(percent_decode(pass))),
            None => (Some(percent_decode(info)), None),
        },
    };
    UrlParts {
        without_credentials: format!("{scheme}{host}{path}"),
        authority: host.to_string(),
        username,
        password,
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(value) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(value);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The thumbprint recorded for `authority` (`host` or `host:port`; port 443
/// matches either form) in a govc known-hosts file.
fn known_thumbprint(file: &str, authority: &str) -> Result<Option<String>, CliError> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        CliError::Other(format!("cannot read GOVC_TLS_KNOWN_HOSTS file {file}: {e}"))
    })?;
    let mut keys = vec![authority.to_string()];
    match authority.rsplit_once(':') {
        Some((host, "443")) if !host.ends_with(']') || authority.starts_with('[') => {
            keys.push(host.to_string())
        }
        Some((_, port)) if port.chars().all(|c| c.is_ascii_digit()) => {}
        _ => keys.push(format!("{authority}:443")),
    }
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let (Some(host), Some(thumbprint)) = (fields.next(), fields.next()) else {
            continue;
        };
        if host.starts_with('#') {
            continue;
        }
        if keys.iter().any(|k| k == host) {
            return Ok(Some(thumbprint.to_string()));
        }
    }
    Ok(None)
}

/// A Go duration (`time.ParseDuration`): a sequence of decimal numbers, each
/// with a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`): `30s`, `1m30s`,
/// `1.5h`, `500ms`. Zero and negative durations are refused: a call with no
/// time at all cannot succeed.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    const UNITS: &[(&str, f64)] = &[
        ("ns", 1e-9),
        ("us", 1e-6),
        ("\u{b5}s", 1e-6),
        ("\u{3bc}s", 1e-6),
        ("ms", 1e-3),
        ("s", 1.0),
        ("m", 60.0),
        ("h", 3600.0),
    ];
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err("empty duration".into());
    }
    let mut seconds = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        let value: f64 = number
            .parse()
            .map_err(|_| "expected a number with a unit, like 30s or 5m".to_string())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let Some((_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(if unit.is_empty() {
                "missing unit (ns, us, ms, s, m, h)".into()
            } else {
                format!("unknown unit {unit:?} (ns, us, ms, s, m, h)")
            });
        };
        seconds += value * scale;
        rest = tail;
    }
    if seconds <= 0.0 || !seconds.is_finite() || seconds > 1e9 {
        return Err("the duration must be positive".into());
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_as_go_does() {
        let ok = [
            ("30s", Duration::from_secs(30)),
            ("5m", Duration::from_secs(300)),
            ("1m30s", Duration::from_secs(90)),
            ("1.5h", Duration::from_secs(5400)),
            ("500ms", Duration::from_millis(500)),
            ("2h45m", Duration::from_secs(9900)),
        ];
        for (text, expected) in ok {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
        for bad in ["", "30", "s", "5x", "0s", "-5s", "1..5s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
