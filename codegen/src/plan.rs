//! Stage 4 (continued): decisions the emitters share, made once over the
//! whole model: Rust names (checked for collisions), which types are
//! polymorphic (`AnyX`), which fields are boxed to break recursion, and which
//! operations are safe to repeat.

use std::collections::{BTreeMap, BTreeSet};

use crate::bail;
use crate::error::Result;
use crate::idempotent;
use crate::model::{Model, Occurs, TypeRef};
use crate::naming;

/// Names the runtime or the prelude already uses in the modules generated
/// code lives in; a schema type with one of these names would shadow them.
const RESERVED_TYPE_NAMES: &[&str] = &[
    "Box",
    "Clone",
    "DateTime",
    "Debug",
    "Default",
    "Err",
    "Error",
    "ManagedObjectReference",
    "None",
    "Ok",
    "Option",
    "PartialEq",
    "Result",
    "Self",
    "Some",
    "String",
    "Value",
    "Vec",
];

/// Methods `Vim` (the home of the generated methods) has by hand or by
/// derive; an operation with one of these names would clash.
const RESERVED_CLIENT_METHODS: &[&str] = &["invoke", "client", "clone", "clone_from", "fmt"];

/// Everything decided about the model before emitting.
#[derive(Debug)]
pub struct Plan {
    /// Complex types that have subtypes and are referenced: fields of theirs hold `AnyX`.
    pub polymorphic: BTreeSet<String>,
    /// `(declaring type, field)` pairs stored boxed to keep types finite.
    pub boxed: BTreeSet<(String, String)>,
    /// Rust name of every complex type and enumeration.
    pub type_names: BTreeMap<String, String>,
    /// Rust name of every field, by `(declaring type, field)`.
    pub field_names: BTreeMap<(String, String), String>,
    /// Rust variant names of every enumeration, in value order.
    pub variants: BTreeMap<String, Vec<String>>,
    /// Rust method name of every operation.
    pub method_names: BTreeMap<String, String>,
    /// Operations that are safe to repeat.
    pub idempotent: BTreeSet<String>,
    /// Item type name -> its `ArrayOf*` type, for types that have one.
    pub array_of: BTreeMap<String, String>,
    /// The operations each managed object owns, inverted: operation -> owners.
    pub owners: BTreeMap<String, Vec<String>>,
    /// Types compiled in only with a cargo feature of vsphere-client, by XML
    /// name: the feature (see `families`).
    pub gated: BTreeMap<String, &'static str>,
    /// Managed objects compiled in only with a feature, by name.
    pub gated_managed_objects: BTreeMap<String, &'static str>,
    /// Operations (their `Vim` methods) compiled in only with a feature.
    pub gated_operations: BTreeMap<String, &'static str>,
    /// Properties of ungated managed objects compiled in only with a
    /// feature, as `"ManagedObject.property"`.
    pub gated_properties: BTreeMap<String, &'static str>,
}

impl Plan {
    /// The Rust type for a value of `ty` (no `Option`/`Vec`/`Box` wrapping).
    pub fn rust_type(&self, ty: &TypeRef) -> String {
        match ty {
            TypeRef::Primitive(p) => primitive_rust_type(*p).to_string(),
            TypeRef::AnyType => "x::Value".to_string(),
            TypeRef::Mor => "x::ManagedObjectReference".to_string(),
            TypeRef::Complex(name) if self.polymorphic.contains(name) => {
                naming::any_type_name(name)
            }
            TypeRef::Complex(name) | TypeRef::Enum(name) => self.type_names[name].clone(),
        }
    }

    /// The Rust type of a field with its cardinality and boxing.
    pub fn field_type(&self, ty: &TypeRef, occurs: Occurs, boxed: bool) -> String {
        let inner = self.rust_type(ty);
        let inner = if boxed {
            format!("Box<{inner}>")
        } else {
            inner
        };
        match occurs {
            Occurs::Required => inner,
            Occurs::Optional => format!("Option<{inner}>"),
            Occurs::Repeated => format!("Vec<{inner}>"),
        }
    }

