//! Stage 2: raw documents -> normalised model.

use std::collections::{BTreeMap, BTreeSet};

use crate::bail;
use crate::error::{Error, Result};
use crate::managed_objects::ManagedObjectsFile;
use crate::model::{
    ArrayType, ComplexType, EnumType, Field, ManagedObject, Model, Occurs, Operation, Primitive,
    Property, Returnval, SchemaCounts, TypeRef,
};
use crate::parse::{QName, RawBundle, RawContent, RawElement};

pub const VIM_NS: &str = "urn:vim25";

/// Builds the model from a bundle whose raw fixups have been applied.
pub fn normalize(bundle: &RawBundle, managed: Option<&ManagedObjectsFile>) -> Result<Model> {
    let mut model = Model {
        schema_counts: count(bundle),
        ..Model::default()
    };

    let complex_names: BTreeSet<&str> = bundle
        .complex_types
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    let enum_names: BTreeSet<&str> = bundle
        .simple_types
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    let resolver = Resolver {
        complex: &complex_names,
        enums: &enum_names,
    };

    for st in &bundle.simple_types {
        if st.base.local != "string" || !st.base.is_xsd() {
            bail!(
                "{}: enumeration {} is not over xsd:string",
                st.file,
                st.name
            );
        }
        if st.values.is_empty() {
            bail!("{}: simpleType {} has no values", st.file, st.name);
        }
        insert_unique(
            &mut model.enums,
            st.name.clone(),
            EnumType {
                name: st.name.clone(),
                values: st.values.clone(),
            },
        )?;
    }

    for ct in &bundle.complex_types {
        let (base, elements) = match &ct.content {
            RawContent::Sequence { base, elements } => (base, elements),
            RawContent::SimpleContent { .. } => bail!(
                "{}: complexType {} has simple content; only ManagedObjectReference may \
                 (see fixups::managed_object_reference_is_builtin)",
                ct.file,
                ct.name
            ),
        };
        if let Some(array) = as_array(&ct.name, base.as_ref(), elements, &resolver)
            .map_err(|e| e.context(format!("{}: {}", ct.file, ct.name)))?
        {
            insert_unique(&mut model.arrays, ct.name.clone(), array)?;
            continue;
        }
        let base = match base {
            Some(q) => {
                let resolved = resolver.resolve(q)?;
                match resolved {
                    TypeRef::Complex(name) => Some(name),
                    other => bail!("{}: {} extends non-complex {other:?}", ct.file, ct.name),
                }
            }
            None => None,
        };
        let fields = elements
            .iter()
            .map(|el| field(el, &resolver))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| e.context(format!("{}: {}", ct.file, ct.name)))?;
        let is_request = ct.file.ends_with("messagetypes.xsd");
        if is_request && !ct.name.ends_with("RequestType") {
            bail!(
                "{}: {} in a message file is not a *RequestType",
                ct.file,
                ct.name
            );
        }
        insert_unique(
            &mut model.types,
            ct.name.clone(),
            ComplexType {
                name: ct.name.clone(),
                base,
                fields,
                is_request,
                file: ct.file.clone(),
            },
        )?;
    }

    check_inheritance(&model)?;
    read_operations(bundle, &resolver, &mut model)?;
    if let Some(managed) = managed {
        read_managed_objects(managed, &resolver, &mut model)?;
    }
    Ok(model)
}

/// What the documents declare, counted before any fixup.
pub fn count(bundle: &RawBundle) -> SchemaCounts {
    SchemaCounts {
        complex_types: bundle.complex_types.len(),
        array_types: bundle
            .complex_types
            .iter()
            .filter(|t| t.name.starts_with("ArrayOf"))
            .count(),
        enums: bundle.simple_types.len(),
        enum_values: bundle.simple_types.iter().map(|t| t.values.len()).sum(),
        operations: bundle.operations.len(),
    }
}

fn insert_unique<V>(map: &mut BTreeMap<String, V>, key: String, value: V) -> Result<()> {
    if map.contains_key(&key) {
        bail!("{key} is defined twice");
    }
    map.insert(key, value);
    Ok(())
}

struct Resolver<'a> {
    complex: &'a BTreeSet<&'a str>,
    enums: &'a BTreeSet<&'a str>,
}

