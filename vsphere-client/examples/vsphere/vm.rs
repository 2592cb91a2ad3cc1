//! `vm.*`: VM information and lifecycle, like govc.

use std::time::Duration;

use vsphere_client::inventory::{Finder, InventoryObject};
use vsphere_client::vm::{CloneSpec, ConfigSpec};
use vsphere_client::{mo, Client};

use crate::args::{Args, CliError};
use crate::inventory::finder;
use crate::Command;

pub(crate) const COMMANDS: &[&Command] = &[
    &Command {
        name: "vm.info",
        usage: "[-dc DC] [-json] NAME...  VM summary (names, paths or globs)",
        run: |args| Box::pin(info(args)),
    },
    &Command {
        name: "vm.clone",
        usage: "-vm SOURCE [-dc DC] [-folder F] [-pool P] [-ds DS] [-on] [-uuid UUID] [-link] [-template] [-c CPUS] [-m MB] [-net NETWORK] NAME  clone a VM or template",
        run: |args| Box::pin(clone(args)),
    },
    &Command {
        name: "vm.power",
        usage: "-on|-off|-reset|-suspend|-s [-dc DC] NAME...  power operations (-s: guest shutdown)",
        run: |args| Box::pin(power(args)),
    },
    &Command {
        name: "vm.destroy",
        usage: "[-dc DC] NAME...  power off and destroy VMs",
        run: |args| Box::pin(destroy(args)),
    },
    &Command {
        name: "vm.ip",
        usage: "[-dc DC] [-wait DURATION] NAME  wait for the guest's IP address and print it",
        run: |args| Box::pin(ip(args)),
    },
    &Command {
        name: "vm.markastemplate",
        usage: "[-dc DC] NAME...  mark powered-off VMs as templates",
        run: |args| Box::pin(mark_as_template(args)),
    },
];

/// Go-style durations: `90s`, `500ms`, `2m`, `1h30m`, or plain seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, CliError> {
    let bad = || {
        CliError::Usage(format!(
            "invalid duration {text:?} (e.g. 500ms, 30s, 2m, 1h)"
        ))
    };
    if let Ok(seconds) = text.parse::<f64>() {
        return if seconds >= 0.0 && seconds.is_finite() {
            Ok(Duration::from_secs_f64(seconds))
        } else {
            Err(bad())
        };
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_end] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_end..];
        total += Duration::from_secs_f64(number * unit);
    }
    Ok(total)
}

/// Every VM the names (paths, names or globs) designate; each must match one or more.
async fn vms(finder: &Finder, names: &[String]) -> Result<Vec<InventoryObject>, CliError> {
    if names.is_empty() {
        return Err(CliError::Usage("no VM given".into()));
    }
    let mut all = Vec::new();
    for name in names {
        let found = finder.virtual_machines(name).await?;
        if found.is_empty() {
            return Err(CliError::Other(format!("vm {name:?} not found")));
        }
        all.extend(found);
    }
    Ok(all)
}

