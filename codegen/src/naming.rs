//! Stage 4: Rust names for XML names. The rules, written down and tested:
//!
//! - types: the XML name without `_`, first letter upper-cased
//!   (`CloneVM_TaskRequestType` -> `CloneVMTaskRequestType`,
//!   `vslmVClockInfo` -> `VslmVClockInfo`);
//! - fields, parameters and methods: snake_case, where
//!   - a lower-case letter or digit followed by an upper-case one starts a word
//!     (`ipAddress` -> `ip_address`, `ipV6Address` -> `ip_v6_address`),
//!   - in a run of capitals the last one starts a word when a lower-case
//!     letter follows (`HTTPServer` -> `http_server`), except for a plural
//!     acronym: a run of capitals followed by one `s` that ends the word stays
//!     whole (`numCPUs` -> `num_cpus`, `encryptedVMs` -> `encrypted_vms`),
//!   - digits stay with the word before them (`ipv6Address` -> `ipv6_address`),
//!   - `_` and `-` separate words and are dropped (`CloneVM_Task` -> `clone_vm_task`),
//!   - `VMware` is one word (`VMwareDVSConfigSpec` -> `vmware_dvs_config_spec`),
//!   - so are vSphere's product words written with a lower-case `v` and a
//!     capital (`vMotion`, `vCenter`, `vApp`, `vFlash`, `vStorage`, `vSphere`,
//!     `vNic`, `vSan`, `vVol`, `vDisk`, `vClock`, `vRAM`, `vPMC`, `vAssert`),
//!     with a capital `V` too when they start a word inside a name
//!     (`vmotionWithStorageVMotionSupported` ->
//!     `vmotion_with_storage_vmotion_supported`, `RetrieveVStorageObject` ->
//!     `retrieve_vstorage_object`), and with a plural `s` (`vApps`); not when a
//!     lower-case letter continues the word (`vApplication` stays `v_application`),
//!   - a leading `_` is dropped (`_this` -> `this`),
//!   - Rust keywords get a trailing `_` (`type` -> `type_`);
//! - enumeration values: PascalCase of the words split at `_`, `-`, `.` and
//!   spaces, each word's first letter upper-cased and an all-capitals word
//!   lower-cased after its first letter (`poweredOn` -> `PoweredOn`,
//!   `loadbalance_ip` -> `LoadbalanceIp`, `VMFS` -> `Vmfs`, `NFS41` -> `Nfs41`);
//!   digits on both sides of a separator keep a `_` (`windows7_64Guest` ->
//!   `Windows7_64Guest`), a leading digit gets a `V` prefix (`64bit` -> `V64bit`),
//!   and the keyword `Self` gets a trailing `_` (`self` -> `Self_`);
//! - the open fallback variant of every enumeration is `Unrecognized(String)`:
//!   `Unknown` is a real value of 30 vim25 enumerations (`HostSystemPowerState`).

/// Rust's strict and reserved keywords (2015-2024 editions).
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "Self", "static", "struct", "super", "trait", "true", "try", "type",
    "typeof", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Words that are written with an unusual mix of capitals and are one word.
const WHOLE_WORDS: &[&str] = &["VMware"];

/// vSphere's words made of a lower-case `v` and a capitalised word: each is
/// one word, also when written with a capital `V` at the start of a word
/// (see the module docs).
const V_WORDS: &[&str] = &[
    "vAssert", "vApp", "vCenter", "vClock", "vDisk", "vFlash", "vMotion", "vNic", "vPMC", "vRAM",
    "vSan", "vSphere", "vStorage", "vVol",
];

/// Exceptions to the snake_case rules, where the rules give a misleading split.
const SNAKE_OVERRIDES: &[(&str, &str)] = &[("enable3DSupport", "enable_3d_support")];

/// The name of the open fallback variant of every enumeration.
pub const UNRECOGNIZED_VARIANT: &str = "Unrecognized";

/// Rust type name of an XML type name.
pub fn type_name(xml: &str) -> String {
    let mut out: String = xml.chars().filter(|&c| c != '_').collect();
    if let Some(first) = out.chars().next() {
        if first.is_ascii_lowercase() {
            out.replace_range(0..1, &first.to_ascii_uppercase().to_string());
        }
    }
    out
}

