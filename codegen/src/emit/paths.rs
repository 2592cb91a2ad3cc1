//! Typed property paths: `paths::VirtualMachine.runtime().power_state()` is
//! the path `runtime.powerState` of a `mo::VirtualMachine`, checked by the
//! compiler.
//!
//! One unit struct per managed object type (its properties, inherited
//! ones included, as methods) and one struct per data type a path can go
//! through (a structure with fields reached through properties and fields
//! that are neither repeated nor of another kind: the property collector
//! traverses nothing else, `MANAGED_OBJECTS.resolve_path` neither). A method
//! returns the struct of the next data type, or a finished
//! `PropertyPath<M>` for anything a path cannot go through. Every method is
//! `#[inline]` and the data types' structs are generic over the managed
//! object, so a program compiles only the paths it uses.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::{format, lit, pack, since_doc, Item};
use crate::bail;
use crate::error::Result;
use crate::model::{Model, Occurs, Since, TypeRef};
use crate::naming;
use crate::plan::Plan;

/// The method that turns a data type's path struct into the path itself.
const INTO_PATH: &str = "into_path";

/// How the generated check reaches a data type's path struct: an expression
/// from a managed object's root struct, and that object's `cfg` (or nothing).
struct Route {
    expr: String,
    cfg: String,
}

/// One step of a path: a method of a path struct.
struct Step {
    xml_name: String,
    method: String,
    /// The data type the step leads into, when a path can go on from there.
    next: Option<String>,
    since: Since,
    doc: String,
    /// The step's own `cfg` (a gated property of an ungated managed object), or nothing.
    cfg: String,
}

/// Returns `(file name, contents without header)` pairs for `paths/`.
pub(crate) fn emit(model: &Model, plan: &Plan) -> Result<Vec<(String, String)>> {
    let traversable = |ty: &TypeRef, occurs: Occurs| -> Option<String> {
        match ty {
            TypeRef::Complex(name)
                if occurs != Occurs::Repeated && !model.all_fields(name).is_empty() =>
            {
                Some(name.clone())
            }
            _ => None,
        }
    };

    // The data types a path can go through, reached from the properties,
    // each with the first route found to it (an expression making its path
    // struct, for the generated check).
    // A route starts at a managed object and carries its `cfg` (or its
    // property's); the first found is kept, so the managed objects outside
    // every feature-gated family go first, their gated properties after
    // them: a path struct, and its check, is gated only when no other route
    // reaches it.
    let mut routes: BTreeMap<String, Route> = BTreeMap::new();
    let mut pending: Vec<String> = Vec::new();
    let reach = |next: &Option<String>,
                 route: Route,
                 routes: &mut BTreeMap<String, Route>,
                 pending: &mut Vec<String>| {
        if let Some(next) = next {
            if !routes.contains_key(next) {
                routes.insert(next.clone(), route);
                pending.push(next.clone());
            }
        }
    };
    let mut items = Vec::new();
    let mut checks = Vec::new();
    let mut data_steps: BTreeMap<String, Vec<Step>> = BTreeMap::new();
    let (gated, open): (Vec<_>, Vec<_>) = model
        .managed_objects
        .values()
        .partition(|mo| !plan.managed_object_cfg(&mo.name).is_empty());
    let mut gated_property_routes: Vec<(Option<String>, Route)> = Vec::new();
    for objects in [open, gated] {
        for (next, route) in std::mem::take(&mut gated_property_routes) {
            reach(&next, route, &mut routes, &mut pending);
        }
        for mo in objects {
            let rust = naming::type_name(&mo.name);
            let cfg = plan.managed_object_cfg(&mo.name);
            let mut steps = Vec::new();
            for owner in lineage(model, &mo.name) {
                for p in &model.managed_objects[owner].properties {
                    let step = Step {
                        xml_name: p.name.clone(),
                        method: naming::field_name(&p.name),
                        next: traversable(&p.ty, p.occurs),
                        since: p.since,
                        doc: type_doc(&p.ty, p.occurs),
                        cfg: match cfg.is_empty() {
                            true => plan.property_cfg(owner, &p.name),
                            false => String::new(),
                        },
                    };
                    let route = Route {
                        expr: format!("{rust}.{}()", step.method),
                        cfg: format!("{cfg}{}", step.cfg),
                    };
                    match step.cfg.is_empty() {
                        true => reach(&step.next, route, &mut routes, &mut pending),
                        false => gated_property_routes.push((step.next.clone(), route)),
                    }
                    steps.push(step);
                }
            }
            if !steps.is_empty() {
                checks.push(check_code(&rust, &rust, &steps, &cfg));
            }
            let code = super::format_gated(&root_code(plan, &mo.name, &rust, &steps)?, &cfg)?;
            items.push((
                rust,
                Item {
                    group: super::group_of(&mo.name),
                    code,
                },
            ));
        }
        while let Some(name) = pending.pop() {
            let mut steps = Vec::new();
            for (owner, f) in model.all_fields(&name) {
                let step = Step {
                    xml_name: f.name.clone(),
                    method: plan.field_names[&(owner.to_string(), f.name.clone())].clone(),
                    next: traversable(&f.ty, f.occurs),
                    since: f.since,
                    doc: type_doc(&f.ty, f.occurs),
                    cfg: String::new(),
                };
                let route = Route {
                    expr: format!("{}.{}()", routes[&name].expr, step.method),
                    cfg: routes[&name].cfg.clone(),
                };
                reach(&step.next, route, &mut routes, &mut pending);
                steps.push(step);
            }
            data_steps.insert(name, steps);
        }
    }
    for (name, steps) in &data_steps {
        let route = &routes[name];
        checks.push(check_code(
            &plan.type_names[name],
            &route.expr,
            steps,
            &route.cfg,
        ));
        items.push((
            plan.type_names[name].clone(),
            Item {
                group: super::group_of(name),
                code: super::format_gated(&data_code(plan, name, steps)?, &route.cfg)?,
            },
        ));
    }

    let mut files = Vec::new();
    let mut root = String::from(
        "//! Typed property paths: `paths::VirtualMachine.runtime().power_state()` is\n\
         //! `runtime.powerState` of a `mo::VirtualMachine`, checked by the compiler.\n\n",
    );
    // Managed objects and data types in one name order, so a file holds one group.
    items.sort_by(|a, b| a.0.cmp(&b.0));
    // One module, its files included, like `types` (codegen's emit/mod.rs).
    root.push_str("use crate::property::PropertyPath as P;\n\n");
    for (name, codes) in pack(items.into_iter().map(|(_, item)| item).collect()) {
        writeln!(root, "include!(\"{name}.rs\");").ok();
        files.push((format!("{name}.rs"), format!("\n{}", codes.concat())));
    }
    root.push_str("#[cfg(test)]\nmod check;\n");
    files.extend(check_files(checks)?);
    files.push(("mod.rs".to_string(), root));
    Ok(files)
}

