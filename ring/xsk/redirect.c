//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// xlb_redirect: send packets addressed to a VIP to the AF_XDP socket of the
// receive queue; pass everything else (ARP, ND, SSH, BGP, probes) to the
// kernel. A VIP packet whose queue has no socket is dropped (and counted)
// on the queues xlb serves, so a restart costs retransmits, not resets.
// Map layouts and key encoding: doc.go.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MAX_QUEUES 256
#define MAX_VIPS 65536
#define MAX_EXT_HDRS 8

// Network-byte-order constants, so no per-packet byte swaps.
#define BE_ETH_P_IP bpf_htons(ETH_P_IP)
#define BE_ETH_P_IPV6 bpf_htons(ETH_P_IPV6)
#define BE_ETH_P_8021Q bpf_htons(ETH_P_8021Q)
#define BE_ETH_P_8021AD bpf_htons(ETH_P_8021AD)
#define BE_IP_MF bpf_htons(0x2000)
#define BE_IP_OFFSET bpf_htons(0x1fff)
#define BE_IP6_OFFSET bpf_htons(0xfff8)

#define PROTO_ICMPV6 58
#define NEXTHDR_HOP 0
#define NEXTHDR_ROUTING 43
#define NEXTHDR_FRAGMENT 44
#define NEXTHDR_AUTH 51
#define NEXTHDR_DEST 60

// vip_key: one forwarding-rule match. addr is IPv6, or IPv4 mapped
// (::ffff:a.b.c.d); port is the destination port in network byte order, 0
// for "all ports"; proto is the IP protocol, 0 for "all protocols"
// (L3_DEFAULT). 20 bytes, no implicit padding.
struct vip_key {
	__u8 addr[16];
	__be16 port;
	__u8 proto;
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_VIPS);
	__type(key, struct vip_key);
	__type(value, __u32); // rule flags, reserved; any value means "match"
} xlb_vips SEC(".maps");

// xlb_vip_addrs: every address that has at least one entry in xlb_vips,
// with the number of such entries. Used for ICMP: echo requests to a VIP
// and errors quoting a packet from a VIP.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_VIPS);
	__type(key, __u8[16]);
	__type(value, __u32);
} xlb_vip_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xlb_xsks SEC(".maps");

// xlb_ctl: per queue, what a VIP packet gets when the queue's XSKMAP slot
// is empty. NOSOCK_PASS (0, the initial value) for queues xlb does not
// serve; NOSOCK_DROP for served queues, whose socket is only missing
// between two owners (a restart, a crash) and whose flows the kernel would
// answer with resets or forward.
#define NOSOCK_PASS 0
#define NOSOCK_DROP 1

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xlb_ctl SEC(".maps");

// nosock_counts: VIP packets of one queue that found no socket, per CPU.
struct nosock_counts {
	__u64 dropped;
	__u64 passed;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct nosock_counts);
} xlb_nosock SEC(".maps");

static __always_inline void map_v4(__u8 *dst, __be32 addr)
{
	__builtin_memset(dst, 0, 10);
	dst[10] = 0xff;
	dst[11] = 0xff;
	__builtin_memcpy(dst + 12, &addr, 4);
}

// vip_match looks the rule up from most to least specific: (addr, proto,
// port), (addr, proto, all ports), (addr, all protocols). has_port is 0
// for non-first fragments and protocols without ports.
static __always_inline int vip_match(struct vip_key *k, __u8 proto, __be16 port, int has_port)
{
	k->pad = 0;
	k->proto = proto;
	if (has_port && port) {
		k->port = port;
		if (bpf_map_lookup_elem(&xlb_vips, k))
			return 1;
	}
	k->port = 0;
	if (bpf_map_lookup_elem(&xlb_vips, k))
		return 1;
	k->proto = 0;
	return bpf_map_lookup_elem(&xlb_vips, k) != 0;
}

static __always_inline int is_vip_addr(const __u8 *addr)
{
	__u8 a[16];
	__builtin_memcpy(a, addr, 16);
	return bpf_map_lookup_elem(&xlb_vip_addrs, a) != 0;
}

// icmp4_redirect: echo request to a VIP, or an error whose quoted IPv4
// header has a VIP as its source.
static __always_inline int icmp4_redirect(void *l4, void *data_end, __be32 dst)
{
	__u8 *icmp = l4;
	__u8 a[16];
	if ((void *)(icmp + 8) > data_end)
		return 0;
	switch (icmp[0]) {
	case 8: // echo request
		map_v4(a, dst);
		return is_vip_addr(a);
	case 3: // destination unreachable (incl. fragmentation needed)
	case 11: // time exceeded
	case 12: { // parameter problem
		struct iphdr *in = (void *)(icmp + 8);
		if ((void *)(in + 1) > data_end)
			return 0;
		map_v4(a, in->saddr);
		return is_vip_addr(a);
	}
	}
	return 0;
}

