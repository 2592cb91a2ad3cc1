//! `snapshot.*`: VM snapshots with govc's flags and output.
//!
//! A snapshot NAME is a name, a tree path (`base/child`) or an id
//! (`snapshot-42`), as govc reads it; a name several snapshots share is an
//! error naming each of them. The VM is `-vm NAME` or `GOVC_VM`.

use serde::Serialize;
use vsphere_client::vm::snapshot::{RemoveOptions, Snapshot, SnapshotSpec, SnapshotTree};
use vsphere_client::vm::VirtualMachine;

use crate::args::{Args, CliError};
use crate::inventory::finder;
use crate::Command;

pub(crate) const COMMANDS: &[&Command] = &[
    &Command {
        name: "snapshot.create",
        usage: "-vm VM [-dc DC] [-d DESC] [-m=true] [-q] NAME  snapshot the VM (-m: with memory, -q: quiesce)",
        run: |args| Box::pin(create(args)),
    },
    &Command {
        name: "snapshot.tree",
        usage: "-vm VM [-dc DC] [-c=true] [-C] [-D] [-d] [-f] [-i] [-s] [-json]  the snapshot tree (-c current '.', -C current name only, -D date, -d description, -f full path, -i id, -s size)",
        run: |args| Box::pin(tree(args)),
    },
    &Command {
        name: "snapshot.revert",
        usage: "-vm VM [-dc DC] [-s] [NAME]  revert to NAME or to the current snapshot (-s: suppress power on)",
        run: |args| Box::pin(revert(args)),
    },
    &Command {
        name: "snapshot.remove",
        usage: "-vm VM [-dc DC] [-r] [-c=true] NAME|'*'  remove a snapshot (-r: with its children, -c: consolidate; '*': all)",
        run: |args| Box::pin(remove(args)),
    },
];

/// The flags naming the VM: `-dc` and `-vm` (or `GOVC_VM`).
struct VmFlags {
    datacenter: Option<String>,
    vm: Option<String>,
}

impl VmFlags {
    fn take(args: &mut Args) -> Result<VmFlags, CliError> {
        Ok(VmFlags {
            datacenter: args.value("dc")?,
            vm: args.value("vm")?,
        })
    }

    /// Connects and finds the one VM they name.
    async fn resolve(self, args: &Args) -> Result<VirtualMachine, CliError> {
        let name = self
            .vm
            .or_else(|| std::env::var("GOVC_VM").ok().filter(|v| !v.is_empty()))
            .ok_or_else(|| CliError::Usage("-vm VM is required (or GOVC_VM)".into()))?;
        let client = args.connect().await?;
        let object = finder(&client, &self.datacenter)
            .virtual_machine(&name)
            .await?;
        Ok(client.vm(object.reference))
    }
}

/// Exactly one positional argument.
fn one_name(args: &mut Args) -> Result<String, CliError> {
    match args.positionals()?.as_slice() {
        [name] => Ok(name.clone()),
        _ => Err(CliError::Usage("expected NAME".into())),
    }
}

async fn create(mut args: Args) -> Result<(), CliError> {
    let memory = args.flag_or("m", true)?;
    let quiesce = args.flag("q")?;
    let description = args.value("d")?.unwrap_or_default();
    let target = VmFlags::take(&mut args)?;
    let name = one_name(&mut args)?;
    let vm = target.resolve(&args).await?;
    let spec = SnapshotSpec::new(name)
        .description(description)
        .memory(memory)
        .quiesce(quiesce);
    vm.start_create_snapshot(&spec).await?.wait().await?;
    Ok(())
}

async fn revert(mut args: Args) -> Result<(), CliError> {
    let suppress_power_on = args.flag("s")?;
    let target = VmFlags::take(&mut args)?;
    let names = args.positionals()?;
    if names.len() > 1 {
        return Err(CliError::Usage("expected at most one NAME".into()));
    }
    let vm = target.resolve(&args).await?;
    let task = match names.first() {
        Some(name) => vm.start_revert_to_snapshot(name, suppress_power_on).await?,
        None => {
            vm.start_revert_to_current_snapshot(suppress_power_on)
                .await?
        }
    };
    task.wait().await?;
    Ok(())
}