/// A function calling every method of one path struct (reached by
/// `route`), each path checked by `check`; behind `cfg` when the struct is.
fn check_code(rust: &str, route: &str, steps: &[Step], cfg: &str) -> (String, String) {
    let mut code = format!(
        "{cfg}pub(super) fn {}() {{\n    let at = || {route};\n",
        naming::field_name(rust)
    );
    if route != rust {
        code.push_str("    check(at().into_path(), \"\");\n");
    }
    for step in steps {
        let whole = if step.next.is_some() {
            ".into_path()"
        } else {
            ""
        };
        writeln!(
            code,
            "    {}check(at().{}(){whole}, {});",
            step.cfg,
            step.method,
            lit(&step.xml_name)
        )
        .ok();
    }
    code.push_str("}\n");
    (rust.to_string(), code)
}

/// The test of every path method (`check/`): each path resolves through
/// the property tables the runtime validates string paths with, and ends in
/// its segment. One function per path struct, packed into files.
fn check_files(mut checks: Vec<(String, String)>) -> Result<Vec<(String, String)>> {
    checks.sort();
    let mut files = Vec::new();
    let mut mod_rs = String::from(
        "//! Every method of every path struct makes a path the property tables resolve.\n\n",
    );
    let mut calls = String::new();
    let items = checks
        .into_iter()
        .map(|(name, code)| Item {
            group: super::group_of(&name),
            code,
        })
        .collect();
    for (file, codes) in pack(items) {
        writeln!(mod_rs, "mod {file};").ok();
        for code in &codes {
            if let Some((cfg, name)) = code
                .split_once("pub(super) fn ")
                .and_then(|(cfg, c)| Some((cfg, c.split_once('(')?.0)))
            {
                writeln!(calls, "    {cfg}{file}::{name}();").ok();
            }
        }
        files.push((
            format!("check/{file}.rs"),
            format(&format!(
                "use super::check;\nuse super::super::*;\n\n{}",
                codes.concat()
            ))?,
        ));
    }
    mod_rs.push_str(&format(&format!(
        "use crate::property::PropertyPath as P;\n\
         use crate::xml::ManagedObjectType;\n\n\
         fn check<M: ManagedObjectType>(path: P<M>, segment: &str) {{\n    \
         let path = path.as_str();\n    \
         assert!(path == segment || segment.is_empty() || path.ends_with(&format!(\".{{segment}}\")), \"{{path}} should end in {{segment}}\");\n    \
         if let Err(e) = super::super::mo::MANAGED_OBJECTS.resolve_path(&super::super::REGISTRY, M::TYPE_NAME, path) {{\n        \
         panic!(\"{{}}: {{path}}: {{e}}\", M::TYPE_NAME);\n    }}\n}}\n\n\
         #[test]\nfn every_path_method_makes_a_path_the_tables_resolve() {{\n{calls}}}\n"
    ))?);
    files.push(("check/mod.rs".to_string(), mod_rs));
    Ok(files)
}

