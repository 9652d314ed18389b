package control

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzHandler: whatever arrives, the handler answers with a status and,
// unless it is 200, a JSON error with a message; it never panics.
func FuzzHandler(f *testing.F) {
	f.Add("POST", "/v1/backend/mark", `{"rule":"web","backend":"192.0.2.1","role":"failover"}`)
	f.Add("GET", "/v1/lookup?rule=web&src=198.51.100.7:40000&dst_port=80", "")
	f.Add("POST", "/v1/conntrack/flush", `{"rule":"web","limit":3}`)
	f.Add("GET", "/v1/conntrack?rule=web&limit=%zz", "")
	h := NewHandler(&fakeAPI{})
	f.Fuzz(func(t *testing.T, method, target, body string) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		req, err := http.NewRequest(method, "http://xlb"+target, strings.NewReader(body))
		if err != nil {
			return // not a request net/http would hand to a handler
		}
		req = req.WithContext(WithPeer(req.Context(), Peer{Level: LevelAdmin}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code == http.StatusOK {
			if !json.Valid(w.Body.Bytes()) {
				t.Fatalf("200 with a body that is not JSON: %q", w.Body.String())
			}
			return
		}
		var e Error
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Message == "" {
			t.Fatalf("%s %s: status %d, body %q is not a JSON error", method, target, w.Code, w.Body.String())
		}
	})
}
