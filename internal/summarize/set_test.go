package summarize

import (
	"fmt"
	"testing"
)

// TestClientCacheIsBounded: however many specs tenants name, the set keeps
// at most maxClients LLM clients, the most recently used.
func TestClientCacheIsBounded(t *testing.T) {
	s, err := NewSet("extractive", map[string]Endpoint{ProviderOpenAI: {BaseURL: "http://127.0.0.1:1/v1/"}})
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := s.Get("openai:model-0")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 10*maxClients; i++ {
		if _, _, err := s.Get(fmt.Sprintf("openai:model-%d", i)); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // keep model-0 recently used
			if again, _, _ := s.Get("openai:model-0"); again != first {
				t.Fatal("a recently used client was rebuilt")
			}
		}
	}
	if n := s.Clients(); n != maxClients {
		t.Errorf("%d clients cached; want at most %d", n, maxClients)
	}
}