    /// The attribute that compiles `type_name`'s items only with its
    /// family's feature (`#[cfg(feature = "all-events")] `), or nothing.
    pub fn cfg(&self, type_name: &str) -> String {
        crate::emit::cfg_attr(self.gated.get(type_name).copied())
    }

    /// [`cfg`](Self::cfg) of a managed object.
    pub fn managed_object_cfg(&self, name: &str) -> String {
        crate::emit::cfg_attr(self.gated_managed_objects.get(name).copied())
    }

    /// [`cfg`](Self::cfg) of an operation's `Vim` method.
    pub fn operation_cfg(&self, name: &str) -> String {
        crate::emit::cfg_attr(self.gated_operations.get(name).copied())
    }

    /// [`cfg`](Self::cfg) of the property `property` declared by managed
    /// object `owner`: its `mo::` field and path method.
    pub fn property_cfg(&self, owner: &str, property: &str) -> String {
        crate::emit::cfg_attr(self.gated_property_feature(owner, property))
    }

    /// The feature that compiles in the property `property` declared by
    /// managed object `owner`, when one does.
    pub fn gated_property_feature(&self, owner: &str, property: &str) -> Option<&'static str> {
        let key = format!("{owner}.{property}");
        self.gated_properties.get(&key).copied()
    }

    /// Whether the field `field` declared by `owner` is boxed.
    pub fn is_boxed(&self, owner: &str, field: &str) -> bool {
        self.boxed.contains(&(owner.to_string(), field.to_string()))
    }
}

/// The Rust type of an XML Schema primitive.
pub fn primitive_rust_type(p: crate::model::Primitive) -> &'static str {
    use crate::model::Primitive as P;
    match p {
        P::String | P::AnyUri => "String",
        P::Boolean => "bool",
        P::Byte => "i8",
        P::Short => "i16",
        P::Int => "i32",
        P::Long => "i64",
        P::Float => "f32",
        P::Double => "f64",
        P::DateTime => "x::DateTime",
        P::Base64Binary => "Vec<u8>",
    }
}

