//! `Decode`/`Encode` for the XML Schema primitive types vim25 uses.

use std::fmt;

use super::reader::{DecodeErrorKind, XmlReader};
use super::{Decode, DecodeError, Encode, XmlWriter};

impl Decode for String {
    fn decode(r: &mut XmlReader<'_>) -> Result<Self, DecodeError> {
        Ok(r.read_text()?.into_owned())
    }
}

impl Encode for String {
    fn encode_as(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>) {
        w.text_element(tag, xsi_type, self);
    }
}

impl Decode for bool {
    fn decode(r: &mut XmlReader<'_>) -> Result<Self, DecodeError> {
        r.read_parsed("boolean", |s| match s {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => None,
        })
    }
}

impl Encode for bool {
    fn encode_as(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>) {
        w.text_element(tag, xsi_type, if *self { "true" } else { "false" });
    }
}

macro_rules! integer {
    ($($ty:ty => $xsd:literal),*) => {$(
        impl Decode for $ty {
            fn decode(r: &mut XmlReader<'_>) -> Result<Self, DecodeError> {
                r.read_parsed($xsd, parse_integer)
            }
        }

        impl Encode for $ty {
            fn encode_as(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>) {
                w.text_element(tag, xsi_type, &self.to_string());
            }
        }
    )*};
}

integer!(i16 => "short", i32 => "int", i64 => "long");

/// `xsd:byte` is signed, and vCenter sends byte arrays (hashes, SCSI
/// inquiry data) as such; but it sends PCI bus, slot and function numbers
/// (`HostPciDevice`) unsigned, `<bus>138</bus>`. Both read: 128 to 255 as
/// the byte of the same bits (`138` is `-118`; `bus as u8` is 138).
impl Decode for i8 {
    fn decode(r: &mut XmlReader<'_>) -> Result<Self, DecodeError> {
        r.read_parsed("byte", |text| {
            let value: i16 = parse_integer(text)?;
            match value {
                -128..=127 => i8::try_from(value).ok(),
                128..=255 => Some((value as u8) as i8),
                _ => None,
            }
        })
    }
}

impl Encode for i8 {
    fn encode_as(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>) {
        w.text_element(tag, xsi_type, &self.to_string());
    }
}

/// An `xsd:int` and friends. Most are a few digits: those are read in one
/// loop without a branch per digit (18 digits cannot overflow an `i64`);
/// anything else is left to `str::parse`.
fn parse_integer<T: TryFrom<i64> + std::str::FromStr>(text: &str) -> Option<T> {
    let bytes = text.as_bytes();
    let (negative, digits) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    if (1..=18).contains(&digits.len()) {
        let mut value: i64 = 0;
        let mut all_digits = true;
        for &b in digits {
            let digit = b.wrapping_sub(b'0');
            all_digits &= digit < 10;
            value = value.wrapping_mul(10).wrapping_add(i64::from(digit));
        }
        if all_digits {
            return T::try_from(if negative { -value } else { value }).ok();
        }
    }
    text.strip_prefix('+').unwrap_or(text).parse().ok()
}

macro_rules! float {
    ($($ty:ty => $xsd:literal),*) => {$(
        impl Decode for $ty {
            fn decode(r: &mut XmlReader<'_>) -> Result<Self, DecodeError> {
                r.read_parsed($xsd, |s| match s {
                    "INF" | "+INF" => Some(<$ty>::INFINITY),
                    "-INF" => Some(<$ty>::NEG_INFINITY),
                    "NaN" => Some(<$ty>::NAN),
                    // Rust also accepts "inf"/"nan"/"infinity", which XML Schema does not.
                    _ if s.bytes().any(|b| b.is_ascii_alphabetic() && !matches!(b, b'e' | b'E')) => None,
                    _ => s.parse().ok(),
                })
            }
        }

        impl Encode for $ty {
            fn encode_as(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>) {
                let text = if self.is_nan() {
                    "NaN".to_string()
                } else if self.is_infinite() {
                    if *self > 0.0 { "INF".to_string() } else { "-INF".to_string() }
                } else {
                    // `Display` is the shortest representation that parses back exactly.
                    self.to_string()
                };
                w.text_element(tag, xsi_type, &text);
            }
        }
    )*};
}

