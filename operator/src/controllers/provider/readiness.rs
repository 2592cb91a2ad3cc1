//! The provider role's reconcile core: Provider readiness (credentials, TLS,
//! inventory -> failure domains) and a VMImage's readiness on each Provider.
//! It reads Secrets and ConfigMaps through [`Objects`] and vCenter through
//! [`VSphere`], so `check` and the cluster role run the same code.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::validate;
use crate::api::{
    CloneMode, DatacenterTemplate, FailureDomain, ImageProviderStatus, NamespacedReference,
    Provider, ProviderStatus, SourceKind, VMImage, VSphereMachine,
};
use crate::conditions::{self, Observed, Status, READY};
use crate::controllers::virtualmachine::schedule::provider_key;
use crate::vsphere::{
    ConnectParams, Error, ErrorKind, FoundTemplate, ImageTarget, Inventory, LibraryItemLookup,
    PlacementMissing, PlacementTarget, SecretString, Session, Tls, VSphere,
};

/// Condition reasons of a Provider's `Ready` and `Deleting`, and a
/// VMImage's per Provider (`ConnectFailed` and `VCenterUnresponsive` are
/// both); what each means is in [`crate::api::reasons`].
pub mod reason {
    pub use crate::api::reasons::provider::*;
    pub use crate::api::reasons::vmimage::{
        DEPLOY_FAILED, LIBRARY_ITEM_DEPLOYED, LIBRARY_ITEM_NOT_FOUND, LIBRARY_ITEM_UNSUPPORTED,
        LOOKUP_FAILED, NO_VSPHERE_SOURCE, TEMPLATE_FOUND, TEMPLATE_NOT_FOUND,
    };
}

/// Read access to the Secrets and ConfigMaps a Provider references.
pub trait Objects {
    fn secret(&self, namespace: &str, name: &str) -> Option<Secret>;
    fn config_map(&self, namespace: &str, name: &str) -> Option<ConfigMap>;
    /// The templates VSphereMachines of `provider` may still be cloned from
    /// ([`templates_in_use`]); `None` when unknown (nothing is removed then).
    fn templates_in_use(&self, provider: &NamespacedReference) -> Option<BTreeSet<String>> {
        let _ = provider;
        None
    }
}

/// The templates of `provider` that `machines` still need: those of
/// machines not provisioned yet (being cloned, or about to be), and those
/// of linked clones (their disks are children of the template's snapshot).
/// A provisioned full clone needs its template no more.
pub fn templates_in_use<'a>(
    machines: impl IntoIterator<Item = &'a VSphereMachine>,
    provider: &NamespacedReference,
) -> BTreeSet<String> {
    machines
        .into_iter()
        .filter(|m| m.spec.provider_ref == *provider)
        .filter(|m| {
            m.spec.clone_mode == CloneMode::Linked
                || !m.status.as_ref().is_some_and(|s| s.provisioned)
        })
        .map(|m| m.spec.template.name.clone())
        .collect()
}

/// The Secrets and ConfigMaps one reconcile read by name (the provider
/// role keeps no cache of them). No `Debug`: it holds passwords.
#[derive(Clone, Default)]
pub struct Fetched {
    pub secrets: Vec<Secret>,
    pub config_maps: Vec<ConfigMap>,
    /// [`templates_in_use`] of the Provider, from the role's machine cache.
    pub templates_in_use: Option<BTreeSet<String>>,
}

impl Objects for Fetched {
    fn secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        self.secrets
            .iter()
            .find(|s| {
                s.metadata.namespace.as_deref() == Some(namespace)
                    && s.metadata.name.as_deref() == Some(name)
            })
            .cloned()
    }

    fn config_map(&self, namespace: &str, name: &str) -> Option<ConfigMap> {
        self.config_maps
            .iter()
            .find(|c| {
                c.metadata.namespace.as_deref() == Some(namespace)
                    && c.metadata.name.as_deref() == Some(name)
            })
            .cloned()
    }

    fn templates_in_use(&self, _provider: &NamespacedReference) -> Option<BTreeSet<String>> {
        self.templates_in_use.clone()
    }
}

/// The names of the Secrets (credentials, CA bundle) and ConfigMaps (CA
/// bundle) `provider` reads, in its own namespace.
pub fn referenced(provider: &Provider) -> (Vec<String>, Vec<String>) {
    let connection = &provider.spec.connection;
    let mut secrets = vec![connection.credentials_ref.name.clone()];
    let mut config_maps = Vec::new();
    if let Some(ca) = &connection.ca_bundle {
        secrets.extend(ca.secret_ref.as_ref().map(|r| r.name.clone()));
        config_maps.extend(ca.config_map_ref.as_ref().map(|r| r.name.clone()));
    }
    secrets.dedup();
    (secrets, config_maps)
}

