//! `ls` and `find`: the inventory by path, like govc.

use vsphere_client::inventory::glob_match;

use crate::args::{Args, CliError};
use crate::Command;

pub(crate) const COMMANDS: &[&Command] = &[
    &Command {
        name: "ls",
        usage: "[-dc DC] [PATH]...  list the children of each inventory path (globs allowed)",
        run: |args| Box::pin(ls(args)),
    },
    &Command {
        name: "find",
        usage: "[-dc DC] [PATH] [-type m|h|d|c|s|n|p|f|r|a|w] [-name PATTERN]  objects under PATH, recursively",
        run: |args| Box::pin(find(args)),
    },
];

/// The finder, scoped to `-dc` when given.
pub(crate) fn finder(
    client: &vsphere_client::Client,
    datacenter: &Option<String>,
) -> vsphere_client::inventory::Finder {
    match datacenter {
        Some(dc) => client.finder().in_datacenter(dc),
        None => client.finder(),
    }
}

async fn ls(mut args: Args) -> Result<(), CliError> {
    let datacenter = args.value("dc")?;
    let mut paths = args.positionals()?;
    if paths.is_empty() {
        paths.push(String::new());
    }
    let client = args.connect().await?;
    let finder = finder(&client, &datacenter);
    for path in paths {
        for object in finder.list(&path).await? {
            println!("{}", object.path);
        }
    }
    Ok(())
}

/// govc's `find -type` letters.
fn types_of(letter: &str) -> Result<&'static [&'static str], CliError> {
    Ok(match letter {
        "m" => &["VirtualMachine"],
        "h" => &["HostSystem"],
        "d" => &["Datacenter"],
        "c" => &["ClusterComputeResource"],
        "r" => &["ComputeResource", "ClusterComputeResource"],
        "s" => &["Datastore"],
        "n" => &["Network", "DistributedVirtualPortgroup", "OpaqueNetwork"],
        "g" => &["DistributedVirtualPortgroup"],
        "p" => &["ResourcePool", "VirtualApp"],
        "a" => &["VirtualApp"],
        "f" => &["Folder"],
        "w" => &["DistributedVirtualSwitch", "VmwareDistributedVirtualSwitch"],
        other => {
            return Err(CliError::Usage(format!(
                "unknown -type {other:?} (m h d c r s n g p a f w)"
            )))
        }
    })
}

async fn find(mut args: Args) -> Result<(), CliError> {
    let datacenter = args.value("dc")?;
    let mut types: Vec<&str> = Vec::new();
    for letter in args.values("type")? {
        types.extend(types_of(&letter)?);
    }
    let name = args.value("name")?;
    let positionals = args.positionals()?;
    let path = match positionals.as_slice() {
        [] => "/".to_string(),
        [path] => path.clone(),
        _ => return Err(CliError::Usage("at most one PATH".into())),
    };
    let client = args.connect().await?;
    let finder = finder(&client, &datacenter);
    for object in finder.find_under(&path, &types).await? {
        if name
            .as_deref()
            .is_some_and(|pattern| !glob_match(pattern, &object.name))
        {
            continue;
        }
        println!("{}", object.path);
    }
    Ok(())
}