async fn info(mut args: Args) -> Result<(), CliError> {
    let datacenter = args.value("dc")?;
    let json = args.flag("json")?;
    let names = args.positionals()?;
    let client = args.connect().await?;
    let finder = finder(&client, &datacenter);
    let found = vms(&finder, &names).await?;
    let refs: Vec<_> = found.iter().map(|o| o.reference.clone()).collect();
    let details = client
        .properties::<mo::VirtualMachine>(&[
            "config.uuid",
            "config.instanceUuid",
            "config.guestFullName",
            "config.hardware.numCPU",
            "config.hardware.memoryMB",
            "config.template",
            "runtime.powerState",
            "runtime.bootTime",
            "runtime.host",
            "guest.ipAddress",
        ])?
        .get_many(&refs)
        .await?;
    let mut hosts: Vec<_> = details
        .iter()
        .filter_map(|vm| vm.runtime.as_ref()?.host.clone())
        .collect();
    hosts.sort();
    hosts.dedup();
    let host_names: Vec<(vsphere_client::types::ManagedObjectReference, String)> = client
        .properties::<mo::HostSystem>(&["name"])?
        .get_many(&hosts)
        .await?
        .into_iter()
        .map(|h| (h.mo_ref, h.name.unwrap_or_default()))
        .collect();
    let host_name = |vm: &mo::VirtualMachine| {
        let host = vm.runtime.as_ref()?.host.as_ref()?;
        host_names
            .iter()
            .find(|(r, _)| r == host)
            .map(|(_, n)| n.clone())
    };
    let mut rows = Vec::new();
    for object in &found {
        let Some(vm) = details.iter().find(|vm| vm.mo_ref == object.reference) else {
            continue;
        };
        let config = vm.config.clone().unwrap_or_default();
        let runtime = vm.runtime.clone().unwrap_or_default();
        let ip = vm
            .guest
            .as_ref()
            .and_then(|g| g.ip_address.clone())
            .unwrap_or_default();
        if json {
            rows.push(serde_json::json!({
                "name": object.name,
                "path": object.path,
                "self": object.reference.to_string(),
                "uuid": config.uuid,
                "instanceUuid": config.instance_uuid,
                "guestFullName": config.guest_full_name,
                "numCPU": config.hardware.num_cpu,
                "memoryMB": config.hardware.memory_mb,
                "template": config.template,
                "powerState": runtime.power_state.as_str(),
                "bootTime": runtime.boot_time.as_ref().map(std::string::ToString::to_string),
                "ipAddress": ip,
                "host": host_name(vm),
            }));
            continue;
        }
        println!("Name:           {}", object.name);
        println!("  Path:         {}", object.path);
        println!("  UUID:         {}", config.uuid);
        println!("  Guest name:   {}", config.guest_full_name);
        println!("  Memory:       {}MB", config.hardware.memory_mb);
        println!("  CPU:          {} vCPU(s)", config.hardware.num_cpu);
        println!("  Power state:  {}", runtime.power_state.as_str());
        println!(
            "  Boot time:    {}",
            runtime.boot_time.map(|t| t.to_string()).unwrap_or_default()
        );
        println!("  IP address:   {ip}");
        println!("  Host:         {}", host_name(vm).unwrap_or_default());
        if config.template {
            println!("  Template:     true");
        }
    }
    if json {
        let text = serde_json::to_string_pretty(&serde_json::json!({ "virtualMachines": rows }))
            .map_err(|e| CliError::Other(e.to_string()))?;
        println!("{text}");
    }
    Ok(())
}

/// A path (or a name under the datacenter's host folder) to a pool; a
/// cluster or host stands for its root pool.
async fn pool(
    client: &Client,
    finder: &Finder,
    path: &str,
) -> Result<vsphere_client::types::ManagedObjectReference, CliError> {
    let object = match finder.find_one(path).await {
        Ok(object) => object,
        Err(_) if !path.contains('/') => {
            let dc = finder.default_datacenter().await?;
            finder
                .find_one(&format!("{}/host/*/{path}", dc.path()))
                .await?
        }
        Err(err) => return Err(err.into()),
    };
    match object.type_name() {
        "ResourcePool" | "VirtualApp" => Ok(object.reference),
        "ClusterComputeResource" | "ComputeResource" => client
            .properties::<mo::ComputeResource>(&["resourcePool"])?
            .get(&object.reference)
            .await?
            .resource_pool
            .ok_or_else(|| CliError::Other(format!("{path} has no resource pool"))),
        other => Err(CliError::Other(format!(
            "{path} is a {other}, not a resource pool"
        ))),
    }
}

/// The default pool: the only root pool of the datacenter, else the first
/// cluster's.
async fn default_pool(
    finder: &Finder,
) -> Result<vsphere_client::types::ManagedObjectReference, CliError> {
    let mut clusters = finder.clusters().await?;
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(pool) = clusters.into_iter().find_map(|c| c.resource_pool) {
        return Ok(pool);
    }
    let pools = finder.resource_pools().await?;
    pools
        .into_iter()
        .find(|p| p.owner.is_some())
        .map(|p| p.mo_ref)
        .ok_or_else(|| CliError::Other("no resource pool found: give -pool".into()))
}

