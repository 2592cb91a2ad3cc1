//! Address allocation for banlieue's built-in IP pool, pure: the pool's
//! addresses (CIDRs, ranges, single addresses) less its exclusions, and the
//! address a claim gets given those already taken. The allocator that binds
//! Cluster API `IPAddressClaim`s records the result; this part decides it,
//! the same way in a cluster and in `check`.
//!
//! Rules, as Cluster API's in-cluster IPAM provider has them: a CIDR entry
//! gives its hosts (not its network address, nor an IPv4 broadcast address
//! when the prefix is shorter than 31); the gateway is never handed out;
//! the lowest free address is taken, so a re-run decides the same.

use std::collections::BTreeSet;
use std::net::IpAddr;

/// What a pool is made of, as its spec writes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolSpec {
    /// `10.0.0.0/24`, `10.0.0.10-10.0.0.50`, `10.0.0.7` (one family throughout).
    pub addresses: Vec<String>,
    /// The prefix length the guest gets with its address.
    pub prefix: u8,
    pub gateway: Option<String>,
    /// Never handed out: same forms as `addresses`.
    pub excluded_addresses: Vec<String>,
}

/// A pool's addresses, parsed: inclusive ranges of one family, as numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    v6: bool,
    ranges: Vec<(u128, u128)>,
    excluded: Vec<(u128, u128)>,
    pub prefix: u8,
    pub gateway: Option<IpAddr>,
}

/// Why a pool cannot give a claim an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolError {
    /// The spec does not parse or is inconsistent (the message says where).
    Invalid(String),
    /// Every address is taken or excluded.
    Exhausted { size: u128 },
}

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolError::Invalid(message) => f.write_str(message),
            PoolError::Exhausted { size } => {
                write!(f, "all {size} address(es) of the pool are in use")
            }
        }
    }
}