impl Resolver<'_> {
    fn resolve(&self, q: &QName) -> Result<TypeRef> {
        if q.is_xsd() {
            if q.local == "anyType" {
                return Ok(TypeRef::AnyType);
            }
            return Primitive::from_xsd(&q.local)
                .map(TypeRef::Primitive)
                .ok_or_else(|| Error::new(format!("unsupported XML Schema type xsd:{}", q.local)));
        }
        if q.namespace != VIM_NS {
            bail!("type {}:{} outside urn:vim25", q.namespace, q.local);
        }
        if q.local == "ManagedObjectReference" {
            return Ok(TypeRef::Mor);
        }
        if self.enums.contains(q.local.as_str()) {
            return Ok(TypeRef::Enum(q.local.clone()));
        }
        if self.complex.contains(q.local.as_str()) {
            return Ok(TypeRef::Complex(q.local.clone()));
        }
        bail!("unknown type vim25:{}", q.local)
    }

    fn resolve_name(&self, name: &str) -> Result<TypeRef> {
        let q = match Primitive::from_xsd(name) {
            Some(_) => QName {
                namespace: "http://www.w3.org/2001/XMLSchema".into(),
                local: name.into(),
            },
            None if name == "anyType" => QName {
                namespace: "http://www.w3.org/2001/XMLSchema".into(),
                local: name.into(),
            },
            None => QName {
                namespace: VIM_NS.into(),
                local: name.into(),
            },
        };
        self.resolve(&q)
    }
}

fn occurs(el: &RawElement) -> Result<Occurs> {
    Ok(match (el.min_occurs, el.max_occurs) {
        (1, Some(1)) => Occurs::Required,
        (0, Some(1)) => Occurs::Optional,
        (_, None) => Occurs::Repeated,
        (min, max) => bail!("element {}: unsupported occurrence {min}..{max:?}", el.name),
    })
}

fn field(el: &RawElement, resolver: &Resolver<'_>) -> Result<Field> {
    let Some(type_name) = &el.type_name else {
        bail!("element {} has an inline type", el.name);
    };
    Ok(Field {
        name: el.name.clone(),
        ty: resolver.resolve(type_name)?,
        occurs: occurs(el)?,
    })
}

/// An `ArrayOf*` wrapper: no base, a single repeated element. Recognised by
/// shape and name together; a type that has one without the other is an error.
fn as_array(
    name: &str,
    base: Option<&QName>,
    elements: &[RawElement],
    resolver: &Resolver<'_>,
) -> Result<Option<ArrayType>> {
    let named = name.starts_with("ArrayOf");
    let shaped = base.is_none()
        && elements.len() == 1
        && elements[0].max_occurs.is_none()
        && elements[0].min_occurs == 0;
    match (named, shaped) {
        (false, _) => Ok(None),
        (true, false) => bail!("named like an array but not shaped like one"),
        (true, true) => {
            let item = &elements[0];
            let item_type = field(item, resolver)?.ty;
            Ok(Some(ArrayType {
                name: name.to_string(),
                item_tag: item.name.clone(),
                item: item_type,
            }))
        }
    }
}

fn check_inheritance(model: &Model) -> Result<()> {
    for ty in model.types.values() {
        let mut seen = BTreeSet::new();
        let mut current = Some(ty);
        while let Some(t) = current {
            if !seen.insert(t.name.as_str()) {
                bail!("inheritance cycle through {}", t.name);
            }
            current = match &t.base {
                Some(b) => Some(
                    model
                        .types
                        .get(b)
                        .ok_or_else(|| Error::new(format!("{} extends unknown {b}", t.name)))?,
                ),
                None => None,
            };
        }
        // Flattened fields must have distinct XML names: the decoder dispatches on them.
        let mut names = BTreeSet::new();
        for (owner, f) in model.all_fields(&ty.name) {
            if !names.insert(f.name.as_str()) {
                bail!(
                    "{}: field {} (from {owner}) repeats an inherited field",
                    ty.name,
                    f.name
                );
            }
        }
    }
    Ok(())
}

