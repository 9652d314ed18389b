package daemon

import (
	"fmt"

	"github.com/xlbnet/xlb/failover"
	"github.com/xlbnet/xlb/hash"
	"github.com/xlbnet/xlb/pkg/config"
	"github.com/xlbnet/xlb/pkg/dataplane"
	"github.com/xlbnet/xlb/pkg/encap"
	"github.com/xlbnet/xlb/pkg/engine"
	"github.com/xlbnet/xlb/pkg/health"
	"github.com/xlbnet/xlb/pkg/packet"
)

// Configuration enums → runtime values: the one place where a config
// value becomes the value of the package that acts on it. Each table names
// every pair explicitly, so neither side's numeric order matters (encap.Kind
// starts with KindNone, config.EncapType with IPIP), and TestEnumTables
// checks that every value config accepts has an entry: a value added to
// config without one fails that test, not a packet.
var (
	affinities = enumMap[config.Affinity, hash.Affinity]{
		config.AffinityNone:              hash.AffinityNone,
		config.AffinityClientIPPortProto: hash.AffinityClientIPPortProto,
		config.AffinityClientIPProto:     hash.AffinityClientIPProto,
		config.AffinityClientIP:          hash.AffinityClientIP,
	}
	trackingModes = enumMap[config.TrackingMode, hash.TrackingMode]{
		config.PerConnection: hash.PerConnection,
		config.PerSession:    hash.PerSession,
	}
	persistences = enumMap[config.Persistence, failover.PersistencePolicy]{
		config.PersistDefaultForProtocol: failover.PersistDefaultForProtocol,
		config.PersistNever:              failover.PersistNever,
		config.PersistAlways:             failover.PersistAlways,
	}
	roles = enumMap[config.Role, failover.Role]{
		config.RolePrimary:  failover.RolePrimary,
		config.RoleFailover: failover.RoleFailover,
	}
	zonalModes = enumMap[config.ZonalMode, failover.ZonalMode]{
		config.ZonalDisabled:       failover.ZonalDisabled,
		config.ZonalSpillCrossZone: failover.ZonalSpillCrossZone,
		config.ZonalStayWithinZone: failover.ZonalStayWithinZone,
	}
	ruleProtocols = enumMap[config.Protocol, dataplane.RuleProtocol]{
		config.ProtocolTCP:       dataplane.RuleTCP,
		config.ProtocolUDP:       dataplane.RuleUDP,
		config.ProtocolL3Default: dataplane.RuleL3Default,
	}
	// ipProtocols is the IP protocol of a rule's flows for the XDP VIP set
	// (L3_DEFAULT rules match any and do not use it), lookups and simulated
	// flows (which assume TCP for L3_DEFAULT).
	ipProtocols = enumMap[config.Protocol, uint8]{
		config.ProtocolTCP:       packet.ProtoTCP,
		config.ProtocolUDP:       packet.ProtoUDP,
		config.ProtocolL3Default: packet.ProtoTCP,
	}
	encapKinds = enumMap[config.EncapType, encap.Kind]{
		config.EncapIPIP:   encap.IPIP,
		config.EncapGUE:    encap.GUE,
		config.EncapGRE:    encap.GRE,
		config.EncapDirect: encap.Direct,
	}
	healthKinds = enumMap[config.HealthCheckType, health.Kind]{
		config.HealthNone:  health.NoProbe,
		config.HealthHTTP:  health.HTTP,
		config.HealthHTTPS: health.HTTPS,
		config.HealthTCP:   health.TCP,
		config.HealthSSL:   health.SSL,
		config.HealthHTTP2: health.HTTP2,
		config.HealthGRPC:  health.GRPC,
		config.HealthUDP:   health.UDP,
	}
	proxyHeaders = enumMap[config.ProxyHeader, health.ProxyHeader]{
		config.ProxyNone: health.ProxyNone,
		config.ProxyV1:   health.ProxyV1,
	}
	attachModes = enumMap[config.XDPMode, engine.AttachMode]{
		config.XDPAuto:    engine.AttachAuto,
		config.XDPNative:  engine.AttachNative,
		config.XDPGeneric: engine.AttachGeneric,
	}
	bindModes = enumMap[config.BindMode, engine.BindMode]{
		config.BindAuto:     engine.BindAuto,
		config.BindZeroCopy: engine.BindZeroCopy,
		config.BindCopy:     engine.BindCopy,
	}
)

// enumMap maps every value of a configuration enum C to its runtime value.
type enumMap[C interface {
	~uint8
	fmt.Stringer
}, R any] map[C]R

// of returns c's runtime value. config.Load rejects every value without a
// name, and TestEnumTables checks that every named value is here, so a
// miss is a bug in this file: it panics rather than run with a guess.
func (m enumMap[C, R]) of(c C) R {
	r, ok := m[c]
	if !ok {
		panic(fmt.Sprintf("daemon: no runtime value for %T %s (%d)", c, c, uint8(c)))
	}
	return r
}
