//! Secret fields: passwords, tickets, tokens, key material. The generated
//! `Debug` of a structure shows `<redacted>` for them when they are set
//! (`x::XmlWriter::write_secret`); they are sent to the server like any other
//! field.

use crate::model::{Field, Primitive, TypeRef};

/// Field names that hold a secret wherever they are a string.
const SECRET_NAMES: &[&str] = &[
    "password",
    "oldPassword",
    "newPassword",
    "adminPassword",
    "domainAdminPassword",
    "vimAccountPassword",
    "chapSecret",
    "mutualChapSecret",
    "sessionId",
    "token",
    "sspiToken",
    "ticket",
    "cloneTicket",
    "privateKey",
    "verificationToken",
    "trustVerificationToken",
    "keyData",
];

/// Fields whose name says nothing, by `(type, field)`: the password of a
/// guest customization, a generic service ticket.
const SECRET_FIELDS: &[(&str, &str)] = &[
    ("CustomizationPassword", "value"),
    ("SessionManagerGenericServiceTicket", "id"),
];

/// Whether `owner.field` holds a secret: a string field with one of the names
/// above. Numbers and flags named like secrets (`connectionCookie`,
/// `resetPassword`) are not.
pub fn is_secret(owner: &str, field: &Field) -> bool {
    matches!(
        field.ty,
        TypeRef::Primitive(Primitive::String | Primitive::Base64Binary)
    ) && (SECRET_NAMES.contains(&field.name.as_str())
        || SECRET_FIELDS.contains(&(owner, field.name.as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Occurs, Since};

    fn field(name: &str, ty: TypeRef) -> Field {
        Field {
            name: name.to_owned(),
            ty,
            occurs: Occurs::Optional,
            since: Since::default(),
        }
    }

    #[test]
    fn strings_named_like_secrets_are_and_numbers_and_flags_are_not() {
        let string = TypeRef::Primitive(Primitive::String);
        assert!(is_secret(
            "NamePasswordAuthentication",
            &field("password", string.clone())
        ));
        assert!(is_secret(
            "HostInternetScsiHbaAuthenticationProperties",
            &field("chapSecret", string.clone())
        ));
        assert!(is_secret(
            "CustomizationPassword",
            &field("value", string.clone())
        ));
        assert!(!is_secret("OptionValue", &field("value", string.clone())));
        assert!(!is_secret("HostAccountSpec", &field("description", string)));
        assert!(!is_secret(
            "HostConnectSpec",
            &field("resetPassword", TypeRef::Primitive(Primitive::Boolean))
        ));
        assert!(!is_secret(
            "VirtualMachineMksTicket",
            &field("connectionCookie", TypeRef::Primitive(Primitive::Int))
        ));
        assert!(!is_secret(
            "CustomizationIdentification",
            &field(
                "domainAdminPassword",
                TypeRef::Complex("CustomizationPassword".into())
            )
        ));
    }
}
