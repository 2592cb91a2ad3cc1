//! Request types: the `*RequestType` struct of every operation (its `_this`
//! and parameters) with its `Request` impl: operation name, whether it is safe
//! to repeat, and how to read the response's `returnval`.

use std::fmt::Write as _;

use super::{lit, structs, Counts, Item};
use crate::bail;
use crate::error::Result;
use crate::model::{Model, Occurs, Operation};
use crate::plan::Plan;

pub(crate) fn emit(model: &Model, plan: &Plan, counts: &mut Counts) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    let mut by_request: std::collections::BTreeMap<&str, &Operation> = Default::default();
    for op in model.operations.values() {
        if by_request.insert(&op.request_type, op).is_some() {
            bail!("{} is the request type of two operations", op.request_type);
        }
    }
    for ty in model.types.values().filter(|t| t.is_request) {
        let Some(op) = by_request.get(ty.name.as_str()) else {
            bail!("request type {} belongs to no operation", ty.name);
        };
        let rust = &plan.type_names[&ty.name];
        let mut code = structs::struct_code(model, plan, ty);
        let (response, read) = response_type(plan, op);
        writeln!(
            code,
            "impl x::Request for {rust} {{\n    \
             const NAME: &'static str = {};\n    \
             const IDEMPOTENT: bool = {};\n    \
             type Response = {response};\n    \
             #[inline]\n    fn this(&self) -> &x::ManagedObjectReference {{ &self.this }}\n    \
             #[inline]\n    fn decode_response(r: &mut x::XmlReader<'_>) -> Result<Self::Response, x::DecodeError> {{ r.{read}() }}\n}}",
            lit(&op.name),
            plan.idempotent.contains(&op.name),
        )
        .ok();
        items.push(Item {
            group: super::group_of(&op.name),
            code: super::format_gated(&code, &plan.cfg(&ty.name))?,
        });
        counts.request_types += 1;
        counts.operations += 1;
    }
    Ok(items)
}

/// The Rust response type of an operation and the reader method for it.
pub(crate) fn response_type(plan: &Plan, op: &Operation) -> (String, &'static str) {
    match &op.returnval {
        None => ("()".to_string(), "read_no_returnval"),
        Some(ret) => {
            let ty = plan.rust_type(&ret.ty);
            match ret.occurs {
                Occurs::Required => (ty, "read_returnval"),
                Occurs::Optional => (format!("Option<{ty}>"), "read_returnval_opt"),
                Occurs::Repeated => (format!("Vec<{ty}>"), "read_returnval_vec"),
            }
        }
    }
}
