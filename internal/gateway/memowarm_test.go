package gateway

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestMemoWarmIsCold: a request parsed by a door whose memo already holds
// its messages (a replica that served the conversation's last call) yields
// what a door with an empty memo (a cold replica) makes of it: the same
// messages, identities, details, stored digests and history chains. The
// warm door saw an earlier request of the conversation, one whose messages
// differ from the request's only by a byte, and the request itself. (Bytes
// one apart have other hashes, so this does not test the comparison that
// confirms a hit: TestMemoHashCollisionMisses forges the hash for that.)
func TestMemoWarmIsCold(t *testing.T) {
	type doorCase struct {
		name string
		make func(*memo) door
		// body is a request of the conversation; v names the variant.
		body func(v string) string
	}
	for _, tc := range []doorCase{
		{"chat", func(m *memo) door { return openAIChat{m} }, func(v string) string {
			return `{"model":"m","messages":[{"role":"system","content":"sys"},` +
				`{"role":"user","content":"do the task` + v + `"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"call_1","content":"a b c` + v + `"},` +
				`{"role":"assistant","content":"done` + v + `"},{"role":"user","content":"next"}]}`
		}},
		{"responses", func(m *memo) door { return openAIResponses{m} }, func(v string) string {
			return `{"model":"m","input":[{"role":"user","content":"do the task` + v + `"},` +
				`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"enc` + v + `"},` +
				`{"type":"function_call","call_id":"call_1","name":"ls","arguments":"{}"},` +
				`{"type":"function_call_output","call_id":"call_1","output":"a b c` + v + `"},` +
				`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done` + v + `"}]},` +
				`{"role":"user","content":"next"}]}`
		}},
		{"anthropic", func(m *memo) door { return anthropicMessages{m} }, func(v string) string {
			return `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"do the task` + v + `"}]},` +
				`{"role":"assistant","content":[{"type":"thinking","thinking":"t` + v + `","signature":"s"},{"type":"tool_use","id":"tu_1","name":"ls","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu_1","content":"a b c` + v + `"}]},` +
				`{"role":"assistant","content":[{"type":"text","text":"done` + v + `"}]},` +
				`{"role":"user","content":[{"type":"text","text":"next"}]}]}`
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parse := func(d door, body string) *conversation {
				t.Helper()
				c, err := d.parse(mustScan(t, body))
				if err != nil {
					t.Fatalf("%v\n%s", err, body)
				}
				historyChains(d.name(), signal{}, c)
				return c
			}
			for _, v := range []string{"", "!", "?"} {
				body := tc.body(v)
				cold := parse(tc.make(newMemo(memoBytes)), body)
				warmMemo := newMemo(memoBytes)
				warm := tc.make(warmMemo)
				// The earlier variants first (same hashes' neighbours, other
				// bytes), then the request twice: the second parse is all hits.
				for _, earlier := range []string{"", "!", "?"} {
					if earlier != v {
						parse(warm, tc.body(earlier))
					}
				}
				parse(warm, body)
				got := parse(warm, body)
				for _, f := range []struct {
					what      string
					got, want any
				}{
					{"messages", got.msgs, cold.msgs},
					{"identities", got.ids, cold.ids},
					{"details", got.details, cold.details},
					{"stored digests", got.digests, cold.digests},
					{"chains", got.chains, cold.chains},
					{"system", got.system, cold.system},
				} {
					if !reflect.DeepEqual(f.got, f.want) {
						t.Errorf("variant %q: the warm memo's %s differ from the cold one's:\n%v\n%v", v, f.what, f.got, f.want)
					}
				}
				// And both are the messages' own, computed here without a memo.
				for _, c := range []*conversation{cold, got} {
					for i := range c.msgs {
						m := &c.msgs[i]
						if c.ids[i] != identityOf(m) || c.details[i] != detailOf(m) || c.digests[i] != storedDigest(m) {
							t.Errorf("variant %q, message %d: the identity, detail or stored digest the door gave is not the message's", v, i)
						}
					}
				}
			}
		})
	}
}

// TestMemoHashCollisionMisses: an entry whose hash the request's bytes
// share but whose bytes or door differ is not taken, for a message or a
// run; an entry of the same bytes at the same door is.
func TestMemoHashCollisionMisses(t *testing.T) {
	m := newMemo(memoBytes)
	d := openAIChat{m}
	c, err := d.parse(mustScan(t, `{"model":"m","messages":[{"role":"user","content":"one"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	one := memoKey(doorOpenAIChat, []byte(`{"role":"user","content":"one"}`))
	if _, ok := m.get(one); !ok {
		t.Fatal("the memo does not hold the message it parsed")
	}
	other := one
	other.raw = []byte(`{"role":"user","content":"two"}`)
	if e, ok := m.get(other); ok {
		t.Errorf("other bytes of the same hash took the entry of %q", e.msgs[0].Parts[0].Text)
	}
	other.raw = one.raw[:len(one.raw)-1]
	if _, ok := m.get(other); ok {
		t.Error("a prefix of the bytes took the entry")
	}
	// The doors share the memo: the same bytes at another door are
	// another message (an Anthropic message is not parsed as a Chat
	// Completions one), even of the same hash.
	atAnthropic := memoKey(doorAnthropic, one.raw)
	atAnthropic.h = one.h
	if _, ok := m.get(atAnthropic); ok {
		t.Error("the same bytes at another door of the same hash took the entry")
	}
	_ = c

	items := []string{`{"type":"reasoning","id":"rs_1","summary":[]}`, `{"type":"function_call","call_id":"c1","name":"ls","arguments":"{}"}`}
	run := runKey(doorOpenAIResponses, toRaws(items))
	m.put(run, len(strings.Join(items, ",")), c.msgs)
	if _, ok := m.get(runKey(doorOpenAIResponses, toRaws(items))); !ok {
		t.Fatal("the memo does not hold the run")
	}
	for _, changed := range [][]string{
		{items[0]},
		{items[0], items[1], items[1]},
		{items[0] + "," + items[1]},
		{items[0], strings.Replace(items[1], "ls", "rm", 1)},
	} {
		k := runKey(doorOpenAIResponses, toRaws(changed))
		k.h = run.h
		if _, ok := m.get(k); ok {
			t.Errorf("the run %q took the entry of another run of its hash", changed)
		}
	}
}

func toRaws(items []string) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, s := range items {
		out[i] = json.RawMessage(s)
	}
	return out
}