async fn clone(mut args: Args) -> Result<(), CliError> {
    let datacenter = args.value("dc")?;
    let source = args
        .value("vm")?
        .ok_or_else(|| CliError::Usage("-vm SOURCE is required".into()))?;
    let folder = args.value("folder")?;
    let pool_path = args.value("pool")?;
    let datastore_name = args.value("ds")?;
    let power_on = args.flag("on")?;
    let uuid = args.value("uuid")?;
    let linked = args.flag("link")?;
    let template = args.flag("template")?;
    let cpus = args.value("c")?;
    let memory = args.value("m")?;
    let networks = args.values("net")?;
    let name = match args.positionals()?.as_slice() {
        [name] => name.clone(),
        _ => return Err(CliError::Usage("expected NAME".into())),
    };
    let mut config = ConfigSpec::new();
    if let Some(cpus) = cpus {
        config = config.cpus(
            cpus.parse()
                .map_err(|_| CliError::Usage(format!("-c {cpus}: not a number")))?,
        );
    }
    if let Some(memory) = memory {
        config = config.memory_mb(
            memory
                .parse()
                .map_err(|_| CliError::Usage(format!("-m {memory}: not a number")))?,
        );
    }
    if let Some(uuid) = &uuid {
        config = config.instance_uuid(uuid.clone());
    }

    let client = args.connect().await?;
    let finder = finder(&client, &datacenter);
    let source_vm = finder.virtual_machine(&source).await?;
    if !networks.is_empty() {
        config = config.replace_nics();
        for network in &networks {
            config = config.nic(finder.network(network).await?);
        }
    }
    let folder = match folder {
        Some(path) => finder.folder(&path).await?,
        None => finder.default_folder().await?,
    };
    let pool = match pool_path {
        Some(path) => pool(&client, &finder, &path).await?,
        None => default_pool(&finder).await?,
    };
    let mut spec = CloneSpec::new(&folder).pool(pool).config(config);
    if let Some(ds) = datastore_name {
        spec = spec.datastore(&finder.datastore(&ds).await?);
    }
    if linked {
        spec = spec.linked();
    }
    if template {
        spec = spec.template();
    }
    if power_on {
        spec = spec.power_on();
    }
    eprint!("Cloning {} to {name}...", source_vm.path);
    let result = client.vm(source_vm.reference).clone_vm(&name, &spec).await;
    match result {
        Ok(vm) => {
            eprintln!("OK");
            let described = finder
                .describe(std::slice::from_ref(vm.reference()))
                .await?;
            match described.first() {
                Some(object) => println!("{}", object.path),
                None => println!("{}", vm.reference()),
            }
            Ok(())
        }
        Err(err) => {
            eprintln!("failed");
            Err(err.into())
        }
    }
}

async fn power(mut args: Args) -> Result<(), CliError> {
    let datacenter = args.value("dc")?;
    let on = args.flag("on")?;
    let off = args.flag("off")?;
    let reset = args.flag("reset")?;
    let suspend = args.flag("suspend")?;
    let shutdown = args.flag("s")?;
    let chosen = [on, off, reset, suspend, shutdown]
        .iter()
        .filter(|f| **f)
        .count();
    if chosen != 1 {
        return Err(CliError::Usage(
            "give exactly one of -on, -off, -reset, -suspend, -s".into(),
        ));
    }
    let names = args.positionals()?;
    let client = args.connect().await?;
    let finder = finder(&client, &datacenter);
    for object in vms(&finder, &names).await? {
        let vm = client.vm(object.reference.clone());
        let (what, result) = if on {
            ("Powering on", vm.power_on().await)
        } else if off {
            ("Powering off", vm.power_off().await)
        } else if reset {
            ("Reset", vm.reset().await)
        } else if suspend {
            ("Suspend", vm.suspend().await)
        } else {
            ("Shutdown guest", vm.shutdown_guest().await)
        };
        match result {
            Ok(()) => println!("{what} {}... OK", object.reference),
            Err(err) => {
                println!("{what} {}... failed", object.reference);
                return Err(err.into());
            }
        }
    }
    Ok(())
}

async fn destroy(mut args: Args) -> Result<(), CliError> {
    let datacenter = args.value("dc")?;
    let names = args.positionals()?;
    let client = args.connect().await?;
    let finder = finder(&client, &datacenter);
    for object in vms(&finder, &names).await? {
        let vm = client.vm(object.reference.clone());
        let state = vm.state().await?;
        if state.power_state != vsphere_client::types::VirtualMachinePowerState::PoweredOff {
            vm.power_off().await?;
        }
        vm.destroy().await?;
    }
    Ok(())
}

async fn ip(mut args: Args) -> Result<(), CliError> {
    let datacenter = args.value("dc")?;
    let wait = match args.value("wait")? {
        Some(text) => parse_duration(&text)?,
        None => Duration::from_secs(3600),
    };
    let names = args.positionals()?;
    if names.len() != 1 {
        return Err(CliError::Usage("expected NAME".into()));
    }
    let client = args.connect().await?;
    let object = finder(&client, &datacenter)
        .virtual_machine(&names[0])
        .await?;
    println!("{}", client.vm(object.reference).wait_for_ip(wait).await?);
    Ok(())
}

async fn mark_as_template(mut args: Args) -> Result<(), CliError> {
    let datacenter = args.value("dc")?;
    let names = args.positionals()?;
    let client = args.connect().await?;
    let finder = finder(&client, &datacenter);
    for object in vms(&finder, &names).await? {
        client.vm(object.reference).mark_as_template().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("-1").is_err());
    }
}