float!(f32 => "float", f64 => "double");

/// An `xsd:dateTime`, kept as the server sent it (`2024-05-01T12:00:00.123Z`).
///
/// vSphere always sends UTC with a `Z` or an offset; parsing into a calendar
/// type is left to the caller so the crate does not force a time library.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DateTime(String);

impl DateTime {
    /// Wraps an `xsd:dateTime` lexical value as is.
    pub fn new(value: impl Into<String>) -> Self {
        DateTime(value.into())
    }

    /// The lexical value.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The lexical value, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for DateTime {
    fn from(value: String) -> Self {
        DateTime(value)
    }
}

impl From<&str> for DateTime {
    fn from(value: &str) -> Self {
        DateTime(value.to_string())
    }
}

impl Decode for DateTime {
    fn decode(r: &mut XmlReader<'_>) -> Result<Self, DecodeError> {
        Ok(DateTime(
            r.read_text()?
                .trim_matches(super::reader::is_xml_space)
                .to_string(),
        ))
    }
}

impl Encode for DateTime {
    fn encode_as(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>) {
        w.text_element(tag, xsi_type, &self.0);
    }
}

/// `xsd:base64Binary`.
impl Decode for Vec<u8> {
    fn decode(r: &mut XmlReader<'_>) -> Result<Self, DecodeError> {
        let text = r.read_text()?;
        base64_decode(&text).ok_or_else(|| {
            r.error(
                DecodeErrorKind::InvalidValue,
                "invalid base64Binary value".to_string(),
            )
        })
    }
}

impl Encode for Vec<u8> {
    fn encode_as(&self, w: &mut XmlWriter, tag: &str, xsi_type: Option<&str>) {
        w.text_element(tag, xsi_type, &base64_encode(self));
    }
}

const BASE64_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sextets = [(n >> 18) & 63, (n >> 12) & 63, (n >> 6) & 63, n & 63];
        for (i, s) in sextets.iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(BASE64_ALPHABET[*s as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Lenient decoding: whitespace (line-wrapped values) is ignored and padding
/// is optional; any other character outside the alphabet is an error.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    let mut padding = 0usize;
    for byte in text.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                padding += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' | b'\n' => continue,
            _ => return None,
        };
        if padding > 0 {
            return None; // data after padding
        }
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    if padding > 2 || bits >= 6 {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_every_length() {
        for len in 0..20 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let text = base64_encode(&bytes);
            assert_eq!(text.len() % 4, 0);
            assert_eq!(base64_decode(&text).as_deref(), Some(&bytes[..]), "{text}");
        }
        assert_eq!(base64_encode(b"Man"), "TWFu");
        assert_eq!(base64_encode(b"Ma"), "TWE=");
        assert_eq!(base64_decode("TW\nE").as_deref(), Some(&b"Ma"[..]));
        assert_eq!(base64_decode("TWE=x"), None);
        assert_eq!(base64_decode("T!=="), None);
        assert_eq!(base64_decode("T"), None);
    }

    #[test]
    fn integers_read_as_str_parse_reads_them() {
        let texts = [
            "0",
            "7",
            "-7",
            "+7",
            "0042",
            "-0",
            "2147483647",
            "2147483648",
            "-2147483648",
            "-2147483649",
            "999999999999999999",
            "-999999999999999999",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "",
            "+",
            "-",
            "+-5",
            "--5",
            "1 2",
            "12a",
            "a12",
            "٣",
            "1_000",
            "0x10",
            "99999999999999999999999",
        ];
        for text in texts {
            fn reference<T: std::str::FromStr>(t: &str) -> Option<T> {
                t.strip_prefix('+').unwrap_or(t).parse().ok()
            }
            assert_eq!(
                parse_integer::<i64>(text),
                reference(text),
                "{text:?} as i64"
            );
            assert_eq!(
                parse_integer::<i32>(text),
                reference(text),
                "{text:?} as i32"
            );
            assert_eq!(
                parse_integer::<i16>(text),
                reference(text),
                "{text:?} as i16"
            );
            assert_eq!(parse_integer::<i8>(text), reference(text), "{text:?} as i8");
        }
    }
}
