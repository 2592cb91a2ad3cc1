//! `library.ls`: content libraries and their items, like govc.

use vsphere_client::rest::RestClient;

use crate::args::{Args, CliError};
use crate::tags::with_rest;
use crate::Command;

pub(crate) const COMMANDS: &[&Command] = &[&Command {
    name: "library.ls",
    usage: "[-l] [/LIBRARY[/ITEM]]  list libraries, the items of a library, or one item",
    run: |args| Box::pin(ls(args)),
}];

async fn ls(mut args: Args) -> Result<(), CliError> {
    let long = args.flag("l")?;
    let mut found = args.positionals()?;
    if found.len() > 1 {
        return Err(CliError::Usage(
            "expected at most one /LIBRARY[/ITEM]".into(),
        ));
    }
    let target = found.pop();
    with_rest(&args, |_, rest| async move {
        match target {
            None => list_libraries(&rest, long).await,
            Some(path) => {
                let trimmed = path.trim_matches('/');
                let (library, item) = match trimmed.split_once('/') {
                    Some((library, item)) => (library, Some(item)),
                    None => (trimmed, None),
                };
                list_items(&rest, library, item, long).await
            }
        }
    })
    .await
}

async fn list_libraries(rest: &RestClient, long: bool) -> Result<(), CliError> {
    let mut libraries = rest.library().libraries().await?;
    libraries.sort_by(|a, b| a.name.cmp(&b.name));
    for library in libraries {
        if long {
            println!("/{:<30} {:<10} {}", library.name, library.type_, library.id);
        } else {
            println!("/{}", library.name);
        }
    }
    Ok(())
}

async fn list_items(
    rest: &RestClient,
    library_name: &str,
    item_name: Option<&str>,
    long: bool,
) -> Result<(), CliError> {
    let content = rest.library();
    let library = content
        .by_name(library_name)
        .await?
        .ok_or_else(|| CliError::Other(format!("library {library_name:?} not found")))?;
    let mut items = match item_name {
        Some(name) => vec![content
            .item_by_name(&library.id, name)
            .await?
            .ok_or_else(|| {
                CliError::Other(format!(
                    "item {name:?} not found in library {:?}",
                    library.name
                ))
            })?],
        None => content.items(&library.id).await?,
    };
    items.sort_by(|a, b| a.name.cmp(&b.name));
    for item in items {
        let path = format!("/{}/{}", library.name, item.name);
        if long {
            let kind = item.type_.as_ref().map_or("-", |t| t.as_str());
            let size = item
                .size
                .map(|s| s.to_string())
                .unwrap_or_else(|| "-".into());
            println!("{path:<40} {kind:<12} {size:>12} {}", item.id);
        } else {
            println!("{path}");
        }
    }
    Ok(())
}
