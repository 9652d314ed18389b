package control

import (
	"errors"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// The rows of a streamed answer (stream.go) are encoded by hand: the
// bytes encoding/json writes for a Backend (its tags' names, order and
// omitempty; its escapes, number and time formats), without reflection
// and without the allocation encoding/json's time.Time.MarshalJSON makes
// for each time. TestStreamedBytesAsEncodingJSON compares the two for
// values with every field set, so a field added to Backend without its
// line here fails it.

// errNotFinite is encoding/json's refusal of a NaN or an infinity.
var errNotFinite = errors.New("json: unsupported value: a NaN or infinite number")

// appendBackend appends b as encoding/json encodes it; an error, as
// encoding/json's, for a number JSON cannot hold.
func appendBackend(e []byte, b *Backend) ([]byte, error) {
	bad := false
	e = appendStringField(e, '{', "rule", b.Rule)
	e = appendStringField(e, ',', "address", b.Address)
	e = appendStringField(e, ',', "group", b.Group)
	e = appendStringField(e, ',', "role", b.Role)
	e = appendStringField(e, ',', "role_source", b.RoleSource)
	e = appendStringField(e, ',', "admin", b.Admin)
	e = appendStringField(e, ',', "admin_source", b.AdminSource)
	e = appendTimeField(e, "drained_at", b.DrainedAt)
	e = appendTimeField(e, "drain_until", b.DrainUntil)
	e = appendStringField(e, ',', "health", b.Health)
	if b.HealthDetail != "" {
		e = appendStringField(e, ',', "health_detail", b.HealthDetail)
	}
	if b.WeightState != "" {
		e = appendStringField(e, ',', "weight_state", b.WeightState)
	}
	e = strconv.AppendInt(append(e, `,"weight_configured":`...), int64(b.WeightConfigured), 10)
	e = appendStringField(e, ',', "weight_source", b.WeightSource)
	e = strconv.AppendUint(append(e, `,"weight_effective":`...), uint64(b.WeightEffective), 10)
	e = appendFloat(append(e, `,"share":`...), b.Share, &bad)
	e = strconv.AppendBool(append(e, `,"eligible":`...), b.Eligible)
	e = appendStringField(e, ',', "tier", b.Tier)
	e = strconv.AppendBool(append(e, `,"usable":`...), b.Usable)
	e = strconv.AppendUint(append(e, `,"slot":`...), uint64(b.Slot), 10)
	e = strconv.AppendInt(append(e, `,"connections":`...), int64(b.Connections), 10)
	e = strconv.AppendInt(append(e, `,"session_entries":`...), int64(b.SessionEntries), 10)
	e = strconv.AppendInt(append(e, `,"packets":`...), b.Packets, 10)
	e = appendFloat(append(e, `,"packets_per_second":`...), b.PacketsPerSec, &bad)
	if b.NextHop != "" {
		e = appendStringField(e, ',', "next_hop", b.NextHop)
	}
	// Traffic
	e = strconv.AppendInt(append(e, `,"bytes":`...), b.Bytes, 10)
	e = appendFloat(append(e, `,"bytes_per_second":`...), b.BytesPerSec, &bad)
	e = strconv.AppendInt(append(e, `,"new_connections":`...), b.NewConnections, 10)
	e = appendFloat(append(e, `,"new_connections_per_second":`...), b.NewConnectionsPerSec, &bad)
	e = strconv.AppendInt(append(e, `,"active_connections":`...), int64(b.ActiveConnections), 10)
	e = strconv.AppendInt(append(e, `,"inactive_connections":`...), int64(b.InactiveConnections), 10)
	// CheckInfo
	e = appendTimeField(e, "last_check", b.LastCheck)
	e = appendFloat(append(e, `,"probe_latency_seconds":`...), b.ProbeLatencySeconds, &bad)
	e = appendTimeField(e, "health_since", b.HealthSince)
	e = strconv.AppendUint(append(e, `,"health_changes":`...), b.HealthChanges, 10)
	if b.ProbeRule != "" {
		e = appendStringField(e, ',', "probe_rule", b.ProbeRule)
	}
	if bad {
		return e, errNotFinite
	}
	return append(e, '}'), nil
}

// appendStringField appends sep, the field's name and its string value.
func appendStringField(e []byte, sep byte, name, v string) []byte {
	e = append(e, sep, '"')
	e = append(e, name...)
	e = append(e, '"', ':')
	return appendString(e, v)
}

// appendTimeField appends ,"name":"RFC 3339" unless t is nil (omitempty).
func appendTimeField(e []byte, name string, t *time.Time) []byte {
	if t == nil {
		return e
	}
	e = append(e, ',', '"')
	e = append(e, name...)
	e = append(e, '"', ':', '"')
	e = t.AppendFormat(e, time.RFC3339Nano)
	return append(e, '"')
}

// appendFloat appends f as encoding/json does: like ES6, the shortest
// decimal that reads back as f, in exponent form below 1e-6 and from
// 1e21 on, with e-07 shortened to e-7. NaN and infinities are not JSON:
// they set *bad.
func appendFloat(e []byte, f float64, bad *bool) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		*bad = true
		return e
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	e = strconv.AppendFloat(e, f, format, -1, 64)
	if format == 'e' {
		if n := len(e); n >= 4 && e[n-4] == 'e' && e[n-3] == '-' && e[n-2] == '0' {
			e[n-2] = e[n-1]
			e = e[:n-1]
		}
	}
	return e
}

const hexDigits = "0123456789abcdef"

// appendString appends s quoted as encoding/json quotes it by default:
// <, > and & escaped for HTML, control characters as \n, \t, \b, \f,
// \r or \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendString(e []byte, s string) []byte {
	e = append(e, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			e = append(e, s[start:i]...)
			switch c {
			case '\\', '"':
				e = append(e, '\\', c)
			case '\b':
				e = append(e, '\\', 'b')
			case '\f':
				e = append(e, '\\', 'f')
			case '\n':
				e = append(e, '\\', 'n')
			case '\r':
				e = append(e, '\\', 'r')
			case '\t':
				e = append(e, '\\', 't')
			default:
				e = append(e, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			e = append(e, s[start:i]...)
			e = append(e, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			e = append(e, s[start:i]...)
			e = append(e, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	e = append(e, s[start:]...)
	return append(e, '"')
}