// icmp6_redirect: echo request to a VIP, or an error whose quoted IPv6
// header has a VIP as its source.
static __always_inline int icmp6_redirect(void *l4, void *data_end, const __u8 *dst)
{
	__u8 *icmp = l4;
	if ((void *)(icmp + 8) > data_end)
		return 0;
	switch (icmp[0]) {
	case 128: // echo request
		return is_vip_addr(dst);
	case 1: // destination unreachable
	case 2: // packet too big
	case 3: // time exceeded
	case 4: { // parameter problem
		struct ipv6hdr *in = (void *)(icmp + 8);
		if ((void *)(in + 1) > data_end)
			return 0;
		return is_vip_addr((const __u8 *)&in->saddr);
	}
	}
	return 0;
}

static __always_inline int ports_dst(void *l4, void *data_end, __be16 *port)
{
	__be16 *p = l4;
	if ((void *)(p + 2) > data_end)
		return 0;
	*port = p[1];
	return 1;
}

static __always_inline int match_v4(struct iphdr *ip, void *data_end)
{
	struct vip_key k;
	__be16 port = 0;
	int has_port = 0;
	void *l4;

	if ((void *)(ip + 1) > data_end || ip->ihl < 5)
		return 0;
	l4 = (void *)ip + ip->ihl * 4;
	// A non-first fragment carries no ports: all-ports rules only.
	// A first fragment carries the transport header: matched like a whole
	// packet, so it meets the same rule as an unfragmented packet would.
	int first = (ip->frag_off & BE_IP_OFFSET) == 0;
	if (first && ip->protocol == IPPROTO_ICMP && icmp4_redirect(l4, data_end, ip->daddr))
		return 1;
	if (first && (ip->protocol == IPPROTO_TCP || ip->protocol == IPPROTO_UDP ||
		      ip->protocol == IPPROTO_SCTP))
		has_port = ports_dst(l4, data_end, &port);
	map_v4(k.addr, ip->daddr);
	return vip_match(&k, ip->protocol, port, has_port);
}

static __always_inline int match_v6(struct ipv6hdr *ip6, void *data_end)
{
	struct vip_key k;
	__be16 port = 0;
	int has_port = 0, first = 1;
	__u8 nexthdr;
	void *l4;

	if ((void *)(ip6 + 1) > data_end)
		return 0;
	nexthdr = ip6->nexthdr;
	l4 = ip6 + 1;
	// Walk at most MAX_EXT_HDRS extension headers to the transport header
	// or a fragment header; a longer chain is treated as unknown protocol
	// (all-protocols rules only).
#pragma unroll
	for (int i = 0; i < MAX_EXT_HDRS; i++) {
		__u8 *h = l4;
		if (nexthdr == NEXTHDR_HOP || nexthdr == NEXTHDR_ROUTING || nexthdr == NEXTHDR_DEST) {
			if ((void *)(h + 8) > data_end)
				return 0;
			nexthdr = h[0];
			l4 = h + (h[1] + 1) * 8;
		} else if (nexthdr == NEXTHDR_AUTH) {
			if ((void *)(h + 8) > data_end)
				return 0;
			nexthdr = h[0];
			l4 = h + (h[1] + 2) * 4;
		} else if (nexthdr == NEXTHDR_FRAGMENT) {
			if ((void *)(h + 8) > data_end)
				return 0;
			nexthdr = h[0];
			if (*(__be16 *)(h + 2) & BE_IP6_OFFSET)
				first = 0;
			l4 = h + 8;
			if (!first)
				break; // nothing follows but payload
		} else {
			break;
		}
	}
	if (first && nexthdr == PROTO_ICMPV6 &&
	    icmp6_redirect(l4, data_end, (const __u8 *)&ip6->daddr))
		return 1;
	if (first && (nexthdr == IPPROTO_TCP || nexthdr == IPPROTO_UDP || nexthdr == IPPROTO_SCTP))
		has_port = ports_dst(l4, data_end, &port);
	__builtin_memcpy(k.addr, &ip6->daddr, 16);
	return vip_match(&k, nexthdr, port, has_port);
}

SEC("xdp")
int xlb_redirect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__be16 proto;
	void *l3;
	int match = 0;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	proto = eth->h_proto;
	l3 = eth + 1;
	if (proto == BE_ETH_P_8021Q || proto == BE_ETH_P_8021AD) {
		__be16 *vlan = l3; // TCI, then the inner EtherType
		if ((void *)(vlan + 2) > data_end)
			return XDP_PASS;
		proto = vlan[1];
		l3 = vlan + 2;
	}
	if (proto == BE_ETH_P_IP)
		match = match_v4(l3, data_end);
	else if (proto == BE_ETH_P_IPV6)
		match = match_v6(l3, data_end);
	if (!match)
		return XDP_PASS;
	__u32 q = ctx->rx_queue_index;
	// The low bits of flags are returned when the slot is empty (kernel
	// 5.3+): 0, XDP_ABORTED, which is never XDP_REDIRECT.
	if (bpf_redirect_map(&xlb_xsks, q, 0) == XDP_REDIRECT)
		return XDP_REDIRECT;
	struct nosock_counts *c = bpf_map_lookup_elem(&xlb_nosock, &q);
	__u32 *mode = bpf_map_lookup_elem(&xlb_ctl, &q);
	if (mode && *mode == NOSOCK_DROP) {
		if (c)
			c->dropped++;
		return XDP_DROP;
	}
	if (c)
		c->passed++;
	return XDP_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
