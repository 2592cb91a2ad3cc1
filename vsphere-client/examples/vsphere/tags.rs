//! `tags.*`: tag categories, tags and their attachments, like govc, over
//! the vSphere Automation (REST) API.

use vsphere_client::rest::{Cardinality, CategorySpec, RestClient, TagSpec};
use vsphere_client::types::ManagedObjectReference;
use vsphere_client::Client;

use crate::args::{Args, CliError};
use crate::Command;

pub(crate) const COMMANDS: &[&Command] = &[
    &Command {
        name: "tags.category.ls",
        usage: "  list tag categories (names)",
        run: |args| Box::pin(category_ls(args)),
    },
    &Command {
        name: "tags.category.create",
        usage: "[-d DESC] [-m] [-t TYPE]... NAME  create a category (-m: multiple tags per object); prints its id",
        run: |args| Box::pin(category_create(args)),
    },
    &Command {
        name: "tags.category.rm",
        usage: "NAME  delete a category and its tags",
        run: |args| Box::pin(category_rm(args)),
    },
    &Command {
        name: "tags.ls",
        usage: "[-c CATEGORY]  list tags (names)",
        run: |args| Box::pin(tags_ls(args)),
    },
    &Command {
        name: "tags.create",
        usage: "-c CATEGORY [-d DESC] NAME  create a tag; prints its id",
        run: |args| Box::pin(tags_create(args)),
    },
    &Command {
        name: "tags.rm",
        usage: "[-c CATEGORY] NAME  delete a tag",
        run: |args| Box::pin(tags_rm(args)),
    },
    &Command {
        name: "tags.attach",
        usage: "[-c CATEGORY] TAG PATH  attach a tag to the object at an inventory path",
        run: |args| Box::pin(tags_attach(args, true)),
    },
    &Command {
        name: "tags.detach",
        usage: "[-c CATEGORY] TAG PATH  detach a tag from the object at an inventory path",
        run: |args| Box::pin(tags_attach(args, false)),
    },
    &Command {
        name: "tags.attached.ls",
        usage: "[-r] PATH|TAG  tags attached to an object (a /path, or -r), else objects a tag is attached to",
        run: |args| Box::pin(attached_ls(args)),
    },
];

/// Connects, runs `body` with a REST client (sharing the SOAP session where
/// the server allows it), and deletes the REST session afterwards.
pub(crate) async fn with_rest<T, F>(
    args: &Args,
    body: impl FnOnce(Client, RestClient) -> F,
) -> Result<T, CliError>
where
    F: std::future::Future<Output = Result<T, CliError>>,
{
    let client = args.connect().await?;
    let rest = client.rest().await?;
    let result = body(client, rest.clone()).await;
    if let Err(err) = rest.logout().await {
        tracing::debug!(error = %err, "REST logout failed");
    }
    result
}

/// Exactly `n` positional arguments.
pub(crate) fn positionals(args: &mut Args, n: usize, what: &str) -> Result<Vec<String>, CliError> {
    let found = args.positionals()?;
    if found.len() != n {
        return Err(CliError::Usage(format!("expected {what}")));
    }
    Ok(found)
}

/// The object at an inventory path (`/DC0/vm/VM0`), through the SOAP
/// `SearchIndex.FindByInventoryPath`.
pub(crate) async fn resolve_path(
    client: &Client,
    path: &str,
) -> Result<ManagedObjectReference, CliError> {
    let search_index = client
        .service_content()
        .search_index
        .clone()
        .ok_or_else(|| CliError::Other("the server has no SearchIndex".into()))?;
    let trimmed = path.trim_start_matches('/');
    client
        .vim()
        .find_by_inventory_path(&search_index, trimmed)
        .await?
        .ok_or_else(|| CliError::Other(format!("{path}: not found")))
}

async fn category_ls(mut args: Args) -> Result<(), CliError> {
    positionals(&mut args, 0, "no arguments")?;
    with_rest(&args, |_, rest| async move {
        for category in rest.tagging().categories().await? {
            println!("{}", category.name);
        }
        Ok(())
    })
    .await
}

