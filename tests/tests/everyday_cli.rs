//! The `vsphere` CLI's inventory and VM commands (ls, find, vm.*, walk)
//! against the simulator, as a govc user would run them.

use std::path::PathBuf;
use std::process::{Command, Output};

use vsphere_tests::{Simulator, SimulatorOptions, Template};

fn cli() -> PathBuf {
    vsphere_tests::vsphere_cli_binary()
}

struct Cli<'a> {
    sim: &'a Simulator,
}

impl Cli<'_> {
    fn run(&self, args: &[&str]) -> Output {
        let mut command = Command::new(cli());
        command.args(args);
        for var in [
            "GOVC_TLS_CA_CERTS",
            "GOVC_TLS_KNOWN_HOSTS",
            "VSPHERE_LOG",
            "HTTPS_PROXY",
            "https_proxy",
        ] {
            command.env_remove(var);
        }
        command
            .env("GOVC_URL", self.sim.sdk_url())
            .env("GOVC_USERNAME", self.sim.username())
            .env("GOVC_PASSWORD", self.sim.password())
            .env("GOVC_INSECURE", "1");
        command.output().expect("run the vsphere CLI")
    }

    /// Runs a command that must succeed; its stdout lines.
    fn ok(&self, args: &[&str]) -> Vec<String> {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "vsphere {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Runs a command that must fail; its exit code and stderr.
    fn fails(&self, args: &[&str]) -> (i32, String) {
        let output = self.run(args);
        assert!(!output.status.success(), "vsphere {args:?} should fail");
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

async fn simulator(options: SimulatorOptions) -> Simulator {
    tokio::task::spawn_blocking(move || Simulator::start(options))
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("simulator: {e}"))
}

#[tokio::test]
async fn ls_and_find_print_inventory_paths() {
    let sim = simulator(SimulatorOptions {
        datacenters: 2,
        ..Default::default()
    })
    .await;
    let cli = Cli { sim: &sim };
    assert_eq!(cli.ok(&["ls"]), ["/DC0", "/DC1"]);
    assert_eq!(
        cli.ok(&["ls", "/DC0"]),
        ["/DC0/datastore", "/DC0/host", "/DC0/network", "/DC0/vm"]
    );
    assert_eq!(cli.ok(&["ls", "-dc", "DC1", "vm"]).len(), 4);
    let hosts = cli.ok(&["find", "/DC1", "-type", "h"]);
    assert_eq!(
        hosts,
        [
            "/DC1/host/DC1_C0/DC1_C0_H0",
            "/DC1/host/DC1_C0/DC1_C0_H1",
            "/DC1/host/DC1_C0/DC1_C0_H2",
            "/DC1/host/DC1_H0/DC1_H0"
        ]
    );
    assert_eq!(cli.ok(&["find", "-type", "m", "-name", "*_VM1"]).len(), 4);
    assert_eq!(cli.ok(&["find", "/", "-type", "d"]), ["/DC0", "/DC1"]);
    assert!(cli
        .ok(&["find", "/DC0", "-type", "n"])
        .iter()
        .any(|p| p == "/DC0/network/VM Network"));
    assert!(cli
        .ok(&["find", "-type", "s"])
        .iter()
        .all(|p| p.contains("/datastore/")));
    let (code, err) = cli.fails(&["ls", "/DC0/vm/nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("not found"), "{err}");
    let (code, err) = cli.fails(&["find", "-type", "z"]);
    assert_eq!(code, 2, "usage error");
    assert!(err.contains("unknown -type"), "{err}");
}

#[tokio::test]
async fn vm_info_clone_power_ip_template_destroy() {
    let sim = simulator(SimulatorOptions {
        templates: vec![Template::everywhere("golden")],
        ..Default::default()
    })
    .await;
    let cli = Cli { sim: &sim };
    let info = cli.ok(&["vm.info", "DC0_H0_VM0"]);
    assert_eq!(info[0], "Name:           DC0_H0_VM0");
    assert!(
        info.contains(&"  Path:         /DC0/vm/DC0_H0_VM0".to_string()),
        "{info:?}"
    );
    assert!(
        info.contains(&"  Power state:  poweredOn".to_string()),
        "{info:?}"
    );
    assert!(
        info.contains(&"  Host:         DC0_H0".to_string()),
        "{info:?}"
    );

    let uuid = "5a0d3c18-8e4f-4c1b-9d2a-3f7e6b5c4d3e";
    let cloned = cli.ok(&[
        "vm.clone",
        "-vm",
        "golden",
        "-on",
        "-uuid",
        uuid,
        "-net",
        "DC0_DVPG0",
        "web-1",
    ]);
    assert_eq!(cloned, ["/DC0/vm/web-1"]);
    let json = cli.ok(&["vm.info", "-json", "web-1"]).join("\n");
    let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let vm = &value["virtualMachines"][0];
    assert_eq!(vm["instanceUuid"], uuid);
    assert_eq!(vm["powerState"], "poweredOn");
    assert_eq!(vm["path"], "/DC0/vm/web-1");
    assert_eq!(vm["template"], false);

    assert_eq!(cli.ok(&["vm.power", "-off", "web-1"]).len(), 1);
    let (code, err) = cli.fails(&["vm.power", "-off", "web-1"]);
    assert_eq!(code, 1);
    assert!(err.contains("InvalidPowerState"), "{err}");
    let (code, _) = cli.fails(&["vm.power", "-on", "-off", "web-1"]);
    assert_eq!(code, 2);
    cli.ok(&["vm.power", "-on", "web-1"]);
    cli.ok(&["vm.power", "-s", "web-1"]);
    let (_, err) = cli.fails(&["vm.ip", "-wait", "1s", "web-1"]);
    assert!(err.contains("no IP address within"), "{err}");

    cli.ok(&["vm.markastemplate", "web-1"]);
    let json = cli.ok(&["vm.info", "-json", "web-1"]).join("\n");
    let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(value["virtualMachines"][0]["template"], true);

    cli.ok(&["vm.destroy", "DC0_H0_VM1"]);
    let (_, err) = cli.fails(&["vm.info", "DC0_H0_VM1"]);
    assert!(err.contains("not found"), "{err}");
}

#[tokio::test]
async fn walk_counts_every_vm_of_every_round() {
    // 30 VMs per pool and standalone host: 60 VMs, read in pages of 7.
    let sim = simulator(SimulatorOptions {
        vms: 30,
        autostart: false,
        ..Default::default()
    })
    .await;
    let cli = Cli { sim: &sim };
    assert_eq!(
        cli.ok(&["walk", "-n", "3", "-page", "7"]),
        ["vms=180 iters=3"]
    );
    assert_eq!(
        cli.ok(&[
            "walk",
            "-props",
            "name,config.hardware.device",
            "-interval",
            "10ms",
            "-n",
            "2"
        ]),
        ["vms=120 iters=2"]
    );
    let (code, err) = cli.fails(&["walk", "-props", "name,runtime.nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("runtime.nope"), "{err}");
}

/// The snapshot tree as the SDK reads it: (path, id, created) in tree order.
async fn snapshot_rows(sim: &Simulator, vm: &str) -> Vec<(String, String, String)> {
    let client = vsphere_client::Client::builder(&sim.sdk_url())
        .credentials(sim.username(), sim.password())
        .insecure(true)
        .keepalive(None)
        .connect()
        .await
        .expect("connect");
    let object = client.finder().virtual_machine(vm).await.expect("vm");
    let tree = client
        .vm(object.reference)
        .snapshot_tree()
        .await
        .expect("tree");
    let rows = tree
        .iter()
        .map(|(path, s)| (path, s.reference.value.clone(), s.created.to_string()))
        .collect();
    let _ = client.close().await;
    rows
}

#[tokio::test]
async fn snapshot_commands_print_what_govc_prints() {
    let sim = simulator(SimulatorOptions::default()).await;
    let cli = Cli { sim: &sim };
    fn with_vm<'a>(args: &[&'a str]) -> Vec<&'a str> {
        let mut all = args.to_vec();
        all.extend(["-vm", "DC0_H0_VM0"]);
        all
    }
    // No snapshot: no output, exit 0.
    assert!(cli.ok(&with_vm(&["snapshot.tree"])).is_empty());
    assert!(cli
        .ok(&with_vm(&["snapshot.create", "-d", "first one", "base"]))
        .is_empty());
    cli.ok(&with_vm(&["snapshot.create", "app"]));
    cli.ok(&with_vm(&["snapshot.create", "-m=false", "-q", "app"]));
    cli.ok(&with_vm(&["snapshot.revert", "base"]));
    cli.ok(&with_vm(&["snapshot.create", "-d", "<db> & co", "db"]));

    // govc's layout: two spaces per level, a "." line after the current one.
    assert_eq!(
        cli.ok(&with_vm(&["snapshot.tree"])),
        ["base", "  app", "    app", "  db", "  ."]
    );
    assert_eq!(
        cli.ok(&with_vm(&["snapshot.tree", "-c=false", "-f"])),
        ["base", "  base/app", "    base/app/app", "  base/db"]
    );
    assert_eq!(cli.ok(&with_vm(&["snapshot.tree", "-C"])), ["db"]);
    assert_eq!(
        cli.ok(&with_vm(&["snapshot.tree", "-C", "-f"])),
        ["base/db"]
    );
    // -d: " - " and the description padded to 4 (Go's %4s).
    assert_eq!(
        cli.ok(&with_vm(&["snapshot.tree", "-d"])),
        [
            "base - first one",
            "  app -     ",
            "    app -     ",
            "  db - <db> & co",
            "  . - <db> & co"
        ]
    );
    // -s -i -D: "[size id date]  " before the name; the simulator's files
    // are empty, so every size is 0B.
    let rows = snapshot_rows(&sim, "DC0_H0_VM0").await;
    let date = |created: &str| {
        assert!(
            created.ends_with('Z'),
            "the simulator runs in UTC: {created}"
        );
        format!("{}Z", &created[..19])
    };
    let expected: Vec<String> = rows
        .iter()
        .zip(["base", "  app", "    app", "  db"])
        .map(|((_, id, created), name)| {
            let indent = name.len() - name.trim_start().len();
            format!(
                "{}[0B {id} {}]  {}",
                &name[..indent],
                date(created),
                name.trim_start()
            )
        })
        .collect();
    let mut expected_with_dot = expected.clone();
    expected_with_dot.push(expected[3].replace("]  db", "]  ."));
    assert_eq!(
        cli.ok(&with_vm(&["snapshot.tree", "-s", "-i", "-D"])),
        expected_with_dot
    );

    // -json: govc's records (MarshalIndent, fields in its order, an empty
    // child list as null, <, > and & escaped).
    let json = cli
        .ok(&with_vm(&["snapshot.tree", "-json", "-i", "-d"]))
        .join("\n");
    let id = |i: usize| rows[i].1.as_str();
    let expected_json = format!(
        r#"[
  {{
    "id": "{}",
    "name": "base",
    "description": "first one",
    "current": false,
    "childSnapshotList": [
      {{
        "id": "{}",
        "name": "app",
        "description": "",
        "current": false,
        "childSnapshotList": [
          {{
            "id": "{}",
            "name": "app",
            "description": "",
            "current": false,
            "childSnapshotList": null
          }}
        ]
      }},
      {{
        "id": "{}",
        "name": "db",
        "description": "\u003cdb\u003e \u0026 co",
        "current": true,
        "childSnapshotList": null
      }}
    ]
  }}
]"#,
        id(0),
        id(1),
        id(2),
        id(3)
    );
    assert_eq!(json, expected_json);

    // An ambiguous name is refused, naming both matches; a path is not.
    let (code, err) = cli.fails(&with_vm(&["snapshot.revert", "app"]));
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("base/app ({})", id(1)))
            && err.contains(&format!("base/app/app ({})", id(2))),
        "{err}"
    );
    cli.ok(&with_vm(&["snapshot.revert", "-s", "base/app/app"]));
    assert_eq!(
        cli.ok(&with_vm(&["snapshot.tree"])),
        ["base", "  app", "    app", "    .", "  db"]
    );
    cli.ok(&with_vm(&["snapshot.revert"]));
    cli.ok(&with_vm(&["snapshot.revert", id(3)]));

    // -r removes the subtree; without it the children move up.
    cli.ok(&with_vm(&["snapshot.remove", "-r", "base/app"]));
    assert_eq!(
        cli.ok(&with_vm(&["snapshot.tree"])),
        ["base", "  db", "  ."]
    );
    cli.ok(&with_vm(&["snapshot.remove", "-c=false", "base"]));
    assert_eq!(cli.ok(&with_vm(&["snapshot.tree"])), ["db", "."]);
    let (_, err) = cli.fails(&with_vm(&["snapshot.remove", "nope"]));
    assert!(err.contains("snapshot \"nope\" not found"), "{err}");
    cli.ok(&with_vm(&["snapshot.create", "db"]));
    cli.ok(&with_vm(&["snapshot.remove", "*"]));
    assert!(cli.ok(&with_vm(&["snapshot.tree"])).is_empty());

    let (code, err) = cli.fails(&with_vm(&["snapshot.create"]));
    assert_eq!(code, 2, "usage error: {err}");
    let (code, err) = cli.fails(&["snapshot.tree"]);
    assert_eq!(code, 2);
    assert!(err.contains("-vm VM is required"), "{err}");
}