/// A string value of a Secret, from `data` or (in manifests not yet applied) `stringData`.
pub fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    if let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(key)) {
        return String::from_utf8(bytes.0.clone()).ok();
    }
    secret
        .string_data
        .as_ref()
        .and_then(|d| d.get(key))
        .cloned()
}

/// What a Provider that is not Ready waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// A change of its spec.
    Spec,
    /// An object it names to be created or fixed: a Secret or ConfigMap
    /// (credentials, CA bundle), or a resource pool or folder in vCenter
    /// (`spec.placement`). Nothing watches them, so it looks again with backoff.
    ReferencedObject,
    /// vCenter, which may recover by itself: retried with backoff and
    /// counted under the metric label of its reason's kind.
    VCenter,
}

/// Why a Provider is not Ready: its condition's reason and message, and
/// what it waits for.
#[derive(Debug)]
pub struct Failure {
    pub reason: &'static str,
    pub message: String,
    pub cause: Cause,
}

impl Failure {
    fn new(reason: &'static str, message: String, cause: Cause) -> Self {
        Failure {
            reason,
            message,
            cause,
        }
    }

    fn vcenter(e: Error, otherwise: &'static str) -> Self {
        Failure::new(reason_of(&e, otherwise), e.message, Cause::VCenter)
    }
}

/// Credentials and TLS settings of a Provider, read from its Secrets and ConfigMaps.
pub fn connect_params(
    provider: &Provider,
    objects: &impl Objects,
) -> Result<ConnectParams, Failure> {
    let errors = validate::provider(&provider.spec);
    if !errors.is_empty() {
        // Only a name two overrides share: the reason the inventory gives it.
        let only_clashes =
            validate::failure_domain_name_clashes(&provider.spec).len() == errors.len();
        let reason = if only_clashes {
            reason::DUPLICATE_FAILURE_DOMAIN
        } else {
            reason::INVALID_SPEC
        };
        return Err(Failure::new(
            reason,
            validate::describe(&errors),
            Cause::Spec,
        ));
    }
    let key = provider_key(provider);
    let connection = &provider.spec.connection;
    let secret_name = &connection.credentials_ref.name;
    let secret = objects.secret(&key.namespace, secret_name).ok_or_else(|| {
        Failure::new(
            reason::SECRET_MISSING,
            format!(
                "Secret {}/{secret_name} (spec.connection.credentialsRef) not found",
                key.namespace
            ),
            Cause::ReferencedObject,
        )
    })?;
    let field = |name: &str| {
        secret_value(&secret, name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                Failure::new(
                    reason::SECRET_INVALID,
                    format!(
                        "Secret {}/{secret_name} has no non-empty {name:?} key",
                        key.namespace
                    ),
                    Cause::ReferencedObject,
                )
            })
    };
    let call_deadline = connection.call_deadline().map_err(|message| {
        Failure::new(
            reason::INVALID_SPEC,
            format!("spec.connection.callDeadline: {message}"),
            Cause::Spec,
        )
    })?;
    let username = field("username")?;
    let password = SecretString::new(field("password")?);

    // A CA bundle that cannot be used is a TLS problem: `ConnectFailed`, as
    // the guide has it, the detail in the message.
    let unusable_ca = |message: String, cause: Cause| {
        Failure::new(
            reason::CONNECT_FAILED,
            format!("CA bundle: {message}"),
            cause,
        )
    };
    let tls = match &connection.ca_bundle {
        _ if connection.insecure_skip_tls_verify => Tls::Insecure,
        None => Tls::SystemRoots,
        Some(ca) => {
            let (pem, cause) = if let Some(inline) = &ca.inline {
                (Some(inline.clone()), Cause::Spec)
            } else if let Some(r) = &ca.config_map_ref {
                let cm = objects.config_map(&key.namespace, &r.name).ok_or_else(|| {
                    unusable_ca(
                        format!(
                            "ConfigMap {}/{} (spec.connection.caBundle.configMapRef) not found",
                            key.namespace, r.name
                        ),
                        Cause::ReferencedObject,
                    )
                })?;
                let pem = cm.data.as_ref().and_then(|d| d.get(&ca.key)).cloned();
                (pem, Cause::ReferencedObject)
            } else if let Some(r) = &ca.secret_ref {
                let s = objects.secret(&key.namespace, &r.name).ok_or_else(|| {
                    unusable_ca(
                        format!(
                            "Secret {}/{} (spec.connection.caBundle.secretRef) not found",
                            key.namespace, r.name
                        ),
                        Cause::ReferencedObject,
                    )
                })?;
                (secret_value(&s, &ca.key), Cause::ReferencedObject)
            } else {
                (None, Cause::Spec)
            };
            let pem = pem
                .filter(|p| p.contains("-----BEGIN CERTIFICATE-----"))
                .ok_or_else(|| {
                    unusable_ca(
                        format!(
                            "no PEM certificate under key {:?} (spec.connection.caBundle)",
                            ca.key
                        ),
                        cause,
                    )
                })?;
            Tls::CaBundle(pem)
        }
    };
    Ok(ConnectParams {
        provider: key,
        endpoint: connection.endpoint.clone(),
        username,
        password,
        tls,
        call_deadline,
    })
}

