//! What `{:?}` shows of a generated data object and what `==` compares: both
//! read the fields the way the object is sent (`x::debug_fields`,
//! `x::same_fields`), so `Debug` names the fields as the vSphere API does,
//! leaves out the unset ones, and never shows a password or ticket.

// Inherited fields are set through the deref after `Default`, as the crate
// documents; clippy would have every field in the literal.
#![allow(clippy::field_reassign_with_default)]

use vsphere_client::types::*;
use vsphere_client::xml::{ManagedObjectReference, Value};

const SECRET: &str = "s3cret-pw";

fn file_info(path: &str) -> VirtualMachineFileInfo {
    VirtualMachineFileInfo {
        vm_path_name: Some(path.to_owned()),
        ..Default::default()
    }
}

#[test]
fn debug_shows_the_set_fields_by_their_api_names_nested_and_pretty() {
    let spec = VirtualMachineConfigSpec {
        name: Some("web".to_owned()),
        num_cpus: Some(2),
        files: Some(file_info("[ds1] web/web.vmx")),
        ..Default::default()
    };
    assert_eq!(
        format!("{spec:?}"),
        r#"VirtualMachineConfigSpec { name: "web", files: VirtualMachineFileInfo { vmPathName: "[ds1] web/web.vmx" }, numCPUs: 2 }"#
    );
    assert_eq!(
        format!("{spec:#?}"),
        r#"VirtualMachineConfigSpec {
    name: "web",
    files: VirtualMachineFileInfo {
        vmPathName: "[ds1] web/web.vmx",
    },
    numCPUs: 2,
}"#
    );
    assert_eq!(
        format!("{:?}", VirtualMachineFileInfo::default()),
        "VirtualMachineFileInfo"
    );
}

#[test]
fn debug_shows_inherited_fields_first_and_lists_and_polymorphic_values_as_held() {
    let mut disk = VirtualDisk::default();
    disk.key = 2000;
    disk.capacity_in_kb = 1024;
    let mut backing = VirtualDiskFlatVer2BackingInfo::default();
    backing.file_name = "[ds1] web/web.vmdk".to_owned();
    backing.disk_mode = "persistent".to_owned();
    disk.backing = Some(backing.into());
    let devices: Vec<AnyVirtualDevice> = vec![disk.into(), VirtualCdrom::default().into()];
    let hardware = VirtualHardware {
        num_cpu: 1,
        device: devices,
        ..Default::default()
    };
    let shown = format!("{hardware:?}");
    assert!(
        shown.contains(
            r#"device: [VirtualDisk { key: 2000, backing: VirtualDiskFlatVer2BackingInfo { fileName: "[ds1] web/web.vmdk", diskMode: "persistent" }, capacityInKB: 1024 }, VirtualCdrom { key: 0 }]"#
        ),
        "{shown}"
    );
}

#[test]
fn debug_never_shows_a_secret_that_is_sent() {
    let mut auth = NamePasswordAuthentication::default();
    auth.username = "admin".to_owned();
    auth.password = SECRET.to_owned();
    auth.interactive_session = true;
    let any: AnyGuestAuthentication = auth.clone().into();
    let login = LoginRequestType {
        this: ManagedObjectReference::new("SessionManager", "SessionManager"),
        user_name: "admin".to_owned(),
        password: SECRET.to_owned(),
        locale: None,
    };
    let mut token = SAMLTokenAuthentication::default();
    token.token = SECRET.to_owned();
    let customization = CustomizationIdentification {
        domain_admin: Some("admin".to_owned()),
        domain_admin_password: Some(CustomizationPassword {
            value: SECRET.to_owned(),
            plain_text: true,
        }),
        ..Default::default()
    };
    let ticket = SessionManagerGenericServiceTicket {
        id: SECRET.to_owned(),
        ..Default::default()
    };
    let shown = [
        format!("{auth:?}"),
        format!("{any:#?}"),
        format!("{login:?}"),
        format!("{token:?}"),
        format!("{customization:?}"),
        format!("{ticket:?}"),
    ];
    for text in &shown {
        assert!(!text.contains(SECRET), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }
    assert_eq!(
        shown[0],
        r#"NamePasswordAuthentication { interactiveSession: true, username: "admin", password: <redacted> }"#
    );
    // The secret still goes to the server.
    let mut w = vsphere_client::xml::XmlWriter::new();
    vsphere_client::xml::Encode::encode(&login, &mut w, "Login");
    assert!(String::from_utf8_lossy(w.as_bytes()).contains(SECRET));
}

#[test]
fn eq_compares_every_field_inherited_nested_and_the_type_held() {
    let disk = |key: i32, file: &str| {
        let mut disk = VirtualDisk::default();
        disk.key = key;
        let mut backing = VirtualDiskFlatVer2BackingInfo::default();
        backing.file_name = file.to_owned();
        disk.backing = Some(backing.into());
        AnyVirtualDevice::from(disk)
    };
    assert_eq!(disk(2000, "[ds1] a.vmdk"), disk(2000, "[ds1] a.vmdk"));
    // An inherited field (VirtualDevice.key), a field two levels down.
    assert_ne!(disk(2000, "[ds1] a.vmdk"), disk(2001, "[ds1] a.vmdk"));
    assert_ne!(disk(2000, "[ds1] a.vmdk"), disk(2000, "[ds1] b.vmdk"));
    // The same inherited fields in another subtype are another value.
    let mut cdrom = VirtualCdrom::default();
    cdrom.key = 2000;
    let mut plain = VirtualDisk::default();
    plain.key = 2000;
    assert_ne!(AnyVirtualDevice::from(cdrom), AnyVirtualDevice::from(plain));

    let spec = |cpus: i32| VirtualMachineConfigSpec {
        num_cpus: Some(cpus),
        files: Some(file_info("[ds1] web/web.vmx")),
        ..Default::default()
    };
    assert_eq!(spec(2), spec(2));
    assert_ne!(spec(2), spec(4));
    assert_ne!(spec(2), VirtualMachineConfigSpec::default());

    // Objects in an anyType slot: equal by type and content.
    let value = |path: &str| Value::object(file_info(path));
    assert_eq!(value("[ds1] a.vmx"), value("[ds1] a.vmx"));
    assert_ne!(value("[ds1] a.vmx"), value("[ds1] b.vmx"));
    assert_ne!(
        Value::object(VirtualMachineFileInfo::default()),
        Value::object(VirtualMachineFlagInfo::default())
    );
}
