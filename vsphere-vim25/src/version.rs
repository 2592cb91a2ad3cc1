//! vim25 API versions as numbers: what the writer checks a field's or a
//! value's version against (see [`XmlWriter::since`](crate::xml::XmlWriter::since)).

/// A vim25 API version as a number that orders like the version: one byte
/// per part, `0x0800_0100` for 8.0.1.0 (parts past 255 count as 255, past
/// the fourth are ignored; no vim25 version has either).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiLevel(pub u32);

impl ApiLevel {
    /// Above every version: what a writer without a server checks against.
    pub const MAX: ApiLevel = ApiLevel(u32::MAX);

    /// `8.0.1.0`, `7.0`, `6.5` (missing parts are zero); `None` for text
    /// that is not a dotted version.
    pub fn parse(version: &str) -> Option<ApiLevel> {
        if !is_version(version) {
            return None;
        }
        let mut level = 0u32;
        for (i, part) in version.split('.').take(4).enumerate() {
            let byte = part.parse::<u32>().unwrap_or(u32::MAX).min(255);
            level |= byte << (24 - 8 * i);
        }
        Some(ApiLevel(level))
    }
}

impl std::fmt::Display for ApiLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b, c, d] = self.0.to_be_bytes();
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

/// A dotted version of digits: `8.0.1.0`, `7.0`.
pub(crate) fn is_version(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 32
        && text
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}
