//! A typed method on `Vim` (the client's handle for raw operations) per
//! operation: it builds the request and returns `Vim::call`'s future, so the
//! arguments are not borrowed across the await. Each is `#[inline]`: it is
//! compiled into a program only if the program calls it. Not `async fn`:
//! type and borrow checking ~970 async bodies cost the crate's every build
//! a few seconds, for futures that only wrap `call`'s.

use std::fmt::Write as _;

use super::{format, requests::response_type, Counts, Item};
use crate::error::Result;
use crate::model::{Model, Occurs, Primitive, TypeRef};
use crate::plan::Plan;

pub(crate) fn emit(model: &Model, plan: &Plan, counts: &mut Counts) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    for op in model.operations.values() {
        let request = &model.types[&op.request_type];
        let request_rust = &plan.type_names[&op.request_type];
        let method = &plan.method_names[&op.name];
        let (response, _) = response_type(plan, op);

        let mut params = String::from("&self, this: &x::ManagedObjectReference");
        let mut build = String::from("this: this.clone(),");
        for f in request.fields.iter().skip(1) {
            let name = &plan.field_names[&(request.name.clone(), f.name.clone())];
            let boxed = plan.is_boxed(&request.name, &f.name);
            let rust = plan.rust_type(&f.ty);
            let is_str = matches!(
                f.ty,
                TypeRef::Primitive(Primitive::String | Primitive::AnyUri)
            );
            let is_copy = matches!(f.ty, TypeRef::Primitive(p) if p.is_copy());
            let (param, value) = match f.occurs {
                Occurs::Required if is_str => ("&str".to_string(), format!("{name}.to_owned()")),
                Occurs::Required if is_copy => (rust.clone(), name.clone()),
                Occurs::Required if boxed => {
                    (format!("&{rust}"), format!("Box::new({name}.clone())"))
                }
                Occurs::Required => (format!("&{rust}"), format!("{name}.clone()")),
                Occurs::Optional if is_str => (
                    "Option<&str>".to_string(),
                    format!("{name}.map(str::to_owned)"),
                ),
                Occurs::Optional if is_copy => (format!("Option<{rust}>"), name.clone()),
                Occurs::Optional if boxed => (
                    format!("Option<&{rust}>"),
                    format!("{name}.map(|value| Box::new(value.clone()))"),
                ),
                Occurs::Optional => (format!("Option<&{rust}>"), format!("{name}.cloned()")),
                Occurs::Repeated => (format!("&[{rust}]"), format!("{name}.to_vec()")),
            };
            write!(params, ", {name}: {param}").ok();
            if &value == name {
                write!(build, "{name},").ok();
            } else {
                write!(build, "{name}: {value},").ok();
            }
        }

        let mut doc = format!("/// Invokes `{}`", op.name);
        if let Some(owners) = plan.owners.get(&op.name) {
            let owners: Vec<String> = owners.iter().map(|o| format!("`{o}`")).collect();
            write!(doc, " on {}", owners.join(", ")).ok();
        }
        doc.push_str(".\n");
        doc.push_str(&super::since_doc(op.since));
        if !op.faults.is_empty() {
            let faults: Vec<String> = op.faults.iter().map(|f| format!("`{f}`")).collect();
            writeln!(doc, "///\n/// Declared faults: {}.", faults.join(", ")).ok();
        }

        let cfg = plan.operation_cfg(&op.name);
        // Formatted inside an impl block, which `emit` strips: a file gets one
        // `impl Vim` block for all its methods.
        let code = format!(
            "impl<'a> crate::Vim<'a> {{\n{doc}{cfg}#[inline]\npub fn {method}({params}) -> impl std::future::Future<Output = Result<{response}, crate::Error>> + 'a {{\n    \
             self.call({request_rust} {{ {build} }})\n}}\n}}\n"
        );
        let code = format(&code)?;
        let code = code
            .strip_prefix("impl<'a> crate::Vim<'a> {\n")
            .and_then(|c| c.trim_end().strip_suffix('}'))
            .map(str::to_string)
            .ok_or_else(|| crate::error::Error::new("unexpected method layout"))?;
        items.push(Item {
            group: super::group_of(&op.name),
            code,
        });
        counts.methods += 1;
    }
    Ok(items)
}
