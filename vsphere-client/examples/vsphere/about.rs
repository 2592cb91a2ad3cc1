//! `about`: what the server is, like `govc about`.

use crate::args::{Args, CliError};
use crate::Command;

pub(crate) const COMMANDS: &[&Command] = &[&Command {
    name: "about",
    usage: "[-l]  product name, version and API version of the server",
    run: |args| Box::pin(run(args)),
}];

async fn run(mut args: Args) -> Result<(), CliError> {
    let long = args.flag("l")?;
    if !args.positionals()?.is_empty() {
        return Err(CliError::Usage("about takes no arguments".into()));
    }
    let client = args.connect().await?;
    let about = &client.service_content().about;
    let optional = |value: &Option<String>| value.clone().unwrap_or_default();
    let mut rows = vec![
        ("FullName", about.full_name.clone()),
        ("Name", about.name.clone()),
        ("Vendor", about.vendor.clone()),
        ("Version", about.version.clone()),
        ("Build", about.build.clone()),
        ("OS type", about.os_type.clone()),
        ("API type", about.api_type.clone()),
        ("API version", about.api_version.clone()),
        ("Product ID", about.product_line_id.clone()),
        ("UUID", optional(&about.instance_uuid)),
    ];
    if long {
        rows.push(("Patch level", optional(&about.patch_level)));
        rows.push(("Locale", optional(&about.locale_version)));
        rows.push(("License", optional(&about.license_product_name)));
        rows.push(("Negotiated", client.api_version()));
    }
    for (label, value) in rows {
        println!("{:<14}{value}", format!("{label}:"));
    }
    Ok(())
}
