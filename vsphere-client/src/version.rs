//! vim25 API version negotiation.
//!
//! Every vCenter and ESXi serves `/sdk/vimServiceVersions.xml` naming the
//! newest `urn:vim25` version it speaks. The client announces the lower of
//! that and the version its bindings were generated from, in the
//! `SOAPAction: urn:vim25/<version>` header, so an older server gets a
//! version it knows and a newer one answers in the schema we can decode.

use std::cmp::Ordering;

use vsphere_vim25::xml::ApiLevel;

/// The newest vim25 API version the generated bindings describe: the 7.0U3
/// WSDL bundle plus what later versions added (`wsdl/additions.json`).
pub const GENERATED_API_VERSION: &str = vsphere_vim25::API_VERSION;

/// The newest `urn:vim25` version in a `vimServiceVersions.xml` document,
/// or `None` when the document does not name one.
pub(crate) fn parse_service_versions(xml: &str) -> Option<String> {
    // The document is small and flat: <namespaces><namespace><name>urn:vim25
    // </name><version>X</version><priorVersions>...</priorVersions>...
    let mut rest = xml;
    while let Some(start) = rest.find("<namespace>") {
        let after = &rest[start + "<namespace>".len()..];
        let end = after.find("</namespace>").unwrap_or(after.len());
        let block = &after[..end];
        if element_text(block, "name").map(str::trim) == Some("urn:vim25") {
            // The first <version> of the block is the current one; prior
            // versions come after it, inside <priorVersions>.
            let current = match block.find("<priorVersions>") {
                Some(prior) => &block[..prior],
                None => block,
            };
            return element_text(current, "version")
                .map(str::trim)
                .filter(|v| ApiLevel::parse(v).is_some())
                .map(str::to_owned);
        }
        rest = &after[end..];
    }
    None
}

fn element_text<'a>(xml: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = xml.find(&open)? + open.len();
    let len = xml[start..].find(&close)?;
    Some(&xml[start..start + len])
}

/// Compares dotted versions numerically (`6.7.3` < `7.0` < `7.0.3.0`);
/// missing components count as zero.
pub(crate) fn compare_versions(a: &str, b: &str) -> Ordering {
    let mut left = a.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let mut right = b.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (l, r) => match l.unwrap_or(0).cmp(&r.unwrap_or(0)) {
                Ordering::Equal => continue,
                other => return other,
            },
        }
    }
}

/// The version to announce to a server that speaks `server` at most.
pub(crate) fn negotiate(server: &str) -> String {
    if compare_versions(server, GENERATED_API_VERSION) == Ordering::Less {
        server.to_owned()
    } else {
        GENERATED_API_VERSION.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VCENTER: &str = r#"<?xml version="1.0" encoding="UTF-8" ?>
<namespaces version="1.0">
 <namespace>
  <name>urn:vim25</name>
  <version>8.0.2.0</version>
  <priorVersions>
   <version>8.0.1.0</version>
   <version>6.0</version>
  </priorVersions>
 </namespace>
 <namespace>
  <name>urn:vim2</name>
  <version>2.5</version>
 </namespace>
</namespaces>"#;

    #[test]
    fn reads_the_current_vim25_version() {
        assert_eq!(parse_service_versions(VCENTER).as_deref(), Some("8.0.2.0"));
        let older = VCENTER.replace("8.0.2.0", "6.7.3");
        assert_eq!(parse_service_versions(&older).as_deref(), Some("6.7.3"));
    }

    #[test]
    fn garbage_gives_none() {
        for doc in [
            "",
            "<html>404</html>",
            "<namespaces><namespace><name>urn:vim25</name></namespace></namespaces>",
            "<namespace><name>urn:vim25</name><version>seven</version></namespace>",
            "<namespace>",
        ] {
            assert_eq!(parse_service_versions(doc), None, "{doc}");
        }
    }

    #[test]
    fn api_levels_order_like_versions() {
        let level = |v| ApiLevel::parse(v).expect(v);
        assert_eq!(level("8.0.1.0"), ApiLevel(0x0800_0100));
        assert_eq!(level("8.0.1.0").to_string(), "8.0.1.0");
        assert_eq!(level("7.0"), level("7.0.0.0"));
        assert!(level("6.5") < level("7.0.3.0"));
        assert!(level("7.0.3.0") < level("7.0.3.1"));
        assert!(level("9.0.0.0") < level("10.0"));
        assert!(level(GENERATED_API_VERSION) < ApiLevel::MAX);
        assert_eq!(level("1.2.3.4.5"), level("1.2.3.4"));
        assert_eq!(level("7.999"), level("7.255"));
        for junk in ["", "seven", "8..0", "8.0-beta"] {
            assert_eq!(ApiLevel::parse(junk), None, "{junk}");
        }
    }

    #[test]
    fn negotiates_the_lower_version() {
        assert_eq!(GENERATED_API_VERSION, "9.1.1.0");
        assert_eq!(negotiate("10.0.0.0"), "9.1.1.0");
        assert_eq!(negotiate("9.1.1.0"), "9.1.1.0");
        assert_eq!(negotiate("8.0.2.0"), "8.0.2.0");
        assert_eq!(negotiate("7.0.3.0"), "7.0.3.0");
        assert_eq!(negotiate("6.7.3"), "6.7.3");
        assert_eq!(negotiate("7.0"), "7.0");
        assert_eq!(compare_versions("7.0", "7.0.0.0"), Ordering::Equal);
        assert_eq!(compare_versions("10.0", "9.9"), Ordering::Greater);
    }
}
