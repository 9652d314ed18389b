// Package config reads, defaults and validates the appliance configuration
// (xlb.toml plus rules_dir/*.toml, one forwarding rule per file, and
// services_dir/*.toml, one backend service per file;
// docs/design.md#configuration) and keeps the CLI state overlay
// (state_file).
//
// # Ownership and goroutines
//
// Load and LoadState are called by the daemon's control goroutine (start,
// reload, SIGHUP) and by `xlb validate`; nothing here runs on the packet
// path. A load of 32 rule files or more that keeps nothing (the first)
// reads and parses them on one goroutine per CPU, each file into its own
// findings, merged in file order before Load returns. A Loader's watch
// (watch.go) is read by its loads, never by a goroutine of its own. A
// *Config is immutable once Load returns it and may be shared (a Loader's
// next Config shares the *Rule of every file it kept). A
// *State belongs to the control goroutine: it changes it (Mark, Drain,
// Undrain, SetWeight, Reset), Saves it, and only then publishes the result
// of Apply, so an acknowledged CLI change survives a crash. Apply returns a
// fresh View and changes neither input.
//
// # Files
//
//	schema.go    the Config and Rule types (what Load returns), limits and defaults
//	load.go      Load: xlb.toml's keys, then every rule file (loader);
//	             Loader, a Load that parses again only the files that changed
//	stat.go      a rule file's identity, so a Loader need not read it again
//	watch.go     the Loader's inotify watch on rules_dir: which entries
//	             changed since the last load, so it need not stat them all
//	restart.go   pin_dir: where the XDP program's link and maps are pinned
//	rule.go      one rule file's keys: ports, health check, zonal affinity
//	groups.go    [[group]] and backends; checks of groups, families, zones
//	service.go   backend services: services_dir's files, the keys a rule
//	             takes from the service it names, checks between them
//	validate.go  checks across rule files (overlapping VIP, protocol, ports)
//	reader.go    typed getters over a decoded TOML table (every error at once)
//	lines.go     key path → line, for file:line: key: messages
//	issue.go     Issue, Warning, Error
//	enums.go     the typed values of the operator's strings (no runtime types)
//	state.go     State: the CLI overlay and its edits (Mark, Drain, …)
//	statefile.go the state file: Marshal, Save (atomic)
//	view.go      View: the overlay applied to a Config, with each value's source
//	bgp.go       [bgp] and [[bgp.peer]]: the BGP type, its reader and checks
//	bfd.go       [bgp.bfd]: the BFD timers of the peers with bfd = true
//	fleet.go     [fleet]: flow-state sharing's peers, port, key file, limits
//	sources.go   source_ranges (a rule's admitted clients) and unmatched_vip_traffic
//	appliance_state.go  the appliance drain in the overlay ([appliance] in state_file)
//	host.go      CheckHost: what a configuration needs from this machine
//	salvage.go   what reads from an xlb.toml that does not parse (ControlSocket)
//	overlay.go   LoadWithRules: Load with rule files from memory in place of
//	             rules_dir's (xlb k8s checks the files it would write)
//	stateloss.go StateFileError: a rejected state file and what removing it drops
//
// A new top-level section of xlb.toml gets its own file with its reader
// (as bgp.go), its type in schema.go or beside the reader, and its keys
// with their defaults and ranges in deploy/examples, which is the
// documented list of keys: TestExampleDocumentsEveryKey fails when a key
// the loader knows is missing there, and TestExamples loads it.
//
// # Errors and warnings
//
// Load reports every problem of every file at once in an *Error, each as
// "file:line: key: message" (rules.d/web.toml:14: failover.ratio: 1.5 is
// outside [0, 1]); file is relative to the directory of xlb.toml (absolute
// when outside it). A bad configuration is rejected whole: Load returns a
// Config only when there is no error. Warnings (same format) do not reject.
//
// Decisions where the design is silent:
//
//   - Defaults are Google Cloud's documented ones where it has them
//     (health checks every 5 s with a 5 s timeout and thresholds 2 and 2,
//     idle timeout 60 s, failover drain 10 minutes, immediate failback);
//     deploy/examples gives each key's default. A public hash_seed default
//     is accepted with a warning (clients that know the seed can aim flows
//     at one backend). L3_DEFAULT rules default to ports "ALL".
//   - Files are decoded into generic maps and walked by typed getters
//     rather than decoded into structs and checked with
//     MetaData.Undecoded: struct decoding stops at the first type error
//     (we report them all) and matches keys case-insensitively (VIP = …
//     would silently set vip); a key no getter asked for is reported as
//     unknown, with the closest known key as a hint.
//   - Line numbers: BurntSushi/toml v1.6.0 keeps key positions in
//     MetaData but does not export them (only ParseError has a Position,
//     used for syntax errors), and does not tell [[group]] elements apart,
//     so a small scanner (lines.go) maps key paths to lines. Paths index
//     arrays from 0: group[1].backends[0]. A key that is not written (a
//     missing required key, a default that does not fit) has no line.
//   - Enum strings are case-sensitive (upper case as in the seeds; roles
//     and the appliance modes lower case); a case mistake
//     gets a hint.
//   - health_check.type is required: a silent default would either probe
//     a port nobody listens on or hide failures.
//   - Ranges: ratios and capacity_scaler [0, 1]; draining timeout
//     0..3600 s; idle_timeout 1 s..24 h; failover_drain_timeout and
//     failback_delay 0..1 h; interval and timeout 1..300 s with timeout ≤
//     interval; thresholds 1..10; weights 0..1000 (as the weight header);
//     maglev_table_size prime, ≥ 100 × the backends of the largest rule
//     and ≤ 2^24 (unset: each rule's follows its backends, hash.TableSizeFor,
//     so a rule has at most 167772); max_entries 1024..2^30; ports 1..65535.
//   - Lenient where it is unambiguous: ports list elements may be TOML
//     integers (80) as well as strings ("80"); hash_seed may be a
//     non-negative integer as well as a "0x…" or decimal string.
//   - Ports of one rule must not overlap each other; two rules overlap when
//     they share the VIP and the protocol and their ports meet ("ALL" meets
//     every port), or are both L3_DEFAULT on one VIP. The later file (by
//     name) gets the error. An L3_DEFAULT rule may share its VIP with TCP and
//     UDP rules (docs/design.md#rules-and-vips): the specific rule takes its
//     packets, the L3_DEFAULT rule the rest (as Google Cloud orders
//     forwarding rules on one address); a UDP rule with a port list beside
//     one gets a warning, because the non-first fragments of its datagrams
//     carry no port and go to the L3_DEFAULT rule.
//   - failover_health_threshold (Cloud Service Mesh's failoverHealthThreshold,
//     seed 001), in [failover] or a [[group]], is rejected with the reason
//     rather than as an unknown key: failover.ratio is its rule-wide form (a
//     threshold of 70 % is ratio = 0.7), and CSM's per-group partial shift
//     would put primary and failover backends in one eligible set, where a
//     "switch between primary and failover backends" — what draining on
//     failover, failover_drain_timeout and the flush without draining are
//     defined on — no longer exists. Auto capacity drain covers the other
//     half of the CSM behaviour (a group too unhealthy to carry its share
//     is taken out, the rest of the rule absorbs it; taken-out groups count
//     against the ratio).
//   - Failover: a group with role failover needs a primary group; a
//     [failover] table with keys but no failover group is an error (its
//     settings would do nothing); at most 50 groups per role.
//   - A rule needs at least one backend; groups may be empty (staging). A
//     backend address appears once per rule (its role is its group's).
//     Addresses must not be unspecified, multicast, the broadcast address,
//     zoned or loopback, nor a backend equal to the VIP; CheckHost also
//     refuses a VIP that is an address of the interface or the broadcast
//     address of one of its prefixes (xlb would take the appliance's own
//     ssh, BGP and health-check traffic). IPv4-mapped IPv6 addresses
//     are taken as IPv4.
//   - source_ranges (sources.go, docs/design.md#source-ranges): prefixes
//     only (an address is refused with the /32 or /128 to write), no host
//     bits (the prefix it lies in is named), no IPv4-mapped IPv6 prefix
//     (the IPv4 prefix is named), at most 65536; both families may mix,
//     since one list serves an IPv4 and an IPv6 rule as Kubernetes'
//     loadBalancerSourceRanges does, but a list with no prefix of the
//     VIP's family admits nobody and is refused; a duplicate warns. The
//     reader takes a table, so a backend service file can read the key
//     the same way. unmatched_vip_traffic is drop (default) or pass.
//   - Families: IPIP, GUE and GRE carry IPv4 in IPv4, IPv6 in IPv6 and
//     IPv4 in IPv6 (what pkg/encap builds); nothing carries IPv6 in IPv4,
//     so an IPv6 VIP needs IPv6 backends. DIRECT rewrites MACs only, so its
//     backends must be of the VIP's family.
//   - Static weights ({address, weight}) are allowed only with
//     WEIGHTED_MAGLEV and replace the health-check weight of that
//     backend; WEIGHTED_MAGLEV still needs an HTTP or HTTPS check for the
//     other backends (and for health).
//   - Fragment warnings: a UDP or L3_DEFAULT rule without
//     fragment_tracking gets one warning per missing part of the safe
//     recipe (ports "ALL"; CLIENT_IP or CLIENT_IP_PROTO; PER_SESSION).
//   - Zonal affinity: an enabled mode needs groups with a zone (error);
//     no client prefixes, or prefixes for a zone no group has, are
//     warnings; prefixes must have no host bits and map to one zone.
//   - Load checks the files only; CheckHost checks the machine: the
//     interface exists, listed queues are among its active receive queues,
//     control_socket_group names a group. xlb validate runs both (unless
//     --offline) and the state file too, so that systemd's ExecStartPre
//     fails where xlb run would; the daemon runs CheckHost at start and on
//     reload.
//   - A syntax error in xlb.toml is reported alone for that file: the rule
//     files are still read, from the rules_dir its line names if that line
//     reads, and what depends on its other keys (an unreadable rules_dir,
//     the Maglev size) is not reported. The CLI finds control_socket the
//     same way (ControlSocket) and only warns, so xlb reload and status
//     reach the daemon during the incident.
//   - An integer that does not fit in 64 bits stops the TOML parser: it is
//     reported with its key, replaced by 0 and the file parsed again, so
//     its other errors are found; getter errors on that line are dropped.
//   - maglev_table_size gets one message: "not prime and smaller than …,
//     use a prime ≥ N, e.g. P" when both, never two suggestions.
//   - A state file that does not load is a StateFileError: its file:line:
//     errors and, read line by line from what still reads, the overrides
//     and appliance drain that removing it would drop.
//   - Relative paths in xlb.toml are relative to its directory.
//     state_file must not be a *.toml in rules_dir (it would be read as a
//     rule) nor xlb.toml itself. Hidden files and non-.toml files in
//     rules_dir are ignored (editor leftovers); an empty rules_dir is a
//     warning.
//   - [bgp]: absent means BGP == nil and nothing is announced. Defaults
//     hold_time 3s (keepalive a third, at least 1 s), withdraw_delay 2s,
//     med 0, port 179 (the fleet guide's example). Hold times are whole
//     seconds, 3..3600 (0, "no keepalives", is not offered: a dead
//     appliance would never be noticed). AS numbers are integers (asplain)
//     1..4294967294 without AS_TRANS 23456 and the reserved 65535.
//     communities holds both kinds: "A:V" is a standard community, "G:L1:L2"
//     a large one. Peer addresses must not be loopback (a router is never
//     on the appliance) and appear once; ebgp_multihop on an iBGP session
//     is an error. IPv4 VIPs go to IPv4 peers and IPv6 VIPs to IPv6 peers
//     (the next hop is the session's own address), so a family with VIPs
//     but no peer is a warning.
//   - Backend services (service.go, docs/design.md#backend-services): a
//     service file holds every key of a rule file but vip, protocol,
//     ports and backend_service (those are refused there, by name); a
//     rule names one with backend_service and then writes none of the
//     service's keys (each one it writes is refused at its line: two
//     places for one value could disagree). Load copies the service's
//     keys into each rule naming it, so a Rule reads the same whichever
//     way it was written and the daemon needs nothing else to forward;
//     Rule.Service names the service, ServiceName is the rule's own name
//     for a rule with its own backends (its own service, not listed in
//     Config.Services). The name defaults to the file name; two services
//     of one name, or a service named like a rule with its own backends,
//     are refused. An unknown name is refused with the closest one; a
//     service no rule names warns. services_dir defaults to "services.d"
//     and may be absent. Families: a service whose rules have both
//     families and whose backends have both serves each family from its
//     backends of that family (a host listed with an address of each);
//     otherwise every rule gets every backend and the family checks name
//     the rule whose VIP a backend cannot carry. The service's
//     source_ranges are the default of its rules; a rule that writes the
//     key (even []) keeps its own. Fragment warnings name the file that
//     holds the key to change.
//
// # State overlay
//
// The CLI marks a backend's role, drains or undrains it, or overrides its
// weight; role is per group in the rule files, so the overlay holds
// per-backend overrides, keyed by (rule, backend address) — the rule
// being the backend service for a rule that names one (OverrideKey), so
// that every rule of the service follows one override. state_file is
// TOML (version = 1, [[override]] rule, backend, role, drained,
// drained_at, weight), written by Save atomically: a temporary file in the
// same directory, fsync, rename over the old file, fsync of the directory;
// temporaries left by a crash are removed by the next Save. The rule files
// are never written. Apply lays the overlay over a Config and gives each
// value its source ("config" or "cli").
//
// Decisions: Mark to the group's own role removes the role override, and
// Mark refuses to leave a rule with failover backends but no primary.
// SetWeight needs WEIGHTED_MAGLEV. Overrides that match no rule or backend
// (a reload removed them) are kept in the file and reported by Apply as
// View.Stale, so a backend that comes back gets its drain back (the
// reload that brings it back says so: daemon's revivedOverrides); Reset
// removes them. A state file that does not parse stops the daemon (with
// file:line:key errors) rather than silently dropping drains.
package config
