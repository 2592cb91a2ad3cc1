//! Stage 2: raw documents -> normalised model.

use std::collections::{BTreeMap, BTreeSet};

use crate::additions::{AdditionsFile, FieldEntry};
use crate::bail;
use crate::error::{Error, Result};
use crate::managed_objects::ManagedObjectsFile;
use crate::model::{
    ApiVersion, ArrayType, ComplexType, EnumType, Field, ManagedObject, Model, Occurs, Operation,
    Primitive, Property, Returnval, SchemaCounts, Since, TypeRef,
};
use crate::parse::{QName, RawBundle, RawContent, RawElement};

pub const VIM_NS: &str = "urn:vim25";

/// The API version of the base bundle.
pub const BASE_API_VERSION: &str = "7.0.3.0";

/// Builds the model from a bundle whose raw fixups have been applied, its
/// managed objects, and what later API versions added.
pub fn normalize(
    bundle: &RawBundle,
    managed: Option<&ManagedObjectsFile>,
    additions: Option<&AdditionsFile>,
) -> Result<Model> {
    let mut model = Model {
        schema_counts: count(bundle),
        ..Model::default()
    };

    let mut complex_names: BTreeSet<&str> = bundle
        .complex_types
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    let mut enum_names: BTreeSet<&str> = bundle
        .simple_types
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    let request_names: Vec<String> = additions
        .iter()
        .flat_map(|a| &a.operations)
        .filter(|op| op.since.is_some())
        .map(|op| request_type_name(&op.name))
        .collect();
    if let Some(additions) = additions {
        complex_names.extend(
            additions
                .types
                .iter()
                .filter(|t| t.since.is_some())
                .map(|t| t.name.as_str()),
        );
        complex_names.extend(additions.arrays.iter().map(String::as_str));
        complex_names.extend(request_names.iter().map(String::as_str));
        enum_names.extend(
            additions
                .enums
                .iter()
                .filter(|e| e.since.is_some())
                .map(|e| e.name.as_str()),
        );
    }
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
                since: None,
                value_since: BTreeMap::new(),
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
                since: None,
            },
        )?;
    }

    read_operations(bundle, &resolver, &mut model)?;
    if let Some(managed) = managed {
        read_managed_objects(managed, &resolver, &mut model)?;
    }
    if let Some(additions) = additions {
        merge_additions(additions, &resolver, &mut model)
            .map_err(|e| e.context("wsdl/additions.json"))?;
    }
    check_inheritance(&model)?;
    Ok(model)
}

/// `CloneVM_Task` -> `CloneVMRequestType`: the request type of an operation
/// (the rule holds for every operation of the bundle, which the extractor
/// checks).
pub fn request_type_name(operation: &str) -> String {
    let stem = operation.strip_suffix("_Task").unwrap_or(operation);
    format!("{stem}RequestType")
}

/// What [`merge_additions`] adds to the schema's counts.
pub fn count_additions(additions: &AdditionsFile) -> SchemaCounts {
    let new_types = additions.types.iter().filter(|t| t.since.is_some()).count();
    let new_operations = additions
        .operations
        .iter()
        .filter(|o| o.since.is_some())
        .count();
    SchemaCounts {
        complex_types: new_types + additions.arrays.len() + new_operations,
        array_types: additions.arrays.len(),
        enums: additions.enums.iter().filter(|e| e.since.is_some()).count(),
        enum_values: additions.enums.iter().map(|e| e.values.len()).sum(),
        operations: new_operations,
    }
}

/// The version of an entry: `None` at or below the base bundle's version
/// (pyvmomi lists a few values of 7.0.3.0 that the bundle lacks).
fn since_of(text: Option<&str>, base: ApiVersion) -> Result<Since> {
    let Some(text) = text else { return Ok(None) };
    let version = ApiVersion::parse(text)
        .ok_or_else(|| Error::new(format!("{text:?} is not an API version")))?;
    Ok((version > base).then_some(version))
}

/// The cardinality of a table entry's `array` and `optional` flags.
fn table_occurs(array: bool, optional: bool) -> Occurs {
    match (array, optional) {
        (true, _) => Occurs::Repeated,
        (false, true) => Occurs::Optional,
        (false, false) => Occurs::Required,
    }
}