/// Makes every decision and checks names for collisions.
pub fn plan(model: &Model) -> Result<Plan> {
    let polymorphic = polymorphic_types(model);
    let boxed = boxed_fields(model, &polymorphic)?;

    let mut type_names = BTreeMap::new();
    let mut taken: BTreeMap<String, String> = BTreeMap::new();
    for name in model.types.keys().chain(model.enums.keys()) {
        let rust = naming::type_name(name);
        if RESERVED_TYPE_NAMES.contains(&rust.as_str()) {
            bail!("type {name} would be named {rust}, which generated code already uses");
        }
        if let Some(other) = taken.insert(rust.clone(), name.clone()) {
            bail!("types {other} and {name} both map to the Rust name {rust}");
        }
        type_names.insert(name.clone(), rust);
    }
    for name in &polymorphic {
        let rust = naming::any_type_name(name);
        if let Some(other) = taken.insert(rust.clone(), name.clone()) {
            bail!("polymorphic enum of {name} is named {rust}, like the type {other}");
        }
    }

    let mut field_names = BTreeMap::new();
    for ty in model.types.values() {
        for f in &ty.fields {
            field_names.insert(
                (ty.name.clone(), f.name.clone()),
                naming::field_name(&f.name),
            );
        }
    }
    for ty in model.types.values() {
        let mut seen = BTreeMap::new();
        for (owner, f) in model.all_fields(&ty.name) {
            let rust = &field_names[&(owner.to_string(), f.name.clone())];
            if let Some(other) = seen.insert(rust.clone(), f.name.clone()) {
                bail!(
                    "{}: fields {other} and {} both map to {rust}",
                    ty.name,
                    f.name
                );
            }
        }
    }

    let mut variants = BTreeMap::new();
    for e in model.enums.values() {
        let names: Vec<String> = e.values.iter().map(|v| naming::variant_name(v)).collect();
        let mut seen = BTreeSet::new();
        for (value, variant) in e.values.iter().zip(&names) {
            if variant == naming::UNRECOGNIZED_VARIANT {
                bail!(
                    "{}: value {value:?} maps to the fallback variant name",
                    e.name
                );
            }
            if !seen.insert(variant.as_str()) {
                bail!("{}: two values map to the variant {variant}", e.name);
            }
        }
        variants.insert(e.name.clone(), names);
    }

    let mut method_names = BTreeMap::new();
    let mut methods_taken = BTreeMap::new();
    for op in model.operations.keys() {
        let rust = naming::method_name(op);
        if RESERVED_CLIENT_METHODS.contains(&rust.as_str()) {
            bail!("operation {op} maps to {rust}, a hand-written Vim method");
        }
        if let Some(other) = methods_taken.insert(rust.clone(), op.clone()) {
            bail!("operations {other} and {op} both map to the method {rust}");
        }
        method_names.insert(op.clone(), rust);
    }

    let idempotent = idempotent::safe_operations(model)?;

    let mut array_of = BTreeMap::new();
    for array in model.arrays.values() {
        if let TypeRef::Complex(item) | TypeRef::Enum(item) = &array.item {
            if array.name != format!("ArrayOf{item}") {
                bail!(
                    "{} holds {item}: array names must be ArrayOf + item",
                    array.name
                );
            }
            array_of.insert(item.clone(), array.name.clone());
        }
    }

    let mut owners: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for mo in model.managed_objects.values() {
        for m in &mo.methods {
            owners.entry(m.clone()).or_default().push(mo.name.clone());
        }
        for p in &mo.properties {
            if p.occurs == Occurs::Repeated {
                if let TypeRef::Complex(item) | TypeRef::Enum(item) = &p.ty {
                    if !array_of.contains_key(item) {
                        bail!(
                            "{}.{}: no ArrayOf{item} to carry its value",
                            mo.name,
                            p.name
                        );
                    }
                }
            }
        }
    }

    let gates = crate::families::gates(model);
    Ok(Plan {
        polymorphic,
        boxed,
        type_names,
        field_names,
        variants,
        method_names,
        idempotent,
        array_of,
        owners,
        gated: gates.types,
        gated_managed_objects: gates.managed_objects,
        gated_operations: gates.operations,
        gated_properties: gates.properties,
    })
}

/// Types with subtypes that appear as a field type, an operation result, an
/// array item or a managed object property: their slots can hold a subtype.
fn polymorphic_types(model: &Model) -> BTreeSet<String> {
    let children = model.subtypes();
    let mut referenced: BTreeSet<&str> = BTreeSet::new();
    for ty in model.types.values() {
        for f in &ty.fields {
            if let TypeRef::Complex(name) = &f.ty {
                referenced.insert(name);
            }
        }
    }
    for array in model.arrays.values() {
        if let TypeRef::Complex(name) = &array.item {
            referenced.insert(name);
        }
    }
    for op in model.operations.values() {
        if let Some(TypeRef::Complex(name)) = op.returnval.as_ref().map(|r| &r.ty) {
            referenced.insert(name);
        }
    }
    for mo in model.managed_objects.values() {
        for p in &mo.properties {
            if let TypeRef::Complex(name) = &p.ty {
                referenced.insert(name);
            }
        }
    }
    referenced
        .into_iter()
        .filter(|name| children.contains_key(name))
        .map(str::to_string)
        .collect()
}

/// An inline containment: target type index, the field's origin
/// `(declaring type, field)`, and its cardinality.
type Edge = (usize, (String, String), Occurs);

