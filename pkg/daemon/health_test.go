package daemon

import (
	"reflect"
	"testing"
	"time"

	"github.com/xlbnet/xlb/pkg/config"
)

// TestCheckOf: every key of [health_check] reaches the prober. Each field
// of config.HealthCheck gets a value of its own; the health.Check field of
// the same name must carry it (Type becomes Kind through healthKinds), so
// a key added to config but not passed on fails here.
func TestCheckOf(t *testing.T) {
	hc := config.HealthCheck{Type: config.HealthHTTPS, ProxyHeader: config.ProxyV1}
	v := reflect.ValueOf(&hc).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name + "-value")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			if f.Type() == reflect.TypeOf(time.Duration(0)) {
				f.SetInt(int64(time.Duration(i+1) * time.Second))
			} else {
				f.SetInt(int64(i + 1))
			}
		case reflect.Uint16:
			f.SetUint(uint64(1000 + i))
		case reflect.Uint8: // enums: set above or left at their first value
		default:
			t.Fatalf("field %s: kind %s not handled by this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	got := reflect.ValueOf(checkOf(hc))
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if name == "Type" {
			if k := got.FieldByName("Kind").Interface(); k != healthKinds.of(hc.Type) {
				t.Errorf("Kind = %v, want %v", k, healthKinds.of(hc.Type))
			}
			continue
		}
		if name == "Path" {
			continue // how probes leave is the dialer's (probepath.go), not the prober's
		}
		if name == "ProxyHeader" {
			if p := got.FieldByName(name).Interface(); p != proxyHeaders.of(hc.ProxyHeader) {
				t.Errorf("ProxyHeader = %v, want %v", p, proxyHeaders.of(hc.ProxyHeader))
			}
			continue
		}
		g := got.FieldByName(name)
		if !g.IsValid() {
			t.Errorf("health.Check has no field %s", name)
			continue
		}
		if v.Field(i).Kind() == reflect.Uint8 {
			continue // an enum of its own: converted by its table, checked by TestEnumTables
		}
		if g.Interface() != v.Field(i).Interface() {
			t.Errorf("%s = %v, want %v", name, g.Interface(), v.Field(i).Interface())
		}
	}
}