fn number(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn address(v6: bool, n: u128) -> IpAddr {
    if v6 {
        IpAddr::V6(n.into())
    } else {
        // Within u32: every IPv4 range is parsed from IPv4 addresses.
        IpAddr::V4(std::net::Ipv4Addr::from(n as u32))
    }
}

fn parse_ip(text: &str, field: &str) -> Result<IpAddr, PoolError> {
    text.trim()
        .parse::<IpAddr>()
        .map_err(|_| PoolError::Invalid(format!("{field}: {text:?} is not an IP address")))
}

/// One entry as an inclusive range: a CIDR's hosts, a range, one address.
fn parse_entry(text: &str, field: &str) -> Result<(bool, u128, u128), PoolError> {
    if let Some((base, bits)) = text.split_once('/') {
        let ip = parse_ip(base, field)?;
        let width: u32 = if ip.is_ipv6() { 128 } else { 32 };
        let bits: u32 = bits
            .trim()
            .parse()
            .ok()
            .filter(|b| *b <= width)
            .ok_or_else(|| {
                PoolError::Invalid(format!(
                    "{field}: {text:?} has no prefix length of 0 to {width}"
                ))
            })?;
        let host_bits = width - bits;
        let mask = if host_bits == 0 {
            0
        } else {
            (1u128 << host_bits) - 1
        };
        let network = number(ip) & !mask;
        let last = network | mask;
        // A network's own address, and an IPv4 network's broadcast
        // address, are no host's (a /31 or /32, or IPv6, has no such).
        let (first, last) = match (ip.is_ipv6(), host_bits) {
            (_, 0) => (network, last),
            (false, 1) => (network, last),
            (false, _) => (network + 1, last - 1),
            (true, _) => (network + 1, last),
        };
        return Ok((ip.is_ipv6(), first, last));
    }
    if let Some((from, to)) = text.split_once('-') {
        let (from, to) = (parse_ip(from, field)?, parse_ip(to, field)?);
        if from.is_ipv6() != to.is_ipv6() || number(from) > number(to) {
            return Err(PoolError::Invalid(format!(
                "{field}: {text:?} is not a range from a lower to a higher address of one family"
            )));
        }
        return Ok((from.is_ipv6(), number(from), number(to)));
    }
    let ip = parse_ip(text, field)?;
    Ok((ip.is_ipv6(), number(ip), number(ip)))
}

impl Pool {
    /// The pool of `spec`, or what is wrong with it.
    pub fn parse(spec: &PoolSpec) -> Result<Pool, PoolError> {
        if spec.addresses.is_empty() {
            return Err(PoolError::Invalid("addresses: none given".into()));
        }
        let mut family = None;
        let mut same_family = |v6: bool, field: &str, text: &str| match family {
            Some(f) if f != v6 => Err(PoolError::Invalid(format!(
                "{field}: {text:?} is not of the pool's address family"
            ))),
            _ => {
                family = Some(v6);
                Ok(())
            }
        };
        let mut entries = |list: &[String], name: &str| {
            let mut ranges = Vec::with_capacity(list.len());
            for (i, text) in list.iter().enumerate() {
                let field = format!("{name}[{i}]");
                let (v6, first, last) = parse_entry(text, &field)?;
                same_family(v6, &field, text)?;
                ranges.push((first, last));
            }
            Ok::<_, PoolError>(ranges)
        };
        let mut ranges = entries(&spec.addresses, "addresses")?;
        let mut excluded = entries(&spec.excluded_addresses, "excludedAddresses")?;
        let gateway = match &spec.gateway {
            Some(text) => {
                let ip = parse_ip(text, "gateway")?;
                same_family(ip.is_ipv6(), "gateway", text)?;
                excluded.push((number(ip), number(ip)));
                Some(ip)
            }
            None => None,
        };
        let v6 = family.unwrap_or(false);
        let width = if v6 { 128 } else { 32 };
        if spec.prefix == 0 || u32::from(spec.prefix) > width {
            return Err(PoolError::Invalid(format!(
                "prefix: {} is not a prefix length of 1 to {width}",
                spec.prefix
            )));
        }
        ranges.sort_unstable();
        excluded.sort_unstable();
        Ok(Pool {
            v6,
            ranges,
            excluded,
            prefix: spec.prefix,
            gateway,
        })
    }

    /// How many addresses the pool can hand out (overlaps and exclusions aside).
    pub fn size(&self) -> u128 {
        self.ranges
            .iter()
            .map(|(first, last)| last - first + 1)
            .fold(0u128, u128::saturating_add)
    }

    /// Is `ip` one the pool hands out?
    pub fn contains(&self, ip: IpAddr) -> bool {
        let n = number(ip);
        ip.is_ipv6() == self.v6
            && self.ranges.iter().any(|(a, b)| (*a..=*b).contains(&n))
            && !self.excluded.iter().any(|(a, b)| (*a..=*b).contains(&n))
    }

    /// The lowest address of the pool that is neither excluded nor in
    /// `taken`; the same inputs always give the same address.
    pub fn allocate(&self, taken: &BTreeSet<IpAddr>) -> Result<IpAddr, PoolError> {
        let taken: BTreeSet<u128> = taken
            .iter()
            .filter(|ip| ip.is_ipv6() == self.v6)
            .map(|ip| number(*ip))
            .collect();
        for (first, last) in &self.ranges {
            let mut candidate = *first;
            'range: while candidate <= *last {
                // Past an exclusion that holds the candidate in one step.
                for (a, b) in &self.excluded {
                    if (*a..=*b).contains(&candidate) {
                        match b.checked_add(1) {
                            Some(next) => candidate = next,
                            None => break 'range,
                        }
                        continue 'range;
                    }
                }
                if !taken.contains(&candidate) {
                    return Ok(address(self.v6, candidate));
                }
                match candidate.checked_add(1) {
                    Some(next) => candidate = next,
                    None => break,
                }
            }
        }
        Err(PoolError::Exhausted { size: self.size() })
    }
}

/// A pool's allocations as its status records them: address -> the claim
/// (`namespace/name`) that holds it. The allocator writes them under the
/// pool's resourceVersion, so two allocators racing cannot both write.
pub type Allocations = std::collections::BTreeMap<IpAddr, String>;