async fn remove(mut args: Args) -> Result<(), CliError> {
    let children = args.flag("r")?;
    let consolidate = args.flag_or("c", true)?;
    let target = VmFlags::take(&mut args)?;
    let name = one_name(&mut args)?;
    let vm = target.resolve(&args).await?;
    let task = if name == "*" {
        vm.start_remove_all_snapshots(consolidate).await?
    } else {
        let options = RemoveOptions {
            children,
            consolidate,
        };
        vm.start_remove_snapshot(&name, options).await?
    };
    task.wait().await?;
    Ok(())
}

/// What `snapshot.tree` prints, as govc's flags choose.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TreeFormat {
    /// `-c` (on by default): a `.` line after the current snapshot.
    pub current: bool,
    /// `-C`: only the current snapshot's name.
    pub current_name: bool,
    /// `-D`: the creation date.
    pub date: bool,
    /// `-d`: the description.
    pub description: bool,
    /// `-f`: full tree paths.
    pub full_path: bool,
    /// `-i`: the id (the reference's value).
    pub id: bool,
    /// `-s`: the size.
    pub size: bool,
}

async fn tree(mut args: Args) -> Result<(), CliError> {
    let format = TreeFormat {
        current: args.flag_or("c", true)?,
        current_name: args.flag("C")?,
        date: args.flag("D")?,
        description: args.flag("d")?,
        full_path: args.flag("f")?,
        id: args.flag("i")?,
        size: args.flag("s")?,
    };
    let json = args.flag("json")?;
    let target = VmFlags::take(&mut args)?;
    if !args.positionals()?.is_empty() {
        return Err(CliError::Usage("snapshot.tree takes no NAME".into()));
    }
    let vm = target.resolve(&args).await?;
    let tree = vm.snapshot_tree().await?;
    if tree.is_empty() {
        // govc: exit 0 with no output for a VM without snapshots.
        return Ok(());
    }
    let text = if json {
        render_json(&tree, &format)?
    } else {
        render_tree(&tree, &format)
    };
    print!("{text}");
    Ok(())
}

/// govc's `snapshot.tree` lines: two spaces of indent per level, then
/// `[size id date]  ` for the chosen attributes, the name (or full path),
/// and ` - description` (padded to 4) with `-d`. The current snapshot is
/// followed by a `.` line with the same attributes, unless `-c=false`;
/// `-C` prints only its name.
pub(crate) fn render_tree(tree: &SnapshotTree, format: &TreeFormat) -> String {
    let mut out = String::new();
    if format.current_name {
        if let Some((path, snapshot)) = tree
            .iter()
            .find(|(_, s)| Some(&s.reference) == tree.current.as_ref())
        {
            out.push_str(if format.full_path {
                &path
            } else {
                &snapshot.name
            });
            out.push('\n');
        }
        return out;
    }
    let current_line = format.current && tree.current.is_some();
    write_level(&mut out, tree, format, current_line, 0, "", &tree.roots);
    out
}

fn write_level(
    out: &mut String,
    tree: &SnapshotTree,
    format: &TreeFormat,
    current_line: bool,
    depth: usize,
    parent_path: &str,
    snapshots: &[Snapshot],
) {
    for snapshot in snapshots {
        let path = if parent_path.is_empty() {
            snapshot.name.clone()
        } else {
            format!("{parent_path}/{}", snapshot.name)
        };
        let indent = " ".repeat(2 * depth);
        let mut attributes = Vec::new();
        if format.size {
            attributes.push(byte_size(tree.size(&snapshot.reference).unwrap_or(0)));
        }
        if format.id {
            attributes.push(snapshot.reference.value.clone());
        }
        if format.date {
            attributes.push(go_time(snapshot, false));
        }
        let meta = if attributes.is_empty() {
            String::new()
        } else {
            format!("[{}]  ", attributes.join(" "))
        };
        let mut names = vec![if format.full_path {
            path.as_str()
        } else {
            snapshot.name.as_str()
        }];
        if current_line && tree.current.as_ref() == Some(&snapshot.reference) {
            names.push(".");
        }
        for name in names {
            if format.description {
                out.push_str(&format!(
                    "{indent}{meta}{name} - {:>4}\n",
                    snapshot.description
                ));
            } else {
                out.push_str(&format!("{indent}{meta}{name}\n"));
            }
        }
        write_level(
            out,
            tree,
            format,
            current_line,
            depth + 1,
            &path,
            &snapshot.children,
        );
    }
}