fn added_field(entry: &FieldEntry, resolver: &Resolver<'_>, base: ApiVersion) -> Result<Field> {
    let ty = resolver
        .resolve_name(&entry.type_name)
        .map_err(|e| e.context(&entry.name))?;
    let occurs = table_occurs(entry.array, entry.optional);
    Ok(Field {
        name: entry.name.clone(),
        ty,
        occurs,
        since: since_of(entry.since.as_deref(), base)?,
    })
}

/// Inserts `field` after the field named `after` (first when `None`).
fn insert_after(
    fields: &mut Vec<Field>,
    after: Option<&str>,
    field: Field,
    first: usize,
) -> Result<()> {
    if fields.iter().any(|f| f.name == field.name) {
        bail!("field {} is there already", field.name);
    }
    let at = match after {
        None => first,
        Some(after) => match fields.iter().position(|f| f.name == after) {
            Some(i) => i + 1,
            None => bail!("field {} follows {after}, which is not there", field.name),
        },
    };
    fields.insert(at, field);
    Ok(())
}

/// Merges what later API versions added (see [`crate::additions`]).
fn merge_additions(file: &AdditionsFile, resolver: &Resolver<'_>, model: &mut Model) -> Result<()> {
    let base = ApiVersion::parse(&file.base_api_version)
        .ok_or_else(|| Error::new("bad base_api_version"))?;
    if file.base_api_version != BASE_API_VERSION {
        bail!(
            "the additions extend API {}, the generator's base is {BASE_API_VERSION}",
            file.base_api_version
        );
    }
    let newest =
        ApiVersion::parse(&file.api_version).ok_or_else(|| Error::new("bad api_version"))?;
    model.api_version = Some(newest);

    for e in &file.enums {
        let ctx = |err: Error| err.context(format!("enumeration {}", e.name));
        let since = since_of(e.since.as_deref(), base).map_err(ctx)?;
        let mut value_since = BTreeMap::new();
        if e.since.is_some() {
            let Some(since) = since else {
                bail!("enumeration {}: new, yet not newer than the base", e.name);
            };
            let mut values = Vec::new();
            for v in &e.values {
                let v_since = since_of(v.since.as_deref(), base)
                    .map_err(ctx)?
                    .unwrap_or(since);
                value_since.insert(v.name.clone(), v_since.max(since));
                values.push(v.name.clone());
            }
            insert_unique(
                &mut model.enums,
                e.name.clone(),
                EnumType {
                    name: e.name.clone(),
                    values,
                    since: Some(since),
                    value_since,
                },
            )?;
            continue;
        }
        let Some(existing) = model.enums.get_mut(&e.name) else {
            bail!("enumeration {} is not in the bundle", e.name);
        };
        for v in &e.values {
            if existing.values.contains(&v.name) {
                bail!("enumeration {}: value {} is there already", e.name, v.name);
            }
            let at = match &v.after {
                None => 0,
                Some(after) => match existing.values.iter().position(|x| x == after) {
                    Some(i) => i + 1,
                    None => bail!(
                        "enumeration {}: {} follows {after}, not there",
                        e.name,
                        v.name
                    ),
                },
            };
            existing.values.insert(at, v.name.clone());
            if let Some(since) = since_of(v.since.as_deref(), base).map_err(ctx)? {
                existing.value_since.insert(v.name.clone(), since);
            }
        }
    }

    for t in &file.types {
        let ctx = |err: Error| err.context(format!("type {}", t.name));
        if t.since.is_some() {
            let since = since_of(t.since.as_deref(), base).map_err(ctx)?;
            if since.is_none() {
                bail!("type {}: new, yet not newer than the base", t.name);
            }
            let base_type = match &t.base {
                Some(b) => match resolver.resolve_name(b).map_err(ctx)? {
                    TypeRef::Complex(name) => Some(name),
                    other => bail!("type {} extends non-complex {other:?}", t.name),
                },
                None => None,
            };
            let fields = t
                .fields
                .iter()
                .map(|f| added_field(f, resolver, base))
                .collect::<Result<Vec<_>>>()
                .map_err(ctx)?;
            insert_unique(
                &mut model.types,
                t.name.clone(),
                ComplexType {
                    name: t.name.clone(),
                    base: base_type,
                    fields,
                    is_request: false,
                    file: "additions.json".into(),
                    since,
                },
            )?;
            continue;
        }
        let mut added = Vec::new();
        for f in &t.fields {
            added.push((
                added_field(f, resolver, base).map_err(ctx)?,
                f.after.as_deref(),
            ));
        }
        let Some(existing) = model.types.get_mut(&t.name) else {
            bail!("type {} is not in the bundle", t.name);
        };
        for (field, after) in added {
            insert_after(&mut existing.fields, after, field, 0).map_err(ctx)?;
        }
    }

    for name in &file.arrays {
        let Some(item) = name.strip_prefix("ArrayOf") else {
            bail!("array {name} is not named ArrayOf + item");
        };
        let item_type = resolver.resolve_name(item)?;
        insert_unique(
            &mut model.arrays,
            name.clone(),
            ArrayType {
                name: name.clone(),
                item_tag: item.to_string(),
                item: item_type,
            },
        )?;
    }

    for op in &file.operations {
        let ctx = |err: Error| err.context(format!("operation {}", op.name));
        let request_type = request_type_name(&op.name);
        let mut params = Vec::new();
        for p in &op.params {
            params.push((
                added_field(p, resolver, base).map_err(ctx)?,
                p.after.as_deref(),
            ));
        }
        if op.since.is_none() {
            let Some(existing) = model.operations.get(&op.name) else {
                bail!("operation {} is not in the bundle", op.name);
            };
            let request = model
                .types
                .get_mut(&existing.request_type)
                .ok_or_else(|| Error::new(format!("{request_type} is missing")))?;
            for (field, after) in params {
                // New parameters go after `_this` at the earliest.
                insert_after(&mut request.fields, after, field, 1).map_err(ctx)?;
            }
            continue;
        }
        let since = since_of(op.since.as_deref(), base).map_err(ctx)?;
        let mut fields = vec![Field {
            name: "_this".into(),
            ty: TypeRef::Mor,
            occurs: Occurs::Required,
            since,
        }];
        fields.extend(params.into_iter().map(|(f, _)| f));
        insert_unique(
            &mut model.types,
            request_type.clone(),
            ComplexType {
                name: request_type.clone(),
                base: None,
                fields,
                is_request: true,
                file: "additions.json".into(),
                since,
            },
        )?;
        let returnval = match &op.returns {
            None => None,
            Some(r) => Some(Returnval {
                ty: resolver.resolve_name(&r.type_name).map_err(ctx)?,
                occurs: table_occurs(r.array, r.optional),
            }),
        };
        let mut faults = Vec::new();
        for f in &op.faults {
            match resolver.resolve_name(f).map_err(ctx)? {
                TypeRef::Complex(name) => faults.push(name),
                other => bail!(
                    "operation {}: fault {other:?} is not a complex type",
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
                since,
            },
        )?;
    }

    for mo in &file.managed_objects {
        let ctx = |err: Error| err.context(format!("managed object {}", mo.name));
        let since = since_of(mo.since.as_deref(), base).map_err(ctx)?;
        let mut properties = Vec::new();
        for p in &mo.properties {
            let ty = resolver.resolve_name(&p.type_name).map_err(ctx)?;
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
                occurs: table_occurs(p.array, p.optional),
                mo_type: p.mo_type.clone(),
                since: since_of(p.since.as_deref(), base).map_err(ctx)?,
            });
        }
        for m in &mo.methods {
            if !model.operations.contains_key(m) {
                bail!("managed object {}: method {m} is not an operation", mo.name);
            }
        }
        if mo.since.is_some() {
            let mut methods = mo.methods.clone();
            methods.sort();
            properties.sort_by(|a, b| a.name.cmp(&b.name));
            insert_unique(
                &mut model.managed_objects,
                mo.name.clone(),
                ManagedObject {
                    name: mo.name.clone(),
                    base: mo.base.clone(),
                    properties,
                    methods,
                    since,
                },
            )?;
            continue;
        }
        let Some(existing) = model.managed_objects.get_mut(&mo.name) else {
            bail!("managed object {} is not in managed-objects.json", mo.name);
        };
        for p in properties {
            if existing.properties.iter().any(|q| q.name == p.name) {
                bail!("{}.{} is there already", mo.name, p.name);
            }
            existing.properties.push(p);
        }
        existing.properties.sort_by(|a, b| a.name.cmp(&b.name));
        existing.methods.extend(mo.methods.iter().cloned());
        existing.methods.sort();
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
        since: None,
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
                since: None,
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
            let occurs = table_occurs(p.array, p.optional);
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
                since: None,
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
                since: None,
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
