package clients

import "testing"

// TestProviderCountsAsOpenAIMeasured: the scripted provider counts the
// two requests OpenAI's cookbook ("How to count tokens with tiktoken")
// sent to the real API, as the API counted them for gpt-4o (o200k_base):
// 124 prompt tokens for its messages (four of them with a name), 101 for
// its tool and two messages. These are measurements of the provider, not
// contextd's rule: TestFramingIsTheProvidersCount compares contextd with
// this provider, so the provider is pinned to what the real one counted.
func TestProviderCountsAsOpenAIMeasured(t *testing.T) {
	p := newTestProvider(t, 100000)
	msg := func(role, name, content string) map[string]any {
		m := map[string]any{"role": role, "content": content}
		if name != "" {
			m["name"] = name
		}
		return m
	}
	named := map[string]any{"messages": []any{
		msg("system", "", "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."),
		msg("system", "example_user", "New synergies will help drive top-line growth."),
		msg("system", "example_assistant", "Things working well together will increase revenue."),
		msg("system", "example_user", "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."),
		msg("system", "example_assistant", "Let's talk later when we're less busy about how to do better."),
		msg("user", "", "This late pivot means we don't have time to boil the ocean for the client deliverable."),
	}}
	weather := map[string]any{
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{
			"name": "get_current_weather", "description": "Get the current weather in a given location",
			"parameters": map[string]any{"type": "object", "required": []any{"location"}, "properties": map[string]any{
				"location": map[string]any{"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
				"unit": map[string]any{"type": "string", "description": "The unit of temperature to return",
					"enum": []any{"celsius", "fahrenheit"}}}}}}},
		"messages": []any{
			msg("system", "", "You are a helpful assistant that can answer to questions about the weather."),
			msg("user", "", "What's the weather like in San Francisco?"),
		}}
	for _, tc := range []struct {
		name string
		body map[string]any
		want int64
	}{{"named messages", named, 124}, {"a tool", weather, 101}} {
		_, counts := p.prefixes(chatSegments(tc.body))
		if got := counts[len(counts)-1]; got != tc.want {
			t.Errorf("%s: the provider counts %d prompt tokens, OpenAI's API counted %d", tc.name, got, tc.want)
		}
	}
}
