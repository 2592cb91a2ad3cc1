//! The module map in `src/lib.rs` names every file of `src/`: a file added
//! without a line in the map fails here, so the map stays the tree.

use std::path::Path;

fn files(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if path.is_dir() {
            files(&path, &format!("{prefix}{name}/"), out);
        } else if name.ends_with(".rs") {
            out.push(format!("{prefix}{name}"));
        }
    }
}

#[test]
fn the_module_map_names_every_source_file() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let map: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut all = Vec::new();
    files(&src, "", &mut all);
    all.retain(|file| file != "lib.rs");
    let unnamed: Vec<&String> = all
        .iter()
        .filter(|file| {
            let (dir, name) = match file.rsplit_once('/') {
                Some((dir, name)) => (Some(dir), name),
                None => (None, file.as_str()),
            };
            // A file is named by its own name; one in a folder also needs
            // the folder's line (`vspheremachine/`).
            let folder_named = dir.is_none_or(|d| {
                let last = d.rsplit('/').next().unwrap_or(d);
                map.contains(&format!("{last}/"))
            });
            !(folder_named && map.contains(name))
        })
        .collect();
    assert!(
        unnamed.is_empty(),
        "files of operator/src missing from the module map in lib.rs: {unnamed:?}"
    );
    assert!(all.len() > 40, "read the tree: {all:?}");
}
