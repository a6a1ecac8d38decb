package gateway

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/contextd/contextd/internal/engine"
)

// roundTrip parses a client's request fixture with door d and builds it
// back with the parsed history as the view (what a session that has not
// compacted sends): every field comes back as the client sent it (cache
// marks, thinking signatures, images, reasoning items, unknown fields),
// and key, the conversation's field, holds the same JSON values.
func roundTrip(t *testing.T, d door, name, key string) *conversation {
	t.Helper()
	raw := fixture(t, name)
	body, err := scanBody(raw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.parse(body)
	if err != nil {
		t.Fatalf("%s: parse: %v", name, err)
	}
	if err := d.build(body, c, c.msgs, engine.CacheHints{}); err != nil {
		t.Fatalf("%s: build: %v", name, err)
	}
	var want, got map[string]any
	_ = json.Unmarshal(raw, &want)
	if err := json.Unmarshal(body.encode(), &got); err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if !reflect.DeepEqual(got[k], want[k]) {
			g, _ := json.Marshal(got[k])
			w, _ := json.Marshal(want[k])
			t.Errorf("%s: %s changed on the way through:\n got %s\nwant %s", name, k, g, w)
		}
	}
	if _, ok := want[key]; !ok {
		t.Fatalf("%s has no %s", name, key)
	}
	return c
}