/// The condition reason of a vCenter error: `VCenterUnresponsive` when it
/// did not answer in time, `ConnectFailed` for a lost connection or session,
/// else `otherwise`.
pub fn reason_of(e: &Error, otherwise: &'static str) -> &'static str {
    match e.kind {
        ErrorKind::Unresponsive => reason::VCENTER_UNRESPONSIVE,
        ErrorKind::Connect => reason::CONNECT_FAILED,
        _ => otherwise,
    }
}

/// What a Provider reconcile produced: the status to write.
pub struct ProviderOutcome {
    pub status: ProviderStatus,
    /// `Ready` changed status: worth an event.
    pub transitioned: bool,
    /// What the Provider waits for when this reconcile left it not Ready.
    pub cause: Option<Cause>,
}

impl ProviderOutcome {
    /// The `Ready` reason, and the vCenter failure behind it when vCenter
    /// may fix it by itself (worth retrying soon).
    pub fn ready_reason(&self) -> (&str, Option<ErrorKind>) {
        let reason = conditions::find(&self.status.conditions, READY)
            .map(|c| c.reason.as_str())
            .unwrap_or_default();
        let transient = match self.cause {
            Some(Cause::VCenter) => transient_failure(reason),
            _ => None,
        };
        (reason, transient)
    }

    /// Does the Provider wait for a Secret or ConfigMap it names to be
    /// created or fixed (its credentials or CA bundle)?
    pub fn waits_for_a_referenced_object(&self) -> bool {
        self.cause == Some(Cause::ReferencedObject)
    }
}

/// The vCenter failure a VMImage's per-Provider reason (or a Provider's
/// `Ready` reason from vCenter) stands for when vCenter may fix it by itself
/// (not reachable, not answering, a walk or lookup that failed): retried
/// sooner than the resync and counted under that kind's metric label. `None`
/// for a reason only a change of the spec or a Secret fixes.
pub fn transient_failure(reason: &str) -> Option<ErrorKind> {
    match reason {
        reason::CONNECT_FAILED => Some(ErrorKind::Connect),
        reason::VCENTER_UNRESPONSIVE => Some(ErrorKind::Unresponsive),
        reason::INVENTORY_FAILED => Some(ErrorKind::Inventory),
        reason::LOOKUP_FAILED => Some(ErrorKind::Lookup),
        reason::DEPLOY_FAILED => Some(ErrorKind::Operation),
        _ => None,
    }
}

pub async fn reconcile_provider<V: VSphere>(
    provider: &Provider,
    objects: &impl Objects,
    vsphere: &V,
    now: &Time,
) -> ProviderOutcome {
    let previous = provider.status.clone().unwrap_or_default();
    let mut status = previous.clone();
    let mut cause = None;
    let observed = match connect_and_walk(provider, objects, vsphere).await {
        Ok(failure_domains) => {
            let message = format!(
                "logged in to {}; {} failure domain(s)",
                provider.spec.connection.endpoint,
                failure_domains.len()
            );
            status.failure_domains = failure_domains;
            Observed::new(READY, Status::True, reason::CONNECTED, message)
        }
        // A failure keeps the last known failure domains: a vCenter outage must not
        // make the scheduler forget where VMs can go.
        Err(failure) => {
            cause = Some(failure.cause);
            Observed::new(READY, Status::False, failure.reason, failure.message)
        }
    };
    let generation = provider.metadata.generation;
    let transitioned = conditions::set(&mut status.conditions, observed, generation, now);
    status.observed_generation = generation;
    ProviderOutcome {
        status,
        transitioned,
        cause,
    }
}

async fn connect_and_walk<V: VSphere>(
    provider: &Provider,
    objects: &impl Objects,
    vsphere: &V,
) -> Result<Vec<FailureDomain>, Failure> {
    let params = connect_params(provider, objects)?;
    let session = vsphere
        .connect(&params)
        .await
        .map_err(|e| Failure::vcenter(e, reason::CONNECT_FAILED))?;
    let inventory = session.inventory().await.map_err(|e| {
        if e.unresponsive() {
            vsphere.session_unresponsive(&session);
        }
        Failure::vcenter(e, reason::INVENTORY_FAILED)
    })?;
    let domains = failure_domains(provider, &inventory)
        .map_err(|message| Failure::new(reason::DUPLICATE_FAILURE_DOMAIN, message, Cause::Spec))?;
    verify_placements(&domains, &session)
        .await
        .inspect_err(|failure| {
            if failure.reason == reason::VCENTER_UNRESPONSIVE {
                vsphere.session_unresponsive(&session);
            }
        })?;
    Ok(domains)
}

/// Verifies the resource pool and folder of each failure domain that has
/// one (a folder's last level is made when absent): the first one missing
/// is the Provider's reason, naming the failure domain. One check per
/// distinct (datacenter, cluster, pool, folder).
async fn verify_placements<S: Session>(
    domains: &[FailureDomain],
    session: &S,
) -> Result<(), Failure> {
    let mut checked = BTreeSet::new();
    for fd in domains {
        if fd.resource_pool.is_none() && fd.folder.is_none() {
            continue;
        }
        let target = PlacementTarget {
            datacenter: fd.datacenter.clone(),
            cluster: fd.cluster.clone(),
            resource_pool: fd.resource_pool.clone(),
            folder: fd.folder.clone(),
        };
        let key = (
            target.datacenter.clone(),
            target.cluster.clone(),
            target.resource_pool.clone(),
            target.folder.clone(),
        );
        if !checked.insert(key) {
            continue;
        }
        let missing = session
            .verify_placement(&target)
            .await
            .map_err(|e| Failure::vcenter(e, reason::INVENTORY_FAILED))?;
        let (reason, what) = match missing {
            None => continue,
            Some(PlacementMissing::ResourcePool(what)) => (reason::RESOURCE_POOL_NOT_FOUND, what),
            Some(PlacementMissing::Folder(what)) => (reason::FOLDER_NOT_FOUND, what),
        };
        return Err(Failure::new(
            reason,
            format!("failure domain {}: {what} (spec.placement)", fd.name),
            Cause::ReferencedObject,
        ));
    }
    Ok(())
}

/// One failure domain per (datacenter, cluster or standalone host), named by override or
/// `<provider>-<datacenter>-<cluster>` made a DNS-1123 label. Two resolving to
/// one name is an error naming both.
pub fn failure_domains(
    provider: &Provider,
    inventory: &Inventory,
) -> Result<Vec<FailureDomain>, String> {
    let provider_name = provider.metadata.name.clone().unwrap_or_default();
    let caps = &provider.spec.capabilities;
    let mut by_name: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut domains = Vec::new();
    for dc in &inventory.datacenters {
        for cluster in &dc.clusters {
            let name = provider
                .spec
                .failure_domain_name_overrides
                .iter()
                .find(|o| o.datacenter == dc.name && o.cluster == cluster.name)
                .map(|o| o.name.clone())
                .unwrap_or_else(|| failure_domain_name(&provider_name, &dc.name, &cluster.name));
            if let Some((other_dc, other_cluster)) =
                by_name.insert(name.clone(), (dc.name.clone(), cluster.name.clone()))
            {
                return Err(format!(
                    "failure domain name {name:?} is used by both datacenter {other_dc:?} cluster {other_cluster:?} and datacenter {:?} cluster {:?}",
                    dc.name, cluster.name
                ));
            }
            let labels = BTreeMap::from([
                ("name".to_string(), name.clone()),
                ("datacenter".to_string(), dc.name.clone()),
                ("cluster".to_string(), cluster.name.clone()),
            ]);
            let storage_classes = caps
                .storage_classes
                .iter()
                .filter(|c| match &c.target.datastore_cluster {
                    Some(pod) => cluster.datastore_clusters.contains(pod),
                    None => cluster.datastores.contains(&c.target.datastore),
                })
                .map(|c| c.name.clone())
                .collect();
            let placement = provider.spec.placement_of(&name);
            let network_classes = caps
                .network_classes
                .iter()
                .filter(|c| dc.portgroups.contains(&c.target.port_group))
                .map(|c| c.name.clone())
                .collect();
            domains.push(FailureDomain {
                name,
                datacenter: dc.name.clone(),
                cluster: cluster.name.clone(),
                standalone_host: cluster.standalone,
                resource_pool: placement.resource_pool,
                folder: placement.folder,
                labels,
                storage_classes,
                network_classes,
                features: caps.features.clone(),
            });
        }
    }
    domains.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(domains)
}

/// `<provider>-<datacenter>-<cluster>` as a DNS-1123 label: lower case, runs of
/// other characters as one `-`; when longer than 63, cut and suffixed with a
/// hash of the raw names so two long names never collide.
pub fn failure_domain_name(provider: &str, datacenter: &str, cluster: &str) -> String {
    let raw = format!("{provider}-{datacenter}-{cluster}");
    let mut name = String::with_capacity(raw.len());
    for c in raw.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name = name.trim_matches('-').to_string();
    if name.len() <= 63 {
        return name;
    }
    // FNV-1a: stable across releases and platforms, unlike std's hasher.
    let mut hash: u32 = 0x811c_9dc5;
    for b in format!("{provider}\0{datacenter}\0{cluster}").bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let prefix = name[..54].trim_end_matches('-');
    format!("{prefix}-{hash:08x}")
}

/// A VMImage's readiness on one Provider: its template must exist in every
/// datacenter of the Provider's failure domains. The Provider's session is
/// the one its own reconcile uses (`connect` reuses it).
pub async fn image_on_provider<V: VSphere>(
    image: &VMImage,
    provider: &Provider,
    objects: &impl Objects,
    vsphere: &V,
) -> ImageProviderStatus {
    let key = provider_key(provider);
    let mut entry = ImageProviderStatus {
        provider: key.name.clone(),
        namespace: key.namespace.clone(),
        ..Default::default()
    };
    let mut fail = |reason: &str, message: String| {
        entry.reason = Some(reason.to_string());
        entry.message = Some(message);
        entry.clone()
    };
    let class = &provider.spec.provider_class_ref.name;
    let Some(source) = image.source_for_class(class) else {
        return fail(
            reason::NO_VSPHERE_SOURCE,
            format!(
                "VMImage has no Template or ContentLibraryItem source for provider class {class:?}"
            ),
        );
    };
    let provider_status = provider.status.clone().unwrap_or_default();
    if !conditions::is_true(&provider_status.conditions, READY) {
        let why = conditions::find(&provider_status.conditions, READY)
            .map(|c| format!("{}: {}", c.reason, c.message))
            .unwrap_or_else(|| "not reconciled yet".to_string());
        return fail(
            reason::CONNECT_FAILED,
            format!("provider {key} is not ready ({why})"),
        );
    }
    let datacenters: Vec<String> = provider_status
        .failure_domains
        .iter()
        .map(|fd| fd.datacenter.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if datacenters.is_empty() {
        return fail(
            reason::TEMPLATE_NOT_FOUND,
            format!(
                "provider {key} has no failure domains to look for template {:?} in",
                source.reference
            ),
        );
    }
    let session = match connect_params(provider, objects) {
        Ok(params) => vsphere
            .connect(&params)
            .await
            .map_err(|e| (reason_of(&e, reason::CONNECT_FAILED), e.message)),
        Err(failure) => Err((reason::CONNECT_FAILED, failure.message)),
    };
    let session = match session {
        Ok(session) => session,
        Err((reason, message)) => return fail(reason, message),
    };
    let library = match source.kind {
        SourceKind::Template => None,
        SourceKind::ContentLibraryItem => Some(source.library.clone().unwrap_or_default()),
    };
    let Some(library) = library else {
        return match session.find_template(&source.reference, &datacenters).await {
            Ok(found) => templates_found(entry, &source.reference, &datacenters, &found),
            Err(e) => {
                if e.unresponsive() {
                    vsphere.session_unresponsive(&session);
                }
                fail(reason_of(&e, reason::LOOKUP_FAILED), e.message)
            }
        };
    };
    // A content library item: deployed once into each datacenter as a
    // template, then found as one.
    let item = match session.find_library_item(&library, &source.reference).await {
        Ok(LibraryItemLookup::Found(item)) => item,
        Ok(LibraryItemLookup::NoLibrary) => {
            return fail(
                reason::LIBRARY_ITEM_NOT_FOUND,
                format!("content library {library:?} not found"),
            )
        }
        Ok(LibraryItemLookup::NoItem) => {
            return fail(
                reason::LIBRARY_ITEM_NOT_FOUND,
                format!(
                    "item {:?} not found in content library {library:?}",
                    source.reference
                ),
            )
        }
        Err(e) => {
            if e.unresponsive() {
                vsphere.session_unresponsive(&session);
            }
            return fail(reason_of(&e, reason::LOOKUP_FAILED), e.message);
        }
    };
    if !item.deployable() {
        return fail(
            reason::LIBRARY_ITEM_UNSUPPORTED,
            format!(
                "item {:?} of content library {library:?} is of type {:?}, neither an OVF template nor a VM template",
                item.name, item.item_type
            ),
        );
    }
    let name = item.template_name();
    let mut found = match session.find_template(&name, &datacenters).await {
        Ok(found) => found,
        Err(e) => {
            if e.unresponsive() {
                vsphere.session_unresponsive(&session);
            }
            return fail(reason_of(&e, reason::LOOKUP_FAILED), e.message);
        }
    };
    for datacenter in &datacenters {
        if matches!(found.get(datacenter), Some(Some(_))) {
            continue;
        }
        let Some(domain) = provider_status
            .failure_domains
            .iter()
            .find(|fd| &fd.datacenter == datacenter)
        else {
            continue;
        };
        let target = image_target(provider, domain, &name);
        match session.deploy_library_item(&item, &target).await {
            Ok(template) => {
                found.insert(datacenter.clone(), Some(template));
            }
            Err(e) => {
                if e.unresponsive() {
                    vsphere.session_unresponsive(&session);
                }
                let message = format!(
                    "item {:?} of content library {library:?} into datacenter {datacenter}: {}",
                    item.name, e.message
                );
                return fail(reason_of(&e, reason::DEPLOY_FAILED), message);
            }
        }
    }
    let mut entry = templates_found(entry, &name, &datacenters, &found);
    if entry.ready {
        entry.reason = Some(reason::LIBRARY_ITEM_DEPLOYED.to_string());
        let mut message = format!(
            "item {:?} of content library {library:?} deployed as template {name} in {} datacenter(s)",
            item.name,
            datacenters.len()
        );
        let removed =
            remove_older_versions(image, &key, objects, &session, &item, &datacenters).await;
        if !removed.is_empty() {
            message.push_str(&format!(
                "; the templates of its older versions removed: {}",
                removed.join(", ")
            ));
        }
        entry.message = Some(message);
    }
    entry
}

/// Removes the templates banlieue deployed of older versions of `item`
/// (`banlieue-<item id>-v<other>`), once the image's status already names
/// the current version's template (so no VSphereMachine is made from an
/// older one any more) and no VSphereMachine of the Provider still needs
/// one ([`templates_in_use`]); the names removed. A failure is logged and
/// tried again at the next verification.
async fn remove_older_versions<S: Session>(
    image: &VMImage,
    provider: &NamespacedReference,
    objects: &impl Objects,
    session: &S,
    item: &crate::vsphere::LibraryItemFacts,
    datacenters: &[String],
) -> Vec<String> {
    let name = item.template_name();
    let published = image
        .status
        .iter()
        .flat_map(|s| &s.per_provider)
        .find(|e| e.provider == provider.name && e.namespace == provider.namespace)
        .is_some_and(|e| {
            e.ready && !e.templates.is_empty() && e.templates.iter().all(|t| t.name == name)
        });
    let Some(keep) = objects.templates_in_use(provider).filter(|_| published) else {
        return Vec::new();
    };
    match session
        .remove_library_templates(item, datacenters, &keep)
        .await
    {
        Ok(removed) => {
            if !removed.is_empty() {
                tracing::info!(%provider, item = %item.name, ?removed, "removed the templates of older versions of a content library item");
            }
            removed
        }
        Err(e) => {
            tracing::warn!(%provider, item = %item.name, error = %e, "removing the templates of older versions of a content library item failed; tried again at the next verification");
            Vec::new()
        }
    }
}

/// Where a content library item's template `name` is deployed in a
/// datacenter: its first failure domain's cluster, resource pool and folder
/// (`banlieue-images` unless the Provider names one), and the datastore of
/// the failure domain's first storage class (in the Provider's order).
pub fn image_target(provider: &Provider, domain: &FailureDomain, name: &str) -> ImageTarget {
    let storage = provider
        .spec
        .capabilities
        .storage_classes
        .iter()
        .find(|class| domain.storage_classes.contains(&class.name))
        .map(|class| class.target.clone())
        .unwrap_or_default();
    ImageTarget {
        datacenter: domain.datacenter.clone(),
        cluster: domain.cluster.clone(),
        name: name.to_string(),
        resource_pool: domain.resource_pool.clone(),
        folder: domain.folder.clone(),
        datastore: Some(storage.datastore).filter(|d| !d.is_empty()),
        datastore_cluster: storage.datastore_cluster,
    }
}

/// `entry` ready when template `name` is in each of `datacenters`
/// (`TemplateFound`), else `TemplateNotFound` naming those without it.
fn templates_found(
    mut entry: ImageProviderStatus,
    name: &str,
    datacenters: &[String],
    found: &BTreeMap<String, Option<FoundTemplate>>,
) -> ImageProviderStatus {
    let missing: Vec<&str> = datacenters
        .iter()
        .filter(|dc| !matches!(found.get(*dc), Some(Some(_))))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        entry.reason = Some(reason::TEMPLATE_NOT_FOUND.to_string());
        entry.message = Some(format!(
            "template {name:?} not found in datacenter(s) {}",
            missing.join(", ")
        ));
        return entry;
    }
    entry.ready = true;
    entry.reason = Some(reason::TEMPLATE_FOUND.to_string());
    entry.message = Some(format!(
        "template {name:?} found in {} datacenter(s)",
        datacenters.len()
    ));
    entry.templates = datacenters
        .iter()
        .map(|dc| DatacenterTemplate {
            datacenter: dc.clone(),
            name: name.to_string(),
            mo_ref: found.get(dc).cloned().flatten().map(|t| t.mo_ref),
        })
        .collect();
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use serde_json::json;

    #[test]
    fn templates_stay_in_use_while_a_machine_may_be_cloned_or_is_a_linked_clone() {
        let of = |name: &str, template: &str, provisioned: bool, linked: bool| {
            let mut m = fixtures::machine(name);
            m.spec.template.name = template.into();
            if linked {
                m.spec.clone_mode = CloneMode::Linked;
            }
            m.status = Some(crate::api::VSphereMachineStatus {
                provisioned,
                ..Default::default()
            });
            m
        };
        let mut elsewhere = of("e", "t-other-provider", false, false);
        elsewhere.spec.provider_ref.name = "vc2".into();
        let machines = [
            of("a", "t-cloning", false, false),
            of("b", "t-full", true, false),
            of("c", "t-linked", true, true),
            elsewhere,
        ];
        let provider = machines[0].spec.provider_ref.clone();
        let in_use = templates_in_use(&machines, &provider);
        assert_eq!(
            in_use.into_iter().collect::<Vec<_>>(),
            ["t-cloning", "t-linked"]
        );
    }

    #[test]
    fn an_image_is_deployed_where_its_failure_domain_places_vms() {
        let provider: Provider = serde_json::from_value(json!({
            "metadata": {"name": "vc", "namespace": "ns"},
            "spec": {
                "providerClassRef": {"name": "vsphere"},
                "connection": {"endpoint": "https://vc/sdk", "credentialsRef": {"name": "c"}},
                "capabilities": {"storageClasses": [
                    {"name": "silver", "target": {"datastore": "ds-silver"}},
                    {"name": "gold", "target": {"datastoreCluster": "pod-gold"}},
                    {"name": "bronze", "target": {"datastore": "ds-bronze"}},
                ]},
            },
        }))
        .unwrap();
        let domain = FailureDomain {
            name: "vc-dc0-c0".into(),
            datacenter: "DC0".into(),
            cluster: "C0".into(),
            resource_pool: Some("team-a".into()),
            folder: Some("apps/images".into()),
            // In the domain's order; the Provider's order decides.
            storage_classes: vec!["bronze".into(), "gold".into()],
            ..Default::default()
        };
        assert_eq!(
            image_target(&provider, &domain, "banlieue-item-v2"),
            ImageTarget {
                datacenter: "DC0".into(),
                cluster: "C0".into(),
                name: "banlieue-item-v2".into(),
                resource_pool: Some("team-a".into()),
                folder: Some("apps/images".into()),
                datastore: None,
                datastore_cluster: Some("pod-gold".into()),
            }
        );
        let bare = FailureDomain {
            storage_classes: vec!["bronze".into()],
            resource_pool: None,
            folder: None,
            ..domain
        };
        let target = image_target(&provider, &bare, "t");
        assert_eq!(
            (target.resource_pool, target.folder, target.datastore),
            (None, None, Some("ds-bronze".into()))
        );
    }

    #[test]
    fn secret_values_from_data_or_string_data() {
        let applied: Secret = serde_json::from_value(
            json!({"metadata": {"name": "s"}, "data": {"password": "c2VjcmV0"}}),
        )
        .unwrap();
        assert_eq!(
            secret_value(&applied, "password").as_deref(),
            Some("secret")
        );
        let manifest: Secret = serde_json::from_value(
            json!({"metadata": {"name": "s"}, "stringData": {"password": "secret"}}),
        )
        .unwrap();
        assert_eq!(
            secret_value(&manifest, "password").as_deref(),
            Some("secret")
        );
        assert_eq!(secret_value(&manifest, "username"), None);
    }

    #[test]
    fn names_are_dns_labels_and_long_ones_hashed_without_collision() {
        assert_eq!(
            failure_domain_name("prod-vsphere", "DC-East", "Compute-Cluster-A"),
            "prod-vsphere-dc-east-compute-cluster-a"
        );
        assert_eq!(
            failure_domain_name("p", "My DC", "Cluster_01"),
            "p-my-dc-cluster-01"
        );

        let long_cluster = "Compute-Cluster-With-A-Really-Long-Enterprise-Name-Number";
        let a = failure_domain_name("prod-vsphere", "DC-East", &format!("{long_cluster}-1"));
        let b = failure_domain_name("prod-vsphere", "DC-East", &format!("{long_cluster}-2"));
        for name in [&a, &b] {
            assert!(
                name.len() <= 63 && validate::is_dns1123_label(name),
                "{name}"
            );
            assert!(
                name.starts_with("prod-vsphere-dc-east-compute-cluster-with"),
                "{name}"
            );
        }
        assert_ne!(a, b, "long names that differ after the cut stay distinct");
        assert_eq!(
            a,
            failure_domain_name("prod-vsphere", "DC-East", &format!("{long_cluster}-1")),
            "stable"
        );
    }

    fn inventory() -> Inventory {
        use crate::vsphere::{Cluster, Datacenter};
        Inventory {
            datacenters: vec![
                Datacenter {
                    name: "DC-East".into(),
                    clusters: vec![
                        Cluster {
                            name: "Compute-Cluster-A".into(),
                            datastores: vec!["ds-fast-01".into()],
                            ..Default::default()
                        },
                        Cluster {
                            name: "B".into(),
                            datastores: vec!["ds-slow".into()],
                            ..Default::default()
                        },
                    ],
                    portgroups: vec!["vmnet-prod".into()],
                },
                Datacenter {
                    name: "DC-West".into(),
                    clusters: vec![Cluster {
                        name: "C".into(),
                        datastores: vec!["ds-fast-01".into()],
                        ..Default::default()
                    }],
                    portgroups: vec![],
                },
            ],
        }
    }

    #[test]
    fn failure_domains_list_what_each_cluster_really_offers() {
        let mut p = fixtures::provider("prod-vsphere", json!({}), fixtures::guide_capabilities());
        p.spec.failure_domain_name_overrides =
            serde_json::from_value(json!([{"datacenter": "DC-East", "cluster": "Compute-Cluster-A", "name": "cluster-01"}])).unwrap();
        let fds = failure_domains(&p, &inventory()).unwrap();
        let names: Vec<&str> = fds.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "cluster-01",
                "prod-vsphere-dc-east-b",
                "prod-vsphere-dc-west-c"
            ]
        );
        let a = &fds[0];
        assert_eq!(a.labels.get("name").map(String::as_str), Some("cluster-01"));
        assert_eq!(
            a.labels.get("cluster").map(String::as_str),
            Some("Compute-Cluster-A")
        );
        assert_eq!(
            a.labels.get("datacenter").map(String::as_str),
            Some("DC-East")
        );
        assert_eq!(
            (a.storage_classes.as_slice(), a.network_classes.as_slice()),
            (&["gold".to_string()][..], &["prod".to_string()][..])
        );
        assert!(
            fds[1].storage_classes.is_empty(),
            "ds-fast-01 not mounted on B"
        );
        assert!(
            fds[2].network_classes.is_empty(),
            "no vmnet-prod in DC-West"
        );
        assert_eq!(a.features, ["hotAddCPU", "hotAddMemory", "efiSecureBoot"]);
    }

    #[test]
    fn standalone_hosts_and_datastore_clusters_make_failure_domains_with_their_placement() {
        use crate::vsphere::{Cluster, Datacenter};
        let mut p = fixtures::provider(
            "vc",
            json!({}),
            json!({"storageClasses": [
                {"name": "gold", "target": {"datastore": "ds-a"}},
                {"name": "pooled", "target": {"datastoreCluster": "pod-1"}},
            ]}),
        );
        p.spec.failure_domain_name_overrides = serde_json::from_value(
            json!([{"datacenter": "DC", "cluster": "esxi-01", "name": "edge"}]),
        )
        .unwrap();
        p.spec.placement = serde_json::from_value(json!({
            "resourcePool": "team-a",
            "folder": "apps",
            "failureDomains": [{"name": "edge", "resourcePool": "edge-pool"}],
        }))
        .unwrap();
        let inventory = Inventory {
            datacenters: vec![Datacenter {
                name: "DC".into(),
                clusters: vec![
                    Cluster {
                        name: "C1".into(),
                        datastores: vec!["ds-a".into()],
                        ..Default::default()
                    },
                    Cluster {
                        name: "esxi-01".into(),
                        datastores: vec!["ds-b".into()],
                        datastore_clusters: vec!["pod-1".into()],
                        standalone: true,
                    },
                ],
                portgroups: vec![],
            }],
        };
        let fds = failure_domains(&p, &inventory).unwrap();
        type Seen<'a> = (
            &'a str,
            bool,
            &'a [String],
            Option<&'a str>,
            Option<&'a str>,
        );
        let seen: Vec<Seen> = fds
            .iter()
            .map(|f| {
                (
                    f.name.as_str(),
                    f.standalone_host,
                    f.storage_classes.as_slice(),
                    f.resource_pool.as_deref(),
                    f.folder.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "edge",
                    true,
                    &["pooled".to_string()][..],
                    Some("edge-pool"),
                    Some("apps")
                ),
                (
                    "vc-dc-c1",
                    false,
                    &["gold".to_string()][..],
                    Some("team-a"),
                    Some("apps")
                ),
            ]
        );
        assert_eq!(fds[0].labels["cluster"], "esxi-01", "labels as a cluster's");
    }

    #[test]
    fn duplicate_names_are_an_error_naming_both() {
        let mut p = fixtures::provider("prod-vsphere", json!({}), json!({}));
        p.spec.failure_domain_name_overrides = serde_json::from_value(json!([
            {"datacenter": "DC-East", "cluster": "B", "name": "zone"},
            {"datacenter": "DC-West", "cluster": "C", "name": "zone"},
        ]))
        .unwrap();
        let e = failure_domains(&p, &inventory()).unwrap_err();
        assert_eq!(e, "failure domain name \"zone\" is used by both datacenter \"DC-East\" cluster \"B\" and datacenter \"DC-West\" cluster \"C\"");
    }
}