/// Fields that must be boxed: a struct holding itself (directly or through
/// other structs) by value is infinitely large. Edges through `Vec` or through
/// a polymorphic enum (whose variants are boxed) do not count. Every field on
/// a cycle is boxed, in every type that inherits it, so a field has one Rust
/// type wherever it appears.
fn boxed_fields(
    model: &Model,
    polymorphic: &BTreeSet<String>,
) -> Result<BTreeSet<(String, String)>> {
    // Edges: struct -> struct it contains inline, labelled by the field's origin.
    let names: Vec<&str> = model.types.keys().map(String::as_str).collect();
    let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut edges: Vec<Vec<Edge>> = vec![Vec::new(); names.len()];
    for (i, name) in names.iter().enumerate() {
        for (owner, f) in model.all_fields(name) {
            if f.occurs == Occurs::Repeated {
                continue;
            }
            if let TypeRef::Complex(target) = &f.ty {
                if polymorphic.contains(target) {
                    continue;
                }
                edges[i].push((
                    index[target.as_str()],
                    (owner.to_string(), f.name.clone()),
                    f.occurs,
                ));
            }
        }
    }
    let component = strongly_connected_components(&edges);
    let mut boxed = BTreeSet::new();
    for (from, out) in edges.iter().enumerate() {
        for (to, origin, occurs) in out {
            if component[from] == component[*to] {
                if *occurs == Occurs::Required {
                    // A required cycle has no finite value at all.
                    let on_required_cycle = required_cycle(&edges, *to, from);
                    if on_required_cycle {
                        bail!(
                            "{} contains itself through required fields ({}.{})",
                            names[from],
                            origin.0,
                            origin.1
                        );
                    }
                }
                boxed.insert(origin.clone());
            }
        }
    }
    Ok(boxed)
}

/// Whether `target` reaches `start` through required edges only.
fn required_cycle(edges: &[Vec<Edge>], start: usize, target: usize) -> bool {
    let mut seen = vec![false; edges.len()];
    let mut stack = vec![start];
    while let Some(node) = stack.pop() {
        if node == target {
            return true;
        }
        if std::mem::replace(&mut seen[node], true) {
            continue;
        }
        for (to, _, occurs) in &edges[node] {
            if *occurs == Occurs::Required {
                stack.push(*to);
            }
        }
    }
    false
}

/// Tarjan's algorithm, iterative. Returns the component id of every node.
fn strongly_connected_components<T>(edges: &[Vec<(usize, T, Occurs)>]) -> Vec<usize> {
    let n = edges.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut component = vec![usize::MAX; n];
    let mut next_index = 0;
    let mut next_component = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, next edge to visit)
        let mut call: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (node, ref mut edge)) = call.last_mut() {
            if let Some((to, _, _)) = edges[node].get(*edge) {
                *edge += 1;
                let to = *to;
                if index[to] == usize::MAX {
                    index[to] = next_index;
                    low[to] = next_index;
                    next_index += 1;
                    stack.push(to);
                    on_stack[to] = true;
                    call.push((to, 0));
                } else if on_stack[to] {
                    low[node] = low[node].min(index[to]);
                }
            } else {
                call.pop();
                if let Some(&(parent, _)) = call.last() {
                    low[parent] = low[parent].min(low[node]);
                }
                if low[node] == index[node] {
                    while let Some(member) = stack.pop() {
                        on_stack[member] = false;
                        component[member] = next_component;
                        if member == node {
                            break;
                        }
                    }
                    next_component += 1;
                }
            }
        }
    }
    component
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_find_cycles_and_self_loops() {
        let e = |to: usize| (to, (), Occurs::Optional);
        // 0 -> 1 -> 2 -> 0, 3 -> 3, 4 -> 0
        let edges = vec![vec![e(1)], vec![e(2)], vec![e(0)], vec![e(3)], vec![e(0)]];
        let c = strongly_connected_components(&edges);
        assert_eq!(c[0], c[1]);
        assert_eq!(c[1], c[2]);
        assert_ne!(c[0], c[3]);
        assert_ne!(c[4], c[0]);
        assert_ne!(c[4], c[3]);
    }
}