/// Name of the polymorphic enum of a type with subtypes.
pub fn any_type_name(xml: &str) -> String {
    format!("Any{}", type_name(xml))
}

/// Rust field/parameter name of an XML element name.
pub fn field_name(xml: &str) -> String {
    escape_keyword(snake_case(xml.trim_start_matches('_')))
}

/// Rust method name of an operation name.
pub fn method_name(operation: &str) -> String {
    escape_keyword(snake_case(operation))
}

/// Module (file) name for a group key.
pub fn module_name(key: &str) -> String {
    escape_keyword(snake_case(key))
}

fn escape_keyword(name: String) -> String {
    if KEYWORDS.contains(&name.as_str()) {
        format!("{name}_")
    } else {
        name
    }
}

/// Splits a camelCase/PascalCase/snake name into words (see the module docs).
pub fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut i = 0;
    while i < chars.len() {
        if let Some(whole) = WHOLE_WORDS
            .iter()
            .find(|w| name[byte_offset(&chars, i)..].starts_with(**w))
        {
            flush(&mut words, &mut current);
            words.push(whole.to_string());
            i += whole.chars().count();
            continue;
        }
        if let Some(len) = v_word_at(&chars, i) {
            flush(&mut words, &mut current);
            words.push(chars[i..i + len].iter().collect());
            i += len;
            continue;
        }
        let c = chars[i];
        if c == '_' || c == '-' || c == '.' || c == ' ' {
            flush(&mut words, &mut current);
            i += 1;
            continue;
        }
        if c.is_uppercase() {
            let prev = chars.get(i.wrapping_sub(1)).copied().filter(|_| i > 0);
            let next = chars.get(i + 1).copied();
            let prev_is_lower_or_digit =
                prev.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit());
            let prev_is_upper = prev.is_some_and(char::is_uppercase);
            let starts_word = if prev_is_lower_or_digit {
                true
            } else if prev_is_upper {
                // Last capital of a run before a lower-case letter starts a word,
                // unless that letter is the plural `s` of the run.
                next.is_some_and(char::is_lowercase) && !is_plural_s(&chars, i + 1)
            } else {
                false
            };
            if starts_word {
                flush(&mut words, &mut current);
            }
        }
        current.push(c);
        i += 1;
    }
    flush(&mut words, &mut current);
    words
}

/// The length of the [`V_WORDS`] word starting at `chars[at]`, if one does:
/// at a word start (the name's start, after a separator, a lower-case letter
/// or a digit; `v` only at the name's start or after a separator), with
/// `v` or `V`, optionally a plural `s`, and not continued by a lower-case letter.
fn v_word_at(chars: &[char], at: usize) -> Option<usize> {
    let first = *chars.get(at)?;
    if first != 'v' && first != 'V' {
        return None;
    }
    let prev = at.checked_sub(1).map(|p| chars[p]);
    let after_separator = prev.is_none_or(|p| matches!(p, '_' | '-' | '.' | ' '));
    let boundary = match first {
        'v' => after_separator,
        _ => after_separator || prev.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit()),
    };
    if !boundary {
        return None;
    }
    V_WORDS.iter().find_map(|word| {
        let rest: Vec<char> = word.chars().skip(1).collect();
        if chars.get(at + 1..at + 1 + rest.len()) != Some(&rest[..]) {
            return None;
        }
        let mut len = 1 + rest.len();
        if chars.get(at + len) == Some(&'s')
            && !chars.get(at + len + 1).is_some_and(|c| c.is_lowercase())
        {
            len += 1;
        }
        match chars.get(at + len) {
            Some(c) if c.is_lowercase() => None,
            _ => Some(len),
        }
    })
}

/// Whether `chars[at]` is an `s` that ends a word right after a run of capitals.
fn is_plural_s(chars: &[char], at: usize) -> bool {
    if chars.get(at) != Some(&'s') {
        return false;
    }
    // The run of capitals before it must be at least two long.
    let run = chars[..at]
        .iter()
        .rev()
        .take_while(|c| c.is_uppercase())
        .count();
    if run < 2 {
        return false;
    }
    match chars.get(at + 1) {
        None => true,
        Some(c) => c.is_uppercase() || c.is_ascii_digit() || *c == '_',
    }
}