fn read_operations(bundle: &RawBundle, resolver: &Resolver<'_>, model: &mut Model) -> Result<()> {
    let elements: BTreeMap<&str, &RawElement> = bundle
        .elements
        .iter()
        .map(|e| (e.name.as_str(), e))
        .collect();
    for op in &bundle.operations {
        let ctx = |e: Error| e.context(format!("operation {}", op.name));
        let input = message_element(bundle, &op.input_message).map_err(ctx)?;
        let output = message_element(bundle, &op.output_message).map_err(ctx)?;
        if input != op.name || output != format!("{}Response", op.name) {
            bail!(
                "operation {}: messages use elements {input}/{output}, expected the operation's name",
                op.name
            );
        }
        let request_el = elements
            .get(input)
            .ok_or_else(|| Error::new(format!("operation {}: no element {input}", op.name)))?;
        let request_type = match &request_el.type_name {
            Some(q) => match resolver.resolve(q).map_err(ctx)? {
                TypeRef::Complex(name) => name,
                other => bail!("operation {}: request element of type {other:?}", op.name),
            },
            None => bail!("operation {}: request element has an inline type", op.name),
        };
        match model.types.get(&request_type) {
            Some(t) if t.is_request => match t.fields.first() {
                Some(f)
                    if f.name == "_this"
                        && f.ty == TypeRef::Mor
                        && f.occurs == Occurs::Required => {}
                _ => bail!("{request_type}: first element is not a required _this reference"),
            },
            _ => bail!(
                "operation {}: {request_type} is not a request type",
                op.name
            ),
        }
        let response_el = elements
            .get(output)
            .ok_or_else(|| Error::new(format!("operation {}: no element {output}", op.name)))?;
        let Some(sequence) = &response_el.inline_sequence else {
            bail!("operation {}: {output} has no inline sequence", op.name);
        };
        let returnval = match sequence.as_slice() {
            [] => None,
            [el] if el.name == "returnval" => {
                let f = field(el, resolver).map_err(ctx)?;
                Some(Returnval {
                    ty: f.ty,
                    occurs: f.occurs,
                })
            }
            _ => bail!("operation {}: {output} is not a single returnval", op.name),
        };
        let mut faults = Vec::new();
        for message in &op.fault_messages {
            let element = message_element(bundle, message).map_err(ctx)?;
            let el = elements
                .get(element)
                .ok_or_else(|| Error::new(format!("no fault element {element}")))?;
            match el.type_name.as_ref().map(|q| resolver.resolve(q)) {
                Some(Ok(TypeRef::Complex(name))) => faults.push(name),
                _ => bail!(
                    "operation {}: fault {element} is not a complex type",
                    op.name
                ),
            }
        }
        faults.sort();
        faults.dedup();
        insert_unique(
            &mut model.operations,
            op.name.clone(),
            Operation {
                name: op.name.clone(),
                request_type,
                returnval,
                faults,
            },
        )?;
    }
    Ok(())
}

fn message_element<'a>(bundle: &'a RawBundle, message: &str) -> Result<&'a str> {
    match bundle.messages.get(message) {
        Some(q) if q.namespace == VIM_NS => Ok(&q.local),
        Some(q) => bail!("message {message} uses element {}:{}", q.namespace, q.local),
        None => bail!("no message {message}"),
    }
}

fn read_managed_objects(
    file: &ManagedObjectsFile,
    resolver: &Resolver<'_>,
    model: &mut Model,
) -> Result<()> {
    for mo in &file.managed_objects {
        let mut properties = Vec::new();
        for p in &mo.properties {
            let ty = resolver
                .resolve_name(&p.type_name)
                .map_err(|e| e.context(format!("managed object {}.{}", mo.name, p.name)))?;
            let occurs = match (p.array, p.optional) {
                (true, _) => Occurs::Repeated,
                (false, true) => Occurs::Optional,
                (false, false) => Occurs::Required,
            };
            if p.mo_type.is_some() && ty != TypeRef::Mor {
                bail!(
                    "{}.{}: mo_type on a non-reference property",
                    mo.name,
                    p.name
                );
            }
            properties.push(Property {
                name: p.name.clone(),
                ty,
                occurs,
                mo_type: p.mo_type.clone(),
            });
        }
        properties.sort_by(|a, b| a.name.cmp(&b.name));
        for m in &mo.methods {
            if !model.operations.contains_key(m) {
                bail!(
                    "managed object {}: method {m} is not an operation of the WSDL",
                    mo.name
                );
            }
        }
        let mut methods = mo.methods.clone();
        methods.sort();
        insert_unique(
            &mut model.managed_objects,
            mo.name.clone(),
            ManagedObject {
                name: mo.name.clone(),
                base: mo.base.clone(),
                properties,
                methods,
            },
        )?;
    }
    for mo in model.managed_objects.values() {
        if let Some(base) = &mo.base {
            if !model.managed_objects.contains_key(base) {
                bail!("managed object {} extends unknown {base}", mo.name);
            }
        }
    }
    Ok(())
}