/// govc's `units.ByteSize`: `512B`, `1.5KB`, `20.0MB`, ... (powers of 1024).
pub(crate) fn byte_size(bytes: i64) -> String {
    const UNITS: [(&str, i64); 6] = [
        ("EB", 1 << 60),
        ("PB", 1 << 50),
        ("TB", 1 << 40),
        ("GB", 1 << 30),
        ("MB", 1 << 20),
        ("KB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if bytes >= size {
            return format!("{:.1}{unit}", bytes as f32 / size as f32);
        }
    }
    format!("{bytes}B")
}

/// The creation time as Go prints it: RFC 3339 in the zone the server
/// wrote, `Z` for UTC, with the fraction of a second (trailing zeros
/// dropped, as `time.RFC3339Nano`) or without (as `-D`).
pub(crate) fn go_time(snapshot: &Snapshot, fraction: bool) -> String {
    let text = snapshot.created.as_str().trim();
    if snapshot.created_at().is_none() || text.len() < 19 {
        return text.to_string();
    }
    let (seconds, rest) = text.split_at(19);
    let (digits, zone) = match rest.strip_prefix('.') {
        Some(after) => {
            let end = after
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        }
        None => ("", rest),
    };
    let zone = match zone {
        "" | "Z" | "+00:00" | "-00:00" => "Z",
        other => other,
    };
    let digits = digits.get(..digits.len().min(9)).unwrap_or("");
    let digits = digits.trim_end_matches('0');
    if fraction && !digits.is_empty() {
        format!("{seconds}.{digits}{zone}")
    } else {
        format!("{seconds}{zone}")
    }
}

/// One snapshot of `-json`, fields in govc's order.
#[derive(Serialize)]
struct Record {
    #[serde(rename = "createTime", skip_serializing_if = "Option::is_none")]
    create_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<i64>,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    current: bool,
    #[serde(rename = "childSnapshotList")]
    children: Option<Vec<Record>>,
}

fn record(tree: &SnapshotTree, snapshot: &Snapshot, format: &TreeFormat) -> Record {
    let children: Vec<Record> = snapshot
        .children
        .iter()
        .map(|child| record(tree, child, format))
        .collect();
    Record {
        create_time: format.date.then(|| go_time(snapshot, true)),
        id: format.id.then(|| snapshot.reference.value.clone()),
        size: format
            .size
            .then(|| tree.size(&snapshot.reference).unwrap_or(0)),
        name: snapshot.name.clone(),
        description: format.description.then(|| snapshot.description.clone()),
        current: tree.current.as_ref() == Some(&snapshot.reference),
        // Go marshals an empty list as null.
        children: (!children.is_empty()).then_some(children),
    }
}

/// govc's `snapshot.tree -json`: the roots as an indented array (Go's
/// `json.MarshalIndent` with two spaces, which also escapes `<`, `>`, `&`).
pub(crate) fn render_json(tree: &SnapshotTree, format: &TreeFormat) -> Result<String, CliError> {
    let records: Vec<Record> = tree
        .roots
        .iter()
        .map(|root| record(tree, root, format))
        .collect();
    let records = (!records.is_empty()).then_some(records);
    let text =
        serde_json::to_string_pretty(&records).map_err(|e| CliError::Other(e.to_string()))?;
    Ok(format!(
        "{}\n",
        text.replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026")
    ))
}