async fn category_create(mut args: Args) -> Result<(), CliError> {
    let description = args.value("d")?.unwrap_or_default();
    let multiple = args.flag("m")?;
    let types = args.values("t")?;
    let name = positionals(&mut args, 1, "NAME")?.remove(0);
    let cardinality = if multiple {
        Cardinality::Multiple
    } else {
        Cardinality::Single
    };
    let spec = CategorySpec::new(name, cardinality)
        .description(description)
        .associable_types(types);
    with_rest(&args, |_, rest| async move {
        println!("{}", rest.tagging().create_category(&spec).await?);
        Ok(())
    })
    .await
}

async fn category_rm(mut args: Args) -> Result<(), CliError> {
    let name = positionals(&mut args, 1, "NAME")?.remove(0);
    with_rest(&args, |_, rest| async move {
        let tagging = rest.tagging();
        let category = tagging
            .find_category(&name)
            .await?
            .ok_or_else(|| CliError::Other(format!("category {name:?} not found")))?;
        tagging.delete_category(&category.id).await?;
        Ok(())
    })
    .await
}

async fn tags_ls(mut args: Args) -> Result<(), CliError> {
    let category = args.value("c")?;
    positionals(&mut args, 0, "no arguments")?;
    with_rest(&args, |_, rest| async move {
        let tagging = rest.tagging();
        let tags = match category {
            Some(name) => {
                let category = tagging
                    .find_category(&name)
                    .await?
                    .ok_or_else(|| CliError::Other(format!("category {name:?} not found")))?;
                tagging.tags_in_category(&category.id).await?
            }
            None => tagging.tags().await?,
        };
        for tag in tags {
            println!("{}", tag.name);
        }
        Ok(())
    })
    .await
}

async fn tags_create(mut args: Args) -> Result<(), CliError> {
    let category = args
        .value("c")?
        .ok_or_else(|| CliError::Usage("-c CATEGORY is required".into()))?;
    let description = args.value("d")?.unwrap_or_default();
    let name = positionals(&mut args, 1, "NAME")?.remove(0);
    with_rest(&args, |_, rest| async move {
        let tagging = rest.tagging();
        let category = tagging
            .find_category(&category)
            .await?
            .ok_or_else(|| CliError::Other(format!("category {category:?} not found")))?;
        let id = tagging
            .create_tag(&TagSpec::new(name, category.id).description(description))
            .await?;
        println!("{id}");
        Ok(())
    })
    .await
}

async fn tags_rm(mut args: Args) -> Result<(), CliError> {
    let category = args.value("c")?;
    let name = positionals(&mut args, 1, "NAME")?.remove(0);
    with_rest(&args, |_, rest| async move {
        let tagging = rest.tagging();
        let tag = tagging
            .find_tag(&name, category.as_deref())
            .await?
            .ok_or_else(|| CliError::Other(format!("tag {name:?} not found")))?;
        tagging.delete_tag(&tag.id).await?;
        Ok(())
    })
    .await
}

async fn tags_attach(mut args: Args, attach: bool) -> Result<(), CliError> {
    let category = args.value("c")?;
    let mut found = positionals(&mut args, 2, "TAG PATH")?;
    let path = found.remove(1);
    let name = found.remove(0);
    with_rest(&args, |client, rest| async move {
        let tagging = rest.tagging();
        let tag = tagging
            .find_tag(&name, category.as_deref())
            .await?
            .ok_or_else(|| CliError::Other(format!("tag {name:?} not found")))?;
        let object = resolve_path(&client, &path).await?;
        if attach {
            tagging.attach(&tag.id, &object).await?;
        } else {
            tagging.detach(&tag.id, &object).await?;
        }
        Ok(())
    })
    .await
}

async fn attached_ls(mut args: Args) -> Result<(), CliError> {
    let object_mode = args.flag("r")?;
    let target = positionals(&mut args, 1, "PATH or TAG")?.remove(0);
    with_rest(&args, |client, rest| async move {
        let tagging = rest.tagging();
        if object_mode || target.starts_with('/') {
            let object = resolve_path(&client, &target).await?;
            for id in tagging.list_attached_tags(&object).await? {
                println!("{}", tagging.get_tag(&id).await?.name);
            }
        } else {
            let tag = tagging
                .find_tag(&target, None)
                .await?
                .ok_or_else(|| CliError::Other(format!("tag {target:?} not found")))?;
            for object in tagging.list_attached_objects(&tag.id).await? {
                println!("{object}");
            }
        }
        Ok(())
    })
    .await
}
