package control

import (
	"context"
	"net/http"
	"slices"
	"testing"
)

// TestApplianceRoundTrip: the client's drain and undrain reach the API as
// typed actions; a wrong action or a body is refused.
func TestApplianceRoundTrip(t *testing.T) {
	f := &fakeAPI{}
	path, c := serve(t, f)
	ctx := context.Background()
	for _, a := range []ApplianceAction{ApplianceDrain, ApplianceUndrain} {
		res, err := c.ChangeAppliance(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Changed || res.Appliance.Drained != (a == ApplianceDrain) {
			t.Errorf("%s: %+v", a, res)
		}
	}
	if !slices.Equal(f.applianceActions, []ApplianceAction{ApplianceDrain, ApplianceUndrain}) {
		t.Errorf("actions %v", f.applianceActions)
	}
	if code, msg := raw(t, path, "POST /v1/appliance/explode HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); code != http.StatusNotFound || msg != `unknown appliance action "explode" (drain, undrain)` {
		t.Errorf("unknown action: %d %q", code, msg)
	}
	if code, _ := raw(t, path, "POST /v1/appliance/drain HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n{\"force\": 1}"); code != http.StatusBadRequest {
		t.Errorf("unknown body field: %d", code)
	}
	if len(f.applianceActions) != 2 {
		t.Errorf("refused requests reached the API: %v", f.applianceActions)
	}
}
