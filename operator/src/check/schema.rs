//! Validation of a manifest against a CRD's structural OpenAPI v3 schema, for
//! the subset our CRDs use: types, required fields, enums, minimum/maximum,
//! lengths, item counts, unknown fields, maps (`additionalProperties`).
//! CEL rules (`x-kubernetes-validations`) are not evaluated here; `validate`
//! enforces their content. Constructs outside the subset are reported, never
//! silently accepted, so a CRD change cannot outgrow this checker unnoticed.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

use crate::api::validate::FieldError;

/// The served version's schema of `crd`.
pub fn schema_of(crd: &CustomResourceDefinition) -> Option<&JSONSchemaProps> {
    crd.spec
        .versions
        .first()?
        .schema
        .as_ref()?
        .open_api_v3_schema
        .as_ref()
}

/// Validates a whole object. `apiVersion`, `kind` and `metadata` are the API
/// server's own and not part of the CRD schema.
pub fn validate_object(object: &Value, schema: &JSONSchemaProps) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(map) = object.as_object() else {
        errors.push(FieldError {
            path: "<root>".into(),
            message: "must be an object".into(),
        });
        return errors;
    };
    let mut body = map.clone();
    for key in ["apiVersion", "kind", "metadata"] {
        body.remove(key);
    }
    check(&Value::Object(body), schema, "", &mut errors);
    errors
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn err(errors: &mut Vec<FieldError>, path: &str, message: impl Into<String>) {
    let path = if path.is_empty() { "<root>" } else { path };
    errors.push(FieldError {
        path: path.to_string(),
        message: message.into(),
    });
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn check(value: &Value, schema: &JSONSchemaProps, path: &str, errors: &mut Vec<FieldError>) {
    if schema.one_of.is_some()
        || schema.any_of.is_some()
        || schema.all_of.is_some()
        || schema.not.is_some()
        || schema.pattern.is_some()
    {
        err(
            errors,
            path,
            "schema uses a construct this checker does not support (oneOf/anyOf/allOf/not/pattern)",
        );
        return;
    }
    if value.is_null() {
        if schema.nullable != Some(true) {
            err(errors, path, "must not be null");
        }
        return;
    }
    if schema.x_kubernetes_int_or_string == Some(true) {
        if !(value.is_string() || type_name(value) == "integer") {
            err(
                errors,
                path,
                format!("must be an integer or a string, got {}", type_name(value)),
            );
        }
        return;
    }
    let actual = type_name(value);
    match schema.type_.as_deref() {
        None if schema.x_kubernetes_preserve_unknown_fields == Some(true) => return,
        None => {
            err(errors, path, "schema has no type");
            return;
        }
        Some("number") if actual == "integer" || actual == "number" => {}
        Some(expected) if expected == actual => {}
        Some(expected) => {
            err(
                errors,
                path,
                format!("must be of type {expected}, got {actual}"),
            );
            return;
        }
    }
    if let Some(allowed) = &schema.enum_ {
        if !allowed.iter().any(|a| &a.0 == value) {
            let list = allowed
                .iter()
                .map(|a| a.0.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            err(
                errors,
                path,
                format!("unsupported value {value}: must be one of {list}"),
            );
        }
    }
    match value {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(min) = schema.minimum {
                if x < min {
                    err(
                        errors,
                        path,
                        format!("must be greater than or equal to {min}, got {n}"),
                    );
                }
            }
            if let Some(max) = schema.maximum {
                if x > max {
                    err(
                        errors,
                        path,
                        format!("must be less than or equal to {max}, got {n}"),
                    );
                }
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as i64;
            if let Some(min) = schema.min_length {
                if len < min {
                    err(
                        errors,
                        path,
                        format!("must be at least {min} character(s) long"),
                    );
                }
            }
            if let Some(max) = schema.max_length {
                if len > max {
                    err(
                        errors,
                        path,
                        format!("must be at most {max} character(s) long"),
                    );
                }
            }
        }
        Value::Array(items) => {
            if let Some(min) = schema.min_items {
                if (items.len() as i64) < min {
                    err(errors, path, format!("must have at least {min} item(s)"));
                }
            }
            if let Some(max) = schema.max_items {
                if (items.len() as i64) > max {
                    err(errors, path, format!("must have at most {max} item(s)"));
                }
            }
            match &schema.items {
                Some(JSONSchemaPropsOrArray::Schema(item)) => {
                    for (i, v) in items.iter().enumerate() {
                        check(v, item, &format!("{path}[{i}]"), errors);
                    }
                }
                Some(JSONSchemaPropsOrArray::Schemas(_)) => {
                    err(errors, path, "tuple item schemas are not structural")
                }
                None => err(errors, path, "array schema has no items"),
            }
        }
        Value::Object(map) => {
            for required in schema.required.iter().flatten() {
                if !map.contains_key(required) {
                    err(errors, &child(path, required), "required field is missing");
                }
            }
            let properties = schema.properties.as_ref();
            for (key, v) in map {
                let path = child(path, key);
                if let Some(prop) = properties.and_then(|p| p.get(key)) {
                    check(v, prop, &path, errors);
                    continue;
                }
                match &schema.additional_properties {
                    Some(JSONSchemaPropsOrBool::Schema(s)) => check(v, s, &path, errors),
                    Some(JSONSchemaPropsOrBool::Bool(true)) => {}
                    _ if schema.x_kubernetes_preserve_unknown_fields == Some(true) => {}
                    _ => err(errors, &path, "unknown field"),
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Provider;
    use kube::CustomResourceExt;
    use serde_json::json;

    fn provider(spec: Value) -> Value {
        json!({"apiVersion": "banlieue.io/v1alpha1", "kind": "Provider", "metadata": {"name": "p"}, "spec": spec})
    }

    fn errors(v: Value) -> String {
        let crd = Provider::crd();
        let schema = schema_of(&crd).unwrap();
        crate::api::validate::describe(&validate_object(&v, schema))
    }

    #[test]
    fn accepts_a_minimal_provider() {
        let v = provider(json!({"providerClassRef": {"name": "vsphere"},
            "connection": {"endpoint": "https://vc/sdk", "credentialsRef": {"name": "c"}}}));
        assert_eq!(errors(v), "");
    }

    #[test]
    fn reports_missing_unknown_and_mistyped_fields() {
        let v = provider(
            json!({"providerClassRef": {"name": "vsphere"}, "surprise": 1,
            "connection": {"endpoint": 42, "credentialsRef": {}}}),
        );
        let e = errors(v);
        assert!(e.contains("spec.surprise: unknown field"), "{e}");
        assert!(
            e.contains("spec.connection.endpoint: must be of type string, got integer"),
            "{e}"
        );
        assert!(
            e.contains("spec.connection.credentialsRef.name: required field is missing"),
            "{e}"
        );
    }

    #[test]
    fn reports_values_below_minimum_and_unknown_enum_values() {
        let class = json!({"apiVersion": "banlieue.io/v1alpha1", "kind": "VMClass", "metadata": {"name": "c"},
            "spec": {"hardware": {"cpus": 0, "memoryMiB": 1024,
                "disks": [{"name": "root", "sizeGiB": 10, "storageClass": "gold", "provisioning": "sparse"}]},
                "firmware": "uefi"}});
        let crd = crate::api::VMClass::crd();
        let e = crate::api::validate::describe(&validate_object(&class, schema_of(&crd).unwrap()));
        assert!(
            e.contains("spec.hardware.cpus: must be greater than or equal to 1"),
            "{e}"
        );
        assert!(e.contains("spec.hardware.disks[0].provisioning: unsupported value \"sparse\": must be one of \"thin\", \"thick\", \"eagerZeroed\""), "{e}");
        assert!(
            e.contains("spec.firmware: unsupported value \"uefi\""),
            "{e}"
        );
    }
}