/// `mo` and the managed object types it extends, the root first.
fn lineage<'a>(model: &'a Model, mo: &'a str) -> Vec<&'a str> {
    let mut chain = vec![mo];
    let mut current = model.managed_objects[mo].base.as_deref();
    while let Some(base) = current.filter(|b| model.managed_objects.contains_key(*b)) {
        chain.push(base);
        current = model.managed_objects[base].base.as_deref();
    }
    chain.reverse();
    chain
}

/// What a step holds, for its doc line: `` `VirtualMachinePowerState` ``,
/// `` `VirtualDevice[]` ``.
fn type_doc(ty: &TypeRef, occurs: Occurs) -> String {
    let name = ty.xml_name();
    match occurs {
        Occurs::Repeated => format!("`{name}[]`"),
        _ => format!("`{name}`"),
    }
}

fn root_code(plan: &Plan, mo: &str, rust: &str, steps: &[Step]) -> Result<String> {
    let mut code = format!(
        "/// Property paths of [`mo::{rust}`](super::mo::{rust}), checked by the compiler:\n\
         /// pass them to `Client::properties` (vsphere-client).\n\
         #[derive(Debug, Clone, Copy, Default)]\npub struct {rust};\nimpl {rust} {{\n"
    );
    let object = format!("super::mo::{rust}");
    write_methods(
        &mut code,
        plan,
        &format!("managed object {mo}"),
        steps,
        &[],
        |segment| format!("P::new({segment})"),
        &object,
    )?;
    Ok(code)
}

fn data_code(plan: &Plan, name: &str, steps: &[Step]) -> Result<String> {
    let rust = &plan.type_names[name];
    let mut code = format!(
        "/// Paths into a [`{rust}`](super::types::{rust}) of managed object `M`; \
         [`{INTO_PATH}`](Self::{INTO_PATH}) is the path to the whole `{name}`.\n\
         #[derive(Debug, Clone)]\npub struct {rust}<M>(pub(crate) P<M>);\nimpl<M> {rust}<M> {{\n    \
         /// The path to this `{name}` itself.\n    #[inline]\n    \
         pub fn {INTO_PATH}(self) -> P<M> {{ self.0 }}\n"
    );
    write_methods(
        &mut code,
        plan,
        &format!("data type {name}"),
        steps,
        &[INTO_PATH],
        |segment| format!("self.0.join({segment})"),
        "M",
    )?;
    Ok(code)
}

/// One method per step, then the end of the `impl`: a step's path is
/// `path(segment literal)`, of managed object `object`; `taken` are the
/// struct's other method names.
fn write_methods(
    code: &mut String,
    plan: &Plan,
    what: &str,
    steps: &[Step],
    taken: &[&str],
    path: impl Fn(&str) -> String,
    object: &str,
) -> Result<()> {
    let mut names: BTreeSet<&str> = taken.iter().copied().collect();
    for step in steps {
        if !names.insert(step.method.as_str()) {
            bail!("{what}: two properties map to path method {}", step.method);
        }
        let path = path(&lit(&step.xml_name));
        let (ret, body) = match &step.next {
            Some(next) => {
                let next_rust = &plan.type_names[next];
                (
                    format!("{next_rust}<{object}>"),
                    format!("{next_rust}({path})"),
                )
            }
            None => (format!("P<{object}>"), path),
        };
        writeln!(
            code,
            "    /// `{}`: {}.\n{}    {}#[inline]\n    pub fn {}(self) -> {ret} {{ {body} }}",
            step.xml_name,
            step.doc,
            since_doc(step.since),
            step.cfg,
            step.method
        )
        .ok();
    }
    code.push_str("}\n");
    Ok(())
}