/// The address `claim` holds in `pool`, and the allocations to write when
/// they change: its own address again when it has one (a re-run, or a crash
/// after the allocation was written, binds the same), else the lowest free
/// one. Allocations of claims not in `live` are released first, and an
/// allocation outside the pool's current addresses is not handed out again.
pub fn bind(
    pool: &Pool,
    allocations: &Allocations,
    claim: &str,
    live: &BTreeSet<String>,
) -> Result<(IpAddr, Option<Allocations>), PoolError> {
    let mut kept: Allocations = allocations
        .iter()
        .filter(|(_, holder)| live.contains(*holder) || holder.as_str() == claim)
        .map(|(ip, holder)| (*ip, holder.clone()))
        .collect();
    if let Some(ip) = kept
        .iter()
        .find(|(ip, holder)| holder.as_str() == claim && pool.contains(**ip))
        .map(|(ip, _)| *ip)
    {
        let changed = (kept != *allocations).then_some(kept);
        return Ok((ip, changed));
    }
    // A claim's address that left the pool is given up for a new one.
    kept.retain(|ip, holder| holder.as_str() != claim || pool.contains(*ip));
    let taken: BTreeSet<IpAddr> = kept.keys().copied().collect();
    let ip = pool.allocate(&taken)?;
    kept.insert(ip, claim.to_string());
    Ok((ip, Some(kept)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(addresses: &[&str], prefix: u8, gateway: Option<&str>, excluded: &[&str]) -> Pool {
        Pool::parse(&PoolSpec {
            addresses: addresses
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
            prefix,
            gateway: gateway.map(String::from),
            excluded_addresses: excluded
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
        })
        .expect("a valid pool")
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    fn taken(list: &[&str]) -> BTreeSet<IpAddr> {
        list.iter().map(|s| ip(s)).collect()
    }

    #[test]
    fn a_cidr_gives_its_hosts_lowest_first_never_the_gateway() {
        let p = pool(&["10.0.0.0/29"], 24, Some("10.0.0.1"), &[]);
        assert_eq!(p.size(), 6, "network and broadcast are not hosts");
        let mut used = BTreeSet::new();
        let mut got = Vec::new();
        while let Ok(a) = p.allocate(&used) {
            got.push(a.to_string());
            used.insert(a);
        }
        assert_eq!(
            got,
            ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]
        );
        assert_eq!(
            p.allocate(&used),
            Err(PoolError::Exhausted { size: 6 }),
            "exhausted, not a wrap-around"
        );
        assert_eq!(
            p.allocate(&used).unwrap_err().to_string(),
            "all 6 address(es) of the pool are in use"
        );
    }

    #[test]
    fn ranges_single_addresses_and_exclusions() {
        let p = pool(
            &["10.0.0.20-10.0.0.25", "10.0.0.9"],
            24,
            None,
            &["10.0.0.9", "10.0.0.20-10.0.0.22"],
        );
        assert_eq!(p.allocate(&taken(&[])).unwrap(), ip("10.0.0.23"));
        assert_eq!(p.allocate(&taken(&["10.0.0.23"])).unwrap(), ip("10.0.0.24"));
        assert!(p.contains(ip("10.0.0.25")));
        assert!(!p.contains(ip("10.0.0.21")), "excluded");
        assert!(!p.contains(ip("10.0.0.26")), "outside");
        assert_eq!(
            p.allocate(&taken(&["10.0.0.23", "10.0.0.24", "10.0.0.25"])),
            Err(PoolError::Exhausted { size: 7 })
        );
    }

    #[test]
    fn the_same_inputs_give_the_same_address_and_a_freed_one_comes_back() {
        let p = pool(&["192.168.1.10-192.168.1.12"], 24, None, &[]);
        let used = taken(&["192.168.1.10", "192.168.1.12"]);
        assert_eq!(p.allocate(&used), p.allocate(&used));
        assert_eq!(p.allocate(&used).unwrap(), ip("192.168.1.11"));
        assert_eq!(
            p.allocate(&taken(&["192.168.1.11", "192.168.1.12"]))
                .unwrap(),
            ip("192.168.1.10"),
            "released, handed out again"
        );
    }

    #[test]
    fn small_prefixes_and_ipv6() {
        assert_eq!(pool(&["10.0.0.4/31"], 31, None, &[]).size(), 2);
        assert_eq!(pool(&["10.0.0.4/32"], 32, None, &[]).size(), 1);
        let p = pool(&["fd00::/126"], 64, Some("fd00::1"), &[]);
        assert_eq!(
            p.size(),
            3,
            "no broadcast in IPv6; the network address is skipped"
        );
        assert_eq!(p.allocate(&taken(&[])).unwrap(), ip("fd00::2"));
        assert_eq!(
            p.allocate(&taken(&["fd00::2", "10.0.0.2"])).unwrap(),
            ip("fd00::3")
        );
    }

    #[test]
    fn a_wrong_spec_says_which_field() {
        let invalid =
            |addresses: &[&str], prefix: u8, gateway: Option<&str>| match Pool::parse(&PoolSpec {
                addresses: addresses
                    .iter()
                    .map(std::string::ToString::to_string)
                    .collect(),
                prefix,
                gateway: gateway.map(String::from),
                excluded_addresses: vec![],
            }) {
                Err(PoolError::Invalid(message)) => message,
                other => panic!("not refused: {other:?}"),
            };
        assert_eq!(invalid(&[], 24, None), "addresses: none given");
        assert_eq!(
            invalid(&["10.0.0.300"], 24, None),
            "addresses[0]: \"10.0.0.300\" is not an IP address"
        );
        assert_eq!(
            invalid(&["10.0.0.9-10.0.0.1"], 24, None),
            "addresses[0]: \"10.0.0.9-10.0.0.1\" is not a range from a lower to a higher address of one family"
        );
        assert_eq!(
            invalid(&["10.0.0.0/33"], 24, None),
            "addresses[0]: \"10.0.0.0/33\" has no prefix length of 0 to 32"
        );
        assert_eq!(
            invalid(&["10.0.0.0/24", "fd00::5"], 24, None),
            "addresses[1]: \"fd00::5\" is not of the pool's address family"
        );
        assert_eq!(
            invalid(&["10.0.0.0/24"], 0, None),
            "prefix: 0 is not a prefix length of 1 to 32"
        );
        assert_eq!(
            invalid(&["10.0.0.0/24"], 24, Some("fd00::1")),
            "gateway: \"fd00::1\" is not of the pool's address family"
        );
    }

    #[test]
    fn a_large_pool_skips_an_excluded_block_and_the_taken_addresses() {
        let p = pool(
            &["10.0.0.0/8"],
            8,
            Some("10.0.0.1"),
            &["10.0.0.0-10.0.255.255"],
        );
        let used: BTreeSet<IpAddr> = (0..1000u32)
            .map(|i| {
                IpAddr::V4(std::net::Ipv4Addr::from(
                    u32::from(std::net::Ipv4Addr::new(10, 1, 0, 0)) + i,
                ))
            })
            .collect();
        assert_eq!(p.allocate(&used).unwrap(), ip("10.1.3.232"));
    }
    fn live(claims: &[&str]) -> BTreeSet<String> {
        claims
            .iter()
            .map(std::string::ToString::to_string)
            .collect()
    }

    #[test]
    fn a_claim_bound_again_gets_its_own_address_and_nothing_is_written() {
        let p = pool(&["10.0.0.10-10.0.0.12"], 24, None, &[]);
        let (a, written) = bind(
            &p,
            &Allocations::new(),
            "ns/web-1-eth0",
            &live(&["ns/web-1-eth0"]),
        )
        .unwrap();
        assert_eq!(a, ip("10.0.0.10"));
        let allocations = written.expect("the allocation to write");
        // A re-run, or a crash after the write: the same address, no write.
        let again = bind(&p, &allocations, "ns/web-1-eth0", &live(&["ns/web-1-eth0"])).unwrap();
        assert_eq!(again, (ip("10.0.0.10"), None));
        // Another claim gets another address.
        let (b, written) = bind(
            &p,
            &allocations,
            "ns/web-2-eth0",
            &live(&["ns/web-1-eth0", "ns/web-2-eth0"]),
        )
        .unwrap();
        assert_eq!(b, ip("10.0.0.11"));
        assert_eq!(written.expect("written").len(), 2);
    }

    #[test]
    fn two_binds_from_the_same_allocations_pick_the_same_address_so_one_write_must_lose() {
        // Both racers read the same status; the precondition on the pool's
        // resourceVersion lets one write, the other re-reads and binds anew.
        let p = pool(&["10.0.0.10-10.0.0.12"], 24, None, &[]);
        let both = live(&["ns/a", "ns/b"]);
        let (a, after_a) = bind(&p, &Allocations::new(), "ns/a", &both).unwrap();
        let (b, _) = bind(&p, &Allocations::new(), "ns/b", &both).unwrap();
        assert_eq!(a, b, "the same pick: the write decides");
        let (b, _) = bind(&p, &after_a.unwrap(), "ns/b", &both).unwrap();
        assert_ne!(a, b, "after re-reading, another address");
    }

    #[test]
    fn released_claims_free_their_addresses_and_exhaustion_is_an_error() {
        let p = pool(&["10.0.0.10-10.0.0.11"], 24, None, &[]);
        let allocations = Allocations::from([
            (ip("10.0.0.10"), "ns/gone".to_string()),
            (ip("10.0.0.11"), "ns/kept".to_string()),
        ]);
        assert_eq!(
            bind(
                &p,
                &allocations,
                "ns/new",
                &live(&["ns/gone", "ns/kept", "ns/new"])
            ),
            Err(PoolError::Exhausted { size: 2 })
        );
        let (a, written) = bind(&p, &allocations, "ns/new", &live(&["ns/kept", "ns/new"])).unwrap();
        assert_eq!(a, ip("10.0.0.10"), "the deleted claim's address");
        assert_eq!(
            written,
            Some(Allocations::from([
                (ip("10.0.0.10"), "ns/new".to_string()),
                (ip("10.0.0.11"), "ns/kept".to_string()),
            ]))
        );
    }

    #[test]
    fn an_address_that_left_the_pool_is_replaced() {
        let p = pool(&["10.0.0.20-10.0.0.21"], 24, None, &[]);
        let allocations = Allocations::from([(ip("10.0.0.5"), "ns/a".to_string())]);
        let (a, written) = bind(&p, &allocations, "ns/a", &live(&["ns/a"])).unwrap();
        assert_eq!(a, ip("10.0.0.20"));
        assert_eq!(
            written,
            Some(Allocations::from([(ip("10.0.0.20"), "ns/a".to_string())]))
        );
    }
}