fn byte_offset(chars: &[char], index: usize) -> usize {
    chars[..index].iter().map(|c| c.len_utf8()).sum()
}

fn flush(words: &mut Vec<String>, current: &mut String) {
    if !current.is_empty() {
        words.push(std::mem::take(current));
    }
}

/// snake_case of a name, without keyword escaping.
pub fn snake_case(name: &str) -> String {
    if let Some((_, fixed)) = SNAKE_OVERRIDES.iter().find(|(from, _)| *from == name) {
        return fixed.to_string();
    }
    words(name)
        .iter()
        .map(|w| w.to_lowercase())
        .collect::<Vec<_>>()
        .join("_")
}

/// Rust variant name of an enumeration value.
pub fn variant_name(value: &str) -> String {
    let parts: Vec<&str> = value
        .split(['_', '-', '.', ' ', '/', ':'])
        .filter(|p| !p.is_empty())
        .collect();
    let mut out = String::new();
    for part in parts {
        let mut word = String::new();
        let all_caps = part.chars().filter(|c| c.is_alphabetic()).count() > 1
            && part.chars().all(|c| !c.is_lowercase());
        for (i, c) in part.chars().enumerate() {
            if !c.is_alphanumeric() {
                continue;
            }
            if i == 0 {
                word.extend(c.to_uppercase());
            } else if all_caps {
                word.extend(c.to_lowercase());
            } else {
                word.push(c);
            }
        }
        if word.is_empty() {
            continue;
        }
        // Keep digits apart across a separator: `7_64` must not read `764`.
        if out.ends_with(|c: char| c.is_ascii_digit())
            && word.starts_with(|c: char| c.is_ascii_digit())
        {
            out.push('_');
        }
        out.push_str(&word);
    }
    if out.is_empty() {
        return "Empty".to_string();
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'V');
    }
    escape_keyword(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names() {
        let cases = [
            ("ipAddress", "ip_address"),
            ("vmfsUUID", "vmfs_uuid"),
            ("type", "type_"),
            ("_this", "this"),
            ("key", "key"),
            ("numCPUs", "num_cpus"),
            ("maxCPUsPerCore", "max_cpus_per_core"),
            ("encryptedVMs", "encrypted_vms"),
            ("oneKVolumeAPIsSupported", "one_k_volume_apis_supported"),
            ("ipV6Address", "ip_v6_address"),
            ("ipv6Address", "ipv6_address"),
            ("HTTPServer", "http_server"),
            ("httpNfcServiceTicket", "http_nfc_service_ticket"),
            ("VMwareDVSVspanConfigSpec", "vmware_dvs_vspan_config_spec"),
            ("enable3DSupport", "enable_3d_support"),
            ("accel3dSupported", "accel3d_supported"),
            ("failoverNodeInfo1", "failover_node_info1"),
            ("green2yellow", "green2yellow"),
            ("uuid", "uuid"),
            ("instanceUuid", "instance_uuid"),
            ("x509Certificate", "x509_certificate"),
            ("ref", "ref_"),
            ("match", "match_"),
            ("move", "move_"),
            ("dynamicType", "dynamic_type"),
            ("MOID", "moid"),
            ("vSphereDataProtection", "vsphere_data_protection"),
            (
                "vmotionWithStorageVMotionSupported",
                "vmotion_with_storage_vmotion_supported",
            ),
            ("vMotionNotLicensed", "vmotion_not_licensed"),
            ("vMotionBandwidth", "vmotion_bandwidth"),
            ("encryptedVMotionSupported", "encrypted_vmotion_supported"),
            ("vStorageCapable", "vstorage_capable"),
            ("vAppConfig", "vapp_config"),
            ("vApps", "vapps"),
            ("vFlashCacheAllocation", "vflash_cache_allocation"),
            ("encryptionVFlashSupported", "encryption_vflash_supported"),
            ("vSanConfigSpec", "vsan_config_spec"),
            ("vCenter", "vcenter"),
            ("vClockTime", "vclock_time"),
            ("vDiskId", "vdisk_id"),
            ("supportedVDiskFormats", "supported_vdisk_formats"),
            ("vRAMSizeInKB", "vram_size_in_kb"),
            ("vPMCSupported", "vpmc_supported"),
            ("vAssertsEnabled", "vasserts_enabled"),
            ("vNicProfile", "vnic_profile"),
            ("vsanSupported", "vsan_supported"),
            // Not one of the words: a lower-case letter continues it, or it
            // does not start a word.
            ("vApplication", "v_application"),
            ("privMotion", "priv_motion"),
            ("vmName", "vm_name"),
            ("VMotion", "vmotion"),
        ];
        for (xml, rust) in cases {
            assert_eq!(field_name(xml), rust, "field_name({xml:?})");
        }
    }

    #[test]
    fn method_names() {
        let cases = [
            ("CloneVM_Task", "clone_vm_task"),
            ("RetrievePropertiesEx", "retrieve_properties_ex"),
            ("PowerOnVM_Task", "power_on_vm_task"),
            (
                "CertMgrRefreshCACertificatesAndCRLs_Task",
                "cert_mgr_refresh_ca_certificates_and_crls_task",
            ),
            ("QueryNFSUser", "query_nfs_user"),
            (
                "GetSystemVMsRestrictedDatastores",
                "get_system_vms_restricted_datastores",
            ),
            (
                "ReplaceCACertificatesAndCRLs",
                "replace_ca_certificates_and_crls",
            ),
            ("Login", "login"),
            ("CurrentTime", "current_time"),
            ("RetrieveVStorageObject", "retrieve_vstorage_object"),
            ("QueryVMotionCompatibility", "query_vmotion_compatibility"),
            (
                "VCenterUpdateVStorageObjectMetadataEx_Task",
                "vcenter_update_vstorage_object_metadata_ex_task",
            ),
            ("UpdateVAppConfig", "update_vapp_config"),
        ];
        for (xml, rust) in cases {
            assert_eq!(method_name(xml), rust, "method_name({xml:?})");
        }
    }

    #[test]
    fn type_names() {
        assert_eq!(
            type_name("CloneVM_TaskRequestType"),
            "CloneVMTaskRequestType"
        );
        assert_eq!(type_name("vslmVClockInfo"), "VslmVClockInfo");
        assert_eq!(
            type_name("VirtualMachineConfigSpec"),
            "VirtualMachineConfigSpec"
        );
        assert_eq!(any_type_name("VirtualDevice"), "AnyVirtualDevice");
    }

    #[test]
    fn variant_names() {
        let cases = [
            ("poweredOn", "PoweredOn"),
            ("in_progress", "InProgress"),
            ("True", "True"),
            ("loadbalance_ip", "LoadbalanceIp"),
            ("VMFS", "Vmfs"),
            ("NFS41", "Nfs41"),
            ("SHA256", "Sha256"),
            ("SM3_256", "Sm3_256"),
            ("TOOLSDEPLOYPKG_IDLE", "ToolsdeploypkgIdle"),
            ("windows7_64Guest", "Windows7_64Guest"),
            ("windows7Guest", "Windows7Guest"),
            ("sparse2Gb", "Sparse2Gb"),
            ("IPv4", "IPv4"),
            ("PMem", "PMem"),
            ("vmx-07", "Vmx07"),
            ("64bit", "V64bit"),
            ("-1", "V1"),
            ("", "Empty"),
            ("AllPathsDown_Start", "AllPathsDownStart"),
            ("unknown", "Unknown"),
            ("self", "Self_"),
        ];
        for (xml, rust) in cases {
            assert_eq!(variant_name(xml), rust, "variant_name({xml:?})");
        }
    }

    #[test]
    fn keywords_are_escaped_everywhere() {
        for keyword in KEYWORDS {
            let name = field_name(keyword);
            assert!(
                name.ends_with('_') || !KEYWORDS.contains(&name.as_str()),
                "{keyword}"
            );
        }
    }
}
