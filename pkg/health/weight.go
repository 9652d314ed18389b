package health

import "github.com/xlbnet/xlb/failover"

// parseWeight reads the weight header's values: none is MISSING_WEIGHT;
// one decimal integer 0..1000 (ASCII digits only, leading zeros allowed,
// surrounding blanks ignored) is the weight; anything else, including
// several values, a sign, a fraction ("1.5") or an exponent, is
// INVALID_WEIGHT. The weight is 0 unless the state is OK.
func parseWeight(values []string) (uint32, failover.WeightState) {
	switch len(values) {
	case 0:
		return 0, failover.WeightMissing
	case 1:
	default:
		return 0, failover.WeightInvalid
	}
	s := values[0]
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	if s == "" {
		return 0, failover.WeightInvalid
	}
	var n uint32
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, failover.WeightInvalid
		}
		n = n*10 + uint32(c-'0')
		if n > failover.MaxWeight {
			return 0, failover.WeightInvalid
		}
	}
	return n, failover.WeightOK
}
