//! Golden test: the generator's output for the hand-written fixture under
//! `tests/fixtures/basic` (inheritance, arrays, polymorphism, enums,
//! optional/required/repeated fields, keywords, recursion, anyType, managed
//! objects, and in `additions.json` a type, fields, enumeration values, an
//! operation, a parameter, a managed object and a property added after
//! 7.0.3.0) must equal `tests/golden/basic`, file for file. The expected code
//! is also compiled and exercised against the XML runtime by
//! `tests/tests/golden_compile.rs` of the workspace (package vsphere-tests).
//!
//! After an intended change to the generator: `UPDATE_GOLDEN=1 cargo test -p vsphere-codegen --test golden`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn read_tree(dir: &Path, prefix: &str, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("golden dir") {
        let path = entry.expect("entry").path();
        let name = format!(
            "{prefix}{}",
            path.file_name().expect("name").to_string_lossy()
        );
        if path.is_dir() {
            read_tree(&path, &format!("{name}/"), out);
        } else {
            out.insert(name, std::fs::read_to_string(&path).expect("golden file"));
        }
    }
}

#[test]
fn basic_fixture_matches_golden_output() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests");
    let fixture = root.join("fixtures/basic");
    let golden = root.join("golden/basic");
    let options = vsphere_codegen::Options {
        wsdl: fixture.clone(),
        managed_objects: Some(fixture.join("managed-objects.json")),
        additions: Some(fixture.join("additions.json")),
        out: golden.clone(),
    };
    let (output, summary) = vsphere_codegen::generate(&options).expect("the fixture generates");
    assert_eq!(
        summary.counts.methods, 9,
        "8 of the bundle, Clear_Task added"
    );
    assert_eq!(
        summary.counts.polymorphic_enums, 2,
        "AnyShape and AnyMethodFault"
    );

    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        vsphere_codegen::emit::write(&output, &golden).expect("write golden");
        return;
    }
    let mut expected = BTreeMap::new();
    read_tree(&golden, "", &mut expected);
    let produced: Vec<&String> = output.files.keys().collect();
    let wanted: Vec<&String> = expected.keys().collect();
    assert_eq!(
        produced, wanted,
        "generated file set differs from tests/golden/basic"
    );
    for (path, code) in &output.files {
        let want = &expected[path];
        if code != want {
            let line = code
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(code.lines().count().min(want.lines().count()));
            panic!(
                "{path} differs from the golden file at line {}:\n  generated: {:?}\n  golden:    {:?}\n\
                 (UPDATE_GOLDEN=1 cargo test -p vsphere-codegen --test golden, after checking the change is intended)",
                line + 1,
                code.lines().nth(line),
                want.lines().nth(line)
            );
        }
    }
}

#[test]
fn a_schema_construct_the_generator_does_not_know_fails_loudly() {
    let dir = std::env::temp_dir().join(format!("vsphere-codegen-choice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/basic");
    for file in ["vim.wsdl", "test-messagetypes.xsd"] {
        std::fs::copy(fixture.join(file), dir.join(file)).expect("copy");
    }
    let core = std::fs::read_to_string(fixture.join("core-types.xsd")).expect("core");
    let core = core
        .replacen("<sequence>", "<choice>", 1)
        .replacen("</sequence>", "</choice>", 1);
    std::fs::write(dir.join("core-types.xsd"), core).expect("write");
    let err = vsphere_codegen::generate(&vsphere_codegen::Options {
        wsdl: dir.clone(),
        managed_objects: None,
        additions: None,
        out: dir.join("out"),
    })
    .expect_err("xsd:choice is not supported");
    assert!(err.to_string().contains("DynamicData"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
